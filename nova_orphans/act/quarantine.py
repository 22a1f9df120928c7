"""Operator actions on the quarantine: list it and restore a reaped guest.

A quarantine directory is ``<quarantine_root>/<uuid>/<stamp>`` and holds
``domain.xml`` and ``manifest.json``, and when the guest had them ``nvram``,
``swtpm/``, ``managed.save``, ``snapshots/``, ``checkpoints/``, ``backing/`` and
the instance directory as ``files/`` (see ``manifest``). Purging it for good is
``retention``'s, through the effects.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import errno
import os
import shutil
import struct
import xml.etree.ElementTree as ET

import libvirt

from nova_orphans.act import live, paths
from nova_orphans.act import manifest as manifests
from nova_orphans.act.effects import EffectError
from nova_orphans.core.policy import Step
from nova_orphans.observe import hypervisor
from nova_orphans.record.entries import STAMP_FORMAT, QuarantineEntry
from nova_orphans.record.journal import Journal


@dataclasses.dataclass(frozen=True)
class Listed:
    """A quarantine entry as ``quarantine list`` shows it."""

    entry: QuarantineEntry
    restorable: bool
    #: What the directory holds, or why it cannot be restored.
    detail: str
    #: "journal", or "manifest" when only the directory's manifest knows it.
    known_from: str


def entries(
    journal: Journal, quarantine_root: str, *, with_copies: bool = False
) -> list[QuarantineEntry]:
    """Entries still to restore or purge: the journal's, and those only a manifest knows.

    A quarantine directory whose manifest the journal does not know (the journal
    was lost or replaced) counts unless the manifest says it was restored, or
    that the reap stopped before it tried the undefine (a mere copy): a manifest
    marked as undefining counts, for its domain may be gone (docs/design.md §7;
    restore refuses while libvirt still has the UUID). ``with_copies`` (for
    the purges) counts both: a restored entry's directory, still on disk, and a
    copy go after the retention like every other entry.
    """
    done = journal.quarantine(include_done=True)
    found = journal.quarantine()
    if with_copies:
        found += [e for e in done if e.restored_at and not e.purged_at
                  and os.path.lexists(e.path)]  # fmt: skip
    known = {(e.uuid, e.reaped_at) for e in done}
    for on_disk in manifests.scan(quarantine_root):
        saved = on_disk.manifest
        if saved is None or (saved.uuid, saved.reaped_at) in known:
            continue
        if (saved.restored_at or not saved.possibly_undefined) and not with_copies:
            continue
        files = _files_dir(on_disk.directory)
        moved = paths.path_refusal(on_disk.directory, files) is None
        found.append(
            QuarantineEntry(
                saved.uuid, saved.reaped_at, saved.kind, on_disk.directory, moved,
                list(saved.leftovers),
            )
        )  # fmt: skip
    return sorted(found, key=lambda e: (e.reaped_at, e.uuid))


def latest(journal: Journal, quarantine_root: str, uuid: str) -> QuarantineEntry | None:
    """The newest entry of ``uuid`` to restore; None when there is none.

    Raises ``EffectError`` (one line) when the UUID has quarantine directories
    but none that the journal or a readable manifest describes.
    """
    matching = [e for e in entries(journal, quarantine_root) if e.uuid == uuid]
    if matching:
        return matching[-1]
    broken = [f.problem for f in unknown_directories(journal, quarantine_root) if f.uuid == uuid]
    if broken:
        raise EffectError(f"restore {uuid}: {broken[-1]}; nothing changed")
    return None


def has_managed_save(entry: QuarantineEntry) -> bool:
    """Whether the entry keeps a managed-save image (restoring it runs the guest, paused).

    NOTE: an entry whose manifest cannot be read says no here; ``restore`` then
    refuses it for that reason before anything runs.
    """
    try:
        saved = _manifest(entry, _entry_dir(entry))
    except EffectError:
        return False
    return saved is not None and saved.kept.managed_save


def unknown_directories(journal: Journal, quarantine_root: str) -> list[manifests.Found]:
    """Quarantine directories neither the journal nor a readable manifest describes."""
    known = {e.path for e in journal.quarantine(include_done=True)}
    return [
        f
        for f in manifests.scan(quarantine_root)
        if f.problem is not None and f.directory not in known
    ]


def tampering(
    entry: QuarantineEntry, quarantine_root: str, instances_path: str | None = None
) -> str | None:
    """Why ``restore`` or ``purge`` must not trust the entry; None when nothing is amiss.

    NOTE: docs/design.md rule 7. The quarantine is root's, but what a restore writes
    or a purge deletes is decided by what lies in it, so nothing there is followed:
    the entry must be ``<quarantine_root>/<uuid>/<stamp>`` with no symlink on the way
    or anywhere inside it, and (with ``instances_path``, for a restore) a backing file
    that must be put back must lie in ``instances_path``, and a missing NVRAM file's
    path must be plain (absolute, normalized, no symlink in it). Checked with the
    quarantine's lock held (nothing else moves these files meanwhile). A directory
    that is gone holds nothing to follow (a purge finds it already gone).
    """
    root, path = os.path.abspath(quarantine_root), os.path.abspath(entry.path)
    if not os.path.lexists(path):
        return None
    refusal = paths.path_refusal(root, path)
    if refusal is None and os.path.relpath(path, root).split(os.sep)[:-1] != [entry.uuid]:
        refusal = f"{path} is not a quarantine directory of {entry.uuid} under {root}"
    if refusal is None:
        refusal = _symlink_inside(path)
    if refusal is None and instances_path is not None:
        refusal = _written_outside(entry, path, os.path.abspath(instances_path))
    return None if refusal is None else f"quarantine entry {entry.uuid} ({path}): {refusal}"


def _symlink_inside(directory: str) -> str | None:
    """The first symlink anywhere below ``directory`` (never followed), if any."""

    def unreadable(err: OSError) -> None:
        raise err

    try:
        for top, dirs, files in os.walk(directory, onerror=unreadable):
            for name in sorted(dirs + files):
                if os.path.islink(os.path.join(top, name)):
                    return f"{os.path.join(top, name)} is a symlink (never followed)"
    except OSError as err:
        return f"cannot inspect it: {paths.os_reason(err)}"
    return None


def _written_outside(entry: QuarantineEntry, directory: str, instances_path: str) -> str | None:
    """Why a file restore would put back lies where it must not; None when all is in place.

    A corrupt manifest is refused too (what it names cannot be judged); an
    unreadable XML is refused by restore on its own.
    """
    try:
        saved = manifests.read(directory)
    except manifests.ManifestError as err:
        if os.path.lexists(os.path.join(directory, manifests.MANIFEST_FILE)):
            return str(err)
        saved = None  # NOTE: an older version's entry: restorable from its XML and files
    for backing in saved.kept.backing if saved else ():
        if os.path.lexists(backing.path):
            continue  # NOTE: restore puts back only what is gone
        inside = os.path.commonpath([backing.path, instances_path]) == instances_path
        link = paths.first_symlink(backing.path)
        if not inside or link is not None:
            why = f"{link} is a symlink" if link else f"it is outside {instances_path}"
            return f"its manifest has backing file {backing.path} put back, but {why}"
    try:
        nvram = live.nvram_path(_read_xml(entry, directory))
    except EffectError:
        nvram = None
    if nvram is not None and os.path.isfile(os.path.join(directory, live.NVRAM_FILE)):
        link = paths.first_symlink(nvram)
        if not os.path.isabs(nvram) or os.path.normpath(nvram) != nvram or link is not None:
            why = f"{link} is a symlink" if link else "it is not a plain absolute path"
            return f"its NVRAM is copied back to {nvram}, but {why}"
    return None


def listing(journal: Journal, quarantine_root: str) -> list[Listed]:
    """Every entry to restore or purge, whether it is restorable and what it holds."""
    known = {(e.uuid, e.reaped_at) for e in journal.quarantine()}
    listed = []
    for entry in entries(journal, quarantine_root):
        source = "journal" if (entry.uuid, entry.reaped_at) in known else "manifest"
        try:
            directory = _entry_dir(entry)
            tampered = tampering(entry, quarantine_root)
            if tampered:
                raise EffectError(tampered)
            _read_xml(entry, directory)
            saved = _manifest(entry, directory)
            problem = _missing(entry, directory, saved)
        except EffectError as err:
            problem = str(err)
            saved = None
        if problem:
            listed.append(Listed(entry, False, problem, source))
        else:
            holds = saved.holds() if saved else "xml" + (", files" if entry.files_moved else "")
            if saved and source == "manifest" and not saved.undefined:
                holds += "; undefine not confirmed"  # NOTE: the journal would have confirmed it
            listed.append(Listed(entry, True, holds if saved else f"{holds} (no manifest)", source))
    return listed


def restore(
    entry: QuarantineEntry,
    uri: str,
    instances_path: str,
    quarantine_root: str,
    start: bool = False,
    *,
    swtpm_root: str = live.DEFAULT_SWTPM_ROOT,
) -> str:
    """Bring a reaped guest back: files, backing chain, state, definition, snapshots, save.

    Everything the quarantine must hold is checked first: a corrupt manifest, a
    missing managed-save image or snapshot, or a backing file that is neither in
    place nor kept refuses the restore with nothing changed. A step that fails
    after the files moved back undoes the restore, so the entry is quarantined
    and restorable exactly as before; should undoing fail too, the manifest says
    what state the guest is in. Refuses when libvirt has a domain with this UUID
    again, and an entry that is not to be trusted (``tampering``). Returns what was
    done.
    """
    tampered = tampering(entry, quarantine_root, instances_path)
    if tampered:
        raise EffectError(f"restore {entry.uuid}: {tampered}; nothing changed")
    directory = _entry_dir(entry)
    xml = _read_xml(entry, directory)
    saved = _manifest(entry, directory)
    problem = _missing(entry, directory, saved)
    if problem:
        raise EffectError(f"restore {entry.uuid}: {problem}; nothing changed")
    conn = live.open_connection(uri)
    try:
        _refuse_if_defined(conn, entry.uuid, uri)
        notes = _relink_backing(directory, saved)
        if entry.files_moved:
            notes.append(restore_files(entry, instances_path))
        try:
            notes += _restore_state_files(entry.uuid, xml, directory, swtpm_root)
            dom = conn.defineXML(xml)
        except (libvirt.libvirtError, OSError) as err:
            _undo(conn, entry, directory, instances_path, saved, None)
            raise EffectError(f"restore {entry.uuid}: define failed: {_reason_of(err)}") from err
        notes.insert(0, f"defined {dom.name()}")
        try:
            notes += _restore_libvirt_state(conn, dom, directory, saved, start)
        except (libvirt.libvirtError, OSError) as err:
            what = "start" if start else "restoring its saved state"
            raise _undone(conn, entry, directory, instances_path, saved, what, err) from err
    finally:
        with contextlib.suppress(libvirt.libvirtError):
            conn.close()
    if saved is not None:
        _mark(directory, saved, "restored", start)
    return "; ".join(notes)


#: The journal's name for a restore step (taken through ``actuator.Steps``, act/restore.py).
RESTORE_STEP = Step.RESTORE.value


def reconciled(journal: Journal, uuid: str, defined: bool) -> str:
    """What a restore a crash interrupted left behind (the entry stays as it is)."""
    where = ", ".join(e.path for e in journal.quarantine() if e.uuid == uuid) or "gone"
    if defined:
        return (
            "interrupted after the define: the guest is defined again; what it had besides "
            f"(snapshots, managed save) is still in the quarantine ({where})"
        )
    return f"interrupted before the define: the guest is not defined; quarantine {where}"


def _restore_libvirt_state(
    conn: libvirt.virConnect,
    dom: libvirt.virDomain,
    directory: str,
    saved: manifests.Manifest | None,
    start: bool,
) -> list[str]:
    """Redefine snapshots and checkpoints, bring back the managed save, maybe start."""
    notes = []
    kept = saved.kept if saved is not None else manifests.Kept()
    for index, name in enumerate(kept.snapshots):
        flags = libvirt.VIR_DOMAIN_SNAPSHOT_CREATE_REDEFINE
        if name == kept.current_snapshot:
            flags |= libvirt.VIR_DOMAIN_SNAPSHOT_CREATE_CURRENT
        dom.snapshotCreateXML(_read(directory, manifests.SNAPSHOTS_DIR, f"{index}.xml"), flags)
    for index, _ in enumerate(kept.checkpoints):
        dom.checkpointCreateXML(
            _read(directory, manifests.CHECKPOINTS_DIR, f"{index}.xml"),
            libvirt.VIR_DOMAIN_CHECKPOINT_CREATE_REDEFINE,
        )
    if kept.snapshots or kept.checkpoints:
        notes.append(
            f"redefined {len(kept.snapshots)} snapshot(s), {len(kept.checkpoints)} checkpoint(s)"
        )
    if kept.managed_save:
        image = os.path.join(directory, manifests.MANAGED_SAVE_FILE)
        if start:
            conn.restoreFlags(image, None, 0)
            return [*notes, "resumed from its managed-save image"]
        # NOTE: libvirt marks a managed save only when it writes one itself: the
        # guest is brought back paused from the kept image and saved again.
        conn.restoreFlags(image, None, libvirt.VIR_DOMAIN_SAVE_PAUSED)
        running = saved_running(image)
        dom.managedSave(
            libvirt.VIR_DOMAIN_SAVE_RUNNING if running else libvirt.VIR_DOMAIN_SAVE_PAUSED
        )
        notes.append("managed-saved again (start resumes it)")
    elif start:
        dom.create()
        notes.append("started")
    return notes


def saved_running(image: str) -> bool:
    """Whether a QEMU save image was taken of a running guest (its header says so).

    NOTE: libvirt's QEMU save header is a 16-byte magic, then 32-bit version,
    data length and was-running fields; an unknown header counts as running,
    which is what Nova's suspend saves.
    """
    try:
        with open(image, "rb") as saved:
            header = saved.read(28)
    except OSError:
        return True
    if len(header) < 28 or not header.startswith((b"LibvirtQemudSave", b"LibvirtQemudPart")):
        return True
    return bool(struct.unpack("=I", header[24:28])[0])


def _undone(
    conn: libvirt.virConnect,
    entry: QuarantineEntry,
    directory: str,
    instances_path: str,
    saved: manifests.Manifest | None,
    what: str,
    err: Exception,
) -> EffectError:
    """Undo a restore whose ``what`` failed; the error that says how it ended."""
    failed = _undo(conn, entry, directory, instances_path, saved, what)
    if failed is None:
        return EffectError(
            f"restore {entry.uuid}: {what} failed: {_reason_of(err)}; undone, the guest is "
            "quarantined again and restore can be retried"
        )
    return EffectError(
        f"restore {entry.uuid}: {what} failed: {_reason_of(err)}; undoing failed too "
        f"({failed}): the guest is defined in libvirt, not started; see {directory}"
    )


def _undo(
    conn: libvirt.virConnect,
    entry: QuarantineEntry,
    directory: str,
    instances_path: str,
    saved: manifests.Manifest | None,
    what: str | None,
) -> str | None:
    """Undefine again and move the files back into the quarantine; why that failed, or None."""
    try:
        if what is not None:
            dom = conn.lookupByUUIDString(entry.uuid)
            if dom.isActive():
                dom.destroy()
            live.undefine_with_fallback(dom)
        if entry.files_moved:
            os.rename(os.path.join(instances_path, entry.uuid), _files_dir(directory))
    except (libvirt.libvirtError, OSError) as err:
        reason = _reason_of(err)
        if saved is not None:
            with contextlib.suppress(OSError):
                _mark(directory, saved, f"defined again, {what} failed, undoing failed: {reason}")
        return reason
    return None


def _mark(directory: str, saved: manifests.Manifest, state: str, started: bool = False) -> None:
    """Record in the manifest how a restore ended (the entry is then no longer restorable)."""
    if state == "restored":
        state = "restored and started" if started else "restored"
    now = datetime.datetime.now(datetime.timezone.utc).strftime(STAMP_FORMAT)
    manifests.write(directory, dataclasses.replace(saved, restored_at=now, restore_state=state))


def restore_files(entry: QuarantineEntry, instances_path: str) -> str:
    """Move ``<quarantine>/files`` back to ``<instances_path>/<uuid>``; never over anything."""
    source = _files_dir(_entry_dir(entry))
    refusal = paths.path_refusal(os.path.dirname(source), source)
    if refusal:
        raise EffectError(f"restore files of {entry.uuid}: {refusal}")
    base = os.path.abspath(instances_path)
    link = paths.first_symlink(base)
    if link is not None or not os.path.isdir(base):
        why = f"{link} is a symlink" if link else "it is not a directory"
        raise EffectError(f"restore files of {entry.uuid}: instances_path {base}: {why}")
    target = os.path.join(base, entry.uuid)
    if os.path.lexists(target):
        raise EffectError(f"restore files of {entry.uuid}: {target} exists; not overwritten")
    try:
        os.rename(source, target)
    except OSError as err:
        where = "another file system" if err.errno == errno.EXDEV else _reason_of(err)
        raise EffectError(f"restore files of {entry.uuid}: cannot move to {where}") from err
    return f"moved the instance directory back to {target}"


def _entry_dir(entry: QuarantineEntry) -> str:
    """The entry's quarantine directory, checked: ``…/<uuid>/<stamp>``, no symlinks."""
    if not paths.is_canonical_uuid(entry.uuid):
        raise EffectError(f"quarantine entry: {entry.uuid!r} is not a canonical UUID")
    path = os.path.abspath(entry.path)
    parent = os.path.dirname(path)
    refusal = paths.path_refusal(parent, path)
    if refusal is None and os.path.basename(parent) != entry.uuid:
        refusal = f"{path} is not a quarantine directory of {entry.uuid}"
    if refusal:
        raise EffectError(f"quarantine entry {entry.uuid}: {refusal}")
    return path


