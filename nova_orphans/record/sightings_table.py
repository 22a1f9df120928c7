"""The journal's sightings of findings (docs/design.md rules 4 and 15): how long, and how
steadily, each was seen, and when the agent stopped it."""

from __future__ import annotations

import contextlib
import datetime
import sqlite3
from collections.abc import Mapping
from typing import Any, Protocol

from nova_orphans.decide.sightings import Sighting
from nova_orphans.model import Kind
from nova_orphans.record.entries import SIGHTINGS_COLUMNS, iso, time_of


class _Database(Protocol):
    """What the table asks of the journal it is part of (``Journal``)."""

    def _execute(self, sql: str, args: tuple[Any, ...] = ()) -> sqlite3.Cursor: ...

    def _executemany(self, sql: str, rows: list[tuple[Any, ...]]) -> None: ...

    def _transaction(self) -> contextlib.AbstractContextManager[None]: ...


class SightingsTable:
    """The ``sightings`` table; ``Journal`` is one (a part of it, not opened on its own)."""

    def sightings(self: _Database) -> dict[str, Sighting]:
        """Every sighting remembered from the previous cycles."""
        rows = self._execute(f"SELECT {', '.join(SIGHTINGS_COLUMNS)} FROM sightings")
        return {
            r[0]: Sighting(
                r[0],
                Kind(r[1]),
                time_of(r[2]),  # type: ignore[arg-type]
                time_of(r[3]),  # type: ignore[arg-type]
                r[4],
                time_of(r[5]),
                r[6],
            )
            for r in rows
        }

    def replace_sightings(self: _Database, sightings: Mapping[str, Sighting]) -> None:
        """Store the sightings of the cycle just observed (and forget the rest)."""
        with self._transaction():
            self._execute("DELETE FROM sightings")
            self._executemany(
                "INSERT INTO sightings VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        s.uuid,
                        s.kind.value,
                        iso(s.first_seen),
                        iso(s.last_seen),
                        s.consecutive,
                        iso(s.inactive_since) if s.inactive_since else None,
                        s.inactive_cycles,
                    )
                    for s in sightings.values()
                ],
            )

    def mark_stopped(self: _Database, uuid: str, when: datetime.datetime) -> None:
        """The agent stopped this guest at ``when``: reap_delay (and its cycles) count from then."""
        self._execute(
            "UPDATE sightings SET inactive_since = ?, inactive_cycles = 0 "
            "WHERE uuid = ? AND inactive_since IS NULL",
            (iso(when), uuid),
        )

    def forget(self: _Database, uuid: str) -> None:
        """Reset a finding's sightings: it changed under us and must be seen afresh."""
        self._execute("DELETE FROM sightings WHERE uuid = ?", (uuid,))
