"""docs/design.md rules 12 and 13 on a simulated host and Nova, with the real agent,
decider, actuator, journal and restore guards.

12: the operator's decision wins — a guest someone started after the agent stopped it,
and every restored guest, is on hold: never acted on again until ``release``.
13: restore never creates a second copy — Nova is asked first; ``--start`` is refused
while Nova runs the server; a plain define warns; ``--force`` overrides.
"""

from __future__ import annotations

import json
import pathlib

import pytest

from nova_orphans import cli, exits
from nova_orphans.act.quarantine.restore import RestoreRefused
from nova_orphans.decide.policy import Action
from nova_orphans.fakes.nova import Fault
from nova_orphans.model import DomainState, Kind
from tests import report_schema
from tests.agent.simworld import OTHER, SimWorld

STOP_ONLY = {Kind.DELETED: Action.STOP, Kind.MISPLACED: Action.STOP}


def stops(world: SimWorld, uuid: str) -> int:
    return sum(1 for m, u in world.effects.calls if (m, u) == ("stop", uuid))


def state(world: SimWorld, uuid: str) -> DomainState:
    return world.hv.domains[uuid].state


def decision_of(result, uuid):
    (decision,) = [d for d in result.plan.decisions if d.finding.uuid == uuid]
    return decision


def conf_for(world_path: pathlib.Path) -> str:
    """A config whose journal is the simulated world's (for the journal commands)."""
    path = world_path / "nova-orphans.conf"
    path.write_text(
        "[DEFAULT]\nhost = cmp-1\n"
        f"[agent]\nstate_dir = {world_path / 'state'}\n"
        f"journal_path = {world_path / 'journal.sqlite'}\n"
        "[nova]\nauth_type = admin_token\nendpoint = http://127.0.0.1:1/v2.1\ntoken = t\n"
    )
    return str(path)


def history_json(capsys, conf: str, uuid: str) -> list[dict]:
    capsys.readouterr()
    assert cli.main(["history", "--config-file", conf, "--uuid", uuid, "--format", "json"]) == 0
    return report_schema.valid(json.loads(capsys.readouterr().out))["events"]


# --- rule 12: started by someone else after the agent stopped it --------------------------


