"""The agent's libvirt view against a real libvirtd running QEMU (TCG) guests.

Between cycles our guests are defined, started, stopped, re-tagged, given a USB disk
hot-plugged and hot-unplugged, given a disk in their persistent definition only (libvirt
sends no event for that), redefined, undefined, and a transient one comes and goes; each
cycle the view lists our guests as a full read on a fresh connection does, reading the
XML of only the guests that changed. libvirtd dropping the connection makes the next
cycle connect again and read in full. Only our own domains are compared and cleaned up.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import time
from collections.abc import Iterator

import libvirt
import pytest

from nova_orphans import model
from nova_orphans.fakes import libvirt_node as worlds
from nova_orphans.observe import hypervisor
from nova_orphans.observe.domain_xml import NOVA_NS_1_1
from nova_orphans.observe.libvirt_view import LibvirtView
from tests.libvirt.domains import admin_connection

pytestmark = pytest.mark.libvirtd

PREFIX = "nova-orphans-view-"
#: The longest libvirtd may take to send a change's events (a cycle comes minutes later).
EVENTS_SETTLE = 30.0


def usb_disk(path: str, target: str) -> str:
    """A USB disk: QEMU plugs and unplugs it without the guest's help (the guest has no OS)."""
    return (
        "<disk type='file' device='disk'><driver name='qemu' type='raw'/>"
        f"<source file='{path}'/><target dev='{target}' bus='usb'/></disk>"
    )


@pytest.fixture
def admin(qemu_system_uri: str) -> Iterator[libvirt.virConnect]:
    with admin_connection(qemu_system_uri, PREFIX) as conn:
        yield conn


@pytest.fixture
def images() -> Iterator[str]:
    """A directory libvirtd's QEMU may open (not a private temporary directory)."""
    path = f"/var/tmp/{PREFIX}{os.getpid()}"
    os.makedirs(path, exist_ok=True)
    yield path
    subprocess.run(["rm", "-rf", path], check=False)


def ours(domains: tuple[model.Domain, ...]) -> dict[str, model.Domain]:
    """Our guests by UUID, their CPU time left out (it moves between two reads)."""
    return {
        d.uuid: dataclasses.replace(d, usage=dataclasses.replace(d.usage, cpu_seconds=None))
        for d in domains
        if d.name.startswith(PREFIX)
    }


class Cycles:
    """The view's cycles, each checked against a full read."""

    def __init__(self, view: LibvirtView, uri: str, admin: libvirt.virConnect) -> None:
        self.view, self.uri, self.admin = view, uri, admin

    def settle(self) -> None:
        """Wait until the events of every change made so far have come to the view.

        NOTE: libvirtd sends a driver's events in order, so once the event of a later
        change (a guest defined and undefined, never listed) has come, every earlier one
        has; a connection libvirtd closed sends none (the cycle then reads in full).
        """
        if self.view._observer is None:
            return  # not connected yet: the cycle reads in full
        marker = self.admin.defineXML(
            worlds.qemu_domain(uuid=worlds.random_uuid(), name=f"{PREFIX}settle", metadata=None)
        )
        uuid = marker.UUIDString()
        marker.undefine()
        deadline = time.monotonic() + EVENTS_SETTLE
        while uuid not in self.view._changed and self.view._closed is None:
            assert time.monotonic() < deadline, "libvirtd sent no event in time"
            time.sleep(0.01)

    def run(self) -> tuple[bool, frozenset[str]]:
        """One cycle after the changes settled: whether it read in full, and which of our
        guests' XML it read. Asserts that it lists our guests as a full read does."""
        self.settle()
        with self.view.session() as session:
            listed = session.look()
        with hypervisor.LibvirtObserver.open(self.uri) as observer:
            full = observer.look()
        assert ours(listed) == ours(full)
        read = self.view.last_read
        assert read is not None
        return read.full, read.definitions_read & set(ours(listed))


