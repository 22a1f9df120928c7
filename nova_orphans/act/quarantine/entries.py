"""The quarantine's entries: which there are, which to trust, and what each holds.

A quarantine directory is ``<quarantine_root>/<uuid>/<stamp>`` and holds
``domain.xml`` and ``manifest.json``, and when the guest had them ``nvram``,
``swtpm/``, ``managed.save``, ``snapshots/``, ``checkpoints/``, ``backing/`` and
the instance directory as ``files/`` (see ``manifest``). Its entries are the
journal's and those only a manifest knows; bringing one back is ``restore``'s,
purging it for good ``retention``'s.
"""

from __future__ import annotations

import dataclasses
import os
import xml.etree.ElementTree as ET

from nova_orphans.act.effects import EffectError
from nova_orphans.act.quarantine import files, paths
from nova_orphans.act.quarantine import manifest as manifests
from nova_orphans.exceptions import one_line
from nova_orphans.record.entries import QuarantineEntry
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
        moved = paths.path_refusal(on_disk.directory, files.files_dir(on_disk.directory)) is None
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
        saved = saved_manifest(entry, files.entry_dir(entry))
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
    path = os.path.abspath(entry.path)
    if not os.path.lexists(path):
        return None
    refusal = paths.entry_refusal(entry.uuid, path, quarantine_root)
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
        for top, dirs, found in os.walk(directory, onerror=unreadable):
            for name in sorted(dirs + found):
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
        nvram = files.nvram_path(read_xml(entry, directory))
    except EffectError:
        nvram = None
    if nvram is not None and os.path.isfile(os.path.join(directory, manifests.NVRAM_FILE)):
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
            directory = files.entry_dir(entry)
            tampered = tampering(entry, quarantine_root)
            if tampered:
                raise EffectError(tampered)
            read_xml(entry, directory)
            saved = saved_manifest(entry, directory)
            problem = missing(entry, directory, saved)
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


def saved_manifest(entry: QuarantineEntry, directory: str) -> manifests.Manifest | None:
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


def missing(entry: QuarantineEntry, directory: str, saved: manifests.Manifest | None) -> str | None:
    """Why the quarantine cannot give a complete restore now; None when it can."""
    if entry.files_moved and paths.path_refusal(directory, files.files_dir(directory)):
        return f"its instance files are not in {files.files_dir(directory)}"
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


def read_xml(entry: QuarantineEntry, directory: str) -> str:
    path = os.path.join(directory, manifests.XML_FILE)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, encoding="utf-8") as saved:
            xml = saved.read()
        found = ET.fromstring(xml).findtext("uuid")
    except (OSError, ET.ParseError) as err:
        why = paths.os_reason(err) if isinstance(err, OSError) else one_line(err)
        raise EffectError(f"restore {entry.uuid}: cannot read {path}: {why}") from err
    if (found or "").strip().lower() != entry.uuid:
        raise EffectError(f"restore {entry.uuid}: {path} describes another domain ({found})")
    return xml
