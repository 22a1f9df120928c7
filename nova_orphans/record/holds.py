"""The journal's holds (docs/design.md rule 12): a guest on hold is never acted on until the
operator releases it, and the last steps and releases a hold is judged by."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import sqlite3
from typing import Any, Protocol

from nova_orphans.decide.holds import Hold, LastStep
from nova_orphans.record.entries import iso, time_of


class _Database(Protocol):
    """What the holds ask of the journal they are part of (``Journal``)."""

    def _execute(self, sql: str, args: tuple[Any, ...] = ()) -> sqlite3.Cursor: ...

    def _transaction(self) -> contextlib.AbstractContextManager[None]: ...

    def hold_of(self, uuid: str) -> Hold | None: ...

    def _holds(self, where: str, args: tuple[Any, ...]) -> list[Hold]: ...


class HoldsTable:
    """The ``holds`` table; ``Journal`` is one (NOTE: a part of it, not opened on its own)."""

    def hold(self: _Database, uuid: str, reason: str, now: datetime.datetime) -> Hold:
        """Put a guest on hold; a guest already on hold keeps its hold. Returns the hold."""
        with self._transaction():
            current = self.hold_of(uuid)
            if current is not None:
                return current
            self._execute(
                "INSERT INTO holds (uuid, since, reason) VALUES (?, ?, ?)",
                (uuid, iso(now), reason),
            )
        return Hold(uuid, now, reason)

    def cancel_hold(self: _Database, hold: Hold) -> None:
        """Remove a hold that never took effect (the restore that made it failed)."""
        self._execute(
            "DELETE FROM holds WHERE uuid = ? AND since = ? AND released_at IS NULL",
            (hold.uuid, iso(hold.since)),
        )

    def release(self: _Database, uuid: str, now: datetime.datetime) -> Hold | None:
        """Release a guest's hold; None (and nothing changed) when it is not on hold.

        NOTE: the guest's sightings are forgotten too: once released it is a fresh
        finding and must be seen again for ``sightings_required`` cycles.
        """
        with self._transaction():
            current = self.hold_of(uuid)
            if current is None:
                return None
            self._execute(
                "UPDATE holds SET released_at = ?, released_after_intent = "
                "(SELECT COALESCE(MAX(id), 0) FROM intents) WHERE uuid = ? AND released_at IS NULL",
                (iso(now), uuid),
            )
            self._execute("DELETE FROM sightings WHERE uuid = ?", (uuid,))
        return dataclasses.replace(current, released_at=now)

    def hold_of(self: _Database, uuid: str) -> Hold | None:
        """The guest's hold, read now; None when it is not on hold."""
        found = self._holds("WHERE uuid = ? AND released_at IS NULL", (uuid,))
        return found[0] if found else None

    def holds(self: _Database) -> dict[str, Hold]:
        """Every guest on hold now, by UUID."""
        return {h.uuid: h for h in self._holds("WHERE released_at IS NULL", ())}

    def hold_events(self: _Database, uuid: str | None = None) -> list[Hold]:
        """Every hold ever made (released or not), oldest first, optionally of one UUID."""
        if uuid:
            return self._holds("WHERE uuid = ? ORDER BY id", (uuid,))
        return self._holds("ORDER BY id", ())

    def last_releases(self: _Database) -> dict[str, int]:
        """Per guest released from a hold: the journal's last intent id at its last release."""
        rows = self._execute(
            "SELECT uuid, MAX(released_after_intent) FROM holds "
            "WHERE released_at IS NOT NULL GROUP BY uuid"
        )
        return {r[0]: int(r[1]) for r in rows}

    def last_live_steps(self: _Database) -> dict[str, LastStep]:
        """Each guest's last completed (outcome ``done``) live step on the guest itself.

        NOTE: a retention purge deletes an old quarantine directory, not the guest: a
        purge of a reap that stopped before the undefine (the guest stayed defined,
        stopped) must not hide the agent's stop, or the operator's start after it
        would not put the guest on hold (docs/design.md rule 12).
        """
        rows = self._execute(
            "SELECT uuid, step, finished_at, id FROM intents WHERE id IN (SELECT MAX(id) FROM "
            "intents WHERE dry_run = 0 AND outcome = 'done' AND step != 'purge' GROUP BY uuid)"
        )
        return {r[0]: LastStep(r[1], time_of(r[2]), r[3]) for r in rows}  # type: ignore[arg-type]

    def _holds(self: _Database, where: str, args: tuple[Any, ...]) -> list[Hold]:
        rows = self._execute(f"SELECT uuid, since, reason, released_at FROM holds {where}", args)
        return [Hold(r[0], time_of(r[1]), r[2], time_of(r[3])) for r in rows]  # type: ignore[arg-type]
