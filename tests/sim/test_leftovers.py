"""The simulation plays leftovers (issue 26): what lost servers leave in Neutron, Cinder,
Placement and instances_path is generated, told by the real agent, and every command it
prints is judged against the simulated world (invariant 16); the fleet merge tells no
healthy server as split-brain (invariant 17). Each "breaks" test replays a small history
with the real product, which keeps every invariant, then with one guard removed.
"""

from __future__ import annotations

import dataclasses
import functools

import pytest

from nova_orphans.classify import leftover_judge
from nova_orphans.classify.leftover import Leftover, LeftoverKind, Remedy, Verb
from nova_orphans.decide import told
from nova_orphans.fleet.records import SeenDomain
from nova_orphans.sim import commands, fleet, leftovers, trial
from nova_orphans.sim.generate import FAULT_NAMES
from nova_orphans.sim.services import SERVICE_FAULTS
from nova_orphans.sim.steps import Event, History, Setup
from tests.sim.conftest import cycles, history, invariants


@functools.cache
def generated() -> tuple[trial.Result, ...]:
    """60 generated histories (seed 11)."""
    return tuple(trial.run_generated(11, i) for i in range(60))


def test_histories_tell_every_kind_of_leftover_with_and_without_commands():
    results = generated()
    assert [r for r in results if r.failed] == []
    tally = sum((r.counters.leftovers for r in results), commands.Tally())
    for field in dataclasses.fields(tally):
        if field.name != "split_brains":
            assert getattr(tally, field.name), field.name
    events = {(s.op, s.arg) for r in results for s in r.history.steps if isinstance(s, Event)}
    assert {(op, arg) for op, args in leftovers.ARGS.items() for arg in args} <= events
    faults = {f for r in results for s in r.history.steps for f in getattr(s, "services", ())}
    assert faults == set(SERVICE_FAULTS)
    setups = [r.history.setup for r in results]
    assert {s.neutron_page for s in setups} >= {0, 1, 2, 3}
    assert {s.cinder_page for s in setups} > {0}
    assert any(s.deny_labels for s in setups) and all(s.leaks for s in setups)


@pytest.mark.parametrize("name", leftovers.FAULT_NAMES)
def test_each_part_of_the_leftovers_can_be_left_out(name):
    assert name in FAULT_NAMES
    without = frozenset({name})
    results = (trial.run_generated(11, i, exclude=without) for i in range(6))
    steps = [s for r in results for s in r.history.steps]
    ops = {
        "leftovers:foreign-port": "foreign_port", "leftovers:stray-dir": "stray_dir",
        "leftovers:attachment": "attach", "leftovers:region-split": "region_split",
    }  # fmt: skip
    if name in ops:
        assert all(not isinstance(s, Event) or s.op != ops[name] for s in steps)
    kind = {"services:error": ":error", "services:broken-link": "-"}.get(name)
    if kind:
        assert all(kind not in f for s in steps for f in getattr(s, "services", ()))


def test_leaks_paging_and_deny_rules_can_be_left_out():
    def setups(name: str) -> list[Setup]:
        return [trial.run_generated(11, i, 1, frozenset({name})).history.setup for i in range(30)]

    assert not any(s.leaks for s in setups("leftovers:leak"))
    assert not any(s.neutron_page or s.cinder_page for s in setups("services:paging"))
    assert not any(s.deny_labels for s in setups("operator:deny-uuid"))


# --- a told step without its proofs ----------------------------------------------------------

#: A server deleted while the host was down whose guest is gone since: its files, port,
#: attachment and allocation stay (``leak_seed`` 9 leaves all three in Neutron, Cinder and
#: Placement); a deleted guest is only logged.
LOST = history(
    Setup(interval=60.0, leaks=True, leak_seed=9, actions=(("deleted", "log"),)),
    Event(1.0, "boot_here", "s1"),
    Event(2.0, "boot_here", "s2"),
    Event(3.0, "local_delete", "s2"),
    Event(4.0, "vanish", "s2"),
    *cycles(1, 7),
)


