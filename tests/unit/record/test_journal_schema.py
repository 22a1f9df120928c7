"""The journal's schema version (``PRAGMA user_version``) and its upgrade path: a journal written
by an older version opens (its sightings are forgotten, nothing else), one of a newer version is
refused and left as it is, and the read-only openers never write."""

from __future__ import annotations

import datetime
import hashlib
import pathlib
import shutil
import sqlite3

import pytest

from nova_orphans import exits
from nova_orphans.decide.sightings import Sighting
from nova_orphans.model import Kind
from nova_orphans.record.entries import SCHEMA_VERSION
from nova_orphans.record.journal import Journal, JournalError, lock_path

U = "11111111-2222-3333-4444-555555555555"
T = datetime.datetime(2026, 11, 1, 12, 0, tzinfo=datetime.timezone.utc)

#: The sightings table before it counted the cycles a guest was seen stopped.
OLD_SIGHTINGS = """
CREATE TABLE sightings (
    uuid TEXT PRIMARY KEY, kind TEXT NOT NULL, first_seen TEXT NOT NULL,
    last_seen TEXT NOT NULL, consecutive INTEGER NOT NULL, inactive_since TEXT);
"""


def test_an_old_sightings_table_is_dropped_and_intents_and_quarantine_are_kept(tmp_path):
    path = str(tmp_path / "journal.sqlite")
    old = Journal(path)
    old.begin(U, Kind.DELETED, "stop", False, T)
    old.close()
    db = sqlite3.connect(path)
    # NOTE: a journal of those versions carried no schema version (0).
    db.executescript("DROP TABLE sightings;" + OLD_SIGHTINGS + "PRAGMA user_version = 0;")
    # Seen 9 times, stopped for a week: with the old table, a reap would be due at once.
    db.execute(
        "INSERT INTO sightings VALUES (?, 'deleted', ?, ?, 9, ?)",
        (U, T.isoformat(), T.isoformat(), (T - datetime.timedelta(days=7)).isoformat()),
    )
    db.commit()
    db.close()

    journal = Journal(path)
    assert journal.sightings() == {}  # every finding starts afresh: the cautious side
    assert [(i.uuid, i.step) for i in journal.history()] == [(U, "stop")]
    stopped = Sighting(U, Kind.DELETED, T, T, 2, T, inactive_cycles=4)
    journal.replace_sightings({U: stopped})
    journal.close()
    assert Journal(path).sightings() == {U: stopped}  # a current table is kept as it is


def test_mark_stopped_starts_the_cycles_seen_stopped_from_zero(tmp_path):
    journal = Journal(str(tmp_path / "journal.sqlite"))
    journal.replace_sightings({U: Sighting(U, Kind.UNKNOWN, T, T, 3)})
    later = T + datetime.timedelta(minutes=1)
    journal.mark_stopped(U, later)
    s = journal.sightings()[U]
    assert (s.inactive_since, s.inactive_cycles) == (later, 0)


# --- Schema versions. ---------------------------------------------------------------------

#: A journal as nova-orphans 0.1.0 wrote it before schema versions (user_version 0): one
#: stop done, one quarantine entry, one hold.
UNVERSIONED = pathlib.Path(__file__).parent / "data" / "journal-unversioned.sqlite"
OLD_GUEST = "11111111-2222-4333-8444-555555555555"
OLD_HELD = "22222222-2222-4333-8444-555555555555"


def user_version(path: pathlib.Path) -> int:
    db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    try:
        return int(db.execute("PRAGMA user_version").fetchone()[0])
    finally:
        db.close()


def digest(directory: pathlib.Path) -> dict[str, str]:
    """Every file of ``directory`` (the journal and its WAL files) with its content digest."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in directory.iterdir()}


@pytest.fixture
def unversioned(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "state" / "journal.sqlite"
    path.parent.mkdir()
    shutil.copyfile(UNVERSIONED, path)
    return path


def test_a_new_journal_carries_the_current_schema_version(tmp_path):
    path = tmp_path / "journal.sqlite"
    Journal(str(path)).close()
    assert user_version(path) == SCHEMA_VERSION == 2


def test_a_journal_of_today_upgrades_in_place_keeping_intents_quarantine_and_holds(unversioned):
    assert user_version(unversioned) == 0
    journal = Journal(str(unversioned), exclusive=True)
    try:
        assert [(i.uuid, i.step, i.outcome) for i in journal.history()] == [
            (OLD_GUEST, "stop", "done")
        ]
        assert [e.uuid for e in journal.quarantine()] == [OLD_GUEST]
        assert set(journal.holds()) == {OLD_HELD}
    finally:
        journal.close()
    assert user_version(unversioned) == SCHEMA_VERSION


def test_the_read_only_opener_reads_a_journal_of_today_and_changes_no_byte(unversioned):
    before = digest(unversioned.parent)
    journal = Journal.read_only(str(unversioned))
    assert journal is not None
    try:
        assert [i.step for i in journal.history()] == ["stop"]
        assert set(journal.holds()) == {OLD_HELD}
    finally:
        journal.close()
    assert digest(unversioned.parent) == before
    assert user_version(unversioned) == 0


@pytest.mark.parametrize("version", [SCHEMA_VERSION + 1, 99, -1])
@pytest.mark.parametrize("read_only", [False, True], ids=["writer", "reader"])
def test_a_journal_of_an_unknown_schema_version_is_refused_and_left_as_it_is(
    unversioned, version, read_only
):
    db = sqlite3.connect(unversioned)
    db.execute(f"PRAGMA user_version = {version}")
    db.close()
    before = digest(unversioned.parent)
    with pytest.raises(JournalError, match=f"schema version {version};") as refused:
        Journal(str(unversioned), read_only=read_only)
    assert refused.value.exit_code == exits.USAGE
    assert digest(unversioned.parent) == before
    assert not pathlib.Path(lock_path(str(unversioned))).exists() or not read_only


def test_the_read_only_opener_writes_no_schema_into_an_empty_file(tmp_path):
    path = tmp_path / "journal.sqlite"
    path.touch()
    journal = Journal.read_only(str(path))
    assert journal is not None
    try:
        assert (journal.history(), journal.holds(), journal.quarantine()) == ([], {}, [])
    finally:
        journal.close()
    assert path.read_bytes() == b""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["journal.sqlite"]


def test_a_file_that_is_no_journal_is_one_journal_error(tmp_path):
    path = tmp_path / "journal.sqlite"
    path.write_text("not sqlite at all, but long enough to be read as a header " * 4)
    for read_only in (True, False):
        with pytest.raises(JournalError, match=r"journal\.sqlite"):
            Journal(str(path), read_only=read_only)
