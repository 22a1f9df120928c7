"""docs/design.md rule 18: only a shared volume may cut the wait short, and only when opted in.

A ``deleted`` guest holding a Cinder volume another server is attached to is stopped in the
first cycle when ``stop_shared_volume_at_once`` is on — through the same actuator, its
re-verification (which asks Cinder again) and the journal — and never otherwise.
"""

from __future__ import annotations

import logging
import pathlib

import pytest

from nova_orphans import audit
from nova_orphans.decide.policy import Action
from nova_orphans.fakes.services import SimCinder, SimNeutron, SimPlacement
from nova_orphans.model import DangerKind, Disk, Interface, Kind, Selector, Usage
from nova_orphans.observe.services.dangers import DangerObserver
from nova_orphans.observe.services.placement import PlacementObserver
from tests.agent.simworld import OTHER, SimWorld

VOLUME = "0a0a0a0a-0000-4000-8000-00000000000a"
ELSEWHERE = "0b0b0b0b-0000-4000-8000-00000000000b"
#: The cautious waits: an hour of grace, three sightings, every step stop only.
WAITS = dict(
    actions={Kind.DELETED: Action.STOP, Kind.UNKNOWN: Action.STOP, Kind.MISPLACED: Action.STOP},
    grace_period=3600.0,
    sightings_required=3,
    reap_delay=86400.0,
)


class World(SimWorld):
    """A SimWorld whose agent asks a simulated Cinder and Neutron."""

    def __init__(self, tmp_path: pathlib.Path, **policy: object) -> None:
        super().__init__(tmp_path, **{**WAITS, **policy})
        self.cinder, self.neutron = SimCinder(), SimNeutron()
        self.agent.services = audit.Services(
            PlacementObserver(SimPlacement()), DangerObserver(self.cinder, self.neutron)
        )
        self.boot("managed")

    def with_volume(self, name: str, kind: Kind) -> str:
        """An orphan of ``kind`` whose data volume Cinder attached to another server since."""
        uuid = self.orphan(name, kind)
        disk = Disk("vdb", "disk", "block", f"/dev/disk/by-id/virtio-{VOLUME[:20]}", serial=VOLUME)
        self.hv.change(uuid, disks=(disk,))
        self.cinder.add_volume(VOLUME, "in-use", ((ELSEWHERE, OTHER),))
        return uuid

    def stops(self) -> list[str]:
        return [u for m, u in self.effects.calls if m == "stop"]


def test_off_by_default_a_shared_volume_waits_like_any_orphan(tmp_path, caplog):
    world = World(tmp_path)
    guest = world.with_volume("db", Kind.DELETED)
    with caplog.at_level(logging.WARNING, logger="nova_orphans.agent"):
        result = world.cycle()
    assert f"danger uuid={guest} danger=shared-volume: volume {VOLUME} is attached" in caplog.text
    (finding,) = result.report.findings
    assert [d.kind.value for d in finding.dangers] == ["shared-volume"]
    assert world.stops() == []
    (decision,) = result.plan.decisions
    assert decision.why.startswith("inside grace_period")
    assert result.exit_code == 5  # found, nothing done, a shared volume: the worst
    assert guest in world.hv.domains


@pytest.mark.parametrize("configured", [Action.LOG, Action.STOP, Action.REAP])
def test_on_the_guest_is_stopped_in_the_first_cycle_through_the_journal(tmp_path, configured):
    world = World(tmp_path, stop_shared_volume_at_once=True, actions={Kind.DELETED: configured})
    guest = world.with_volume("db", Kind.DELETED)
    result = world.cycle()
    assert world.stops() == [guest]
    (outcome,) = result.outcomes
    assert (outcome.step.value, outcome.outcome) == ("stop", "done")
    (intent,) = [i for i in world.journal.history() if i.uuid == guest]
    assert (intent.step, intent.outcome) == ("stop", "done")
    # Re-verification asked Cinder again, right before the stop.
    assert world.cinder.requests == [f"/volumes/{VOLUME}"] * 2
    # Only a stop: the reap still waits for reap_delay (the default, a day).
    world.cycle()
    assert [m for m, u in world.effects.calls if u == guest] == ["stop"]