def test_a_guest_started_after_the_agent_stopped_it_is_on_hold_and_never_stopped_again(
    tmp_path, capsys
):
    world = SimWorld(tmp_path, actions=STOP_ONLY)
    world.boot("managed")
    gone = world.orphan("gone", Kind.DELETED)
    world.cycle()
    assert stops(world, gone) == 1 and state(world, gone) is DomainState.SHUTOFF
    stopped_at = world.journal.history(gone)[0].finished_at

    world.start(gone)  # the operator: `virsh start`
    for _ in range(6):
        result = world.cycle(advance=10**5)
        why = decision_of(result, gone).why
        assert decision_of(result, gone).step is None
        assert why.startswith("on hold: started by someone else after the agent stopped it")
        assert f"release with `nova-orphans release {gone}`" in why
    assert stops(world, gone) == 1
    assert state(world, gone) is DomainState.RUNNING

    (hold,) = world.journal.holds().values()
    assert hold.uuid == gone
    assert hold.reason == f"started by someone else after the agent stopped it at {stopped_at}"
    assert world.agent.metrics.on_hold._value.get() == 1
    events = history_json(capsys, conf_for(tmp_path), gone)
    assert [e["event"] for e in events] == ["hold", "step"]
    assert events[0]["reason"] == hold.reason and events[1]["step"] == "stop"
    capsys.readouterr()
    assert cli.main(["history", "--config-file", conf_for(tmp_path), "--wide"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:3] == ["WHEN", "UUID", "KIND"]
    assert f"{gone}  -        hold" in table[1] and table[1].endswith(hold.reason)


def test_a_released_guest_is_acted_on_again_only_after_fresh_sightings(tmp_path, capsys):
    world = SimWorld(tmp_path, actions=STOP_ONLY, sightings_required=3)
    world.boot("managed")
    gone = world.orphan("gone", Kind.DELETED)
    for _ in range(3):
        world.cycle()
    assert stops(world, gone) == 1
    world.start(gone)
    for _ in range(5):  # held cycles do not count as sightings
        world.cycle()
    assert gone not in world.journal.sightings()

    assert world.journal.release(gone, world.now) is not None  # `nova-orphans release`
    assert world.journal.holds() == {}
    for seen in (1, 2):
        result = world.cycle()
        assert decision_of(result, gone).why == f"seen {seen} of 3 cycles"
    assert stops(world, gone) == 1 and state(world, gone) is DomainState.RUNNING
    world.cycle()
    assert stops(world, gone) == 2 and state(world, gone) is DomainState.SHUTOFF
    assert world.agent.metrics.on_hold._value.get() == 0

    # Started again after the second stop: on hold again.
    world.start(gone)
    world.cycle()
    assert gone in world.journal.holds()
    events = [e["event"] for e in history_json(capsys, conf_for(tmp_path), gone)]
    assert events == ["hold", "step", "release", "hold", "step"]


def test_a_guest_the_operator_stopped_or_that_stays_stopped_is_not_put_on_hold(tmp_path):
    world = SimWorld(tmp_path, actions={Kind.DELETED: Action.REAP}, reap_delay=3600.0)
    world.boot("managed")
    gone = world.orphan("gone", Kind.DELETED)
    world.cycle()
    for _ in range(3):
        world.cycle(advance=600)
    assert world.journal.holds() == {}
    for _ in range(100):  # reap_delay (and the cycles it implies) passes: reaped as configured
        world.cycle(advance=600)
        assert world.journal.holds() == {}
        if gone not in world.hv.domains:
            break
    assert gone not in world.hv.domains


def test_the_actuator_refuses_a_guest_put_on_hold_after_the_plan_was_made(tmp_path):
    world = SimWorld(tmp_path)
    world.boot("managed")
    gone = world.orphan("gone", Kind.DELETED)

    def hold_on_lookup(what: str) -> None:
        if what.startswith("lookup"):  # the re-verification's fresh read
            world.journal.hold(gone, "restored from quarantine", world.now)

    world.hv.before_read = hold_on_lookup
    result = world.cycle()
    (outcome,) = result.outcomes
    assert outcome.outcome == "skipped"
    assert "on hold since" in outcome.detail and "restored from quarantine" in outcome.detail
    assert world.touched() == set()
    assert world.journal.history(gone) == []


def test_release_on_the_command_line_ends_the_hold(tmp_path, capsys):
    world = SimWorld(tmp_path, actions=STOP_ONLY)
    world.boot("managed")
    gone = world.orphan("gone", Kind.DELETED)
    world.cycle()
    world.start(gone)
    world.cycle()
    (hold,) = world.journal.holds().values()
    capsys.readouterr()
    assert cli.main(["release", "--config-file", conf_for(tmp_path), gone]) == exits.OK
    out = capsys.readouterr().out
    assert out.startswith(f"released {gone} (on hold since {hold.since.isoformat()}: ")
    assert world.journal.holds() == {}
    assert world.journal.hold_events()[0].released_at is not None


def test_sightings_counted_before_a_hold_came_are_forgotten_on_release(tmp_path):
    world = SimWorld(tmp_path, sightings_required=2)
    world.boot("managed")
    gone = world.orphan("gone", Kind.DELETED)
    world.cycle()

    def hold_on_lookup(what: str) -> None:
        if what.startswith("lookup"):  # a restore's hold lands mid-cycle
            world.journal.hold(gone, "restored from quarantine", world.now)

    world.hv.before_read = hold_on_lookup
    assert [o.outcome for o in world.cycle().outcomes] == ["skipped"]
    world.hv.before_read = None
    world.journal.release(gone, world.now)
    result = world.cycle()
    assert decision_of(result, gone).why == "seen 1 of 2 cycles"
    assert world.touched() == set()


@pytest.mark.parametrize(
    "argv_tail",
    [["11111111-2222-4333-8444-555555555555"], ["not-a-uuid"]],
    ids=["a UUID not on hold", "not a UUID"],
)
def test_release_of_a_guest_not_on_hold_exits_2_and_changes_nothing(tmp_path, capsys, argv_tail):
    world = SimWorld(tmp_path, actions=STOP_ONLY)
    world.boot("managed")
    gone = world.orphan("gone", Kind.DELETED)
    world.cycle()
    world.start(gone)
    world.cycle()
    before = (world.journal.hold_events(), world.journal.sightings(), world.journal.history())
    capsys.readouterr()
    code = cli.main(["release", "--config-file", conf_for(tmp_path), *argv_tail])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == exits.USAGE
    assert len(err) == 1 and err[0].startswith("nova-orphans: usage error")
    assert (world.journal.hold_events(), world.journal.sightings(), world.journal.history()) == (
        before
    )


def test_release_without_a_journal_exits_2_and_creates_none(tmp_path, capsys):
    conf = conf_for(tmp_path)
    code = cli.main(["release", "--config-file", conf, "11111111-2222-4333-8444-555555555555"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == exits.USAGE and len(err) == 1 and "not on hold" in err[0]
    assert not (tmp_path / "journal.sqlite").exists() and not (tmp_path / "state").exists()


# --- rules 12 and 13: restore ---------------------------------------------------------------


def reaped(world: SimWorld, kind: Kind) -> str:
    world.boot("managed")
    uuid = world.orphan(f"reaped-{kind.value}", kind)
    world.cycle()  # stop
    world.cycle()  # reap
    assert uuid not in world.hv.domains and uuid in world.hv.quarantine
    return uuid


def test_a_guest_restored_and_started_is_on_hold_and_never_stopped_again(tmp_path):
    world = SimWorld(tmp_path)
    gone = reaped(world, Kind.DELETED)
    calls = len(world.effects.calls)
    restored = world.restore(gone, start=True)
    assert restored.warning is None  # Nova has only a deleted row: no second copy
    assert state(world, gone) is DomainState.RUNNING
    assert restored.hold.reason.startswith("restored from quarantine and started (reaped ")
    assert world.journal.holds()[gone] == restored.hold
    assert world.journal.quarantine() == []
    for _ in range(6):
        result = world.cycle(advance=10**5)
        assert decision_of(result, gone).why.startswith("on hold: restored from quarantine")
    assert world.effects.calls[calls:] == []
    assert state(world, gone) is DomainState.RUNNING


def test_a_guest_restored_without_start_is_on_hold_too(tmp_path):
    world = SimWorld(tmp_path)
    gone = reaped(world, Kind.UNKNOWN)
    world.restore(gone)
    assert state(world, gone) is DomainState.SHUTOFF
    for _ in range(4):
        world.cycle(advance=10**5)
    assert gone in world.hv.domains and gone in world.journal.holds()


def test_restore_start_of_a_duplicate_whose_server_nova_runs_elsewhere_is_refused(tmp_path):
    world = SimWorld(tmp_path)
    dup = reaped(world, Kind.MISPLACED)
    assert world.nova.server(dup).host == OTHER
    before = (world.journal.quarantine(), world.journal.hold_events(), world.journal.history())
    with pytest.raises(RestoreRefused) as refused:
        world.restore(dup, start=True)
    message = str(refused.value)
    assert f"Nova runs server {dup} on host {OTHER} (status ACTIVE)" in message
    assert "\n" not in message and "--force" in message
    assert dup not in world.hv.domains and dup in world.hv.quarantine
    after = (world.journal.quarantine(), world.journal.hold_events(), world.journal.history())
    assert after == before


def test_a_plain_define_of_such_a_duplicate_warns_and_leaves_it_stopped_on_hold(tmp_path):
    world = SimWorld(tmp_path)
    dup = reaped(world, Kind.MISPLACED)
    restored = world.restore(dup)
    assert restored.warning is not None
    assert restored.warning.startswith(f"Nova runs server {dup} on host {OTHER}")
    assert "defined but not started" in restored.warning
    assert state(world, dup) is DomainState.SHUTOFF
    assert dup in world.journal.holds()


def test_force_starts_the_duplicate_and_the_hold_says_it_was_forced(tmp_path):
    world = SimWorld(tmp_path)
    dup = reaped(world, Kind.MISPLACED)
    restored = world.restore(dup, start=True, force=True)
    assert state(world, dup) is DomainState.RUNNING
    assert "forced: Nova runs server" in restored.hold.reason
    assert restored.warning and restored.warning.startswith("--force")
    for _ in range(3):
        world.cycle(advance=10**5)
    assert state(world, dup) is DomainState.RUNNING  # on hold: the agent leaves it running


@pytest.mark.parametrize("fault", [Fault.SERVER_ERROR, Fault.UNAUTHORIZED, Fault.TIMEOUT])
@pytest.mark.parametrize("start", [True, False])
def test_restore_fails_closed_when_nova_cannot_be_asked_unless_forced(tmp_path, fault, start):
    world = SimWorld(tmp_path)
    gone = reaped(world, Kind.DELETED)
    before = (world.journal.quarantine(), world.journal.hold_events())
    world.nova.inject(fault, times=100)
    with pytest.raises(RestoreRefused, match="Nova could not be asked"):
        world.restore(gone, start=start)
    assert gone not in world.hv.domains
    assert (world.journal.quarantine(), world.journal.hold_events()) == before
    restored = world.restore(gone, start=start, force=True)
    assert gone in world.hv.domains
    assert "forced: Nova could not be asked" in restored.hold.reason


def test_a_failed_define_leaves_no_hold_and_the_entry_restorable(tmp_path):
    world = SimWorld(tmp_path)
    gone = reaped(world, Kind.DELETED)
    world.hv.define(gone, "someone-elses", nova=False)  # the UUID exists in libvirt again
    with pytest.raises(Exception, match="exists in libvirt"):
        world.restore(gone, start=True)
    assert world.journal.hold_events() == []
    assert [e.uuid for e in world.journal.quarantine()] == [gone]


def test_a_plain_restore_of_a_suspended_duplicate_is_refused_it_would_run_it_paused(tmp_path):
    """Bringing back a managed-save image runs QEMU (paused) on the guest's disks.

    For a duplicate whose server Nova runs on another host, that is a second running
    copy with the live one's disks open (shared storage: misplaced guests' files stay
    in place), so without --start it is refused like --start. docs/design.md rule 13.
    """
    world = SimWorld(tmp_path)
    world.boot("managed")
    dup = world.orphan("suspended-dup", Kind.MISPLACED)
    world.hv.suspend(dup)
    world.cycle()  # reap (it is already shut off)
    assert dup in world.hv.quarantine and world.hv.quarantine[dup].kept.managed_save
    before = (world.journal.quarantine(), world.journal.hold_events(), world.journal.history())
    with pytest.raises(RestoreRefused) as refused:
        world.restore(dup)
    message = str(refused.value)
    assert f"Nova runs server {dup} on host {OTHER}" in message and "managed-save" in message
    assert "\n" not in message and "--force" in message
    assert dup not in world.hv.domains and dup in world.hv.quarantine
    after = (world.journal.quarantine(), world.journal.hold_events(), world.journal.history())
    assert after == before
