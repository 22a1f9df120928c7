"""What an orphan endangers, from Cinder's and Neutron's facts (``classify/danger.py``)."""

from __future__ import annotations

import dataclasses

import pytest

from nova_orphans.classify import danger
from nova_orphans.classify.danger import Attachment, Facts, Port, Volume
from nova_orphans.model import Disk, Domain, DomainState, Finding, Interface, Kind

HOST = "cmp-1"
ME = "11111111-0000-4000-8000-000000000001"
OTHER_SERVER = "22222222-0000-4000-8000-000000000002"
MANAGED = "33333333-0000-4000-8000-000000000003"
VOL = "44444444-0000-4000-8000-000000000004"
MAC = "fa:16:3e:aa:bb:cc"


def finding(kind: Kind = Kind.DELETED, disks=(), interfaces=()) -> Finding:
    domain = Domain(
        ME, "instance-1", DomainState.RUNNING, True, False, disks=disks, interfaces=interfaces
    )
    return Finding(ME, "instance-1", kind, "why", domain, None)


VOLUME_DISK = Disk("vdb", "disk", "block", "/dev/sdb", serial=VOL)
NIC = Interface("bridge", MAC.upper(), "tap1", "br-int")


def kinds(found) -> list[str]:
    return [d.kind.value for d in found]


@pytest.mark.parametrize(
    ("case", "volume", "expected"),
    [
        (
            "attached to another server: two writers",
            Volume(VOL, "in-use", (Attachment(OTHER_SERVER, "cmp-2"),)),
            ["shared-volume"],
        ),
        ("available: Cinder may attach it anywhere", Volume(VOL, "available"), ["shared-volume"]),
        ("reserved for an attach", Volume(VOL, "reserved"), ["shared-volume"]),
        (
            "still attached to this very guest here",
            Volume(VOL, "in-use", (Attachment(ME, HOST),)),
            [],
        ),
        ("being deleted, attached to nobody", Volume(VOL, "deleting"), []),
        ("Cinder has no such volume any more", None, []),
    ],
)
def test_a_volume_disk(case, volume, expected):
    facts = Facts(volumes={VOL: volume})
    assert kinds(danger.assess(finding(disks=(VOLUME_DISK,)), facts, HOST, ())) == expected, case


def test_a_shared_volume_names_the_other_server_and_host():
    facts = Facts(volumes={VOL: Volume(VOL, "in-use", (Attachment(OTHER_SERVER, "cmp-2"),))})
    (found,) = danger.assess(finding(disks=(VOLUME_DISK,)), facts, HOST, ())
    assert found.other_server == OTHER_SERVER and found.subject == VOL
    assert f"attached to server {OTHER_SERVER} on cmp-2" in found.detail


def test_a_misplaced_copy_whose_live_copy_writes_the_volume_elsewhere_is_a_shared_volume():
    # The split-brain copy on shared storage: same server, attached on the other host.
    facts = Facts(volumes={VOL: Volume(VOL, "in-use", (Attachment(ME, "cmp-2"),))})
    (found,) = danger.assess(finding(Kind.MISPLACED, disks=(VOLUME_DISK,)), facts, HOST, ())
    assert found.kind.value == "shared-volume"
    assert "this server's live copy on cmp-2" in found.detail


@pytest.mark.parametrize(
    ("disk", "ids"),
    [
        (Disk("vdb", "disk", "block", "/dev/sdb", serial=VOL.upper()), (VOL,)),
        (Disk("vdb", "disk", "network", f"rbd:volumes/volume-{VOL}", "rbd"), (VOL,)),
        (Disk("vda", "disk", "network", f"rbd:vms/{ME}_disk", "rbd"), ()),
        (Disk("vda", "disk", "file", f"/var/lib/nova/instances/{ME}/disk"), ()),
        (Disk("vdc", "disk", "block", "/dev/sdc", serial="not-a-volume"), ()),
    ],
)
def test_which_disks_are_cinder_volumes(disk, ids):
    assert danger.volume_ids(finding(disks=(disk, disk)).domain) == ids


def test_cinder_not_answering_makes_the_volume_danger_unknown_never_none():
    facts = Facts(volumes_error="Cinder: no block-storage endpoint in the service catalog")
    (found,) = danger.assess(finding(disks=(VOLUME_DISK,)), facts, HOST, ())
    assert found.kind.value == "unknown"
    assert "service catalog" in found.detail