def _manifest(entry: QuarantineEntry, directory: str) -> manifests.Manifest | None:
    """The directory's manifest; None for a directory an older version made without one.

    NOTE: an entry only a manifest knows always has one; a journal entry without
    a manifest is restorable from its XML and files, as it always was.
    """
    try:
        saved = manifests.read(directory)
    except manifests.ManifestError as err:
        if not os.path.lexists(os.path.join(directory, manifests.MANIFEST_FILE)):
            return None
        raise EffectError(f"restore {entry.uuid}: {err}") from err
    return saved


def _missing(
    entry: QuarantineEntry, directory: str, saved: manifests.Manifest | None
) -> str | None:
    """Why the quarantine cannot give a complete restore now; None when it can."""
    if entry.files_moved and paths.path_refusal(directory, _files_dir(directory)):
        return f"its instance files are not in {_files_dir(directory)}"
    if saved is None:
        return None
    if saved.restore_state:
        return f"not restorable: {saved.restore_state} ({saved.restored_at})"
    kept = saved.kept
    wanted = [manifests.MANAGED_SAVE_FILE] if kept.managed_save else []
    for where, names in (
        (manifests.SNAPSHOTS_DIR, kept.snapshots),
        (manifests.CHECKPOINTS_DIR, kept.checkpoints),
    ):
        wanted += [os.path.join(where, f"{i}.xml") for i in range(len(names))]
    for name in wanted:
        if not os.path.isfile(os.path.join(directory, name)):
            return f"{os.path.join(directory, name)} is missing"
    for backing in kept.backing:
        copy = os.path.join(directory, manifests.BACKING_DIR, backing.kept)
        if not os.path.isfile(backing.path) and not os.path.isfile(copy):
            return f"backing file {backing.path} is missing and so is its copy {copy}"
    return None


