"""What the journal stores: its tables (and how an older version's are told apart), and its rows
as records."""

from __future__ import annotations

import dataclasses
import datetime

#: The journal's schema version (``PRAGMA user_version``). 0: a journal written before
#: versions were recorded (the same tables as version 1), or a new empty file; 2 adds the
#: leftovers' sightings. The upgrade path is ``Journal._upgrade``: a writer upgrades an older
#: journal in place (adding the tables it lacks); a reader reads versions 0 to 2 as they are
#: (a table a journal lacks reads empty); any other version is refused.
SCHEMA_VERSION = 2

#: Each table of the journal, by name: how it is created.
TABLES = {
    "sightings": """CREATE TABLE IF NOT EXISTS sightings (
    uuid TEXT PRIMARY KEY, kind TEXT NOT NULL, first_seen TEXT NOT NULL,
    last_seen TEXT NOT NULL, consecutive INTEGER NOT NULL, inactive_since TEXT,
    inactive_cycles INTEGER NOT NULL)""",
    "intents": """CREATE TABLE IF NOT EXISTS intents (
    id INTEGER PRIMARY KEY AUTOINCREMENT, uuid TEXT NOT NULL, kind TEXT NOT NULL,
    step TEXT NOT NULL, dry_run INTEGER NOT NULL, started_at TEXT NOT NULL,
    outcome TEXT, finished_at TEXT, detail TEXT)""",
    "quarantine": """CREATE TABLE IF NOT EXISTS quarantine (
    uuid TEXT NOT NULL, reaped_at TEXT NOT NULL, kind TEXT NOT NULL, path TEXT NOT NULL,
    files_moved INTEGER NOT NULL, leftovers TEXT NOT NULL, restored_at TEXT, purged_at TEXT,
    PRIMARY KEY (uuid, reaped_at))""",
    "holds": """CREATE TABLE IF NOT EXISTS holds (
    id INTEGER PRIMARY KEY AUTOINCREMENT, uuid TEXT NOT NULL, since TEXT NOT NULL,
    reason TEXT NOT NULL, released_at TEXT, released_after_intent INTEGER)""",
    "retention_sightings": """CREATE TABLE IF NOT EXISTS retention_sightings (
    uuid TEXT NOT NULL, reaped_at TEXT NOT NULL, first_seen TEXT NOT NULL,
    last_counted TEXT NOT NULL, cycles INTEGER NOT NULL, PRIMARY KEY (uuid, reaped_at))""",
    "leftover_sightings": """CREATE TABLE IF NOT EXISTS leftover_sightings (
    key TEXT PRIMARY KEY, first_seen TEXT NOT NULL, last_seen TEXT NOT NULL,
    looks INTEGER NOT NULL)""",
}

#: The schema of version ``SCHEMA_VERSION``: every table and its indexes.
SCHEMA = (
    ";\n".join(TABLES.values())
    + """;
CREATE INDEX IF NOT EXISTS intents_uuid ON intents (uuid);
CREATE UNIQUE INDEX IF NOT EXISTS holds_active ON holds (uuid) WHERE released_at IS NULL;
"""
)

#: The sightings table's columns; a table with others is from an older version (see
#: ``Journal._drop_old_sightings``).
SIGHTINGS_COLUMNS = (
    "uuid",
    "kind",
    "first_seen",
    "last_seen",
    "consecutive",
    "inactive_since",
    "inactive_cycles",
)

#: How a reap's time names its quarantine directory (and ``QuarantineEntry.reaped_at``).
STAMP_FORMAT = "%Y%m%dT%H%M%SZ"


@dataclasses.dataclass(frozen=True)
class Intent:
    """One step the agent meant to take, and what came of it (None: no outcome yet)."""

    id: int
    uuid: str
    kind: str
    step: str
    dry_run: bool
    started_at: str
    outcome: str | None
    finished_at: str | None
    detail: str | None


@dataclasses.dataclass(frozen=True)
class QuarantineEntry:
    """A reaped guest kept for ``restore``: where its XML (and files) are, what was left."""

    uuid: str
    reaped_at: str
    kind: str
    path: str
    files_moved: bool
    leftovers: list[str]
    restored_at: str | None = None
    purged_at: str | None = None

    @property
    def reaped_time(self) -> datetime.datetime:
        """``reaped_at`` (a quarantine stamp) as a UTC time."""
        parsed = datetime.datetime.strptime(self.reaped_at, STAMP_FORMAT)
        return parsed.replace(tzinfo=datetime.timezone.utc)


@dataclasses.dataclass(frozen=True)
class RetentionSighting:
    """The agent cycles that saw one quarantine entry: retention needs them (rule 15)."""

    first_seen: datetime.datetime
    last_counted: datetime.datetime
    cycles: int


def iso(value: datetime.datetime) -> str:
    """A time as the journal stores it."""
    return value.isoformat()


def time_of(value: str | None) -> datetime.datetime | None:
    """A time the journal stored (None for none)."""
    return datetime.datetime.fromisoformat(value) if value else None
