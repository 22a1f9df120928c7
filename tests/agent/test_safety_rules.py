"""One test (at least) per safety rule of docs/design.md, on a simulated host and Nova.

Each would fail if its rule were broken.
"""

from __future__ import annotations

import dataclasses
import datetime

import pytest

from nova_orphans.decide.policy import Action
from nova_orphans.fakes.host import unreachable
from nova_orphans.fakes.nova import Fault
from nova_orphans.model import Disk, Kind
from nova_orphans.record.entries import STAMP_FORMAT, QuarantineEntry
from tests.agent.simworld import HOST, OTHER, SimWorld

# --- rule 1: nothing Nova manages here, nothing protected ---------------------------------


def test_guests_nova_manages_or_protects_are_never_touched(tmp_path):
    world = SimWorld(tmp_path)
    managed = world.boot("managed")
    soft = world.boot("soft")
    world.nova.soft_delete(soft, at=world.now)
    busy = world.boot("busy")
    world.nova.set_task_state(busy, "migrating", at=world.now)
    resized = world.boot("resized")
    world.nova.resize(resized, OTHER, at=world.now)  # awaits confirmation
    migrating = world.boot("migrating")
    world.nova.live_migrate(migrating, OTHER, finish=False, at=world.now)
    for _ in range(5):
        world.cycle(advance=10**6)
    assert world.touched() == set()
    assert set(world.hv.domains) == {managed, soft, busy, resized, migrating}


# --- rule 2: foreign and lost, never ------------------------------------------------------


def test_foreign_and_lost_are_never_acted_on_whatever_the_config_says(tmp_path):
    every_kind = {kind: Action.REAP for kind in Kind}
    world = SimWorld(tmp_path, actions=every_kind)
    world.hv.define("99999999-9999-4999-8999-999999999999", "operator-vm", nova=False)
    lost = world.nova.boot(HOST, "lost", at=world.now)
    world.boot("managed")
    for _ in range(5):
        result = world.cycle(advance=10**6)
    kinds = {f.kind for f in result.report.findings}
    assert kinds == {Kind.FOREIGN, Kind.LOST}
    assert world.effects.calls == []
    assert lost in {f.uuid for f in result.report.findings}


# --- rule 3: fail closed, and the brakes --------------------------------------------------


@pytest.mark.parametrize(
    "fault",
    [Fault.SERVER_ERROR, Fault.UNAUTHORIZED, Fault.TIMEOUT, Fault.DROP_PAGE, Fault.REPEAT_PAGE],
)
def test_a_failing_nova_makes_the_cycle_do_nothing(tmp_path, fault):
    world = SimWorld(tmp_path)
    world.boot("managed")
    world.orphan("gone", Kind.DELETED)
    world.nova.inject(fault, times=100)
    result = world.cycle()
    if fault in (Fault.DROP_PAGE, Fault.REPEAT_PAGE) and result.error is None:
        # A one-page listing cannot show paging faults; the answer must still be honest.
        assert {f.kind for f in result.report.findings} <= {Kind.DELETED}
    else:
        assert result.error
        assert result.exit_code == 1
    assert world.effects.calls == [] or result.error is None


@pytest.mark.parametrize("down", ["cell1", "cell2"], ids=["the host's cell", "another cell"])
def test_a_cell_nova_cannot_reach_makes_the_cycle_do_nothing(tmp_path, down):
    # docs/design.md rule 17: Nova's listings silently skip a down cell.
    world = SimWorld(tmp_path)
    world.nova.computes[OTHER].cell = "cell2"
    world.boot("managed")
    gone = world.orphan("gone", Kind.UNKNOWN)  # archived: Nova has no record of it
    world.nova.down_cells.add(down)
    result = world.cycle()
    assert result.error and "Nova could not reach a cell" in result.error
    assert result.exit_code == 1
    assert world.effects.calls == []
    registry = world.agent.metrics.registry
    assert registry.get_sample_value("nova_orphans_cycles_aborted_total", {"reason": "nova"}) == 1
    world.nova.down_cells.clear()
    world.cycle()
    assert world.touched() == {gone}


def test_unreachable_libvirt_makes_the_cycle_do_nothing(tmp_path):
    world = SimWorld(tmp_path)
    world.orphan("gone", Kind.DELETED)
    world.hv.before_read = unreachable("qemu:///system")
    result = world.cycle()
    assert result.error and "libvirt" in result.error
    assert world.effects.calls == []


