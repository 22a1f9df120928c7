"""Live and recording effects against libvirt's in-process test:///default driver.

test:///default is one world per process, shared by every connection to it:
the domains defined here are ours (random UUIDs) and are removed afterwards.
"""

from __future__ import annotations

import pathlib
import subprocess
from collections.abc import Callable, Iterator

import libvirt
import pytest

from nova_orphans import virt
from nova_orphans.act import images, live
from nova_orphans.act.effects import EffectError, FilesResult
from nova_orphans.act.quarantine import manifest, restore
from nova_orphans.act.recording import RecordingEffects
from nova_orphans.fakes import libvirt_node as worlds
from nova_orphans.record.entries import QuarantineEntry

URI = "test:///default"
STAMP = "20240501T120000Z"
INACTIVE = libvirt.VIR_DOMAIN_XML_INACTIVE

Define = Callable[..., libvirt.virDomain]


def _xml(uuid: str, name: str, nvram: str | None) -> str:
    firmware = ""
    if nvram is not None:
        firmware = (
            "<loader readonly='yes' type='pflash'>/usr/share/OVMF/OVMF_CODE.fd</loader>"
            f"<nvram>{nvram}</nvram>"
        )
    return (
        f"<domain type='test'><name>{name}</name><uuid>{uuid}</uuid>"
        f"<metadata>{worlds.nova_metadata()}</metadata><memory unit='KiB'>32768</memory>"
        f"<os><type>hvm</type>{firmware}</os></domain>"
    )


@pytest.fixture
def conn() -> Iterator[libvirt.virConnect]:
    libvirt.registerErrorHandler(lambda *_: None, None)
    opened = libvirt.open(URI)
    yield opened
    opened.close()


@pytest.fixture
def define(conn: libvirt.virConnect) -> Iterator[Define]:
    """Define (and by default start) a Nova-like test domain; all are removed afterwards."""
    made: list[str] = []
    # NOTE: taken now: a test may patch the seam's undefine, and the autouse fixtures'
    # monkeypatch is undone only after this fixture's clean-up.
    undefine = virt.undefine_with_fallback

    def _define(
        *, running: bool = True, transient: bool = False, nvram: str | None = None
    ) -> libvirt.virDomain:
        uuid = worlds.random_uuid()
        xml = _xml(uuid, worlds.instance_name(), nvram)
        made.append(uuid)
        if transient:
            return conn.createXML(xml, 0)
        dom = conn.defineXML(xml)
        if running:
            dom.create()
        return dom

    yield _define
    for uuid in made:
        try:
            dom = conn.lookupByUUIDString(uuid)
        except libvirt.libvirtError:
            continue
        persistent = dom.isPersistent()
        if dom.isActive():
            dom.destroy()
        if persistent:
            undefine(dom)  # with its managed save and snapshots


@pytest.fixture
def effects(tmp_path: pathlib.Path) -> Iterator[live.LiveEffects]:
    (tmp_path / "instances").mkdir()
    made = live.LiveEffects(
        URI,
        str(tmp_path / "instances"),
        str(tmp_path / "quarantine"),
        swtpm_root=str(tmp_path / "swtpm"),
    )
    yield made
    made.close()


def _restore(entry: QuarantineEntry, tmp_path: pathlib.Path, start: bool = False) -> str:
    """``restore.bring_back`` of ``entry`` into this test's instances path."""
    root = worlds.quarantine_root_of(entry.path)
    return restore.bring_back(entry, URI, str(tmp_path / "instances"), root, start)


def _gone(conn: libvirt.virConnect, uuid: str) -> bool:
    try:
        conn.lookupByUUIDString(uuid)
    except libvirt.libvirtError as err:
        return bool(err.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN)
    return False


# --- stop ------------------------------------------------------------------------------


def test_stop_shuts_a_running_domain_down_and_keeps_it_defined(
    define: Define, effects: live.LiveEffects
) -> None:
    dom = define()
    assert effects.stop(dom.UUIDString(), 5) == "shut down gracefully in 0 s"
    assert dom.state()[0] == libvirt.VIR_DOMAIN_SHUTOFF
    assert dom.isPersistent()


def test_stop_of_a_shut_off_domain_says_so(define: Define, effects: live.LiveEffects) -> None:
    dom = define(running=False)
    assert effects.stop(dom.UUIDString(), 5) == "already shut off"


