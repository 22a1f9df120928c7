"""Live effects and restore against a real libvirtd running QEMU (TCG) guests.

The guests are tiny and have no OS: a graceful shutdown never completes, so
``stop`` has to power them off. Other tests may define domains in the same
qemu:///system: these tests only touch the domains they created.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator

import libvirt
import pytest

from nova_orphans import cli, virt
from nova_orphans.act import live
from nova_orphans.act.effects import EffectError
from nova_orphans.act.quarantine import manifest, restore
from nova_orphans.fakes import libvirt_node as worlds
from nova_orphans.record.entries import QuarantineEntry

pytestmark = pytest.mark.libvirtd

STAMP = "20240501T120000Z"
INACTIVE = libvirt.VIR_DOMAIN_XML_INACTIVE

Define = Callable[..., libvirt.virDomain]


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
            virt.undefine_with_fallback(dom)  # with its managed save and snapshots
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
    """What the actuator does for a reap (``Actuator._reap``), with the entry it journals."""
    directory = effects.quarantine_dir(uuid, STAMP)
    effects.save_xml(directory, effects.domain_xml(uuid))
    kept = effects.keep_state(uuid, directory)
    saved = manifest.Manifest(uuid, "unknown", STAMP, "guest", kept=kept)
    effects.write_manifest(directory, saved)
    effects.undefine(uuid, directory)
    moved = effects.move_instance_files(uuid, directory).moved if files else False
    effects.write_manifest(directory, dataclasses.replace(saved, undefined=True, files_moved=moved))
    return QuarantineEntry(uuid, STAMP, "unknown", directory, moved, [])


def _restore(entry: QuarantineEntry, uri: str, instances: str, start: bool = False) -> str:
    """``restore.bring_back`` of ``entry`` into ``instances``."""
    return restore.bring_back(entry, uri, instances, worlds.quarantine_root_of(entry.path), start)


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
    assert sorted(os.listdir(entry.path)) == ["domain.xml", "manifest.json"]

    detail = _restore(entry, qemu_system_uri, instances)
    assert detail == f"defined {dom.name()}"
    restored = conn.lookupByUUIDString(uuid)
    assert _canonical(restored.XMLDesc(INACTIVE)) == _canonical(before)
    assert not restored.isActive()


def test_restore_refuses_when_the_uuid_exists_again(
    qemu_system_uri: str, define: Define, effects: live.LiveEffects, instances: str
) -> None:
    dom = define()
    xml = dom.XMLDesc(INACTIVE)
    entry = _reap(effects, dom.UUIDString())
    dom.connect().defineXML(xml)  # someone defined it again by hand
    with pytest.raises(EffectError, match="has this UUID again"):
        _restore(entry, qemu_system_uri, instances)
    (pathlib.Path(entry.path) / "domain.xml").unlink()
    # Once restored, the manifest says so: a second restore is refused before libvirt is asked.
    dom.undefine()
    (pathlib.Path(entry.path) / "domain.xml").write_text(xml)
    _restore(entry, qemu_system_uri, instances)
    with pytest.raises(EffectError, match=r"not restorable: restored \("):
        _restore(entry, qemu_system_uri, instances)


def test_restore_with_start_runs_the_guest(
    qemu_system_uri: str,
    conn: libvirt.virConnect,
    define: Define,
    effects: live.LiveEffects,
    instances: str,
) -> None:
    uuid = define().UUIDString()
    entry = _reap(effects, uuid)
    detail = _restore(entry, qemu_system_uri, instances, start=True)
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

    _restore(entry, qemu_system_uri, instances, start=True)
    assert {p.name: p.read_bytes() for p in directory.iterdir()} == content
    assert conn.lookupByUUIDString(uuid).isActive()


# --- everything a restore needs (docs/design.md rule 16) --------------------------------


def _qcow2_guest(define: Define, instances: str) -> tuple[str, pathlib.Path]:
    """A guest whose disk is a qcow2 overlay in ``<uuid>/disk`` on ``_base/<hash>``, as Nova's."""
    uuid = worlds.random_uuid()
    base = pathlib.Path(instances) / "_base" / "8d4c3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d"
    base.parent.mkdir(exist_ok=True)
    directory = pathlib.Path(instances) / uuid
    directory.mkdir()
    qemu_img = ["qemu-img", "create", "-q", "-f", "qcow2"]
    subprocess.run([*qemu_img, str(base), "16M"], check=True)
    subprocess.run([*qemu_img, "-F", "qcow2", "-b", str(base), str(directory / "disk")], check=True)
    define(uuid=uuid, devices=(worlds.file_disk(str(directory / "disk")),))
    return uuid, base


