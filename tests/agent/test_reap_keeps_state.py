"""docs/design.md rule 16: a reap keeps everything a restore needs, or the guest is not reaped;
rule 8 for the retention purge: one path, through the effects, journaled, reconciled.
"""

from __future__ import annotations

import datetime

import pytest

from nova_orphans.act.quarantine import manifest
from nova_orphans.act.quarantine.manifest import Manifest
from nova_orphans.model import Kind
from nova_orphans.record.entries import STAMP_FORMAT, QuarantineEntry
from tests.agent.simworld import SimWorld

OLD = "11111111-1111-4111-8111-111111111111"


def _reaped(world: SimWorld, name: str = "gone") -> str:
    world.boot("managed")
    gone = world.orphan(name, Kind.DELETED)
    world.cycle()  # stopped
    return gone


def test_a_reap_keeps_the_managed_save_snapshots_and_backing_chain_in_its_manifest(tmp_path):
    world = SimWorld(tmp_path)
    gone = _reaped(world)
    world.hv.suspend(gone)
    world.hv.snapshot(gone, "before-upgrade")
    state = world.hv.state[gone]
    result = world.cycle()
    assert [o.outcome for o in result.outcomes] == ["done"]
    assert "kept xml, files, managed-save, 1 snapshot, backing chain (1 file)" in (
        result.outcomes[0].detail
    )
    (entry,) = world.journal.quarantine()
    saved = world.hv.manifests[entry.path]
    assert (saved.uuid, saved.kind, saved.undefined, saved.files_moved) == (
        gone, "deleted", True, True,
    )  # fmt: skip
    assert saved.kept == state
    # Nova's image cache removes the base; the restore brings guest, state and base back.
    world.hv.clean_image_cache()
    world.hv.restore(gone)
    assert world.hv.state[gone] == state
    assert {b.path for b in state.backing} <= world.hv.bases


def test_a_guest_whose_state_cannot_be_kept_is_not_reaped_and_the_reason_is_reported(tmp_path):
    world = SimWorld(tmp_path)
    gone = _reaped(world)
    world.effects.fail.add("keep_state")
    result = world.cycle()
    assert [o.outcome for o in result.outcomes] == ["failed"]
    assert "keep_state" in result.outcomes[0].detail
    assert gone in world.hv.domains
    assert world.journal.quarantine() == []
    assert "undefine" not in [m for m, _ in world.effects.calls]


def test_a_guest_that_gained_state_after_it_was_kept_is_not_undefined(tmp_path):
    world = SimWorld(tmp_path)
    gone = _reaped(world)
    real = world.effects.keep_state

    def snapshot_taken_meanwhile(uuid, directory):
        kept = real(uuid, directory)
        world.hv.snapshot(uuid, "late")
        return kept

    world.effects.keep_state = snapshot_taken_meanwhile  # type: ignore[method-assign]
    result = world.cycle()
    assert [o.outcome for o in result.outcomes] == ["failed"]
    assert "not kept" in result.outcomes[0].detail
    assert gone in world.hv.domains and world.hv.state[gone].snapshots == ("late",)


# --- retention purge -----------------------------------------------------------------------


def _old_entry(world: SimWorld, tmp_path, uuid: str, days: float, journal: bool) -> str:
    stamp = (world.now - datetime.timedelta(days=days)).strftime(STAMP_FORMAT)
    directory = tmp_path / "quarantine" / uuid / stamp
    directory.mkdir(parents=True)
    (directory / "domain.xml").write_text(f"<domain><uuid>{uuid}</uuid></domain>")
    manifest.write(str(directory), Manifest(uuid, "deleted", stamp, "x", undefined=True))
    if journal:
        world.journal.add_quarantine(
            QuarantineEntry(uuid, stamp, "deleted", str(directory), False, [])
        )
    return str(directory)


DAY = 86400.0


def _through_retention(world: SimWorld, days: int) -> None:
    """Cycles a day apart (the world's interval) up to the last one before the purge.

    An entry first seen old waits the whole retention in cycles too (docs/design.md
    rule 15): its reaped time is the agent's clock's word, which a step forward before
    the first sighting would have made old.
    """
    for _ in range(days):
        world.cycle(DAY)
        assert "purge" not in [m for m, _ in world.effects.calls]


def test_the_retention_purge_is_journaled_intent_before_outcome_after(tmp_path):
    world = SimWorld(tmp_path, interval=DAY)
    world.agent.retention = datetime.timedelta(days=7)
    world.boot("managed")
    directory = _old_entry(world, tmp_path, OLD, 10, journal=True)
    _through_retention(world, 7)
    seen = []

    def during_purge(method: str, uuid: str) -> None:
        if method == "purge":
            seen.append([(i.step, i.outcome) for i in world.journal.open_intents()])

    world.effects.after = during_purge
    world.cycle(DAY)
    assert seen == [[("purge", None)]]  # the intent was open while the directory went
    (intent,) = world.journal.history(OLD)
    assert (intent.step, intent.outcome, intent.detail) == ("purge", "done", f"deleted {directory}")
    assert world.journal.quarantine() == []