def test_nova_saying_no_servers_here_while_libvirt_has_nova_guests_brakes(tmp_path):
    world = SimWorld(tmp_path)
    gone = [world.orphan(f"gone-{i}", Kind.DELETED) for i in range(3)]
    result = world.cycle()
    assert result.plan.brake and "no servers" in result.plan.brake
    assert world.effects.calls == []
    assert {f.uuid for f in result.report.findings} == set(gone)


def test_too_many_orphans_at_once_brakes(tmp_path):
    world = SimWorld(tmp_path, brake_min_orphans=2, max_orphan_fraction=0.5)
    world.boot("managed")
    for i in range(3):
        world.orphan(f"gone-{i}", Kind.DELETED)
    result = world.cycle()
    assert result.plan.brake and "max_orphan_fraction" in result.plan.brake
    assert world.effects.calls == []


# --- rule 4: grace and sightings ----------------------------------------------------------


def test_a_deleted_guest_inside_grace_is_only_logged(tmp_path):
    world = SimWorld(tmp_path, grace_period=3600.0, interval=600.0)
    world.boot("managed")
    gone = world.orphan("gone", Kind.DELETED)
    for _ in range(6):
        world.cycle(advance=600)  # first seen 10 minutes after the deletion; 50 minutes on
    assert world.touched() == set()
    world.cycle(advance=600)  # the grace's 6 cycles since the first sighting (rule 15)
    assert gone in world.touched()


def test_a_finding_needs_consecutive_sightings(tmp_path):
    world = SimWorld(tmp_path, sightings_required=3)
    world.boot("managed")
    gone = world.orphan("gone", Kind.UNKNOWN)
    world.cycle()
    world.cycle()
    assert world.touched() == set()
    world.cycle()
    assert gone in world.touched()


def test_a_missed_cycle_restarts_the_sightings(tmp_path):
    world = SimWorld(tmp_path, sightings_required=2)
    world.boot("managed")
    gone = world.orphan("gone", Kind.UNKNOWN)
    world.cycle()
    world.nova.inject(Fault.SERVER_ERROR, times=1)  # this cycle fails: nothing is seen
    world.cycle()
    assert world.touched() == set()
    world.cycle()
    # A failed cycle does not forget, but does not count either: two real sightings now.
    assert gone in world.touched()


# --- rule 5: re-verify right before each step ---------------------------------------------


def test_a_server_restored_between_scan_and_action_is_not_touched(tmp_path):
    world = SimWorld(tmp_path)
    world.boot("managed")
    soft = world.boot("soft")
    world.nova.soft_delete(soft, at=world.now)
    world.nova.restore(soft, at=world.now)
    world.nova.local_delete(soft, at=world.now)  # now deleted: an orphan on the scan

    def restore_on_lookup(what: str) -> None:
        if what.startswith("lookup"):
            world.nova.server(soft).deleted = False  # the operator undid it in Nova
            world.nova.server(soft).vm_state = "active"
            world.nova.server(soft).status = "ACTIVE"

    world.hv.before_read = restore_on_lookup
    result = world.cycle()
    assert [o.outcome for o in result.outcomes] == ["skipped"]
    assert world.touched() == set()
    assert soft not in world.journal.sightings()


def test_a_migration_starting_between_scan_and_action_skips_the_step(tmp_path):
    world = SimWorld(tmp_path)
    world.boot("managed")
    dup = world.orphan("dup", Kind.MISPLACED)

    def migrate_back(what: str) -> None:
        if what.startswith("lookup"):
            world.nova.live_migrate(dup, HOST, finish=False, at=world.now)

    world.hv.before_read = migrate_back
    result = world.cycle()
    assert [o.outcome for o in result.outcomes] == ["skipped"]
    assert world.touched() == set()


def test_a_domain_that_changed_state_between_scan_and_action_is_skipped(tmp_path):
    world = SimWorld(tmp_path)
    world.boot("managed")
    gone = world.orphan("gone", Kind.DELETED)

    def start_job(what: str) -> None:
        if what.startswith("lookup"):
            world.hv.change(gone, job_active=True)

    world.hv.before_read = start_job
    result = world.cycle()
    assert [o.outcome for o in result.outcomes] == ["skipped"]
    assert "state or job changed" in result.outcomes[0].detail


