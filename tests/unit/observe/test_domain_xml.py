"""Parsing of domain XML devices and of Nova's <nova:instance> metadata."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nova_orphans import model
from nova_orphans.fakes import libvirt_node as worlds
from nova_orphans.observe import domain_xml

NS11 = domain_xml.NOVA_NS_1_1
NS10 = domain_xml.NOVA_NS_1_0


def _devices(body: str) -> tuple[tuple[model.Disk, ...], tuple[model.Interface, ...]]:
    return domain_xml.parse_devices(f"<domain type='qemu'><devices>{body}</devices></domain>")


DISK_CASES = [
    pytest.param(
        "<disk type='file' device='disk'><source file='/var/lib/nova/instances/u/disk'/>"
        "<target dev='vda' bus='virtio'/></disk>",
        model.Disk("vda", "disk", "file", "/var/lib/nova/instances/u/disk"),
        id="a file disk is its path",
    ),
    pytest.param(
        "<disk type='block' device='disk'><source dev='/dev/sdb'/><target dev='vdb'/></disk>",
        model.Disk("vdb", "disk", "block", "/dev/sdb"),
        id="a block disk is its device",
    ),
    pytest.param(
        "<disk type='network' device='disk'><source protocol='rbd' name='vms/u_disk'>"
        "<host name='192.0.2.1' port='6789'/></source><target dev='vda'/></disk>",
        model.Disk("vda", "disk", "network", "rbd:vms/u_disk", "rbd"),
        id="an rbd disk is protocol:name",
    ),
    pytest.param(
        "<disk type='network' device='disk'><source protocol='iscsi' "
        "name='iqn.2010-10.org.openstack:volume-1/1'><host name='192.0.2.2' port='3260'/>"
        "</source><target dev='vdc'/></disk>",
        model.Disk("vdc", "disk", "network", "iscsi:iqn.2010-10.org.openstack:volume-1/1", "iscsi"),
        id="an iscsi disk is protocol:iqn/lun",
    ),
    pytest.param(
        "<disk type='volume' device='disk'><source pool='default' volume='v1.qcow2'/>"
        "<target dev='vdd'/></disk>",
        model.Disk("vdd", "disk", "volume", "default/v1.qcow2"),
        id="a storage-pool volume is pool/volume",
    ),
    pytest.param(
        "<disk type='file' device='cdrom'><target dev='hda' bus='ide'/><readonly/></disk>",
        model.Disk("hda", "cdrom", "file", None),
        id="an empty cdrom drive has no source",
    ),
    pytest.param(
        "<disk type='network' device='disk'><source protocol='nbd'>"
        "<host name='192.0.2.3'/></source><target dev='vde'/></disk>",
        model.Disk("vde", "disk", "network", None, "nbd"),
        id="a network disk without a name keeps its protocol but has no source",
    ),
]


@pytest.mark.parametrize(("xml", "expected"), DISK_CASES)
def test_disk_is_parsed(xml: str, expected: model.Disk) -> None:
    disks, interfaces = _devices(xml)
    assert disks == (expected,)
    assert interfaces == ()


INTERFACE_CASES = [
    pytest.param(
        "<interface type='bridge'><mac address='fa:16:3e:11:22:33'/>"
        "<source bridge='br-int'/><virtualport type='openvswitch'/>"
        "<target dev='tap1234abcd-12'/></interface>",
        model.Interface("bridge", "fa:16:3e:11:22:33", "tap1234abcd-12", "br-int"),
        id="a bridge interface has its bridge and tap",
    ),
    pytest.param(
        "<interface type='ethernet'><mac address='fa:16:3e:00:00:01'/>"
        "<target dev='tap0' managed='no'/></interface>",
        model.Interface("ethernet", "fa:16:3e:00:00:01", "tap0", None),
        id="an ethernet interface has a tap and no source",
    ),
    pytest.param(
        "<interface type='network'><mac address='52:54:00:aa:bb:cc'/>"
        "<source network='default'/></interface>",
        model.Interface("network", "52:54:00:aa:bb:cc", None, "default"),
        id="a network interface is its libvirt network",
    ),
    pytest.param(
        "<interface type='direct'><source dev='eth0' mode='passthrough'/></interface>",
        model.Interface("direct", None, None, "eth0"),
        id="a macvtap interface is its host device and may lack a MAC",
    ),
]


@pytest.mark.parametrize(("xml", "expected"), INTERFACE_CASES)
def test_interface_is_parsed(xml: str, expected: model.Interface) -> None:
    disks, interfaces = _devices(xml)
    assert interfaces == (expected,)
    assert disks == ()


def test_devices_keep_document_order_and_ignore_other_devices() -> None:
    disks, interfaces = _devices(
        worlds.file_disk("/a", "vda")
        + "<controller type='usb'/>"
        + worlds.bridge_interface("fa:16:3e:00:00:01", "tap1")
        + worlds.rbd_disk("vms/b", "vdb")
        + worlds.ethernet_interface("fa:16:3e:00:00:02", "tap2")
    )
    assert [d.target for d in disks] == ["vda", "vdb"]
    assert [i.target_dev for i in interfaces] == ["tap1", "tap2"]


def test_domain_without_devices_has_no_disks_or_interfaces() -> None:
    assert domain_xml.parse_devices("<domain type='qemu'><name>x</name></domain>") == ((), ())


@pytest.mark.parametrize(
    "xml",
    [
        pytest.param("<domain", id="truncated document"),
        pytest.param("<node><domain/></node>", id="wrong root element"),
    ],
)
def test_broken_domain_xml_raises_domain_xml_error(xml: str) -> None:
    with pytest.raises(domain_xml.DomainXMLError):
        domain_xml.parse_devices(xml)


def _strip_prefix(element: str) -> str:
    """What virDomainGetMetadata returns: the element with its namespace removed."""
    for ns in (NS11, NS10):
        element = element.replace(f' xmlns:nova="{ns}"', "")
    return element.replace("nova:", "")


@pytest.mark.parametrize("namespace", [NS11, NS10])
def test_metadata_as_libvirt_returns_it_is_read_in_both_namespaces(namespace: str) -> None:
    text = _strip_prefix(worlds.nova_metadata(namespace=namespace, name="web-1"))
    assert domain_xml.parse_nova_metadata(text, namespace) == model.NovaMetadata(
        namespace=namespace,
        display_name="web-1",
        creation_time="2024-05-01 12:00:00",
        project_id="2f6e8b1c0d9a4e7f8c6b5a4d3e2f1a0b",
        user_id="8a1b0c6e5a2d4c1f9a3e0b7d6c5f4e3a",
        flavor="m1.tiny",
        package="29.0.0",
    )


@pytest.mark.parametrize("namespace", [NS11, NS10])
def test_namespaced_metadata_from_domain_xml_is_read(namespace: str) -> None:
    text = worlds.nova_metadata(namespace=namespace, name="db <primary> & co")
    meta = domain_xml.parse_nova_metadata(text, namespace)
    assert meta.display_name == "db <primary> & co"
    assert meta.namespace == namespace


def test_missing_fields_are_none() -> None:
    text = worlds.nova_metadata(name=None, creation_time=None, user_id=None, flavor=None)
    meta = domain_xml.parse_nova_metadata(text, NS11)
    assert meta == model.NovaMetadata(
        namespace=NS11, project_id="2f6e8b1c0d9a4e7f8c6b5a4d3e2f1a0b", package="29.0.0"
    )


def test_blank_name_and_attribute_less_elements_are_none() -> None:
    text = "<instance><name>  </name><flavor/><owner><user/></owner><package/></instance>"
    meta = domain_xml.parse_nova_metadata(text, NS11)
    assert meta == model.NovaMetadata(namespace=NS11)


def test_fields_in_another_namespace_are_not_nova_fields() -> None:
    text = (
        f'<nova:instance xmlns:nova="{NS11}" xmlns:x="urn:other">'
        "<x:name>impostor</x:name><nova:package version='29.0.0'/></nova:instance>"
    )
    meta = domain_xml.parse_nova_metadata(text, NS11)
    assert meta.display_name is None
    assert meta.package == "29.0.0"


METADATA_ERRORS = [
    pytest.param("", "is empty", id="empty text"),
    pytest.param("this is not xml", "not well-formed", id="plain text"),
    pytest.param("<instance><name>x</instance>", "not well-formed", id="unbalanced tags"),
    pytest.param("<server><name>x</name></server>", "expected <instance>", id="wrong root"),
    pytest.param(
        '<i:instance xmlns:i="urn:evil"><i:name>x</i:name></i:instance>',
        "expected <instance>",
        id="instance element in a foreign namespace",
    ),
    pytest.param("<instance/>", "none of the fields", id="empty instance element"),
    pytest.param(
        "<instance><color>blue</color></instance>", "none of the fields", id="only unknown fields"
    ),
    pytest.param(
        "<instance><name>a</name><name>b</name></instance>",
        "more than one <name>",
        id="ambiguous duplicate field",
    ),
    pytest.param(
        '<!DOCTYPE instance [<!ENTITY a "aaaa">]><instance><name>&a;</name></instance>',
        "DTD",
        id="entity declarations are refused",
    ),
]


@pytest.mark.parametrize(("text", "message"), METADATA_ERRORS)
def test_unreadable_metadata_raises_one_line_error(text: str, message: str) -> None:
    with pytest.raises(domain_xml.MetadataError) as caught:
        domain_xml.parse_nova_metadata(text, NS11)
    assert message in str(caught.value)
    assert str(caught.value).startswith("Nova metadata (nova/1.1)")
    assert "\n" not in str(caught.value)


@given(st.text(max_size=200))
def test_any_text_gives_metadata_or_metadata_error(text: str) -> None:
    try:
        meta = domain_xml.parse_nova_metadata(text, NS10)
    except domain_xml.MetadataError as err:
        assert "\n" not in str(err)
    else:
        assert meta.namespace == NS10


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=50))
def test_any_display_name_round_trips(name: str) -> None:
    meta = domain_xml.parse_nova_metadata(worlds.nova_metadata(name=name), NS11)
    assert meta.display_name == (name.strip() or None)


def test_a_disks_serial_and_the_domains_sizing_are_read():
    parsed = domain_xml.parse_domain(
        "<domain><vcpu current='2'>4</vcpu><currentMemory unit='MiB'>768</currentMemory>"
        "<devices><disk type='block' device='disk'><source dev='/dev/sdb'/>"
        "<target dev='vdb'/><serial> 5a5a5a5a-0000-4000-8000-00000000005a </serial></disk>"
        "</devices></domain>"
    )
    (disk,) = parsed.disks
    assert disk.serial == "5a5a5a5a-0000-4000-8000-00000000005a"
    assert (parsed.vcpus, parsed.memory_bytes) == (2, 768 * 1024**2)
