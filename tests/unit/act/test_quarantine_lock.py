"""A restore and a retention purge never touch the quarantine at the same time.

A running agent's retention purge deleting the directory a ``restore`` is moving
files back from would lose the guest (docs/design.md rule 7: the reap is
reversible). Both hold the quarantine's lock, beside the journal, apart from the
agent's own lock (``restore`` works beside a running agent).
"""

from __future__ import annotations

import datetime

from nova_orphans import cli, exits
from nova_orphans.cli import journal as cli_journal
from nova_orphans.record import lock
from nova_orphans.record.entries import STAMP_FORMAT, QuarantineEntry
from nova_orphans.record.journal import quarantine_lock_path
from tests.agent.simworld import SimWorld
from tests.unit.conftest import U

DAY = 86400.0


def test_the_agent_skips_its_purge_while_a_restore_holds_the_quarantine(tmp_path):
    world = SimWorld(tmp_path, interval=DAY)
    world.agent.retention = datetime.timedelta(days=1)
    world.boot("managed")
    stamp = (world.now - datetime.timedelta(days=30)).strftime(STAMP_FORMAT)
    directory = tmp_path / "quarantine" / U / stamp
    directory.mkdir(parents=True)
    world.journal.add_quarantine(QuarantineEntry(U, stamp, "deleted", str(directory), False, []))
    world.cycle(DAY)  # first sighting
    restore = lock.acquire(quarantine_lock_path(world.journal.path))
    try:
        world.cycle(DAY)  # the retention has passed, but a restore is under way
        assert directory.exists() and "purge" not in [m for m, _ in world.effects.calls]
        assert world.journal.open_intents() == []
    finally:
        lock.release(restore)
    world.cycle(DAY)
    assert not directory.exists() and ("purge", U) in world.effects.calls


def test_restore_waits_for_a_purge_and_gives_up_in_one_line_changing_nothing(
    reaped,
    world,
    capsys,
    monkeypatch,
):
    conf, path = reaped
    monkeypatch.setattr(cli_journal, "QUARANTINE_WAIT", 0.3)
    purge = lock.acquire(quarantine_lock_path(str(path)))
    try:
        code = cli.main(["restore", "--config-file", conf, "--libvirt-uri", world, U, "--force"])
    finally:
        lock.release(purge)
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == exits.ERROR and not out
    assert len(lines) == 1 and "the quarantine is busy" in lines[0] and "pid" in lines[0]
    journal = cli_journal.Journal(str(path))
    assert [e.uuid for e in journal.quarantine()] == [U] and journal.hold_events() == []
