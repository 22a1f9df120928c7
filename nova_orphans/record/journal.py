"""The SQLite journal: sightings across cycles, every intent and its outcome, quarantine.

Every destructive step is written as an intent *before* it starts and gets its
outcome *after*; an intent without an outcome after a crash is reconciled on the
next start, never repeated blindly. ``Journal`` is the one entry point: the tables and their
rows are ``entries``, the holds (rule 12) ``holds``.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import pathlib
import sqlite3
from collections.abc import Iterator
from typing import Any

from nova_orphans.model import Kind
from nova_orphans.record import files, lock
from nova_orphans.record.entries import (
    SCHEMA,
    SCHEMA_VERSION,
    SIGHTINGS_COLUMNS,
    TABLES,
    Intent,
    iso,
)
from nova_orphans.record.holds import HoldsTable
from nova_orphans.record.journal_errors import (  # noqa: F401
    JournalError,
    JournalIOError,
    JournalLocked,
    QuarantineBusy,
    failure,
    present,
    refuse_unwritable,
    unread_wal,
)
from nova_orphans.record.leftover_sightings import LeftoverSightingsTable
from nova_orphans.record.quarantine_table import QuarantineTable
from nova_orphans.record.sightings_table import SightingsTable


def lock_path(journal_path: str) -> str:
    """The lock file of the journal at ``journal_path``: beside the journal's real path.

    NOTE: symlinks resolved (docs/design.md rule 14): a journal reached through a
    symlinked file or directory is one journal with one lock, whatever path an
    agent is given.
    """
    return f"{os.path.realpath(journal_path)}.lock"


def quarantine_lock_path(journal_path: str) -> str:
    """The lock a purge and a restore hold while they touch the quarantine: beside the journal.

    NOTE: apart from the agent's own lock, which a running agent holds for good:
    ``restore`` must work beside a running agent, but never while its retention
    purge deletes the directory being restored.
    """
    return f"{os.path.realpath(journal_path)}.quarantine.lock"


def refuse_if_held(journal_path: str) -> None:
    """Raise ``JournalLocked`` naming the agent that holds the journal now; creates nothing.

    NOTE: for checks before the lock can be taken (nothing may be created yet);
    only taking the lock (``Journal(path, exclusive=True)``) makes a journal ours.
    """
    try:
        holder = lock.holder(lock_path(journal_path))
    except OSError as exc:
        raise failure(journal_path, exc) from exc
    if holder is not None:
        raise _locked(journal_path, holder)


def refuse_unknown_schema(journal_path: str) -> None:
    """Raise ``JournalError`` when the journal at ``journal_path`` has a schema version this
    nova-orphans does not know, or is no regular file (a FIFO would hang sqlite); reads it
    without writing or creating anything (no journal: nothing to refuse)."""
    if not present(journal_path):
        return
    uri = f"{pathlib.Path(os.path.abspath(journal_path)).as_uri()}?mode=ro&immutable=1"
    try:
        db = sqlite3.connect(uri, uri=True, isolation_level=None)
        try:
            version = int(db.execute("PRAGMA user_version").fetchone()[0])
        finally:
            db.close()
    except sqlite3.Error as exc:
        raise failure(journal_path, exc) from exc
    if not 0 <= version <= SCHEMA_VERSION:
        raise _unknown_schema(journal_path, version)


def _unknown_schema(journal_path: str, version: int) -> JournalError:
    return JournalError(
        f"journal {journal_path} has schema version {version}; this nova-orphans "
        f"reads versions 0 to {SCHEMA_VERSION}: run the nova-orphans that wrote it "
        "(or a newer one); nothing was changed"
    )


def _locked(journal_path: str, holder: str) -> JournalLocked:
    return JournalLocked(
        f"another 'nova-orphans run' holds the journal {journal_path}: {holder}; "
        "this one exits and changes nothing"
    )


class Journal(SightingsTable, HoldsTable, LeftoverSightingsTable, QuarantineTable):
    """A small, durable record in one SQLite file.

    ``exclusive``: hold the journal's lock while open (the agent does); a second
    exclusive opener gets ``JournalLocked`` before anything is read or written.
    """

    def __init__(self, path: str, exclusive: bool = False, *, read_only: bool = False) -> None:
        self.path = path
        self._lock: int | None = None
        self._quarantine_held = False
        if read_only:
            self._db = self._open_read_only(path)
            return
        try:
            # NOTE: before the lock file or anything else is created.
            refuse_unknown_schema(path)
            files.private_dir(os.path.dirname(os.path.abspath(path)))
            refuse_unwritable(path)
            if exclusive:
                self._lock = lock.acquire(lock_path(path), f", journal {path}")
            # NOTE: made 0600 before sqlite opens it: sqlite gives its -wal and -shm files the
            # journal's own mode, whatever the umask.
            files.private_file(path)
            self._db = sqlite3.connect(path, isolation_level=None)
            # NOTE: the version is read before anything is written (WAL mode included):
            # a journal of a newer nova-orphans is left exactly as it is.
            version = self._version()
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._upgrade(version)
        except lock.Held as exc:
            raise _locked(path, str(exc)) from exc
        except JournalError:
            self._unlock()
            raise
        except (OSError, sqlite3.Error) as exc:
            self._unlock()
            raise failure(path, exc) from exc
        for made in (path, f"{path}-wal", f"{path}-shm"):  # NOTE: a journal of an older version
            with contextlib.suppress(FileNotFoundError):
                os.chmod(made, 0o600)

    def _version(self) -> int:
        """The journal's schema version; ``JournalError`` (and the file closed) for one this
        nova-orphans does not know (written by a newer version, or not a journal)."""
        version = int(self._db.execute("PRAGMA user_version").fetchone()[0])
        if not 0 <= version <= SCHEMA_VERSION:
            self._db.close()
            raise _unknown_schema(self.path, version)
        return version

    def _upgrade(self, version: int) -> None:
        """Bring the journal from ``version`` to ``SCHEMA_VERSION``, in one transaction.

        The upgrade path (docs/admin/agent.md): version 0 is a new file or a journal
        written before versions were recorded; it gets the tables it lacks, loses a
        sightings table of other columns (``_drop_old_sightings``), and is marked 1.
        """
        if version == SCHEMA_VERSION:
            return
        self._db.execute("BEGIN IMMEDIATE")
        try:
            self._drop_old_sightings()
            for statement in SCHEMA.split(";"):
                if statement.strip():
                    self._db.execute(statement)
            self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def _drop_old_sightings(self) -> None:
        """Drop a sightings table an older version wrote (other columns).

        NOTE: sightings are a per-cycle cache of what was seen; forgetting them
        only makes every finding start its grace and sightings afresh (the
        cautious side). Intents and the quarantine are kept.
        """
        columns = tuple(row[1] for row in self._db.execute("PRAGMA table_info(sightings)"))
        if columns and columns != SIGHTINGS_COLUMNS:
            self._db.execute("DROP TABLE sightings")

    @classmethod
    def read_only(cls, path: str) -> Journal | None:
        """The journal at ``path`` opened read-only, or None when there is none.

        NOTE: ``audit``, ``history`` and ``quarantine list`` change nothing: they never
        create a journal (nor its directory), and never write to one.
        """
        if not present(path):
            return None
        return cls(path, read_only=True)

    @classmethod
    def empty(cls, path: str) -> Journal:
        """A journal with nothing in it, held in memory, standing for ``path`` that has none.

        NOTE: ``quarantine list`` from the manifests alone, when the journal is lost:
        a read-only command creates no journal.
        """
        journal = cls.__new__(cls)
        journal.path, journal._lock, journal._quarantine_held = path, None, False
        journal._db = sqlite3.connect(":memory:", isolation_level=None)
        journal._db.executescript(SCHEMA)
        return journal

    def _open_read_only(self, path: str) -> sqlite3.Connection:
        """``path`` opened read-only (sqlite's ``mode=ro``), its version checked, the tables
        an older or empty journal lacks stood in by empty temporary ones (in memory).

        NOTE: reading a journal in WAL mode makes sqlite create its ``-wal`` and ``-shm``
        files. When there is no ``-wal`` file, no agent has the journal open (the last
        connection checkpointed and removed it): the file alone holds everything, and is
        read ``immutable`` (no locks, no WAL), so the command creates no file. Likewise on
        read-only media, where sqlite cannot create them: it then reads what the agent
        last checkpointed. Beside a running agent (a ``-wal`` file) it reads through the
        WAL as every sqlite reader does.
        """
        base = pathlib.Path(os.path.abspath(path)).as_uri()
        immutable = f"{base}?mode=ro&immutable=1"
        try:
            if not os.path.exists(f"{path}-wal"):
                self._db = self._connect(immutable)
            else:
                try:
                    self._db = self._connect(f"{base}?mode=ro")
                except sqlite3.OperationalError as exc:
                    if os.access(os.path.dirname(os.path.abspath(path)), os.W_OK):
                        raise
                    self._db = self._connect(immutable)
                    unread_wal(path, exc)
            self._version()
            present = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master")}
            for name, statement in TABLES.items():
                if name not in present:
                    self._db.execute(statement.replace("CREATE TABLE", "CREATE TEMP TABLE", 1))
        except sqlite3.Error as exc:
            raise failure(path, exc, "cannot open read-only journal") from exc
        return self._db

    @staticmethod
    def _connect(uri: str) -> sqlite3.Connection:
        """A connection to ``uri`` that has read the file's header (a bad file fails here)."""
        db = sqlite3.connect(uri, uri=True, isolation_level=None)
        try:
            db.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.Error:
            db.close()
            raise
        return db

    def close(self) -> None:
        """Close the database (and give its lock up)."""
        self._db.close()
        self._unlock()

    @contextlib.contextmanager
    def quarantine_held(self, wait: float) -> Iterator[None]:
        """Hold the quarantine's lock (see ``quarantine_lock_path``) for a ``with`` block.

        Raises ``QuarantineBusy`` naming the holder when it is still taken after ``wait`` s.
        """
        try:
            with lock.held(quarantine_lock_path(self.path), wait):
                self._quarantine_held = True
                try:
                    yield
                finally:
                    self._quarantine_held = False
        except lock.Held as exc:
            raise QuarantineBusy(
                f"the quarantine is busy (a purge or a restore: {exc}); nothing changed, try again"
            ) from exc

    @property
    def holds_lock(self) -> bool:
        """Whether this process holds the journal's lock: it is the live agent's (rule 14)."""
        return self._lock is not None

    @property
    def holds_quarantine_lock(self) -> bool:
        """Whether this process is inside ``quarantine_held`` (a purge or restore may run)."""
        return self._quarantine_held

    def _unlock(self) -> None:
        if self._lock is not None:
            lock.release(self._lock)
            self._lock = None

    def _execute(self, sql: str, args: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        # NOTE: a journal that cannot be written must stop the agent: it may not
        # act without a record. One error type, one clear line.
        try:
            return self._db.execute(sql, args)
        except sqlite3.Error as exc:
            raise failure(self.path, exc, "cannot write journal") from exc

    def _executemany(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        try:
            self._db.executemany(sql, rows)
        except sqlite3.Error as exc:
            raise failure(self.path, exc, "cannot write journal") from exc

    # --- intents -----------------------------------------------------------------------

    def begin(self, uuid: str, kind: Kind, step: str, dry_run: bool, now: datetime.datetime) -> int:
        """Write an intent before its step starts; returns its id."""
        cursor = self._execute(
            "INSERT INTO intents (uuid, kind, step, dry_run, started_at) VALUES (?, ?, ?, ?, ?)",
            (uuid, kind.value, step, int(dry_run), iso(now)),
        )
        return int(cursor.lastrowid or 0)

    def finish(self, intent_id: int, outcome: str, detail: str, now: datetime.datetime) -> None:
        """Record what came of an intent."""
        self._execute(
            "UPDATE intents SET outcome = ?, detail = ?, finished_at = ? WHERE id = ?",
            (outcome, detail, iso(now), intent_id),
        )

    def open_intents(self) -> list[Intent]:
        """Intents without an outcome: a step was interrupted (crash, kill)."""
        return self._intents("WHERE outcome IS NULL ORDER BY id", ())

    def history(self, uuid: str | None = None, limit: int = 1000) -> list[Intent]:
        """The latest intents, newest first, optionally of one UUID."""
        if uuid:
            return self._intents("WHERE uuid = ? ORDER BY id DESC LIMIT ?", (uuid, limit))
        return self._intents("ORDER BY id DESC LIMIT ?", (limit,))

    def _intents(self, where: str, args: tuple[Any, ...]) -> list[Intent]:
        rows = self._execute(
            "SELECT id, uuid, kind, step, dry_run, started_at, outcome, finished_at, detail "
            f"FROM intents {where}",
            args,
        )
        return [Intent(r[0], r[1], r[2], r[3], bool(r[4]), r[5], r[6], r[7], r[8]) for r in rows]

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        self._execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._execute("ROLLBACK")
            raise
        self._execute("COMMIT")