def test_each_cycle_of_a_real_history_lists_our_guests_as_a_full_read_does(
    qemu_system_uri: str, admin: libvirt.virConnect, images: str
) -> None:
    def define(n: int, *devices: str) -> libvirt.virDomain:
        xml = worlds.qemu_domain(
            uuid=worlds.random_uuid(),
            name=f"{PREFIX}{n}",
            metadata=worlds.nova_metadata(name=f"server-{n}"),
            devices=devices,
        )
        return admin.defineXML(xml)

    disk = f"{images}/disk.raw"
    subprocess.run(["truncate", "-s", "1M", disk], check=True)
    off, on = define(1), define(2)
    view = LibvirtView(qemu_system_uri, libvirt_full_look_every=1000)
    cycles = Cycles(view, qemu_system_uri, admin)
    try:
        assert cycles.run()[0] is True
        assert cycles.run() == (False, frozenset())  # nothing changed: no XML read

        on.create()
        assert cycles.run() == (False, {on.UUIDString()})
        on.attachDeviceFlags(usb_disk(disk, "sda"), libvirt.VIR_DOMAIN_AFFECT_LIVE)
        assert cycles.run() == (False, {on.UUIDString()})
        on.detachDeviceFlags(usb_disk(disk, "sda"), libvirt.VIR_DOMAIN_AFFECT_LIVE)
        assert cycles.run() == (False, {on.UUIDString()})
        tag = worlds.nova_metadata(name="renamed").replace("nova:", "").replace(":nova=", "=")
        on.setMetadata(
            libvirt.VIR_DOMAIN_METADATA_ELEMENT, tag, "nova", NOVA_NS_1_1,
            libvirt.VIR_DOMAIN_AFFECT_LIVE | libvirt.VIR_DOMAIN_AFFECT_CONFIG,
        )  # fmt: skip
        assert cycles.run() == (False, {on.UUIDString()})
        # No event for a disk given to a shut-off guest's definition: the listing shows it.
        off.attachDeviceFlags(usb_disk(disk, "sdb"), libvirt.VIR_DOMAIN_AFFECT_CONFIG)
        assert cycles.run() == (False, {off.UUIDString()})
        off.setMetadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT, tag, "nova", NOVA_NS_1_1, 0)
        assert cycles.run() == (False, {off.UUIDString()})

        on.destroy()
        off.undefine()
        new = define(3)
        transient = admin.createXML(
            worlds.qemu_domain(uuid=worlds.random_uuid(), name=f"{PREFIX}t"), 0
        )
        assert cycles.run() == (False, {on.UUIDString(), new.UUIDString(), transient.UUIDString()})
        transient.destroy()
        admin.defineXML(on.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE).replace("32768", "49152"))
        assert cycles.run() == (False, {on.UUIDString()})
        assert cycles.run() == (False, frozenset())
    finally:
        view.close()


def our_clients() -> list[str]:
    """libvirtd's ids of this process's read-only connections."""
    listed = subprocess.run(
        ["virt-admin", "client-list", "libvirtd"], capture_output=True, text=True, check=True
    ).stdout.splitlines()[2:]
    found = []
    for client in (line.split()[0] for line in listed if line.strip()):
        info = subprocess.run(
            ["virt-admin", "client-info", "libvirtd", client],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        fields = dict(row.split(":", 1) for row in info.splitlines() if ":" in row)
        fields = {k.strip(): v.strip() for k, v in fields.items()}
        if fields.get("unix_process_id") == str(os.getpid()) and fields.get("readonly") == "yes":
            found.append(client)
    return found


def test_libvirtd_dropping_the_connection_makes_the_next_cycle_connect_and_read_in_full(
    qemu_system_uri: str, admin: libvirt.virConnect
) -> None:
    dom = admin.defineXML(
        worlds.qemu_domain(uuid=worlds.random_uuid(), name=f"{PREFIX}drop", metadata=None)
    )
    view = LibvirtView(qemu_system_uri, libvirt_full_look_every=1000)
    cycles = Cycles(view, qemu_system_uri, admin)
    try:
        cycles.run()
        assert cycles.run()[0] is False
        (client,) = our_clients()
        subprocess.run(["virt-admin", "client-disconnect", "libvirtd", client], check=True)
        dom.setMetadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT, "<x/>", "x", "urn:x", 0)
        full, _ = cycles.run()
        assert full is True
        assert view.last_read is not None and "closed" in str(view.last_read.why)
        assert cycles.run()[0] is False
        assert our_clients() not in ([], [client])  # a new connection
    finally:
        view.close()