def _snapshots(dom: libvirt.virDomain) -> dict[str, str]:
    secure = libvirt.VIR_DOMAIN_SNAPSHOT_XML_SECURE
    return {s.getName(): _canonical(s.getXMLDesc(secure)) for s in dom.listAllSnapshots(0)}


def test_a_managed_saved_guest_comes_back_managed_saved_and_resumes(
    qemu_system_uri: str,
    conn: libvirt.virConnect,
    define: Define,
    effects: live.LiveEffects,
    instances: str,
) -> None:
    dom = define(running=True)
    uuid, name = dom.UUIDString(), dom.name()
    dom.managedSave()  # what Nova's suspend does
    image = pathlib.Path(live.DEFAULT_MANAGED_SAVE_DIR) / f"{name}.save"
    saved = image.read_bytes()

    entry = _reap(effects, uuid)
    assert not _exists(conn, uuid) and not image.exists()
    assert (pathlib.Path(entry.path) / "managed.save").read_bytes() == saved
    assert "managed-save" in manifest.read(entry.path).holds()

    detail = _restore(entry, qemu_system_uri, instances)
    assert "managed-saved again" in detail
    restored = conn.lookupByUUIDString(uuid)
    assert restored.hasManagedSaveImage(0)
    assert restored.state()[0] == libvirt.VIR_DOMAIN_SHUTOFF
    restored.create()  # resumes from the saved RAM state, running as it was saved
    assert restored.state()[0] == libvirt.VIR_DOMAIN_RUNNING
    assert not restored.hasManagedSaveImage(0)


def test_a_managed_saved_guest_restored_with_start_resumes_from_its_saved_state(
    qemu_system_uri: str,
    conn: libvirt.virConnect,
    define: Define,
    effects: live.LiveEffects,
    instances: str,
) -> None:
    dom = define(running=True)
    uuid = dom.UUIDString()
    dom.managedSave()
    entry = _reap(effects, uuid)
    detail = _restore(entry, qemu_system_uri, instances, start=True)
    assert detail.endswith("resumed from its managed-save image")
    restored = conn.lookupByUUIDString(uuid)
    assert restored.state()[0] == libvirt.VIR_DOMAIN_RUNNING
    assert restored.state()[1] == libvirt.VIR_DOMAIN_RUNNING_RESTORED


def test_a_guest_with_checkpoints_comes_back_with_the_same_checkpoints(
    qemu_system_uri: str,
    conn: libvirt.virConnect,
    define: Define,
    effects: live.LiveEffects,
    instances: str,
) -> None:
    uuid, _ = _qcow2_guest(define, instances)
    dom = conn.lookupByUUIDString(uuid)
    dom.create()  # NOTE: this libvirt creates checkpoints of running guests only
    dom.checkpointCreateXML("<domaincheckpoint><name>backup-1</name></domaincheckpoint>", 0)
    dom.checkpointCreateXML("<domaincheckpoint><name>backup-2</name></domaincheckpoint>", 0)
    dom.destroy()
    before = {c.getName(): _canonical(c.getXMLDesc(0)) for c in dom.listAllCheckpoints(0)}

    entry = _reap(effects, uuid, files=True)
    assert manifest.read(entry.path).kept.checkpoints == ("backup-1", "backup-2")
    _restore(entry, qemu_system_uri, instances)
    restored = conn.lookupByUUIDString(uuid)
    after = {c.getName(): _canonical(c.getXMLDesc(0)) for c in restored.listAllCheckpoints(0)}
    assert after == before


def test_a_managed_save_image_that_cannot_be_kept_stops_the_reap(
    qemu_system_uri: str,
    conn: libvirt.virConnect,
    define: Define,
    tmp_path: pathlib.Path,
    instances: str,
) -> None:
    dom = define(running=True)
    dom.managedSave()
    elsewhere = live.LiveEffects(
        qemu_system_uri, instances, str(tmp_path / "quarantine"), managed_save_dir=str(tmp_path)
    )
    with pytest.raises(EffectError, match=r"managed-save image .* not reaped"):
        _reap(elsewhere, dom.UUIDString())
    elsewhere.close()
    assert dom.isPersistent() and dom.hasManagedSaveImage(0)


def test_a_guest_with_snapshots_comes_back_with_the_same_snapshots(
    qemu_system_uri: str,
    conn: libvirt.virConnect,
    define: Define,
    effects: live.LiveEffects,
    instances: str,
) -> None:
    uuid, _ = _qcow2_guest(define, instances)
    dom = conn.lookupByUUIDString(uuid)
    dom.snapshotCreateXML("<domainsnapshot><name>before-upgrade</name></domainsnapshot>", 0)
    dom.snapshotCreateXML("<domainsnapshot><name>after-upgrade</name></domainsnapshot>", 0)
    before = _snapshots(dom)

    entry = _reap(effects, uuid, files=True)
    assert manifest.read(entry.path).kept.snapshots == ("before-upgrade", "after-upgrade")

    _restore(entry, qemu_system_uri, instances)
    restored = conn.lookupByUUIDString(uuid)
    assert _snapshots(restored) == before
    assert restored.snapshotCurrent(0).getName() == "after-upgrade"
    assert restored.snapshotLookupByName("after-upgrade", 0).getParent(0).getName() == (
        "before-upgrade"
    )


