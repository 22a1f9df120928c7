"""The journal's sightings of leftovers (docs/design.md rule 22): a leftover gets a command
only once it was seen in enough looks across the grace period."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Mapping
from typing import Any, Protocol

from nova_orphans.decide.told import LeftoverSighting
from nova_orphans.record.entries import iso, time_of


class _Database(Protocol):
    """What the table asks of the journal it is part of (``Journal``)."""

    def _execute(self, sql: str, args: tuple[Any, ...] = ()) -> sqlite3.Cursor: ...

    def _executemany(self, sql: str, rows: list[tuple[Any, ...]]) -> None: ...

    def _transaction(self) -> contextlib.AbstractContextManager[None]: ...


class LeftoverSightingsTable:
    """The ``leftover_sightings`` table; ``Journal`` is one (a part of it, not opened alone)."""

    def leftover_sightings(self: _Database) -> dict[str, LeftoverSighting]:
        """Every leftover's sightings from the earlier looks, by key."""
        rows = self._execute("SELECT key, first_seen, last_seen, looks FROM leftover_sightings")
        return {
            r[0]: LeftoverSighting(r[0], time_of(r[1]), time_of(r[2]), int(r[3]))  # type: ignore[arg-type]
            for r in rows
        }

    def replace_leftover_sightings(
        self: _Database, sightings: Mapping[str, LeftoverSighting]
    ) -> None:
        """Store the sightings of the look just made (and forget the rest)."""
        with self._transaction():
            self._execute("DELETE FROM leftover_sightings")
            self._executemany(
                "INSERT INTO leftover_sightings VALUES (?, ?, ?, ?)",
                [(s.key, iso(s.first_seen), iso(s.last_seen), s.looks) for s in sightings.values()],
            )
