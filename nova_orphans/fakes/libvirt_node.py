"""Build libvirt domain XML, Nova metadata and test-driver worlds for tests and the demo.

A *world* is a libvirt ``test:///`` driver node file: ``<node>`` holding
``<domain type='test'>`` elements. The driver re-reads the file on every
connection and never writes it back, so each test can own its world.
"""

from __future__ import annotations

import pathlib
import random
import uuid as uuidlib
from collections.abc import Iterable
from xml.sax.saxutils import escape, quoteattr

NOVA_NS_1_1 = "http://openstack.org/xmlns/libvirt/nova/1.1"
NOVA_NS_1_0 = "http://openstack.org/xmlns/libvirt/nova/1.0"
# The test driver's own XML namespace: run state and persistence of a domain.
TEST_DRIVER_NS = "http://libvirt.org/schemas/domain/test/1.0"
# virDomainState values accepted by <test:runstate>.
RUNSTATE = {"running": 1, "paused": 3, "shut off": 5, "crashed": 6}


def random_uuid() -> str:
    """A fresh random UUID string (a domain UUID is the Nova instance UUID)."""
    return str(uuidlib.uuid4())


def instance_name(number: int | None = None) -> str:
    """A Nova-style domain name, ``instance-%08x`` (random when ``number`` is None)."""
    if number is None:
        number = random.randrange(0x10000000, 0xFFFFFFFF)
    return f"instance-{number:08x}"


def nova_metadata(
    *,
    namespace: str = NOVA_NS_1_1,
    name: str | None = "test-server",
    creation_time: str | None = "2024-05-01 12:00:00",
    user_id: str | None = "8a1b0c6e5a2d4c1f9a3e0b7d6c5f4e3a",
    project_id: str | None = "2f6e8b1c0d9a4e7f8c6b5a4d3e2f1a0b",
    flavor: str | None = "m1.tiny",
    package: str | None = "29.0.0",
) -> str:
    """The ``<nova:instance>`` element as Nova writes it; None leaves a field out."""
    parts = []
    if package is not None:
        parts.append(f"<nova:package version={quoteattr(package)}/>")
    if name is not None:
        parts.append(f"<nova:name>{escape(name)}</nova:name>")
    if creation_time is not None:
        parts.append(f"<nova:creationTime>{escape(creation_time)}</nova:creationTime>")
    if flavor is not None:
        parts.append(
            f"<nova:flavor name={quoteattr(flavor)}><nova:memory>512</nova:memory>"
            "<nova:disk>1</nova:disk><nova:vcpus>1</nova:vcpus></nova:flavor>"
        )
    if user_id is not None or project_id is not None:
        owner = ""
        if user_id is not None:
            owner += f"<nova:user uuid={quoteattr(user_id)}>demo</nova:user>"
        if project_id is not None:
            owner += f"<nova:project uuid={quoteattr(project_id)}>demo</nova:project>"
        parts.append(f"<nova:owner>{owner}</nova:owner>")
    body = "".join(parts)
    return f'<nova:instance xmlns:nova="{namespace}">{body}</nova:instance>'


def file_disk(path: str, target: str = "vda") -> str:
    """A ``<disk type='file'>`` element."""
    return (
        f"<disk type='file' device='disk'><driver name='qemu' type='qcow2'/>"
        f"<source file={quoteattr(path)}/><target dev={quoteattr(target)} bus='virtio'/></disk>"
    )


def rbd_disk(name: str, target: str = "vdb") -> str:
    """A ``<disk type='network'>`` element on Ceph RBD."""
    return (
        f"<disk type='network' device='disk'><source protocol='rbd' name={quoteattr(name)}>"
        "<host name='192.0.2.10' port='6789'/></source>"
        f"<target dev={quoteattr(target)} bus='virtio'/></disk>"
    )


def bridge_interface(mac: str, tap: str, bridge: str = "br-int") -> str:
    """An ``<interface type='bridge'>`` with a tap target, as Nova writes for OVS/linuxbridge."""
    return (
        f"<interface type='bridge'><mac address={quoteattr(mac)}/>"
        f"<source bridge={quoteattr(bridge)}/><target dev={quoteattr(tap)}/></interface>"
    )