def test_the_retention_purge_finds_entries_only_their_manifest_knows(tmp_path):
    world = SimWorld(tmp_path, interval=DAY)
    world.agent.retention = datetime.timedelta(days=7)
    world.boot("managed")
    old = _old_entry(world, tmp_path, OLD, 10, journal=False)
    _through_retention(world, 7)
    young = _old_entry(world, tmp_path, "22222222-2222-4222-8222-222222222222", 2, journal=False)
    world.cycle(DAY)
    assert [m for m, _ in world.effects.calls].count("purge") == 1
    assert not (tmp_path / old).exists() and (tmp_path / young).exists()
    (entry,) = world.journal.quarantine(include_done=True)
    assert entry.uuid == OLD and entry.purged_at is not None


def test_a_dry_run_journals_the_purge_it_would_do_and_deletes_nothing(tmp_path):
    world = SimWorld(tmp_path, dry_run=True, interval=DAY)
    world.agent.retention = datetime.timedelta(days=1)
    world.boot("managed")
    directory = _old_entry(world, tmp_path, OLD, 30, journal=True)
    world.cycle(DAY)  # first sighting
    world.cycle(DAY)
    assert (tmp_path / directory).exists()
    assert ("purge", (OLD, directory)) in world.recorder.calls
    (intent,) = world.journal.history(OLD)
    assert (intent.step, intent.dry_run, intent.detail) == (
        "purge",
        True,
        f"would delete {directory}",
    )
    assert [e.uuid for e in world.journal.quarantine()] == [OLD]


class Crash(BaseException):
    """The agent process dies."""


@pytest.mark.parametrize("gone", [True, False], ids=["directory gone", "directory still there"])
def test_a_purge_a_crash_interrupted_is_reconciled_and_not_repeated(tmp_path, gone):
    world = SimWorld(tmp_path, interval=DAY)
    world.agent.retention = datetime.timedelta(days=7)
    world.boot("managed")
    directory = _old_entry(world, tmp_path, OLD, 10, journal=True)
    _through_retention(world, 7)

    def crash(method: str, uuid: str) -> None:
        raise Crash()

    if gone:
        world.effects.after = crash  # dies right after the directory went
    else:
        world.effects.purge = lambda uuid, d: (_ for _ in ()).throw(Crash())  # type: ignore[method-assign]
    with pytest.raises(Crash):
        world.cycle(DAY)
    world.effects.after = None
    purges = [m for m, _ in world.effects.calls].count("purge")
    (note,) = world.agent.reconcile()
    assert ("completed" in note) is gone
    assert world.journal.open_intents() == []
    assert [m for m, _ in world.effects.calls].count("purge") == purges
    left = [e.uuid for e in world.journal.quarantine()]
    assert left == ([] if gone else [OLD])
    assert (tmp_path / directory).exists() is not gone


@pytest.mark.parametrize("defined", [True, False], ids=["defined again", "not defined"])
def test_a_restore_a_crash_interrupted_is_reconciled_truthfully(tmp_path, defined):
    world = SimWorld(tmp_path)
    gone = _reaped(world)
    world.cycle()  # reaped
    (entry,) = world.journal.quarantine()
    world.journal.begin(gone, Kind.DELETED, "restore", False, world.now)
    if defined:
        world.hv.restore(gone)
    (note,) = world.agent.reconcile()
    assert ("interrupted after the define" in note) is defined
    assert ("interrupted before the define" in note) is not defined
    assert entry.path in note
    assert world.journal.open_intents() == []
    assert [e.uuid for e in world.journal.quarantine()] == [gone]


def test_a_wall_clock_step_forward_never_purges_a_quarantine_the_agent_saw_young(tmp_path):
    """A clock stepped 30 days ahead (an RTC off at boot, then NTP) must not purge at once.

    The purge is the only irreversible step: like grace and reap_delay (docs/design.md
    rule 15) the retention needs the wall-clock delay AND the agent cycles it implies,
    counted from the cycle the agent first saw the entry; rule 7 (the reap is reversible).
    """
    world = SimWorld(tmp_path, interval=3600.0)
    world.agent.retention = datetime.timedelta(days=1)
    gone = _reaped(world)
    world.cycle(3600)  # reaped
    assert [e.uuid for e in world.journal.quarantine()] == [gone]
    world.cycle(30 * 86400)  # the wall clock jumps a month ahead: one cycle, not a day's
    assert "purge" not in [m for m, _ in world.effects.calls]
    assert [e.uuid for e in world.journal.quarantine()] == [gone]
    for _ in range(22):
        world.cycle(3600)
    assert "purge" not in [m for m, _ in world.effects.calls]
    world.cycle(3600)  # the 24th cycle after the reap: a day's worth of cycles
    assert ("purge", gone) in world.effects.calls
    assert world.journal.quarantine() == []