def _relink_backing(directory: str, saved: manifests.Manifest | None) -> list[str]:
    """Put back every backing file the disks need that is gone (e.g. Nova's cache removed it)."""
    notes = []
    for backing in saved.kept.backing if saved else ():
        if os.path.lexists(backing.path):
            continue
        copy = os.path.join(directory, manifests.BACKING_DIR, backing.kept)
        try:
            os.makedirs(os.path.dirname(backing.path), exist_ok=True)
            os.link(copy, backing.path, follow_symlinks=False)
        except OSError as err:
            if err.errno != errno.EXDEV:
                why = _reason_of(err)
                raise EffectError(f"put back backing file {backing.path}: {why}") from err
            shutil.copy2(copy, backing.path)
        notes.append(f"put back backing file {backing.path}")
    return notes


def _read(directory: str, *names: str) -> str:
    with open(os.path.join(directory, *names), encoding="utf-8") as saved:
        return saved.read()


def _files_dir(directory: str) -> str:
    return os.path.join(directory, live.FILES_DIR)


def _read_xml(entry: QuarantineEntry, directory: str) -> str:
    path = os.path.join(directory, live.XML_FILE)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, encoding="utf-8") as saved:
            xml = saved.read()
        found = ET.fromstring(xml).findtext("uuid")
    except (OSError, ET.ParseError) as err:
        raise EffectError(f"restore {entry.uuid}: cannot read {path}: {_reason_of(err)}") from err
    if (found or "").strip().lower() != entry.uuid:
        raise EffectError(f"restore {entry.uuid}: {path} describes another domain ({found})")
    return xml