def ethernet_interface(mac: str, tap: str) -> str:
    """An ``<interface type='ethernet'>``: works on real QEMU without any network set up."""
    return (
        f"<interface type='ethernet'><mac address={quoteattr(mac)}/>"
        f"<target dev={quoteattr(tap)} managed='yes'/><model type='virtio'/></interface>"
    )


def node_domain(
    *,
    uuid: str,
    name: str,
    state: str = "running",
    transient: bool = False,
    metadata: str | None = None,
    devices: Iterable[str] = (),
) -> str:
    """A ``<domain type='test'>`` for a test-driver node file.

    ``state`` is one of ``RUNSTATE``; ``metadata`` is put inside ``<metadata>``
    as is (any XML the test driver accepts).
    """
    extra = f"<test:runstate>{RUNSTATE[state]}</test:runstate>"
    if transient:
        extra += "<test:transient/>"
    return (
        f"<domain type='test' xmlns:test='{TEST_DRIVER_NS}'>"
        f"{_identity(uuid, name, metadata)}<memory unit='KiB'>32768</memory>"
        f"<os><type>hvm</type></os><devices>{''.join(devices)}</devices>{extra}</domain>"
    )


def qemu_domain(
    *, uuid: str, name: str, metadata: str | None = None, devices: Iterable[str] = ()
) -> str:
    """A tiny diskless TCG guest (32 MiB, no OS) for a real ``qemu:///system``."""
    return (
        f"<domain type='qemu'>{_identity(uuid, name, metadata)}"
        "<memory unit='MiB'>32</memory><vcpu>1</vcpu>"
        "<os><type arch='x86_64' machine='pc'>hvm</type></os>"
        "<devices><emulator>/usr/bin/qemu-system-x86_64</emulator>"
        f"{''.join(devices)}</devices></domain>"
    )


def _identity(uuid: str, name: str, metadata: str | None) -> str:
    meta = f"<metadata>{metadata}</metadata>" if metadata is not None else ""
    return f"<name>{escape(name)}</name><uuid>{uuid}</uuid>{meta}"


def node(domains: Iterable[str]) -> str:
    """A test-driver node document holding ``domains``."""
    return "<node>\n" + "\n".join(domains) + "\n</node>\n"


def write_node_file(directory: pathlib.Path, domains: Iterable[str], name: str = "node.xml") -> str:
    """Write a node file into ``directory`` and return its ``test:///`` URI."""
    path = directory.resolve() / name
    path.write_text(node(domains), encoding="utf-8")
    return f"test://{path}"


def nova_domains(count: int, *, start: int = 1) -> list[str]:
    """``count`` running test domains that all carry Nova 1.1 metadata."""
    return [
        node_domain(
            uuid=str(uuidlib.UUID(int=start + i)),
            name=instance_name(start + i),
            metadata=nova_metadata(name=f"server-{start + i}"),
            devices=[file_disk(f"/var/lib/nova/instances/{start + i}/disk")],
        )
        for i in range(count)
    ]


def test_driver_node() -> dict[str, str]:
    """``add_compute`` keywords for Nova's node of a host whose libvirt is a test:/// world.

    The hostname and type libvirt's test driver reports, as Nova's libvirt driver would
    report them for its node (docs/design.md rule 10 compares them).
    """
    import libvirt

    conn = libvirt.openReadOnly("test:///default")
    try:
        return {"node": conn.getHostname(), "hypervisor_type": conn.getType()}
    finally:
        conn.close()


def quarantine_root_of(directory: str) -> str:
    """The quarantine root of ``<root>/<uuid>/<stamp>`` (what ``restore`` is given)."""
    return str(pathlib.Path(directory).parents[1])


def write_compute_id(node_uuid: str) -> pathlib.Path:
    """nova-compute's ``compute_id`` naming ``node_uuid``, where the tool looks by default.

    NOTE: that place is the test's scratch directory (``tests/conftest.py``
    ``nova_state_dirs``): this machine's compute proves it is Nova's node of its host
    (docs/design.md rule 10).
    """
    from nova_orphans.config import nova_compute

    path = pathlib.Path(nova_compute.NOVA_STATE_DIRS[0]) / "compute_id"
    path.write_text(node_uuid)
    return path
