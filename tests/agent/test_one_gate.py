"""docs/design.md rule 19: one gate, in the actuator, for every destructive step.

Every pair of the policy's and the agent's options (each kind's action at log, stop and
reap, ``stop_shared_volume_at_once``, dry run, the allow and deny lists, retention, the
waits) is played in every world where a brake (docs/design.md rule 3) or an unproven
identity (rule 10) holds, or a look fails, or this process does not hold the live lock
(rule 14): not one destructive call reaches the effects, and the journal begins no step.
"""

from __future__ import annotations

import dataclasses
import datetime
import itertools
import logging
import pathlib
from collections.abc import Callable, Iterator

import pytest

from nova_orphans import audit
from nova_orphans.act.actuator import Actuator, Steps
from nova_orphans.classify.identity import State, Verdict
from nova_orphans.decide import gate
from nova_orphans.decide.plan import Decision, Plan
from nova_orphans.decide.policy import Action, Step
from nova_orphans.fakes.nova import Fault
from nova_orphans.fakes.services import SimCinder, SimNeutron, SimPlacement
from nova_orphans.model import Disk, DomainState, Kind, Selector
from nova_orphans.observe.services.dangers import DangerObserver
from nova_orphans.observe.services.placement import PlacementObserver
from nova_orphans.record.entries import STAMP_FORMAT, QuarantineEntry
from nova_orphans.record.journal import Journal
from tests.agent.simworld import HOST, OTHER, SimWorld

DAY = 86400.0
VOLUME = "0a0a0a0a-0000-4000-8000-00000000000a"
ELSEWHERE = "0b0b0b0b-0000-4000-8000-00000000000b"
OLD_ENTRY = "0c0c0c0c-0000-4000-8000-00000000000c"
#: Every call of the effects that changes a guest or the quarantine (a reap starts with
#: ``quarantine_dir``).
DESTRUCTIVE = frozenset(
    {"stop", "quarantine_dir", "save_xml", "keep_state", "write_manifest", "undefine",
     "move_instance_files", "purge"}
)  # fmt: skip

ACTIONS = (Action.LOG, Action.STOP, Action.REAP)
#: Every option and its values: each kind's action, then the boolean options.
OPTIONS: dict[str, tuple[object, ...]] = {
    "deleted": ACTIONS,
    "unknown": ACTIONS,
    "misplaced": ACTIONS,
    "stop_shared_volume_at_once": (False, True),
    "dry_run": (False, True),
    "allow": (False, True),  # an allow list naming every guest of the world
    "deny": (False, True),  # a deny list naming no guest of the world
    "retention": (False, True),  # one day, with an entry reaped 30 days ago
    "waits": (False, True),  # the cautious defaults: an hour of grace, three sightings
}


def pairwise(options: dict[str, tuple[object, ...]]) -> list[dict[str, object]]:
    """Combinations covering every pair of values of every two options (greedy).

    NOTE: deterministic: the candidates are taken in product order and each chosen one
    is the first that covers the most pairs not yet covered.
    """
    names = list(options)
    pairs = {
        ((a, va), (b, vb))
        for a, b in itertools.combinations(names, 2)
        for va in options[a]
        for vb in options[b]
    }
    candidates = [
        dict(zip(names, values, strict=True)) for values in itertools.product(*options.values())
    ]

    def covers(combo: dict[str, object]) -> set[tuple[tuple[str, object], tuple[str, object]]]:
        return {((a, combo[a]), (b, combo[b])) for a, b in itertools.combinations(names, 2)}

    chosen = []
    while pairs:
        best = max(candidates, key=lambda c: len(covers(c) & pairs))
        chosen.append(best)
        pairs -= covers(best)
    return chosen


COMBINATIONS = pairwise(OPTIONS)


