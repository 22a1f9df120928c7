"""The journal's tables: ``history``'s events and ``quarantine list``'s entries."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

from nova_orphans.record.entries import Intent
from nova_orphans.record.journal import Journal
from nova_orphans.render import table

#: ``history``'s columns, and with ``--wide``.
HISTORY = (table.Column("WHEN (UTC)"), table.Column("UUID"), table.Column("EVENT", 14),
           table.Column("OUTCOME", 10), table.Column("DETAIL"))  # fmt: skip
HISTORY_WIDE = (table.Column("WHEN"), table.Column("UUID"), table.Column("KIND"),
                table.Column("EVENT"), table.Column("OUTCOME"), table.Column("DETAIL"))  # fmt: skip
#: One event's cells: uuid, kind, event, outcome, detail (``WHEN`` comes first).
Cells = tuple[str, str, str, str, str]


def history_cells(row: tuple[str, ...], wide: bool) -> tuple[str, ...]:
    """The cells of ``HISTORY_WIDE`` (``wide``) or ``HISTORY`` (no kind)."""
    return row if wide else row[:2] + row[3:]


def when(at: datetime.datetime, wide: bool) -> str:
    """A moment for a table: ISO 8601 with ``--wide``, else UTC to the minute."""
    if wide:
        return at.isoformat()
    return at.astimezone(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")


def events(journal: Journal, uuid: str | None) -> list[tuple[datetime.datetime, Any, Cells]]:
    """(when, JSON record, table cells) of every step, hold and release, newest first.

    A step's record is its intent with ``event`` "step"; a hold's and a release's
    have ``event``, ``uuid``, ``at`` and ``reason``.
    """
    events = steps(journal.history(uuid))
    for h in journal.hold_events(uuid):
        moments = [("hold", h.since)] + ([("release", h.released_at)] if h.released_at else [])
        for event, at in moments:
            record = {"event": event, "uuid": h.uuid, "at": at.isoformat(), "reason": h.reason}
            events.append((at, record, (h.uuid, "-", event, "-", h.reason)))
    # NOTE: sorted is stable: events of the same moment keep the order above.
    return sorted(events, key=lambda e: e[0], reverse=True)


def steps(intents: list[Intent]) -> list[tuple[datetime.datetime, Any, Cells]]:
    """(when, JSON record, table cells) of each intent; its record has ``event`` "step"."""
    events = []
    for i in intents:
        event = f"{i.step} (dry run)" if i.dry_run else i.step
        cells = (i.uuid, i.kind, event, i.outcome or "OPEN", i.detail or "")
        record = {"event": "step", **dataclasses.asdict(i)}
        events.append((datetime.datetime.fromisoformat(i.started_at), record, cells))
    return events


#: ``quarantine list``'s columns, and with ``--wide`` (the directory too).
QUARANTINE = (table.Column("REAPED (UTC)"), table.Column("UUID"), table.Column("RESTORE?"),
              table.Column("HOLDS OR LACKS"))  # fmt: skip
QUARANTINE_WIDE = (table.Column("REAPED"), table.Column("UUID"), table.Column("KIND"),
                   table.Column("RESTORABLE"), table.Column("HOLDS OR LACKS"),
                   table.Column("DIRECTORY"))  # fmt: skip