def test_stop_refuses_a_transient_domain_it_would_delete(
    define: Define, effects: live.LiveEffects
) -> None:
    dom = define(transient=True)
    with pytest.raises(EffectError, match="transient"):
        effects.stop(dom.UUIDString(), 5)
    assert dom.isActive()


def test_stop_of_an_unknown_domain_is_one_line_error(effects: live.LiveEffects) -> None:
    with pytest.raises(EffectError, match=r"^no domain [0-9a-f-]+ in test:///default$"):
        effects.stop(worlds.random_uuid(), 5)


def test_unreachable_libvirt_is_one_line_error(tmp_path: pathlib.Path) -> None:
    effects = live.LiveEffects(f"test://{tmp_path}/missing.xml", str(tmp_path), str(tmp_path))
    with pytest.raises(EffectError, match=r"^libvirt unreachable at test://") as caught:
        effects.stop(worlds.random_uuid(), 5)
    assert "\n" not in str(caught.value)


# --- domain XML and undefine -----------------------------------------------------------


def test_domain_xml_is_the_inactive_definition(define: Define, effects: live.LiveEffects) -> None:
    dom = define()
    xml = effects.domain_xml(dom.UUIDString())
    assert xml == dom.XMLDesc(INACTIVE | libvirt.VIR_DOMAIN_XML_SECURE)
    assert worlds.NOVA_NS_1_1 in xml


def test_undefine_of_a_running_domain_is_refused(
    conn: libvirt.virConnect, define: Define, effects: live.LiveEffects
) -> None:
    dom = define()
    directory = effects.quarantine_dir(dom.UUIDString(), STAMP)
    with pytest.raises(EffectError, match="running; stop it first"):
        effects.undefine(dom.UUIDString(), directory)
    assert dom.isActive()
    assert dom.isPersistent()


def test_undefine_falls_back_when_the_driver_rejects_flags(
    conn: libvirt.virConnect, define: Define, effects: live.LiveEffects
) -> None:
    uuid = define(running=False).UUIDString()
    directory = effects.quarantine_dir(uuid, STAMP)
    detail = effects.undefine(uuid, directory)
    assert detail == "undefined (driver rejected keep-tpm, keep-nvram, checkpoints-metadata)"
    assert _gone(conn, uuid)