# --- rule 6: cap and staged escalation ----------------------------------------------------


def test_at_most_max_actions_per_cycle(tmp_path):
    world = SimWorld(tmp_path, max_actions_per_cycle=2, actions={Kind.DELETED: Action.STOP})
    for i in range(6):
        world.boot(f"managed-{i}")
    gone = {world.orphan(f"gone-{i}", Kind.DELETED) for i in range(5)}
    counts = []
    for _ in range(3):
        counts.append(len(world.cycle().outcomes))
    assert counts == [2, 2, 1]
    assert world.touched() == gone


def test_reap_stops_first_and_reaps_only_after_reap_delay(tmp_path):
    world = SimWorld(tmp_path, reap_delay=3600.0, interval=1800.0)
    world.boot("managed")
    gone = world.orphan("gone", Kind.DELETED)
    world.cycle()
    assert world.effects.calls == [("stop", gone)]
    world.cycle(advance=1800)
    assert gone in world.hv.domains  # stopped, still defined
    world.cycle(advance=1801)
    assert gone not in world.hv.domains
    assert gone in world.hv.quarantine


def test_action_stop_leaves_the_guest_stopped_and_defined(tmp_path):
    world = SimWorld(tmp_path, actions={Kind.DELETED: Action.STOP})
    world.boot("managed")
    gone = world.orphan("gone", Kind.DELETED)
    for _ in range(4):
        world.cycle(advance=10**6)
    assert [m for m, u in world.effects.calls if u == gone] == ["stop"]
    assert gone in world.hv.domains and gone in world.hv.files


# --- rule 7: reap is reversible; files only for deleted/unknown -----------------------------


def test_reap_quarantines_xml_and_files_of_deleted_and_unknown_and_restore_brings_them_back(
    tmp_path,
):
    world = SimWorld(tmp_path)
    world.boot("managed")
    gone = world.orphan("gone", Kind.DELETED)
    archived = world.orphan("archived", Kind.UNKNOWN)
    xml = {u: world.hv.xml[u] for u in (gone, archived)}
    world.cycle()
    world.cycle()
    for uuid in (gone, archived):
        assert uuid not in world.hv.domains and uuid not in world.hv.files
        world.hv.restore(uuid)
        assert world.hv.xml[uuid] == xml[uuid]
        assert world.hv.files[uuid] == f"disk-of-{uuid}"
    assert {e.uuid for e in world.journal.quarantine()} == {gone, archived}


def test_a_misplaced_duplicate_is_undefined_but_its_files_are_never_touched(tmp_path):
    world = SimWorld(tmp_path)
    world.boot("managed")
    dup = world.orphan("dup", Kind.MISPLACED)
    world.cycle()
    world.cycle()
    assert dup not in world.hv.domains
    assert world.hv.files[dup] == f"disk-of-{dup}"
    assert ("move_instance_files", dup) not in world.effects.calls


# --- rule 8: intents before, outcomes after, reconciliation -------------------------------


def test_every_step_is_journaled_before_and_after(tmp_path):
    world = SimWorld(tmp_path)
    world.boot("managed")
    gone = world.orphan("gone", Kind.DELETED)
    seen_open = []
    world.effects.after = lambda method, uuid: seen_open.append(
        [i.step for i in world.journal.open_intents()]
    )
    world.cycle()
    world.cycle()
    assert seen_open and all(open_ for open_ in seen_open)  # the intent existed during the step
    assert world.journal.open_intents() == []
    assert [(i.step, i.outcome) for i in reversed(world.journal.history(gone))] == [
        ("stop", "done"),
        ("reap", "done"),
    ]


def test_a_failed_step_is_journaled_as_failed(tmp_path):
    world = SimWorld(tmp_path)
    world.boot("managed")
    gone = world.orphan("gone", Kind.DELETED)
    world.effects.fail.add("stop")
    result = world.cycle()
    assert [o.outcome for o in result.outcomes] == ["failed"]
    assert world.journal.history(gone)[0].outcome == "failed"


class Crash(BaseException):
    """The agent process dies (not an Exception: nothing may catch it)."""