class GateWorld(SimWorld):
    """A SimWorld whose agent asks a simulated Cinder; the options set as ``combo`` says."""

    def __init__(self, tmp_path: pathlib.Path, combo: dict[str, object]) -> None:
        actions = {Kind(k): combo[k] for k in ("deleted", "unknown", "misplaced")}
        waits = (
            dict(grace_period=3600.0, sightings_required=3, reap_delay=DAY)
            if combo["waits"]
            else {}
        )
        super().__init__(
            tmp_path,
            dry_run=bool(combo["dry_run"]),
            actions=actions,
            stop_shared_volume_at_once=combo["stop_shared_volume_at_once"],
            interval=DAY,
            **waits,
        )
        self.combo = combo
        self.cinder = SimCinder()
        self.agent.services = audit.Services(
            PlacementObserver(SimPlacement()), DangerObserver(self.cinder, SimNeutron())
        )
        if combo["deny"]:
            self.agent.deny = Selector(name_patterns=("never-*",))
        if combo["retention"]:
            self.agent.retention = datetime.timedelta(days=1)
            self._quarantined(OLD_ENTRY, age_days=30)

    def shared(self, name: str, kind: Kind = Kind.DELETED) -> str:
        """An orphan of ``kind`` whose volume Cinder attached to another server since."""
        uuid = self.orphan(name, kind)
        disk = Disk("vdb", "disk", "block", f"/dev/disk/by-id/virtio-{VOLUME[:20]}", serial=VOLUME)
        self.hv.change(uuid, disks=(disk,))
        self.cinder.add_volume(VOLUME, "in-use", ((ELSEWHERE, OTHER),))
        return uuid

    def lost(self, name: str) -> str:
        """A server Nova places here that libvirt does not have."""
        return self.nova.boot(HOST, name, at=self.now)

    def allow_all(self) -> None:
        """The allow list, when the combination has one: every guest of the world."""
        if self.combo["allow"]:
            policy = dataclasses.replace(
                self.agent.policy, allow=Selector(uuids=frozenset(self.hv.domains))
            )
            self.agent.policy = policy

    def _quarantined(self, uuid: str, age_days: float) -> None:
        stamp = (self.now - datetime.timedelta(days=age_days)).strftime(STAMP_FORMAT)
        directory = pathlib.Path(self.agent.quarantine_root) / uuid / stamp
        directory.mkdir(parents=True)
        (directory / "domain.xml").write_text("<domain/>")
        self.journal.add_quarantine(
            QuarantineEntry(uuid, stamp, "deleted", str(directory), False, [])
        )

    def destructive_calls(self) -> list[tuple[str, tuple[object, ...]]]:
        calls = self.effects.calls + self.recorder.calls
        return [(m, a) for m, a in calls if m in DESTRUCTIVE]


# --- the worlds: each holds one brake, an unproven identity, a failed look, or no lock --


def orphan_fraction(world: GateWorld) -> None:
    """Three of four Nova guests orphaned (75% > 50%), one a shared-volume danger."""
    world.agent.policy = dataclasses.replace(
        world.agent.policy, brake_min_orphans=2, max_orphan_fraction=0.5
    )
    world.boot("managed")
    world.orphan("archived", Kind.UNKNOWN)  # NOTE: first: archiving takes every deleted row
    world.shared("db")
    world.orphan("gone", Kind.DELETED)


def misplaced_and_lost(world: GateWorld) -> None:
    """Another host's libvirt: this host's one server is missing, a guest is another's."""
    world.lost("mine")
    world.orphan("theirs", Kind.MISPLACED)
    world.shared("db")


def nova_reports_none(world: GateWorld) -> None:
    """Nova places nothing here while libvirt holds Nova guests."""
    world.orphan("archived", Kind.UNKNOWN)
    world.shared("db")


def share_nothing(world: GateWorld) -> None:
    """A wrong cloud: this host's guests have no server of this Nova; its servers look lost."""
    world.orphan("archived", Kind.UNKNOWN)
    world.shared("db")
    world.lost("theirs-1")
    world.lost("theirs-2")


def identity_unproven(world: GateWorld) -> None:
    """Names match but nothing ties the two views: no compute_id, no pinned node UUID
    (docs/design.md rule 10)."""
    (world.state_path / "compute_id").unlink()
    world.boot("managed")
    world.orphan("archived", Kind.UNKNOWN)
    world.shared("db")


def failed_look(world: GateWorld) -> None:
    """Nova answers every request with a 500."""
    world.boot("managed")
    world.orphan("archived", Kind.UNKNOWN)
    world.shared("db")
    world.nova.inject(Fault.SERVER_ERROR, times=10**6)


def lock_not_held(world: GateWorld) -> None:
    """An ordinary world, but this process's journal is not the live agent's (no lock)."""
    world.boot("managed")
    world.orphan("archived", Kind.UNKNOWN)
    world.shared("db")
    path = world.journal.path
    world.journal.close()
    world.journal = world.agent.journal = Journal(path)


WORLDS: dict[str, Callable[[GateWorld], None]] = {
    "orphan fraction": orphan_fraction,
    "misplaced and lost": misplaced_and_lost,
    "Nova reports none": nova_reports_none,
    "the views share nothing": share_nothing,
    "identity unproven": identity_unproven,
    "a failed look": failed_look,
    "the live lock not held": lock_not_held,
}


def cases() -> Iterator[object]:
    for world_name in WORLDS:
        for index, combo in enumerate(COMBINATIONS):
            yield pytest.param(world_name, combo, id=f"{world_name}-{index}")