def test_a_volume_cinder_was_not_asked_about_is_unknown():
    (found,) = danger.assess(finding(disks=(VOLUME_DISK,)), Facts(), HOST, ())
    assert found.kind.value == "unknown"


def test_a_guest_without_volumes_or_macs_needs_neither_service():
    facts = Facts(volumes_error="down", ports_error="down")
    assert danger.assess(finding(), facts, HOST, ()) == ()


def port(device_id: str, owner: str = "compute:nova", mac: str = MAC) -> Port:
    return Port("port-1", mac, device_id, owner, ("10.0.0.5", "fd00::5"), "cmp-2")


@pytest.mark.parametrize(
    ("case", "kind", "ports", "expected"),
    [
        (
            "a port of another server has its MAC",
            Kind.DELETED,
            [port(OTHER_SERVER)],
            ["address-conflict"],
        ),
        (
            "a port of a guest Nova manages here",
            Kind.DELETED,
            [port(MANAGED)],
            ["address-conflict"],
        ),
        (
            "a router's port",
            Kind.UNKNOWN,
            [port("router-1", "network:router_interface")],
            ["address-conflict"],
        ),
        ("an unbound port with no device", Kind.DELETED, [port("")], []),
        ("its own port, never released", Kind.DELETED, [port(ME)], []),
        (
            "a migration leftover and its live copy's port",
            Kind.MISPLACED,
            [port(ME)],
            ["address-conflict"],
        ),
        ("another MAC", Kind.DELETED, [port(OTHER_SERVER, mac="fa:16:3e:00:00:01")], []),
    ],
)
def test_an_interface(case, kind, ports, expected):
    facts = Facts(ports=tuple(ports))
    found = danger.assess(finding(kind, interfaces=(NIC,)), facts, HOST, {MANAGED})
    assert kinds(found) == expected, case


def test_an_address_conflict_names_port_device_and_fixed_ips():
    facts = Facts(ports=(port(MANAGED),))
    (found,) = danger.assess(finding(interfaces=(NIC,)), facts, HOST, {MANAGED})
    assert (found.port, found.other_server, found.fixed_ips) == (
        "port-1",
        MANAGED,
        ("10.0.0.5", "fd00::5"),
    )
    assert f"server {MANAGED}, which Nova manages on this host" in found.detail


def test_neutron_not_answering_makes_the_address_danger_unknown():
    facts = Facts(ports_error="Neutron answered GET /v2.0/ports with HTTP 403: forbidden")
    (found,) = danger.assess(finding(interfaces=(NIC,)), facts, HOST, ())
    assert (found.kind.value, found.subject) == ("unknown", "ports")


def test_the_worst_danger_comes_first_and_shared_volumes_are_listed_first():
    facts = Facts(volumes={VOL: Volume(VOL, "available")}, ports=(port(OTHER_SERVER),))
    both = finding(disks=(VOLUME_DISK,), interfaces=(NIC,))
    assert kinds(danger.assess(both, facts, HOST, ())) == ["shared-volume", "address-conflict"]
    calm = Finding("00000000-0000-4000-8000-000000000000", "a", Kind.DELETED, "", None, None)
    lost = Finding("00000000-0000-4000-8000-0000000000ff", "b", Kind.LOST, "", None, None)
    ordered = danger.with_dangers([calm, lost, both], facts, HOST, ())
    assert [f.uuid for f in ordered] == [ME, calm.uuid, lost.uuid]
    # Findings whose dangers are not looked for say so (None), never "none found" (()).
    assert ordered[2].dangers is None


def test_only_orphans_with_a_domain_are_checked():
    for kind in Kind:
        assert danger.checked(finding(kind)) is (
            kind in (Kind.DELETED, Kind.UNKNOWN, Kind.MISPLACED)
        )


def test_a_stopped_guests_danger_is_told_as_what_starting_it_would_do():
    stopped = finding(disks=(VOLUME_DISK,))
    stopped = dataclasses.replace(
        stopped, domain=dataclasses.replace(stopped.domain, state=DomainState.SHUTOFF)
    )
    facts = Facts(volumes={VOL: Volume(VOL, "available")})
    (found,) = danger.assess(stopped, facts, HOST, ())
    assert found.kind.value == "shared-volume"
    assert found.detail.endswith("(once the guest is started again)")