@pytest.mark.parametrize("crash_after", ["stop", "save_xml", "undefine"])
def test_a_crash_mid_step_is_reconciled_on_restart_and_never_repeated(tmp_path, crash_after):
    world = SimWorld(tmp_path, reap_delay=0.0)
    world.boot("managed")
    gone = world.orphan("gone", Kind.DELETED)
    if crash_after != "stop":
        world.cycle()  # stopped; the reap comes next
    calls_before = len(world.effects.calls)

    def crash(method: str, uuid: str) -> None:
        if method == crash_after:
            raise Crash()

    world.effects.after = crash
    with pytest.raises(Crash):
        world.cycle()
    assert len(world.journal.open_intents()) == 1
    world.effects.after = None
    notes = world.agent.reconcile()
    assert len(notes) == 1 and gone in notes[0]
    assert world.journal.open_intents() == []
    history = world.journal.history(gone)
    assert history[0].outcome == "reconciled"
    # The interrupted call was not repeated by reconciliation.
    assert len(world.effects.calls) == calls_before + len(world.effects.calls[calls_before:])
    assert gone not in world.journal.sightings()


# --- rule 15: time: the wall-clock delay and the cycles it implies ------------------------

DAY = 86400.0


def test_a_wall_clock_step_forward_does_not_end_the_grace(tmp_path):
    world = SimWorld(tmp_path, interval=600.0, grace_period=3600.0)
    world.boot("managed")
    gone = world.orphan("gone", Kind.DELETED)
    world.cycle(advance=600)  # first seen; the grace is 6 cycles from here
    world.cycle(advance=DAY)  # NTP steps the clock a day forward
    for _ in range(4):
        world.cycle(advance=600)
    assert world.touched() == set()
    (waiting,) = world.cycle(advance=0.0).plan.decisions  # a re-run right after: no count
    assert waiting.why.startswith("inside grace_period: 5 of 6 cycles"), waiting.why
    world.cycle(advance=600)
    assert gone in world.touched()


def test_a_wall_clock_step_forward_does_not_end_reap_delay(tmp_path):
    world = SimWorld(tmp_path, interval=600.0, reap_delay=3600.0)
    world.boot("managed")
    gone = world.orphan("gone", Kind.DELETED)
    world.cycle(advance=600)
    assert world.effects.calls == [("stop", gone)]
    world.cycle(advance=DAY)  # one cycle seen stopped of the 6 reap_delay implies
    for _ in range(4):
        world.cycle(advance=600)
    assert gone in world.hv.domains  # stopped, still defined, restartable in place
    world.cycle(advance=600)
    assert gone not in world.hv.domains and gone in world.hv.quarantine


def test_a_wall_clock_stepped_backwards_never_counts_as_a_sighting(tmp_path):
    world = SimWorld(tmp_path, interval=600.0, sightings_required=3)
    world.boot("managed")
    gone = world.orphan("gone", Kind.UNKNOWN)
    world.cycle(advance=600)
    world.cycle(advance=-3600)  # NTP steps the clock an hour back
    assert world.journal.sightings()[gone].consecutive == 1
    world.cycle(advance=60)  # less than half an interval after the last sighting
    assert world.journal.sightings()[gone].consecutive == 1
    for _ in range(5):
        world.cycle(advance=600)
    # The cycles count again, but no delay ends before the clock is back past the first
    # sighting: the first sighting is never moved back.
    assert world.journal.sightings()[gone].consecutive == 6
    assert world.touched() == set()
    world.cycle(advance=600)
    assert gone in world.touched()


def test_a_crash_looping_agent_does_not_run_through_the_sightings(tmp_path):
    world = SimWorld(tmp_path, interval=600.0, sightings_required=3)
    world.boot("managed")
    gone = world.orphan("gone", Kind.UNKNOWN)
    world.cycle(advance=600)
    for _ in range(40):  # systemd restarts it every 30 s; each start runs a cycle at once
        world.agent = dataclasses.replace(world.agent)
        world.cycle(advance=30)
    assert world.touched() == set()
    assert world.journal.sightings()[gone].consecutive == 1
    world.cycle(advance=600)
    world.cycle(advance=600)
    assert gone in world.touched()


# --- dry run decides exactly what a live run decides --------------------------------------


def _decisions(result):
    return [(d.finding.uuid, d.finding.kind, d.step, d.why) for d in result.plan.decisions]


