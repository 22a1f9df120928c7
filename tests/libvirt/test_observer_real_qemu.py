"""The libvirt observer against a real libvirtd running QEMU (TCG) guests.

Other tests may define domains in the same qemu:///system: these tests only
look at, and only clean up, the domains they created themselves.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator

import libvirt
import pytest

from nova_orphans import model
from nova_orphans.fakes import libvirt_node as worlds
from nova_orphans.observe import hypervisor

pytestmark = pytest.mark.libvirtd


@dataclasses.dataclass(frozen=True)
class Guest:
    uuid: str
    name: str
    mac: str
    tap: str


def _guest() -> Guest:
    number = random.randrange(0x10000000, 0xFFFFFFFF)
    mac = "fa:16:3e:" + ":".join(f"{random.randrange(256):02x}" for _ in range(3))
    return Guest(worlds.random_uuid(), worlds.instance_name(number), mac, f"tapno{number:08x}")


@dataclasses.dataclass(frozen=True)
class Guests:
    running: Guest
    shut_off: Guest
    foreign: Guest
    transient: Guest
    garbage: Guest

    def all(self) -> tuple[Guest, ...]:
        return (self.running, self.shut_off, self.foreign, self.transient, self.garbage)


def _xml(guest: Guest, metadata: str | None) -> str:
    nic = worlds.ethernet_interface(guest.mac, guest.tap)
    return worlds.qemu_domain(uuid=guest.uuid, name=guest.name, metadata=metadata, devices=[nic])


def _remove(conn: libvirt.virConnect, guest: Guest) -> None:
    """Destroy and undefine one of our guests; a transient one is gone once destroyed."""
    try:
        dom = conn.lookupByUUIDString(guest.uuid)
        persistent = dom.isPersistent()
        if dom.isActive():
            dom.destroy()
        if persistent:
            dom.undefine()
    except libvirt.libvirtError as err:
        if err.get_error_code() != libvirt.VIR_ERR_NO_DOMAIN:
            raise


@pytest.fixture(scope="module")
def guests(qemu_system_uri: str) -> Iterator[Guests]:
    """A running and a shut-off Nova guest, a foreign one, a transient one, one with garbage."""
    made = Guests(_guest(), _guest(), _guest(), _guest(), _guest())
    conn = libvirt.open(qemu_system_uri)
    try:
        meta = worlds.nova_metadata(name="real-running", flavor="m1.nano")
        conn.defineXML(_xml(made.running, meta)).create()
        conn.defineXML(_xml(made.shut_off, worlds.nova_metadata(name="real-off")))
        conn.defineXML(_xml(made.foreign, None))
        conn.createXML(_xml(made.transient, worlds.nova_metadata(name="real-transient")), 0)
        garbage = f"<nova:flavor xmlns:nova='{worlds.NOVA_NS_1_1}' name='x'/>"
        conn.defineXML(_xml(made.garbage, garbage))
        yield made
    finally:
        failures = []
        for guest in made.all():
            try:
                _remove(conn, guest)
            except libvirt.libvirtError as err:
                failures.append(f"{guest.name}: {err}")
        conn.close()
        assert not failures, f"could not clean up: {failures}"


@pytest.fixture(scope="module")
def seen(qemu_system_uri: str, guests: Guests) -> dict[str, model.Domain]:
    """What the observer lists, by UUID (may include other people's domains)."""
    with hypervisor.LibvirtObserver.open(qemu_system_uri) as observer:
        return {d.uuid: d for d in observer.look()}


def test_running_nova_guest_is_read(guests: Guests, seen: dict[str, model.Domain]) -> None:
    domain = seen[guests.running.uuid]
    assert domain.name == guests.running.name
    assert domain.state is model.DomainState.RUNNING
    assert domain.persistent
    assert not domain.job_active
    assert domain.metadata == model.NovaMetadata(
        namespace=worlds.NOVA_NS_1_1,
        display_name="real-running",
        creation_time="2024-05-01 12:00:00",
        project_id="2f6e8b1c0d9a4e7f8c6b5a4d3e2f1a0b",
        user_id="8a1b0c6e5a2d4c1f9a3e0b7d6c5f4e3a",
        flavor="m1.nano",
        package="29.0.0",
    )
    assert domain.interfaces == (
        model.Interface("ethernet", guests.running.mac, guests.running.tap, None),
    )
    assert domain.disks == ()


def test_shut_off_nova_guest_is_read(guests: Guests, seen: dict[str, model.Domain]) -> None:
    domain = seen[guests.shut_off.uuid]
    assert domain.state is model.DomainState.SHUTOFF
    assert domain.persistent
    assert not domain.job_active
    assert domain.metadata is not None
    assert domain.metadata.display_name == "real-off"


def test_guest_without_metadata_is_foreign(guests: Guests, seen: dict[str, model.Domain]) -> None:
    domain = seen[guests.foreign.uuid]
    assert (domain.metadata, domain.metadata_error) == (None, None)
    assert domain.interfaces[0].mac == guests.foreign.mac


def test_transient_guest_is_not_persistent(guests: Guests, seen: dict[str, model.Domain]) -> None:
    domain = seen[guests.transient.uuid]
    assert domain.state is model.DomainState.RUNNING
    assert not domain.persistent
    assert domain.metadata is not None


def test_garbage_metadata_is_an_error_string(guests: Guests, seen: dict[str, model.Domain]) -> None:
    domain = seen[guests.garbage.uuid]
    assert domain.metadata is None
    assert domain.metadata_error is not None
    assert "expected <instance>" in domain.metadata_error


def test_look_up_is_a_fresh_read_of_one_guest(
    qemu_system_uri: str, guests: Guests, seen: dict[str, model.Domain]
) -> None:
    with hypervisor.LibvirtObserver.open(qemu_system_uri) as observer:
        for guest in (guests.running, guests.shut_off):
            fresh = observer.look_up(guest.uuid)
            assert fresh is not None
            # NOTE: a running guest's CPU time moves on between two reads.
            assert fresh.usage.cpu_seconds is None or fresh.usage.cpu_seconds >= (
                seen[guest.uuid].usage.cpu_seconds or 0
            )
            assert _without_cpu_time(fresh) == _without_cpu_time(seen[guest.uuid])
        assert observer.look_up(worlds.random_uuid()) is None


def _without_cpu_time(domain: model.Domain) -> model.Domain:
    return dataclasses.replace(domain, usage=dataclasses.replace(domain.usage, cpu_seconds=None))
