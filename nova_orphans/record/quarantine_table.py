"""The journal's quarantine entries (docs/design.md §7) and what the agent's cycles saw of each
for the retention purge (rule 15)."""

from __future__ import annotations

import datetime
import json
import sqlite3
from typing import Any, Protocol

from nova_orphans.record.entries import QuarantineEntry, RetentionSighting, iso, time_of


class _Database(Protocol):
    """What the table asks of the journal it is part of (``Journal``)."""

    def _execute(self, sql: str, args: tuple[Any, ...] = ()) -> sqlite3.Cursor: ...


class QuarantineTable:
    """The ``quarantine`` and ``retention_sightings`` tables; ``Journal`` is one (a part of
    it, not opened on its own)."""

    def add_quarantine(self: _Database, entry: QuarantineEntry) -> None:
        """Remember a reaped guest's quarantine."""
        self._execute(
            "INSERT INTO quarantine VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                entry.uuid,
                entry.reaped_at,
                entry.kind,
                entry.path,
                int(entry.files_moved),
                json.dumps(entry.leftovers),
                entry.restored_at,
                entry.purged_at,
            ),
        )

    def mark_files_moved(self: _Database, entry: QuarantineEntry) -> None:
        """The reap moved the instance directory into the entry's quarantine."""
        self._execute(
            "UPDATE quarantine SET files_moved = 1 WHERE uuid = ? AND reaped_at = ?",
            (entry.uuid, entry.reaped_at),
        )

    def quarantine(self: _Database, include_done: bool = False) -> list[QuarantineEntry]:
        """Quarantined guests, oldest first; by default only those still restorable."""
        where = "" if include_done else "WHERE restored_at IS NULL AND purged_at IS NULL"
        rows = self._execute(f"SELECT * FROM quarantine {where} ORDER BY reaped_at")
        return [
            QuarantineEntry(r[0], r[1], r[2], r[3], bool(r[4]), json.loads(r[5]), r[6], r[7])
            for r in rows
        ]

    def close_quarantine(
        self: _Database, entry: QuarantineEntry, column: str, now: datetime.datetime
    ) -> None:
        """Mark a quarantine entry restored or purged (``column``: restored_at | purged_at)."""
        if column not in ("restored_at", "purged_at"):
            raise ValueError(column)
        self._execute(
            f"UPDATE quarantine SET {column} = ? WHERE uuid = ? AND reaped_at = ?",
            (iso(now), entry.uuid, entry.reaped_at),
        )

    def retention_sighting(self: _Database, entry: QuarantineEntry) -> RetentionSighting | None:
        """What the agent's cycles have seen of a quarantine entry (None: not seen yet)."""
        row = self._execute(
            "SELECT first_seen, last_counted, cycles FROM retention_sightings "
            "WHERE uuid = ? AND reaped_at = ?",
            (entry.uuid, entry.reaped_at),
        ).fetchone()
        if row is None:
            return None
        first_seen, last_counted = time_of(row[0]), time_of(row[1])
        assert first_seen is not None and last_counted is not None
        return RetentionSighting(first_seen, last_counted, row[2])

    def put_retention_sighting(
        self: _Database, entry: QuarantineEntry, seen: RetentionSighting
    ) -> None:
        """Store what this cycle saw of a quarantine entry."""
        self._execute(
            "INSERT OR REPLACE INTO retention_sightings VALUES (?, ?, ?, ?, ?)",
            (
                entry.uuid,
                entry.reaped_at,
                iso(seen.first_seen),
                iso(seen.last_counted),
                seen.cycles,
            ),
        )