def test_undefine_works_with_bindings_that_lack_newer_flags(
    conn: libvirt.virConnect,
    define: Define,
    effects: live.LiveEffects,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delattr(libvirt, "VIR_DOMAIN_UNDEFINE_KEEP_TPM")
    monkeypatch.delattr(libvirt, "VIR_DOMAIN_UNDEFINE_CHECKPOINTS_METADATA")
    uuid = define(running=False).UUIDString()
    detail = effects.undefine(uuid, effects.quarantine_dir(uuid, STAMP))
    assert detail == "undefined (driver rejected keep-nvram)"
    assert _gone(conn, uuid)


def test_keep_state_saves_nvram_and_tpm_state_before_the_undefine(
    tmp_path: pathlib.Path, conn: libvirt.virConnect, define: Define, effects: live.LiveEffects
) -> None:
    nvram = tmp_path / "guest_VARS.fd"
    nvram.write_bytes(b"\x01nvram")
    uuid = define(running=False, nvram=str(nvram)).UUIDString()
    tpm = tmp_path / "swtpm" / uuid / "tpm2"
    tpm.mkdir(parents=True)
    (tpm / "tpm2-00.permall").write_bytes(b"\x02tpm")
    directory = pathlib.Path(effects.quarantine_dir(uuid, STAMP))
    kept = effects.keep_state(uuid, str(directory))
    assert (kept.nvram, kept.tpm, kept.managed_save, kept.snapshots) == (True, True, False, ())
    effects.undefine(uuid, str(directory))
    assert (directory / "nvram").read_bytes() == b"\x01nvram"
    assert (directory / "swtpm" / "tpm2" / "tpm2-00.permall").read_bytes() == b"\x02tpm"
    assert _gone(conn, uuid)


def test_restore_defines_again_and_copies_missing_nvram_back(
    tmp_path: pathlib.Path, conn: libvirt.virConnect, define: Define, effects: live.LiveEffects
) -> None:
    nvram = tmp_path / "guest_VARS.fd"
    nvram.write_bytes(b"\x01nvram")
    dom = define(running=False, nvram=str(nvram))
    uuid, before = dom.UUIDString(), dom.XMLDesc(INACTIVE)
    directory = effects.quarantine_dir(uuid, STAMP)
    effects.save_xml(directory, effects.domain_xml(uuid))
    effects.keep_state(uuid, directory)
    effects.undefine(uuid, directory)
    nvram.unlink()
    entry = QuarantineEntry(uuid, STAMP, "unknown", directory, False, [])

    detail = _restore(entry, tmp_path)
    assert detail.startswith("defined ")
    assert f"NVRAM copied back to {nvram}" in detail
    assert conn.lookupByUUIDString(uuid).XMLDesc(INACTIVE) == before
    assert nvram.read_bytes() == b"\x01nvram"

    with pytest.raises(EffectError, match="has this UUID again"):
        _restore(entry, tmp_path)


# --- state a restore needs (docs/design.md rule 16) -----------------------------------


def _snapshots(dom: libvirt.virDomain) -> dict[str, str]:
    secure = libvirt.VIR_DOMAIN_SNAPSHOT_XML_SECURE
    return {s.getName(): s.getXMLDesc(secure) for s in dom.listAllSnapshots(0)}


def test_snapshots_are_kept_and_redefined_parents_first_with_the_current_one(
    tmp_path: pathlib.Path, conn: libvirt.virConnect, define: Define, effects: live.LiveEffects
) -> None:
    dom = define(running=False)
    uuid = dom.UUIDString()
    for name in ("base", "child", "grandchild"):
        dom.snapshotCreateXML(f"<domainsnapshot><name>{name}</name></domainsnapshot>", 0)
    dom.revertToSnapshot(dom.snapshotLookupByName("child", 0), 0)
    before = _snapshots(dom)
    directory = effects.quarantine_dir(uuid, STAMP)
    effects.save_xml(directory, effects.domain_xml(uuid))
    kept = effects.keep_state(uuid, directory)
    assert (kept.snapshots, kept.current_snapshot) == (("base", "child", "grandchild"), "child")
    effects.write_manifest(directory, manifest.Manifest(uuid, "unknown", STAMP, "x", kept=kept))
    effects.undefine(uuid, directory)
    assert _gone(conn, uuid)

    entry = QuarantineEntry(uuid, STAMP, "unknown", directory, False, [])
    detail = _restore(entry, tmp_path)
    assert "redefined 3 snapshot(s), 0 checkpoint(s)" in detail
    restored = conn.lookupByUUIDString(uuid)
    assert _snapshots(restored) == before
    assert restored.snapshotCurrent(0).getName() == "child"


def test_a_snapshot_taken_after_the_state_was_kept_stops_the_undefine(
    conn: libvirt.virConnect, define: Define, effects: live.LiveEffects
) -> None:
    dom = define(running=False)
    uuid = dom.UUIDString()
    directory = effects.quarantine_dir(uuid, STAMP)
    effects.keep_state(uuid, directory)
    dom.snapshotCreateXML("<domainsnapshot><name>late</name></domainsnapshot>", 0)
    with pytest.raises(EffectError, match="its snapshots changed since its state was kept"):
        effects.undefine(uuid, directory)
    assert dom.isPersistent() and [s.getName() for s in dom.listAllSnapshots(0)] == ["late"]


def test_a_snapshot_replaced_by_another_after_the_state_was_kept_stops_the_undefine(
    conn: libvirt.virConnect, define: Define, effects: live.LiveEffects
) -> None:
    """One snapshot deleted and another taken: the count is the same, the state is not.

    docs/design.md rule 16: the undefine flags would drop the new snapshot's metadata.
    """
    dom = define(running=False)
    uuid = dom.UUIDString()
    dom.snapshotCreateXML("<domainsnapshot><name>old</name></domainsnapshot>", 0)
    directory = effects.quarantine_dir(uuid, STAMP)
    effects.keep_state(uuid, directory)
    dom.snapshotLookupByName("old", 0).delete(0)
    dom.snapshotCreateXML("<domainsnapshot><name>new</name></domainsnapshot>", 0)
    with pytest.raises(EffectError, match="its snapshots changed since its state was kept"):
        effects.undefine(uuid, directory)
    assert dom.isPersistent() and [s.getName() for s in dom.listAllSnapshots(0)] == ["new"]


def test_a_managed_save_libvirt_keeps_out_of_reach_is_never_discarded(
    conn: libvirt.virConnect, define: Define, effects: live.LiveEffects
) -> None:
    dom = define(running=True)
    dom.managedSave()  # the test driver keeps no image file at all
    uuid = dom.UUIDString()
    directory = effects.quarantine_dir(uuid, STAMP)
    with pytest.raises(EffectError, match=r"has a managed-save image .* not reaped"):
        effects.keep_state(uuid, directory)
    with pytest.raises(EffectError, match="gained a managed-save image"):
        effects.undefine(uuid, directory)
    assert dom.isPersistent() and dom.hasManagedSaveImage(0)


def test_a_managed_save_replaced_after_the_state_was_kept_stops_the_undefine(
    tmp_path: pathlib.Path, conn: libvirt.virConnect, define: Define
) -> None:
    """Resumed and managed-saved again after keep_state: the kept image is the old RAM state.

    docs/design.md rule 16: the undefine flags would delete the newer image, which the
    quarantine does not hold.
    """
    saves = tmp_path / "save"
    saves.mkdir()
    (tmp_path / "instances").mkdir()
    effects = live.LiveEffects(
        URI,
        str(tmp_path / "instances"),
        str(tmp_path / "quarantine"),
        swtpm_root=str(tmp_path / "swtpm"),
        managed_save_dir=str(saves),
    )
    dom = define(running=True)
    dom.managedSave()  # the test driver keeps no file: the QEMU driver's is put in place
    image = saves / f"{dom.name()}.save"
    image.write_bytes(b"LibvirtQemudSave first RAM state")
    uuid = dom.UUIDString()
    directory = effects.quarantine_dir(uuid, STAMP)
    assert effects.keep_state(uuid, directory).managed_save
    image.unlink()  # `virsh start` consumed it; `virsh managedsave` wrote a new one
    image.write_bytes(b"LibvirtQemudSave second, newer RAM state")
    with pytest.raises(EffectError, match="managed-save image changed since its state was kept"):
        effects.undefine(uuid, directory)
    effects.close()
    assert dom.isPersistent() and dom.hasManagedSaveImage(0)
    assert image.read_bytes().endswith(b"newer RAM state")


def test_the_backing_chain_of_the_guests_own_disk_is_kept_and_a_volumes_is_not(
    tmp_path: pathlib.Path, conn: libvirt.virConnect, effects: live.LiveEffects
) -> None:
    uuid = worlds.random_uuid()
    instances = tmp_path / "instances"
    (instances / "_base").mkdir()
    (instances / uuid).mkdir()
    volumes = tmp_path / "cinder-nfs"
    volumes.mkdir()
    create = ["qemu-img", "create", "-q", "-f", "qcow2"]
    for base, top in (
        (instances / "_base" / "image", instances / uuid / "disk"),
        (volumes / "volume-1", volumes / "volume-1.snap"),
    ):
        subprocess.run([*create, str(base), "1M"], check=True)
        subprocess.run([*create, "-F", "qcow2", "-b", str(base), str(top)], check=True)
    disks = worlds.file_disk(str(instances / uuid / "disk")) + worlds.file_disk(
        str(volumes / "volume-1.snap"), "vdb"
    )
    xml = _xml(uuid, worlds.instance_name(), None).replace(
        "</os>", f"</os><devices>{disks}</devices>"
    )
    conn.defineXML(xml)
    try:
        directory = effects.quarantine_dir(uuid, STAMP)
        kept = effects.keep_state(uuid, directory)
    finally:
        conn.lookupByUUIDString(uuid).undefine()
    (backing,) = kept.backing
    assert (backing.path, backing.kept, backing.how) == (
        str(instances / "_base" / "image"), "0-image", "hard link",
    )  # fmt: skip
    kept_copy = pathlib.Path(directory) / "backing" / "0-image"
    assert kept_copy.stat().st_ino == (instances / "_base" / "image").stat().st_ino


def test_an_unreadable_backing_chain_stops_the_reap(
    tmp_path: pathlib.Path,
    conn: libvirt.virConnect,
    effects: live.LiveEffects,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    uuid = worlds.random_uuid()
    (tmp_path / "instances" / uuid).mkdir()
    disk = tmp_path / "instances" / uuid / "disk"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(disk), "1M"], check=True)
    devices = f"<devices>{worlds.file_disk(str(disk))}</devices>"
    conn.defineXML(_xml(uuid, worlds.instance_name(), None).replace("</os>", f"</os>{devices}"))
    monkeypatch.setattr(images, "QEMU_IMG", "/nonexistent/qemu-img")
    try:
        with pytest.raises(EffectError, match=r"cannot read the backing chain of .*nonexistent"):
            effects.keep_state(uuid, effects.quarantine_dir(uuid, STAMP))
        assert conn.lookupByUUIDString(uuid).isPersistent()
    finally:
        conn.lookupByUUIDString(uuid).undefine()