def lost(**changes: object) -> History:
    return dataclasses.replace(LOST, setup=dataclasses.replace(LOST.setup, **changes))


def with_region_split(h: History) -> History:
    return dataclasses.replace(h, steps=(*h.steps[:4], Event(5.0, "region_split", "", "on"),
                                         *h.steps[4:]))  # fmt: skip


#: Histories whose commands each need one proof of rule 22 (docs/design.md).
NEEDS = {
    "identity": (lost(compute_id=False), "identity unproven"),
    "deny rule": (lost(deny_labels=("s2",)), "server s2 is deny-listed"),
    "provider": (with_region_split(LOST), "is not this host's compute node"),
    "fresh look": (LOST, "from an earlier look, carried into a cycle that did not look"),
}


def test_the_real_product_tells_a_lost_server_s_leftovers_with_their_commands():
    result = trial.replay(LOST)
    assert result.violations == []
    tally = result.counters.leftovers
    assert (tally.files, tally.ports, tally.attachments, tally.allocations) == (2, 2, 2, 2)
    assert tally.commands == 8
    for name, (h, _) in NEEDS.items():
        assert trial.replay(h).violations == [], name


@pytest.mark.parametrize("need", sorted(NEEDS))
def test_a_told_step_without_its_proofs_breaks_the_told_invariant(need, monkeypatch):
    # NOTE: a product that writes every remedy's command, whatever rule 22's proofs say.
    def unproven(item: Leftover, proofs: told.Proofs, stale: bool, looked_at: object) -> Leftover:
        command = told._command(item.remedy, proofs) if item.remedy else None
        return dataclasses.replace(item, command=command, held_by=None, why=None)

    monkeypatch.setattr(told, "_told", unproven)
    h, detail = NEEDS[need]
    found = trial.replay(h).violations
    assert {v.invariant for v in found} == {commands.TOLD}, found
    assert any(detail in v.detail for v in found), found


CONTAINER = history(
    Setup(interval=60.0, leftover_sightings_required=1, leftover_grace_period=0.0),
    Event(1.0, "boot_here", "s1"),
    Event(2.0, "foreign_port", "", "kuryr"),
    Event(3.0, "foreign_port", "", "nova"),
    *cycles(1, 2),
)


def test_a_port_of_a_container_or_of_a_device_nova_never_knew_gets_no_command(monkeypatch):
    result = trial.replay(CONTAINER)
    assert result.violations == [] and result.counters.leftovers.foreign_ports == 2
    # NOTE: a product without the ownership check: every port bound here is Nova's.
    monkeypatch.setattr(leftover_judge, "_foreign", _owned)
    found = [v.detail for v in trial.replay(CONTAINER).violations]
    assert len({d for d in found if "which Nova never knew" in d}) == 2, found
    assert any("owned by 'compute:kuryr', no zone of Nova's" in d for d in found), found


def _owned(port, ips, why):  # type: ignore[no-untyped-def]
    return Leftover(LeftoverKind.PORT, port.id, port.device_id, why,
                    Remedy(Verb.UNBIND_PORT, port.id))  # fmt: skip


# --- split-brain -----------------------------------------------------------------------------

#: A live migration away whose source clean-up failed: the server runs on the other
#: compute, its copy here is shut off; the host's report and the other compute's merged.
MOVED = history(
    Setup(interval=60.0),
    Event(1.0, "boot_here", "s1"),
    Event(2.0, "boot_here", "s2"),
    Event(3.0, "live_migrate", "s2", "cleanup_failed"),
    *cycles(1, 1),
    Event(61.0, "fleet", "", "unknown-host"),
    *cycles(2, 2),
)


def test_a_merge_that_counts_a_shut_off_copy_as_running_breaks_the_split_brain_invariant(
    monkeypatch,
):
    assert trial.replay(MOVED).violations == []
    monkeypatch.setattr(SeenDomain, "running", property(lambda self: True))
    found = trial.replay(MOVED).violations
    assert invariants(trial.replay(MOVED)) == {fleet.SPLIT_BRAIN}, found
    assert "healthy server s2 told as split-brain" in found[0].detail