@pytest.mark.parametrize(
    "cinder_now",
    [
        pytest.param(lambda c: c.volumes.pop(VOLUME), id="volume deleted"),
        pytest.param(lambda c: c.add_volume(VOLUME, "in-use", ()), id="detached elsewhere"),
        pytest.param(lambda c: setattr(c, "fail", 500), id="Cinder fails"),
        pytest.param(lambda c: setattr(c, "fail", "timeout"), id="Cinder times out"),
    ],
)
def test_reverification_asks_cinder_again_and_refuses_when_the_danger_is_not_confirmed(
    tmp_path, cinder_now
):
    world = World(tmp_path, stop_shared_volume_at_once=True)
    guest = world.with_volume("db", Kind.DELETED)
    real_facts = world.agent.services.dangers.look
    calls = []

    def facts_then_change(findings):
        found = real_facts(findings)
        calls.append(found)
        if len(calls) == 1:  # the cycle's look saw the shared volume; then Cinder changed
            cinder_now(world.cinder)
        return found

    world.agent.services.dangers.look = facts_then_change  # type: ignore[method-assign]
    result = world.cycle()
    assert world.stops() == []
    (outcome,) = result.outcomes
    assert outcome.outcome == "skipped"
    assert "the shared-volume danger is gone" in outcome.detail
    assert guest in world.hv.domains


@pytest.mark.parametrize(
    ("kind", "danger"),
    [
        (Kind.UNKNOWN, "shared-volume"),
        (Kind.MISPLACED, "shared-volume"),
        (Kind.DELETED, "address-conflict"),
        (Kind.DELETED, "unknown"),
        (Kind.DELETED, None),
    ],
)
def test_the_decider_never_skips_grace_for_anything_else(tmp_path, kind, danger):
    world = World(tmp_path, stop_shared_volume_at_once=True)
    if danger == "shared-volume":
        guest = world.with_volume("other", kind)
    else:
        guest = world.orphan("other", kind)
        mac = "fa:16:3e:0c:0c:0c"
        world.hv.change(guest, interfaces=(Interface("bridge", mac, "tap0c", "br-int"),))
        if danger == "address-conflict":
            world.neutron.add_port("port-1", mac, ELSEWHERE, ("10.0.0.9",), OTHER)
        elif danger == "unknown":
            world.neutron.fail = 403
    result = world.cycle()
    (finding,) = result.report.findings
    assert finding.kind is kind
    assert [d.kind.value for d in finding.dangers] == ([danger] if danger else [])
    assert world.stops() == []
    # It waits the whole grace, as every guest does.
    for _ in range(3):
        world.cycle(advance=600)
    assert world.stops() == []


@pytest.mark.parametrize("guard", ["allow list", "hold", "brake", "cap taken"])
def test_a_shared_volume_still_obeys_holds_brakes_the_allow_list_and_the_cap(tmp_path, guard):
    policy: dict[str, object] = {"stop_shared_volume_at_once": True}
    if guard == "allow list":
        policy["allow"] = Selector(frozenset({ELSEWHERE}))
    if guard == "brake":
        policy.update(brake_min_orphans=1, max_orphan_fraction=0.0)
    if guard == "cap taken":
        policy["max_actions_per_cycle"] = 0
    world = World(tmp_path, **policy)
    guest = world.with_volume("db", Kind.DELETED)
    if guard == "hold":
        world.journal.hold(guest, "restored by the operator", world.now)
    result = world.cycle()
    assert world.stops() == []
    assert result.plan.steps == []


def test_the_agent_exports_what_orphans_cost_and_endanger(tmp_path):
    world = World(tmp_path)
    for danger in DangerKind:
        assert (
            world.agent.metrics.registry.get_sample_value(
                "nova_orphans_dangers", {"danger": danger.value}
            )
            == 0
        )
    guest = world.with_volume("db", Kind.DELETED)
    world.hv.change(guest, usage=Usage(vcpus=2, memory_bytes=3 * 1024**3, disk_bytes=5 * 1024**3))
    foreign = "0d0d0d0d-0000-4000-8000-00000000000d"
    world.hv.define(foreign, "by-hand", nova=False)
    world.hv.change(foreign, usage=Usage(vcpus=1, memory_bytes=1024**3, disk_bytes=0))
    world.cycle()

    def value(name: str, **labels: str) -> float | None:
        return world.agent.metrics.registry.get_sample_value(name, labels)

    assert value("nova_orphans_untracked_vcpus") == 3
    assert value("nova_orphans_untracked_memory_bytes") == 4 * 1024**3
    assert value("nova_orphans_untracked_disk_bytes") == 5 * 1024**3
    assert value("nova_orphans_dangers", danger="shared-volume") == 1
    assert value("nova_orphans_dangers", danger="address-conflict") == 0
    world.cinder.fail = "timeout"
    world.cycle()
    assert value("nova_orphans_dangers", danger="shared-volume") == 0
    assert value("nova_orphans_dangers", danger="unknown") == 1
