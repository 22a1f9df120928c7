"""The one retention purge: ``purge --older-than`` and the agent's ``quarantine_retention_days``.

Deleting a quarantine directory is the only irreversible step, so it goes the way
every destructive step goes: through the actuator (its gate, docs/design.md rule 19)
and the effects (a dry run records instead of deleting), with an intent journaled
before and its outcome after; an intent a crash left open is reconciled by
``reconciled`` from what is on disk.
"""

from __future__ import annotations

import dataclasses
import datetime
import os

from nova_orphans.act.actuator import Actuator
from nova_orphans.act.quarantine import entries
from nova_orphans.decide.policy import Policy, Step
from nova_orphans.decide.sightings import counts_after
from nova_orphans.record.entries import QuarantineEntry, RetentionSighting
from nova_orphans.record.journal import Journal

#: The journal's name for a purge step.
STEP = Step.PURGE.value


@dataclasses.dataclass(frozen=True)
class Purged:
    """What became of one expired quarantine entry."""

    entry: QuarantineEntry
    outcome: str  # done | failed | refused (the gate was closed)
    detail: str
    dry_run: bool


def expired(
    journal: Journal,
    quarantine_root: str,
    now: datetime.datetime,
    older_than: datetime.timedelta,
    cycles: Policy | None = None,
) -> list[QuarantineEntry]:
    """Entries reaped ``older_than`` ago or more: the journal's and those only a manifest knows.

    NOTE: that includes the directories of reaps that stopped before the undefine
    (the guest stayed defined): after retention they go like every other entry.
    With ``cycles`` (the agent's policy) this is one of the agent's cycles: every
    entry is sighted, and an entry is expired only once as many cycles saw it as
    the part of ``older_than`` still left when it was first seen implies.
    """
    cutoff = now - older_than
    listed = entries.entries(journal, quarantine_root, with_copies=True)
    if cycles is not None:
        listed = [e for e in listed if _cycles_passed(journal, e, now, older_than, cycles)]
    return [e for e in listed if e.reaped_time <= cutoff]


def _cycles_passed(
    journal: Journal,
    entry: QuarantineEntry,
    now: datetime.datetime,
    older_than: datetime.timedelta,
    policy: Policy,
) -> bool:
    """Count this cycle's sighting of ``entry``; whether retention's cycles have passed.

    NOTE: docs/design.md rule 15. A wall clock stepped forward makes every entry
    look old at once, even before the entry's first sighting; the purge is the one
    irreversible step, so, as for grace, the whole retention is also needed in
    cycles counted from the first sighting. The agent sights its own reaps from
    the next cycle on, so this costs nothing in normal operation; an entry first
    seen old (a journal lost, a directory copied in) waits one more retention, or
    the operator's ``purge --older-than``.
    """
    seen = journal.retention_sighting(entry)
    if seen is None:
        seen = RetentionSighting(now, now, 0)
    elif counts_after(seen.last_counted, now, policy.interval):
        seen = RetentionSighting(seen.first_seen, now, seen.cycles + 1)
    journal.put_retention_sighting(entry, seen)
    return seen.cycles >= policy.cycles_for(older_than.total_seconds())


def purge_expired(
    actuator: Actuator,
    journal: Journal,
    quarantine_root: str,
    now: datetime.datetime,
    older_than: datetime.timedelta,
    cycles: Policy | None = None,
    wait: float = 60.0,
) -> list[Purged]:
    """Purge every expired entry through ``actuator`` (its gate, journal and record).

    ``cycles``: the agent's policy (its cycles count, see ``expired``); None for
    the operator's ``purge`` command, which goes by the wall clock alone. Holds
    the quarantine's lock throughout (``QuarantineBusy`` after ``wait`` seconds):
    a restore never sees its directory deleted under it.
    """
    with journal.quarantine_held(wait):
        return [
            _purge(actuator, journal, quarantine_root, entry, now)
            for entry in expired(journal, quarantine_root, now, older_than, cycles)
        ]


def _purge(
    actuator: Actuator,
    journal: Journal,
    quarantine_root: str,
    entry: QuarantineEntry,
    now: datetime.datetime,
) -> Purged:
    """Purge one entry through the actuator; a live purge closes it in the journal."""
    done = actuator.purge(entry, quarantine_root, lambda: _close(journal, entry, now))
    return Purged(entry, done.outcome, done.detail, done.dry_run)


def reconciled(journal: Journal, uuid: str, now: datetime.datetime) -> str:
    """Close the journal's view of a purge a crash interrupted; repeat nothing.

    An entry of ``uuid`` whose directory is gone was purged; one whose directory
    is still there stays listed (an expired one is purged again by the next pass).
    """
    # NOTE: a restored entry's directory is purged after the retention too.
    left = [e for e in journal.quarantine(include_done=True) if e.uuid == uuid and not e.purged_at]
    gone = [e for e in left if not os.path.lexists(e.path)]
    for entry in gone:
        _close(journal, entry, now)
    if len(gone) < len(left):
        return "interrupted or not begun; a quarantine directory is still there; not repeated"
    return "completed: the quarantine directory is gone"


def _close(journal: Journal, entry: QuarantineEntry, now: datetime.datetime) -> None:
    known = {(e.uuid, e.reaped_at) for e in journal.quarantine(include_done=True)}
    if (entry.uuid, entry.reaped_at) not in known:
        # NOTE: an entry only its manifest knew: the journal learns it as purged.
        journal.add_quarantine(entry)
    journal.close_quarantine(entry, "purged_at", now)
