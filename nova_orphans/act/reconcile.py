"""After a crash: close the steps the journal shows interrupted, from what libvirt shows now.

Nothing is repeated: each interrupted step is closed as ``reconciled`` with what became of
it, and its guest must be seen afresh before anything else happens to it.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
from collections.abc import Callable
from typing import Protocol

from nova_orphans.act.effects import Effects
from nova_orphans.act.quarantine import restore, retention
from nova_orphans.model import Domain
from nova_orphans.record.entries import Intent, QuarantineEntry
from nova_orphans.record.journal import Journal

LOG = logging.getLogger(__name__)


class DomainLookup(Protocol):
    """What reconciling needs from a hypervisor observer: a fresh read of one domain."""

    def look_up(self, uuid: str) -> Domain | None:
        """A fresh read of one domain; None when it does not exist."""


def reconcile(
    journal: Journal,
    effects: Effects,
    open_hypervisor: Callable[[], contextlib.AbstractContextManager[DomainLookup]],
    clock: Callable[[], datetime.datetime],
) -> list[str]:
    """Close the intents a crash left open; one note per closed step (none: nothing open).

    The hypervisor is opened only when there is something to close.
    """
    notes: list[str] = []
    open_intents = journal.open_intents()
    if not open_intents:
        return notes
    with open_hypervisor() as hypervisor:
        for intent in open_intents:
            domain = hypervisor.look_up(intent.uuid)
            now = clock()
            detail = _reconciled(journal, effects, intent, domain, now)
            journal.finish(intent.id, "reconciled", detail, now)
            # The guest must be seen afresh before anything else happens to it.
            journal.forget(intent.uuid)
            notes.append(f"{intent.uuid} {intent.step}: {detail}")
            LOG.warning(
                "reconciled interrupted step uuid=%s step=%s: %s",
                intent.uuid,
                intent.step,
                detail,
            )
    return notes


def _reconciled(
    journal: Journal,
    effects: Effects,
    intent: Intent,
    domain: Domain | None,
    now: datetime.datetime,
) -> str:
    """What became of ``intent``'s step, with its journal and quarantine brought in line."""
    uuid, step = intent.uuid, intent.step
    if step == retention.STEP:
        return retention.reconciled(journal, uuid, now)
    if step == restore.RESTORE_STEP:
        return restore.reconciled(journal, uuid, defined=domain is not None)
    if step == "stop":
        if domain is None or not domain.is_active:
            return "completed before the interruption (guest not running)"
        return "interrupted; guest still running; not repeated"
    if domain is not None:
        return "interrupted before undefine; domain still defined; not repeated"
    saved = _adopt_quarantine(journal, effects, uuid, intent.kind)
    return f"completed: domain undefined; quarantine {saved or 'not found'}"


def _adopt_quarantine(journal: Journal, effects: Effects, uuid: str, kind: str) -> str | None:
    """Bring the journal in line with the quarantine a crash interrupted.

    An undefined guest whose quarantine the journal does not know, or whose
    files were moved after the journal last heard of it, stays restorable.
    """
    known = {e.reaped_at: e for e in journal.quarantine(include_done=True) if e.uuid == uuid}
    latest = None
    for saved in effects.saved_quarantines(uuid):
        entry = known.get(saved.stamp)
        if entry is None:
            entry = QuarantineEntry(uuid, saved.stamp, kind, saved.directory, False, [])
            journal.add_quarantine(entry)
        if saved.files_moved and not entry.files_moved:
            journal.mark_files_moved(entry)
        latest = saved.directory
    return latest
