"""A journal written by an older version opens: its sightings are forgotten, nothing else."""

from __future__ import annotations

import datetime
import sqlite3

from nova_orphans.core.model import Kind
from nova_orphans.core.sightings import Sighting
from nova_orphans.record.journal import Journal

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
    db.executescript("DROP TABLE sightings;" + OLD_SIGHTINGS)
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