def _restore_state_files(uuid: str, xml: str, directory: str, swtpm_root: str) -> list[str]:
    notes = []
    nvram = live.nvram_path(xml)
    saved = os.path.join(directory, live.NVRAM_FILE)
    if nvram is not None and os.path.isfile(saved):
        if os.path.lexists(nvram):
            notes.append(f"NVRAM kept at {nvram}")
        else:
            os.makedirs(os.path.dirname(nvram), exist_ok=True)
            shutil.copy2(saved, nvram)
            os.chmod(nvram, 0o600)
            notes.append(f"NVRAM copied back to {nvram}")
    saved_tpm = os.path.join(directory, live.TPM_DIR)
    tpm = os.path.join(swtpm_root, uuid)
    if os.path.isdir(saved_tpm) and not os.path.lexists(tpm):
        shutil.copytree(saved_tpm, tpm, symlinks=True)
        notes.append(f"TPM state copied back to {tpm}")
    return notes


def _refuse_if_defined(conn: libvirt.virConnect, uuid: str, uri: str) -> None:
    try:
        dom = conn.lookupByUUIDString(uuid)
    except libvirt.libvirtError as err:
        if hypervisor.is_gone(err):
            return
        raise EffectError(f"restore {uuid}: {hypervisor.libvirt_reason(err)}") from err
    raise EffectError(f"restore {uuid}: libvirt {uri} has this UUID again ({dom.name()}); refused")


def _reason_of(err: Exception) -> str:
    if isinstance(err, libvirt.libvirtError):
        return hypervisor.libvirt_reason(err)
    if isinstance(err, OSError):
        return paths.os_reason(err)
    return " ".join(str(err).split())
