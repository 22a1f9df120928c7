"""Live effects and restore against a real libvirtd running QEMU (TCG) guests.

The guests are tiny and have no OS: a graceful shutdown never completes, so
``stop`` has to power them off. Other tests may define domains in the same
qemu:///system: these tests only touch the domains they created.
"""

from __future__ import annotations

import os
import pathlib
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator

import libvirt
import pytest

from nova_orphans.act import live, quarantine
from nova_orphans.act.effects import EffectError
from nova_orphans.record.journal import QuarantineEntry
from tests import worlds

pytestmark = pytest.mark.libvirtd

STAMP = "20240501T120000Z"
INACTIVE = libvirt.VIR_DOMAIN_XML_INACTIVE

Define = Callable[..., libvirt.virDomain]


@pytest.fixture
def conn(qemu_system_uri: str) -> Iterator[libvirt.virConnect]:
    libvirt.registerErrorHandler(lambda *_: None, None)
    opened = libvirt.open(qemu_system_uri)
    yield opened
    opened.close()


@pytest.fixture
def define(conn: libvirt.virConnect) -> Iterator[Define]:
    """Define a diskless Nova guest (started when asked); ours are removed afterwards."""
    made: list[str] = []

    def _define(
        *, running: bool = False, devices: tuple[str, ...] = (), uuid: str | None = None
    ) -> libvirt.virDomain:
        uuid = uuid or worlds.random_uuid()
        made.append(uuid)
        meta = worlds.nova_metadata(name="effects-real")
        xml = worlds.qemu_domain(
            uuid=uuid, name=worlds.instance_name(), metadata=meta, devices=devices
        )
        dom = conn.defineXML(xml)
        if running:
            dom.create()
        return dom

    yield _define
    failures = []
    for uuid in made:
        try:
            dom = conn.lookupByUUIDString(uuid)
            if dom.isActive():
                dom.destroy()
            dom.undefine()
        except libvirt.libvirtError as err:
            if err.get_error_code() != libvirt.VIR_ERR_NO_DOMAIN:
                failures.append(f"{uuid}: {err}")
    assert not failures, f"could not clean up: {failures}"


@pytest.fixture
def instances(tmp_path: pathlib.Path) -> str:
    path = tmp_path / "instances"
    path.mkdir()
    return str(path)


@pytest.fixture
def effects(
    qemu_system_uri: str, tmp_path: pathlib.Path, instances: str
) -> Iterator[live.LiveEffects]:
    made = live.LiveEffects(qemu_system_uri, instances, str(tmp_path / "quarantine"))
    yield made
    made.close()


def _canonical(xml: str) -> str:
    return ET.canonicalize(xml, strip_text=True)


def _reap(effects: live.LiveEffects, uuid: str, files: bool = False) -> QuarantineEntry:
    """What the actuator does for a reap, with the entry it would journal."""
    directory = effects.quarantine_dir(uuid, STAMP)
    effects.save_xml(directory, effects.domain_xml(uuid))
    effects.undefine(uuid, directory)
    moved = effects.move_instance_files(uuid, directory).moved if files else False
    return QuarantineEntry(uuid, STAMP, "unknown", directory, moved, [])


def _exists(conn: libvirt.virConnect, uuid: str) -> bool:
    try:
        conn.lookupByUUIDString(uuid)
    except libvirt.libvirtError as err:
        if err.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN:
            return False
        raise
    return True


def test_stop_of_a_guest_without_os_times_out_then_powers_off(
    define: Define, effects: live.LiveEffects
) -> None:
    dom = define(running=True)
    detail = effects.stop(dom.UUIDString(), 1.5)
    assert detail == "no graceful shutdown within 1.5 s; powered off"
    assert dom.state()[0] == libvirt.VIR_DOMAIN_SHUTOFF
    assert dom.isPersistent()
    assert effects.stop(dom.UUIDString(), 1.5) == "already shut off"


def test_a_running_guest_is_never_undefined(define: Define, effects: live.LiveEffects) -> None:
    dom = define(running=True)
    with pytest.raises(EffectError, match="running; stop it first"):
        _reap(effects, dom.UUIDString())
    assert dom.isActive()
    assert dom.isPersistent()


def test_reap_undefines_and_restore_brings_back_the_identical_definition(
    qemu_system_uri: str,
    conn: libvirt.virConnect,
    define: Define,
    effects: live.LiveEffects,
    instances: str,
) -> None:
    dom = define()
    uuid, before = dom.UUIDString(), dom.XMLDesc(INACTIVE)
    entry = _reap(effects, uuid)
    assert not _exists(conn, uuid)
    assert os.listdir(entry.path) == ["domain.xml"]

    detail = quarantine.restore(entry, qemu_system_uri, instances)
    assert detail == f"restored {uuid}: defined {dom.name()}"
    restored = conn.lookupByUUIDString(uuid)
    assert _canonical(restored.XMLDesc(INACTIVE)) == _canonical(before)
    assert not restored.isActive()


def test_restore_refuses_when_the_uuid_exists_again(
    qemu_system_uri: str, define: Define, effects: live.LiveEffects, instances: str
) -> None:
    dom = define()
    entry = _reap(effects, dom.UUIDString())
    quarantine.restore(entry, qemu_system_uri, instances)
    with pytest.raises(EffectError, match="has this UUID again"):
        quarantine.restore(entry, qemu_system_uri, instances)


def test_restore_with_start_runs_the_guest(
    qemu_system_uri: str,
    conn: libvirt.virConnect,
    define: Define,
    effects: live.LiveEffects,
    instances: str,
) -> None:
    uuid = define().UUIDString()
    entry = _reap(effects, uuid)
    detail = quarantine.restore(entry, qemu_system_uri, instances, start=True)
    assert detail.endswith("; started")
    assert conn.lookupByUUIDString(uuid).isActive()


def test_reap_moves_the_instance_directory_and_restore_moves_it_back_byte_identical(
    qemu_system_uri: str,
    conn: libvirt.virConnect,
    define: Define,
    effects: live.LiveEffects,
    instances: str,
) -> None:
    uuid = worlds.random_uuid()
    directory = pathlib.Path(instances) / uuid
    directory.mkdir()
    content = {"disk": os.urandom(1 << 20), "disk.info": b'{"disk": "raw"}'}
    for name, data in content.items():
        (directory / name).write_bytes(data)
    disk = worlds.file_disk(str(directory / "disk")).replace("qcow2", "raw")
    define(uuid=uuid, devices=(disk,))

    entry = _reap(effects, uuid, files=True)
    assert entry.files_moved
    assert not directory.exists()
    quarantined = pathlib.Path(entry.path) / "files"
    assert {p.name: p.read_bytes() for p in quarantined.iterdir()} == content

    quarantine.restore(entry, qemu_system_uri, instances, start=True)
    assert {p.name: p.read_bytes() for p in directory.iterdir()} == content
    assert conn.lookupByUUIDString(uuid).isActive()