def test_dry_run_decisions_equal_live_decisions(tmp_path):
    results = {}
    for dry_run in (False, True):
        world = SimWorld(tmp_path / str(dry_run), dry_run=dry_run, max_actions_per_cycle=2)
        world.boot("managed")
        world.boot("other-managed")
        for kind in (Kind.DELETED, Kind.UNKNOWN, Kind.MISPLACED):
            world.orphan(f"orphan-{kind.value}", kind)
        world.hv.define("99999999-9999-4999-8999-999999999999", "operator-vm", nova=False)
        results[dry_run] = world.cycle()
        if dry_run:
            assert world.touched() == set()
            assert all(o.dry_run for o in results[dry_run].outcomes)
    assert _decisions(results[True]) == _decisions(results[False])
    assert [o.uuid for o in results[True].outcomes] == [o.uuid for o in results[False].outcomes]


# --- quarantine retention ------------------------------------------------------------------

OLD_UUID = "11111111-1111-4111-8111-111111111111"


def _quarantined(world: SimWorld, root, uuid: str, age_days: float):
    """A quarantine directory the journal knows, reaped ``age_days`` before the world's now."""
    stamp = (world.now - datetime.timedelta(days=age_days)).strftime(STAMP_FORMAT)
    directory = root / uuid / stamp
    directory.mkdir(parents=True)
    (directory / "domain.xml").write_text("<domain/>")
    world.journal.add_quarantine(QuarantineEntry(uuid, stamp, "deleted", str(directory), False, []))
    return directory


def test_quarantine_entries_older_than_retention_are_purged_and_younger_kept(tmp_path):
    """Rule 15 for the one irreversible step: the retention's age AND its cycles.

    An entry first seen 10 days old (its age is the clock's word) still waits the
    retention's 7 cycles; one the agent reaped later is kept until its own retention.
    """
    day = 86400.0
    world = SimWorld(tmp_path, interval=day)
    world.agent.retention = datetime.timedelta(days=7)
    world.boot("managed")
    root = tmp_path / "quarantine"
    old = _quarantined(world, root, "11111111-1111-4111-8111-111111111111", 10)
    young = None
    for cycle in range(7):  # the first sighting, then 6 of the 7 cycles
        world.cycle(day)
        assert old.exists()
        if cycle == 2:
            young = _quarantined(world, root, "22222222-2222-4222-8222-222222222222", 0)
    world.cycle(day)
    assert young is not None
    assert not old.exists() and young.exists()
    assert [e.uuid for e in world.journal.quarantine()] == [young.parent.name]


def test_a_dry_run_never_purges_the_quarantine(tmp_path):
    day = 86400.0
    world = SimWorld(tmp_path, dry_run=True, interval=day)
    world.agent.retention = datetime.timedelta(days=1)
    world.boot("managed")
    directory = _quarantined(world, tmp_path / "quarantine", OLD_UUID, 30)
    for _ in range(3):  # well past the retention's age and its cycles
        world.cycle(day)
    assert ("purge", (OLD_UUID, str(directory))) in world.recorder.calls  # it would have
    assert directory.exists()


def test_a_failed_file_move_still_leaves_the_reaped_guest_restorable(tmp_path):
    world = SimWorld(tmp_path)
    world.boot("managed")
    gone = world.orphan("gone", Kind.DELETED)
    world.cycle()  # stopped
    world.effects.fail.add("move_instance_files")
    result = world.cycle()
    assert [o.outcome for o in result.outcomes] == ["failed"]
    (entry,) = world.journal.quarantine()
    assert entry.uuid == gone and not entry.files_moved
    world.hv.restore(gone)
    assert gone in world.hv.domains and world.hv.files[gone] == f"disk-of-{gone}"


def test_leftovers_are_judged_against_the_configured_instances_path(tmp_path):
    world = SimWorld(tmp_path)
    world.agent.instances_path = "/srv/nova/instances"
    world.boot("managed")
    gone = world.orphan("gone", Kind.DELETED)
    own = Disk("vda", "disk", "file", f"/srv/nova/instances/{gone}/disk")
    volume = Disk("vdb", "disk", "block", "/dev/mapper/volume-1")
    world.hv.change(gone, disks=(own, volume))
    world.cycle()
    world.cycle()
    (entry,) = world.journal.quarantine()
    assert entry.leftovers == ["disk vdb: block device /dev/mapper/volume-1 (LVM, iSCSI or FC)"]