def test_the_combinations_cover_every_pair_of_options():
    names = list(OPTIONS)
    for a, b in itertools.combinations(names, 2):
        seen = {(c[a], c[b]) for c in COMBINATIONS}
        assert seen == set(itertools.product(OPTIONS[a], OPTIONS[b])), (a, b)


@pytest.mark.parametrize(("world_name", "combo"), list(cases()))
def test_no_option_combination_takes_a_step_past_the_gate(tmp_path, world_name, combo):
    world = GateWorld(tmp_path, combo)
    WORLDS[world_name](world)
    world.allow_all()
    before = {u: d.state for u, d in world.hv.domains.items()}
    for _ in range(3):  # past the waits, the sightings and the retention's cycles
        result = world.cycle(DAY)
        assert not [o for o in result.outcomes if o.outcome == "done"]
    assert world.destructive_calls() == []
    assert world.journal.history() == []
    assert {u: d.state for u, d in world.hv.domains.items()} == before


def test_the_same_options_act_once_the_gate_is_clear(tmp_path):
    """The enumeration can fail: lift the brake of the orphan-fraction world and the
    at-once option stops the shared-volume guest, every action `log`, as rule 18 says."""
    combo = {name: values[0] for name, values in OPTIONS.items()}
    combo["stop_shared_volume_at_once"] = True
    world = GateWorld(tmp_path, combo)
    orphan_fraction(world)
    world.agent.policy = dataclasses.replace(world.agent.policy, max_orphan_fraction=1.0)
    world.cycle(DAY)
    assert [m for m, _ in world.destructive_calls()] == ["stop"]


def test_a_log_only_policy_with_at_once_meets_the_brake_that_an_acting_one_meets(tmp_path):
    """The reproduced case: stop_shared_volume_at_once, every action `log`, the fraction
    brake holding. The stop is withheld and the gate stays closed; the brake is an error."""
    combo = {name: values[0] for name, values in OPTIONS.items()}
    combo["stop_shared_volume_at_once"] = True
    world = GateWorld(tmp_path, combo)
    orphan_fraction(world)
    result = world.cycle(DAY)
    assert result.plan is not None and "max_orphan_fraction" in (result.plan.brake or "")
    assert result.plan.steps == []
    assert world.destructive_calls() == []


# --- the actuator itself refuses: a plan that carries steps past a closed gate --------


def _plan_with_every_step(world: SimWorld) -> Plan:
    """A plan (made by hand: no decider would) that stops one guest and reaps another."""
    running = world.orphan("running", Kind.DELETED)
    stopped = world.orphan("stopped", Kind.DELETED)
    world.hv.change(stopped, state=DomainState.SHUTOFF)
    report = world.agent.cycle()  # a clear cycle, only to get the findings
    by_uuid = {f.uuid: f for f in report.report.findings}
    return Plan(
        [
            Decision(by_uuid[running], Action.STOP, Step.STOP, "by hand"),
            Decision(by_uuid[stopped], Action.REAP, Step.REAP, "by hand"),
        ]
    )


CLOSED = [
    gate.CLOSED,
    gate.judge(
        identity=Verdict(HOST, State.UNPROVEN, (), "identity not proven: nothing tied them"),
        brake="identity not proven: nothing tied them",
        holds_lock=True,
    ),
    gate.judge(
        identity=Verdict(HOST, State.VERIFIED, (), "identity verified"),
        brake="the two views share nothing",
        holds_lock=True,
    ),
    gate.judge(
        identity=Verdict(HOST, State.VERIFIED, (), "identity verified"),
        brake=None,
        holds_lock=False,
    ),
]


@pytest.mark.parametrize("verdict", CLOSED, ids=["none", "unproven", "brake", "no lock"])
def test_the_actuator_refuses_every_step_while_the_gate_is_closed(tmp_path, verdict, caplog):
    world = SimWorld(tmp_path, actions={Kind.DELETED: Action.REAP}, max_actions_per_cycle=0)
    world.boot("managed")
    plan = _plan_with_every_step(world)
    world.effects.calls.clear()
    actuator = Actuator(
        world.effects, None, world.journal, lambda: world.now, dry_run=False, verdict=verdict
    )
    with caplog.at_level(logging.WARNING, logger="nova_orphans.act.actuator"):
        outcomes = actuator.execute(plan)
    assert [(o.step, o.outcome) for o in outcomes] == [
        (Step.STOP, "refused"),
        (Step.REAP, "refused"),
    ]
    assert all(verdict.why in o.detail for o in outcomes)
    assert world.effects.calls == []
    assert world.journal.history() == []
    assert "action=stop dry_run=False outcome=refused" in caplog.text


