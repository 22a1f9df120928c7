"""``restore`` with its guards: Nova is asked first, and the restored guest goes on hold.

docs/design.md rule 13: restore never creates a second copy — ``--start`` of a guest
whose server Nova runs (anywhere) is refused, a plain define warns, and a Nova that
cannot be asked refuses both, unless ``--force``. Rule 12: every restored guest is on
hold until the operator releases it, so the agent never stops it again on its own.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable

from nova_orphans import exits
from nova_orphans.act.actuator import Steps
from nova_orphans.act.effects import EffectError
from nova_orphans.core.holds import Hold, restore_verdict
from nova_orphans.core.model import Kind
from nova_orphans.core.policy import Step
from nova_orphans.exceptions import NovaOrphansError
from nova_orphans.observe.errors import ObserveError
from nova_orphans.observe.nova.observer import NovaObserver
from nova_orphans.record.entries import QuarantineEntry
from nova_orphans.record.journal import Journal

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


def restore(
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
        server, nova_error = None, " ".join(str(exc).split())
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
