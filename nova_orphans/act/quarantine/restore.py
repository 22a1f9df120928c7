"""Restore: a reaped guest brought back from its quarantine entry, with its guards.

``guarded_restore`` is the operator's ``restore``: Nova is asked first, and the
restored guest goes on hold. docs/design.md rule 13: restore never creates a second
copy — ``--start`` of a guest whose server Nova runs (anywhere) is refused, a plain
define warns, and a Nova that cannot be asked refuses both, unless ``--force``. Rule
12: every restored guest is on hold until the operator releases it, so the agent
never stops it again on its own. ``bring_back`` is what it runs as its step: the
files, the state and the definition put back in libvirt.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import os
import struct
from collections.abc import Callable

from nova_orphans import exits, virt
from nova_orphans.act import live
from nova_orphans.act.actuator import Steps
from nova_orphans.act.effects import EffectError
from nova_orphans.act.quarantine import entries, files, paths
from nova_orphans.act.quarantine import manifest as manifests
from nova_orphans.decide.holds import Hold, restore_verdict
from nova_orphans.decide.policy import Step
from nova_orphans.exceptions import NovaOrphansError, one_line
from nova_orphans.model import Kind
from nova_orphans.observe.errors import ObserveError
from nova_orphans.observe.nova.observer import NovaObserver
from nova_orphans.record.entries import STAMP_FORMAT, QuarantineEntry
from nova_orphans.record.journal import Journal

#: The journal's name for a restore step (taken through ``actuator.Steps``).
RESTORE_STEP = Step.RESTORE.value
#: Brings the entry's guest back in libvirt (``start``: and starts it); returns what it did.
Define = Callable[[QuarantineEntry, bool], str]


class RestoreRefused(NovaOrphansError):
    """``restore`` refused: nothing was changed. The message says why, in one line."""

    exit_code = exits.ERROR


@dataclasses.dataclass(frozen=True)
class Restored:
    """What a restore did: its detail, a warning for the operator (or None), the hold."""

    detail: str
    warning: str | None
    hold: Hold


def guarded_restore(
    entry: QuarantineEntry,
    *,
    nova: NovaObserver,
    host: str,
    journal: Journal,
    define: Define,
    now: datetime.datetime,
    steps: Steps,
    start: bool = False,
    force: bool = False,
    saved_state: bool = False,
) -> Restored:
    """Restore ``entry`` if Nova allows it (or ``force``), then put the guest on hold.

    Raises ``RestoreRefused`` before changing anything when Nova runs the server and
    ``start`` is asked (or ``saved_state``: the entry holds a managed-save image,
    which runs the guest paused), or when Nova cannot be asked, unless ``force``;
    and when ``steps``' gate refuses the step (docs/design.md rule 19). ``define``
    runs as one step of ``steps``: journaled, logged and counted; its failure raises
    ``EffectError`` with the guest off hold again and the entry as it was.
    """
    try:
        server, nova_error = nova.fresh_view(host, entry.uuid).lookups[entry.uuid], None
    except ObserveError as exc:
        server, nova_error = None, one_line(exc)
    verdict = restore_verdict(
        entry.uuid,
        server,
        nova_error,
        start=start,
        force=force,
        reaped=f"{entry.reaped_at} as {entry.kind}",
        saved_state=saved_state,
    )
    if verdict.refusal:
        raise RestoreRefused(verdict.refusal)
    # NOTE: the hold is written before the domain exists again, so that an agent
    # cycle that sees the restored domain also sees (at the latest when it
    # re-verifies) that it is on hold.
    existing = journal.hold_of(entry.uuid)
    hold = existing or journal.hold(entry.uuid, verdict.hold_reason, now)

    def defined() -> str:
        detail = define(entry, start)
        known = {(e.uuid, e.reaped_at) for e in journal.quarantine(include_done=True)}
        if (entry.uuid, entry.reaped_at) not in known:
            journal.add_quarantine(entry)  # an entry only its manifest knew
        journal.close_quarantine(entry, "restored_at", now)
        return detail

    try:
        done = steps.take(entry.uuid, Kind(entry.kind), Step.RESTORE, defined)
    except BaseException:
        if existing is None:
            journal.cancel_hold(hold)
        raise
    if done.outcome != "done":
        if existing is None:
            journal.cancel_hold(hold)
        if done.outcome == "refused":
            raise RestoreRefused(done.detail)
        raise EffectError(done.detail)
    return Restored(done.detail, verdict.warning, hold)


def bring_back(
    entry: QuarantineEntry,
    uri: str,
    instances_path: str,
    quarantine_root: str,
    start: bool = False,
    *,
    swtpm_root: str = files.DEFAULT_SWTPM_ROOT,
) -> str:
    """Bring a reaped guest back: files, backing chain, state, definition, snapshots, save.

    Everything the quarantine must hold is checked first: a corrupt manifest, a
    missing managed-save image or snapshot, or a backing file that is neither in
    place nor kept refuses the restore with nothing changed. A step that fails
    after the files moved back undoes the restore, so the entry is quarantined
    and restorable exactly as before; should undoing fail too, the manifest says
    what state the guest is in. Refuses when libvirt has a domain with this UUID
    again, and an entry that is not to be trusted (``entries.tampering``). Returns
    what was done.
    """
    tampered = entries.tampering(entry, quarantine_root, instances_path)
    if tampered:
        raise EffectError(f"restore {entry.uuid}: {tampered}; nothing changed")
    directory = files.entry_dir(entry)
    xml = entries.read_xml(entry, directory)
    saved = entries.saved_manifest(entry, directory)
    problem = entries.missing(entry, directory, saved)
    if problem:
        raise EffectError(f"restore {entry.uuid}: {problem}; nothing changed")
    host = live.open_connection(uri)
    try:
        _refuse_if_defined(host, entry.uuid, uri)
        notes = files.relink_backing(directory, saved)
        if entry.files_moved:
            notes.append(files.move_files_back(entry, instances_path))
        try:
            notes += files.restore_state_files(entry.uuid, xml, directory, swtpm_root)
            guest = host.define(xml)
        except (virt.Error, OSError) as err:
            _undo(host, entry, directory, instances_path, saved, None)
            raise EffectError(f"restore {entry.uuid}: define failed: {_reason_of(err)}") from err
        notes.insert(0, f"defined {guest.name}")
        try:
            notes += _restore_libvirt_state(host, guest, directory, saved, start)
        except (virt.Error, OSError) as err:
            what = "start" if start else "restoring its saved state"
            raise _undone(host, entry, directory, instances_path, saved, what, err) from err
    finally:
        host.close()
    if saved is not None:
        _mark(directory, saved, "restored", start)
    return "; ".join(notes)


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
    host: virt.Host,
    guest: virt.Guest,
    directory: str,
    saved: manifests.Manifest | None,
    start: bool,
) -> list[str]:
    """Redefine snapshots and checkpoints, bring back the managed save, maybe start."""
    notes = []
    kept = saved.kept if saved is not None else manifests.Kept()
    for index, name in enumerate(kept.snapshots):
        xml = files.read_kept(directory, manifests.SNAPSHOTS_DIR, f"{index}.xml")
        guest.redefine_snapshot(xml, current=name == kept.current_snapshot)
    for index, _ in enumerate(kept.checkpoints):
        xml = files.read_kept(directory, manifests.CHECKPOINTS_DIR, f"{index}.xml")
        guest.redefine_checkpoint(xml)
    if kept.snapshots or kept.checkpoints:
        notes.append(
            f"redefined {len(kept.snapshots)} snapshot(s), {len(kept.checkpoints)} checkpoint(s)"
        )
    if kept.managed_save:
        image = os.path.join(directory, manifests.MANAGED_SAVE_FILE)
        if start:
            host.resume_saved(image, paused=False)
            return [*notes, "resumed from its managed-save image"]
        # NOTE: libvirt marks a managed save only when it writes one itself: the
        # guest is brought back paused from the kept image and saved again.
        host.resume_saved(image, paused=True)
        guest.save_memory_state(running=saved_running(image))
        notes.append("managed-saved again (start resumes it)")
    elif start:
        guest.launch()
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
    host: virt.Host,
    entry: QuarantineEntry,
    directory: str,
    instances_path: str,
    saved: manifests.Manifest | None,
    what: str,
    err: Exception,
) -> EffectError:
    """Undo a restore whose ``what`` failed; the error that says how it ended."""
    failed = _undo(host, entry, directory, instances_path, saved, what)
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
    host: virt.Host,
    entry: QuarantineEntry,
    directory: str,
    instances_path: str,
    saved: manifests.Manifest | None,
    what: str | None,
) -> str | None:
    """Undefine again and move the files back into the quarantine; why that failed, or None."""
    try:
        if what is not None:
            guest = host.get_guest(entry.uuid)
            if guest.is_active():
                guest.poweroff()
            guest.delete_configuration()
        if entry.files_moved:
            os.rename(os.path.join(instances_path, entry.uuid), files.files_dir(directory))
    except (virt.Error, OSError) as err:
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


def _refuse_if_defined(host: virt.Host, uuid: str, uri: str) -> None:
    try:
        guest = host.lookup(uuid)
    except virt.Error as err:
        raise EffectError(f"restore {uuid}: {err.reason}") from err
    if guest is not None:
        raise EffectError(
            f"restore {uuid}: libvirt {uri} has this UUID again ({guest.name}); refused"
        )


def _reason_of(err: Exception) -> str:
    if isinstance(err, virt.Error):
        return err.reason
    if isinstance(err, OSError):
        return paths.os_reason(err)
    return one_line(err)