@pytest.mark.parametrize("verdict", CLOSED, ids=["none", "unproven", "brake", "no lock"])
def test_the_actuator_refuses_a_purge_while_the_gate_is_closed(tmp_path, verdict):
    world = SimWorld(tmp_path, interval=DAY)
    _reaped(world)
    (entry,) = world.journal.quarantine()
    world.effects.calls.clear()
    actuator = Actuator(
        world.effects, None, world.journal, lambda: world.now, dry_run=False, verdict=verdict
    )
    with world.journal.quarantine_held(0):
        done = actuator.purge(entry, world.agent.quarantine_root, lambda: None)
    assert (done.step, done.outcome) == (Step.PURGE, "refused")
    assert world.effects.calls == []
    assert [i.step for i in world.journal.history()].count("purge") == 0


def test_the_verdict_is_clear_only_when_every_condition_holds():
    verified = Verdict(HOST, State.VERIFIED, (), "identity verified")
    assert gate.judge(identity=verified, brake=None, holds_lock=True).clear
    unproven = Verdict(HOST, State.UNPROVEN, (), "identity not proven: why")
    for verdict in (
        gate.judge(identity=unproven, brake=None, holds_lock=True),
        gate.judge(identity=verified, brake="a brake", holds_lock=True),
        gate.judge(identity=verified, brake=None, holds_lock=False),
    ):
        assert not verdict.clear and verdict.why
    said = gate.judge(identity=unproven, brake=unproven.reason, holds_lock=False).why
    assert said.count("identity not proven") == 1  # the plan's brake on it is said once
    assert "live agent's lock" in said


def _reaped(world: SimWorld) -> str:
    """A stopped ``deleted`` guest, reaped in the next cycle."""
    world.boot("managed")
    gone = world.orphan("gone", Kind.DELETED)
    world.hv.change(gone, state=DomainState.SHUTOFF)
    world.cycle(DAY)
    assert gone not in world.hv.domains
    return gone


def test_a_purge_is_a_step_of_the_same_path(tmp_path, caplog):
    """One journaled step, one log line, one count in the actions series (rule 19)."""
    world = SimWorld(tmp_path, interval=DAY)
    world.agent.retention = datetime.timedelta(days=1)
    gone = _reaped(world)
    with caplog.at_level(logging.INFO, logger="nova_orphans.act.actuator"):
        for _ in range(3):  # the entry's retention: its age and its cycles
            world.cycle(DAY)
    purges = [i for i in world.journal.history() if i.step == "purge"]
    assert [(i.uuid, i.outcome) for i in purges] == [(gone, "done")]
    lines = [r.getMessage() for r in caplog.records if "action=purge" in r.getMessage()]
    assert len(lines) == 1
    assert lines[0].startswith(f"step uuid={gone} kind=deleted action=purge dry_run=False")
    counted = world.agent.metrics.registry.get_sample_value(
        "nova_orphans_actions_total", {"action": "purge", "outcome": "done", "dry_run": "false"}
    )
    assert counted == 1


def test_a_restore_is_a_step_of_the_same_path(tmp_path, caplog):
    world = SimWorld(tmp_path, interval=DAY)
    gone = _reaped(world)
    with caplog.at_level(logging.INFO, logger="nova_orphans.act.actuator"):
        world.restore(gone)
    lines = [r.getMessage() for r in caplog.records if "action=restore" in r.getMessage()]
    assert len(lines) == 1
    assert lines[0].startswith(f"step uuid={gone} kind=deleted action=restore dry_run=False")
    assert "outcome=done" in lines[0]
    restores = [i for i in world.journal.history() if i.step == "restore"]
    assert [(i.uuid, i.outcome) for i in restores] == [(gone, "done")]
    assert gone in world.hv.domains


def test_a_restore_outside_the_quarantine_lock_is_refused_and_changes_nothing(tmp_path):
    world = SimWorld(tmp_path, interval=DAY)
    gone = _reaped(world)
    (entry,) = world.journal.quarantine()
    steps = Steps(world.journal, lambda: world.now, gate.operator_command("restore"))

    def define() -> str:
        world.hv.restore(gone)
        return "restored"

    done = steps.take(entry.uuid, Kind.DELETED, Step.RESTORE, define)
    assert (done.outcome, done.detail) == (
        "refused",
        "the gate is closed: the quarantine's lock is not held",
    )
    assert gone not in world.hv.domains
    assert [i.step for i in world.journal.history()].count("restore") == 0