def _reaped(effects: live.LiveEffects, uuid: str) -> QuarantineEntry:
    directory = effects.quarantine_dir(uuid, STAMP)
    effects.save_xml(directory, effects.domain_xml(uuid))
    kept = effects.keep_state(uuid, directory)
    effects.undefine(uuid, directory)
    saved = manifest.Manifest(uuid, "unknown", STAMP, "x", kept=kept, undefined=True)
    effects.write_manifest(directory, saved)
    return QuarantineEntry(uuid, STAMP, "unknown", directory, False, [])


def _start_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    def create(self: libvirt.virDomain, flags: int = 0) -> int:
        raise libvirt.libvirtError("internal error: process exited while connecting to monitor")

    monkeypatch.setattr(libvirt.virDomain, "create", create)


def test_a_restore_whose_start_fails_and_whose_undo_fails_says_so_everywhere(
    tmp_path: pathlib.Path,
    conn: libvirt.virConnect,
    define: Define,
    effects: live.LiveEffects,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    uuid = define(running=False).UUIDString()
    entry = _reaped(effects, uuid)
    _start_fails(monkeypatch)

    def undefine_refused(dom: libvirt.virDomain) -> str:
        raise libvirt.libvirtError("Requested operation is not valid: domain is locked")

    monkeypatch.setattr(virt, "undefine_with_fallback", undefine_refused)
    with pytest.raises(EffectError, match=r"start failed: .*undoing failed too") as raised:
        _restore(entry, tmp_path, start=True)
    assert "the guest is defined in libvirt, not started" in str(raised.value)
    assert conn.lookupByUUIDString(uuid).isPersistent()
    saved = manifest.read(entry.path)
    assert saved.restore_state is not None
    assert saved.restore_state.startswith("defined again, start failed, undoing failed")
    # The entry is no longer offered as restorable, and says why.
    with pytest.raises(EffectError, match=r"not restorable: defined again, start failed"):
        _restore(entry, tmp_path)


def test_a_restore_whose_start_fails_is_undone_on_the_test_driver_too(
    tmp_path: pathlib.Path,
    conn: libvirt.virConnect,
    define: Define,
    effects: live.LiveEffects,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    uuid = define(running=False).UUIDString()
    entry = _reaped(effects, uuid)
    with monkeypatch.context() as patched:
        _start_fails(patched)
        with pytest.raises(EffectError, match=r"undone, the guest is quarantined again"):
            _restore(entry, tmp_path, start=True)
    assert _gone(conn, uuid)
    assert manifest.read(entry.path).restore_state is None
    _restore(entry, tmp_path, start=True)
    assert conn.lookupByUUIDString(uuid).isActive()


# --- dry run ---------------------------------------------------------------------------


def test_recording_effects_change_nothing_and_record_every_call(
    tmp_path: pathlib.Path, conn: libvirt.virConnect, define: Define
) -> None:
    dom = define()
    uuid = dom.UUIDString()
    instance = tmp_path / "instances" / uuid
    instance.mkdir(parents=True)
    (instance / "disk").write_bytes(b"disk")
    before = dom.XMLDesc(INACTIVE)
    recording = RecordingEffects(URI, str(tmp_path / "instances"), str(tmp_path / "quarantine"))

    stopped = recording.stop(uuid, 30)
    directory = recording.quarantine_dir(uuid, STAMP)
    xml = recording.domain_xml(uuid)
    recording.save_xml(directory, xml)
    undefined = recording.undefine(uuid, directory)
    files = recording.move_instance_files(uuid, directory)

    assert stopped.startswith("would stop")
    assert undefined.startswith("would undefine")
    assert xml == before
    assert files == FilesResult(
        False, f"dry run: would move {instance} to {directory}/files if safe"
    )
    assert recording.calls == [
        ("stop", (uuid, 30)),
        ("quarantine_dir", (uuid, STAMP)),
        ("domain_xml", (uuid,)),
        ("save_xml", (directory, xml)),
        ("undefine", (uuid, directory)),
        ("move_instance_files", (uuid, directory)),
    ]
    assert dom.isActive()
    assert dom.isPersistent()
    assert dom.XMLDesc(INACTIVE) == before
    assert (instance / "disk").read_bytes() == b"disk"
    assert not (tmp_path / "quarantine").exists()


def test_recording_effects_without_uri_read_no_xml() -> None:
    assert RecordingEffects().domain_xml(worlds.random_uuid()) == ""