def test_a_qcow2_overlay_whose_base_nova_deleted_restores_and_boots(
    qemu_system_uri: str,
    conn: libvirt.virConnect,
    define: Define,
    effects: live.LiveEffects,
    instances: str,
) -> None:
    uuid, base = _qcow2_guest(define, instances)
    content = base.read_bytes()
    entry = _reap(effects, uuid, files=True)
    (kept,) = manifest.read(entry.path).kept.backing
    assert (kept.path, kept.how) == (str(base), "hard link")
    base.unlink()  # Nova's image cache manager: no non-deleted instance uses it

    detail = _restore(entry, qemu_system_uri, instances, start=True)
    assert f"put back backing file {base}" in detail
    assert base.read_bytes() == content
    assert conn.lookupByUUIDString(uuid).isActive()


def test_a_restore_whose_start_fails_is_undone_and_stays_restorable(
    qemu_system_uri: str,
    conn: libvirt.virConnect,
    define: Define,
    effects: live.LiveEffects,
    instances: str,
    tmp_path: pathlib.Path,
) -> None:
    volume = tmp_path / "volume.raw"  # outside the instance directory: not moved
    volume.write_bytes(b"\0" * 65536)
    uuid, _ = _qcow2_guest(define, instances)
    dom = conn.lookupByUUIDString(uuid)
    xml = dom.XMLDesc(INACTIVE).replace(
        "</devices>", worlds.file_disk(str(volume), "vdb").replace("qcow2", "raw") + "</devices>"
    )
    conn.defineXML(xml)
    entry = _reap(effects, uuid, files=True)
    volume.unlink()  # the guest cannot start any more

    with pytest.raises(
        EffectError, match=r"start failed: .*undone, the guest is quarantined again"
    ):
        _restore(entry, qemu_system_uri, instances, start=True)
    assert not _exists(conn, uuid)
    assert not (pathlib.Path(instances) / uuid).exists()
    assert (pathlib.Path(entry.path) / "files" / "disk").is_file()
    assert manifest.read(entry.path).restore_state is None

    volume.write_bytes(b"\0" * 65536)
    _restore(entry, qemu_system_uri, instances, start=True)
    assert conn.lookupByUUIDString(uuid).isActive()


def test_restore_works_from_the_manifest_when_the_journal_is_lost(
    qemu_system_uri: str,
    conn: libvirt.virConnect,
    define: Define,
    tmp_path: pathlib.Path,
    instances: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # NOTE: restore asks Nova first (docs/design.md rule 13); this Nova has no record of
    # the guest, so the restore may start it.
    from nova_orphans.cli import journal as cli_journal
    from nova_orphans.fakes.nova import SimulatedNova

    nova = SimulatedNova()
    # NOTE: and proves this libvirtd is its node of cmp-1 (docs/design.md rule 10).
    nova.add_compute("cmp-1", node=conn.getHostname(), hypervisor_type=conn.getType())
    worlds.write_compute_id(nova.computes["cmp-1"].node_uuid)
    monkeypatch.setattr(cli_journal, "transport_from_conf", lambda conf: nova)
    state = tmp_path / "state"
    config = tmp_path / "nova-orphans.conf"
    config.write_text(
        f"[DEFAULT]\nhost = cmp-1\ninstances_path = {instances}\n"
        f"[libvirt]\nconnection_uri = {qemu_system_uri}\n[agent]\nstate_dir = {state}\n"
    )
    uuid, base = _qcow2_guest(define, instances)
    effects = live.LiveEffects(qemu_system_uri, instances, str(state / "quarantine"))
    _reap(effects, uuid, files=True)
    effects.close()
    assert not (state / "journal.sqlite").exists()  # the journal never knew (or was lost)
    base.unlink()

    assert cli.main(["quarantine", "list", "--wide", "--config-file", str(config)]) == 0
    assert f"{uuid}  unknown  yes         xml, files, backing chain (1 file)" in (
        capsys.readouterr().out
    )
    assert cli.main(["restore", uuid, "--start", "--config-file", str(config)]) == 0
    assert capsys.readouterr().out.startswith(f"restored {uuid}")
    assert conn.lookupByUUIDString(uuid).isActive()
    assert base.is_file()
    # The manifest now says it was restored: it is not listed (nor purged) again.
    assert cli.main(["quarantine", "list", "--config-file", str(config)]) == 0
    assert uuid not in capsys.readouterr().out
