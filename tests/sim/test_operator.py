"""The simulation's operator: generated faults, and each new check fires on a broken product.

Each "breaks" test replays a small history with the real product, which keeps the
invariant, then with one safety mechanism removed, which must break it.
"""

from __future__ import annotations

import dataclasses

import pytest

import nova_orphans.agent as agent_module
from nova_orphans import audit, config
from nova_orphans.act.quarantine import restore as restore_module
from nova_orphans.classify import identity
from nova_orphans.config import strict
from nova_orphans.decide import plan as decide_module
from nova_orphans.decide.holds import Hold
from nova_orphans.decide.policy import Policy
from nova_orphans.record import lock
from nova_orphans.record.journal import Journal
from nova_orphans.sim import checks, operator, trial
from nova_orphans.sim.cloud import OTHER
from nova_orphans.sim.generate import FAULT_NAMES, Generator
from nova_orphans.sim.steps import Cycle, Event, Setup
from tests.sim.conftest import cycles, history, invariants


def identity_always_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The product with its identity check (docs/design.md rule 10) removed.

    NOTE: the brakes go too ("no servers on this host", the structural brake): they
    alone would keep a wrong view from acting in these small histories.
    """

    def verified(hypervisor, nova, host, compute_id_dirs, pinned_node=None):  # type: ignore[no-untyped-def]
        return identity.Verdict(host, identity.State.VERIFIED, (), "not checked")

    monkeypatch.setattr(audit, "check_identity", verified)
    monkeypatch.setattr(decide_module, "brake_of", lambda *args: None)


# --- wrong host, wrong libvirt ---------------------------------------------------------------

#: Two healthy guests here; the operator's config names the other compute from the start.
WRONG_HOST = history(
    Setup(interval=60.0, actions=(("misplaced", "reap"),)),
    Event(0.0, "config", "", f"host:{OTHER}"),
    Event(1.0, "boot_here", "s1"),
    Event(2.0, "boot_here", "s2"),
    *cycles(1, 4),
)

#: The agent, configured right, reads the other compute's libvirt from cycle 2 on.
WRONG_LIBVIRT = history(
    Setup(interval=60.0, actions=(("misplaced", "reap"),)),
    Event(1.0, "boot_other", "s1"),
    Event(2.0, "boot_other", "s2"),
    Event(3.0, "boot_here", "s3"),
    Cycle(60.0),
    Event(100.0, "config", "", f"libvirt:{OTHER}"),
    *cycles(2, 5),
)


def test_an_agent_configured_as_the_other_compute_acts_on_nothing():
    result = trial.replay(WRONG_HOST)
    assert result.violations == []
    assert result.counters.identity_refused == 4
    assert result.counters.stops == result.counters.reaps == 0


def test_without_the_identity_check_a_wrong_host_reaps_healthy_guests(monkeypatch):
    identity_always_passes(monkeypatch)
    found = trial.replay(WRONG_HOST).violations
    safety = [v for v in found if v.invariant == checks.SAFETY]
    assert safety and "while Nova still manages it (cmp-1)" in safety[0].detail


def test_an_agent_reading_the_other_computes_libvirt_acts_on_nothing():
    result = trial.replay(WRONG_LIBVIRT)
    assert result.violations == []
    assert result.counters.identity_refused == 4


def test_without_the_identity_check_a_wrong_libvirt_is_judged_on_the_true_host(monkeypatch):
    identity_always_passes(monkeypatch)
    found = trial.replay(WRONG_LIBVIRT).violations
    assert checks.SAFETY in {v.invariant for v in found}
    assert any("(cmp-2)" in v.detail for v in found)


def test_liveness_excuses_the_cycles_refused_for_identity_and_resumes_when_corrected():
    setup = Setup(interval=60.0, actions=(("deleted", "stop"),))
    steps = (
        Event(1.0, "boot_here", "s1"),
        Event(2.0, "boot_here", "s2"),
        Event(3.0, "local_delete", "s2"),
        Event(30.0, "config", "", f"host:{OTHER}"),
        *cycles(1, 6),
        Event(400.0, "config", "", "right"),
        *cycles(7, 9),
    )
    result = trial.replay(history(setup, *steps))
    assert result.violations == []
    assert result.counters.identity_refused == 6
    assert result.counters.stops == 1


# --- config typos ----------------------------------------------------------------------------

TYPO = history(
    Setup(interval=60.0, actions=(("deleted", "stop"),)),
    Event(1.0, "boot_here", "s1"),
    Event(2.0, "boot_here", "s2"),
    Cycle(60.0),
    Event(61.0, "config", "", "typo:dryrun"),
    Event(62.0, "local_delete", "s2"),
    *cycles(2, 8),
    Event(500.0, "config", "", "right"),
    *cycles(9, 10),
)


def test_a_typod_config_is_refused_and_no_agent_runs_until_it_is_right():
    result = trial.replay(TYPO)
    assert result.violations == []
    assert result.counters.configs_refused == 1
    assert result.counters.cycles_not_running == 7
    assert result.counters.stops == 1  # once the config is right again


@pytest.mark.parametrize("typo", sorted(operator.TYPOS))
def test_every_typo_the_operator_makes_is_refused_by_the_loader(typo, tmp_path):
    with pytest.raises(strict.ConfigError):
        operator.load(Setup(), operator.Config(typo=typo), str(tmp_path))


def test_a_loader_that_ignores_unknown_keys_breaks_the_config_invariant(monkeypatch):
    monkeypatch.setattr(strict.ConfigFiles, "check_keys", lambda self, groups: None)
    found = trial.replay(TYPO).violations
    assert checks.CONFIG in {v.invariant for v in found}
    assert "typo 'dryrun' loaded" in next(v for v in found if v.invariant == checks.CONFIG).detail


def test_a_loader_that_misreads_a_value_breaks_the_config_invariant(monkeypatch):
    real = config.policy

    def half_the_grace(conf):  # type: ignore[no-untyped-def]
        policy: Policy = real(conf)
        return dataclasses.replace(policy, grace_period=policy.grace_period / 2)

    monkeypatch.setattr(config, "policy", half_the_grace)
    setup = Setup(interval=60.0, grace_period=600.0, actions=(("deleted", "stop"),))
    found = trial.replay(history(setup, Event(1.0, "boot_here", "s1"), Cycle(60.0))).violations
    assert [v.invariant for v in found] == [checks.CONFIG]


# --- a dry run and a second agent beside the live one ----------------------------------------

BESIDE = history(
    Setup(interval=60.0, sightings_required=3, actions=(("deleted", "stop"),)),
    Event(1.0, "boot_here", "s1"),
    Event(2.0, "boot_here", "s2"),
    Event(3.0, "local_delete", "s2"),
    Cycle(60.0),
    Event(61.0, "dry_run"),
    Event(62.0, "second_agent"),
    Event(63.0, "dry_run"),
    *cycles(2, 4),
)


def test_dry_runs_beside_the_live_agent_change_nothing_and_a_second_agent_is_refused():
    result = trial.replay(BESIDE)
    assert result.violations == []
    assert result.counters.dry_runs_beside == 2
    assert result.counters.second_agents_refused == 1
    assert result.counters.stops == 1


def no_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    """The product without its journal lock (docs/design.md rule 14)."""
    monkeypatch.setattr(lock, "acquire", lambda path, about="": -1)
    monkeypatch.setattr(lock, "release", lambda fd: None)
    monkeypatch.setattr(lock, "holder", lambda path: None)


def test_a_dry_run_on_the_live_journal_breaks_the_dry_run_apart_invariant(monkeypatch):
    no_lock(monkeypatch)
    real = config.state_paths

    def shared(conf):  # type: ignore[no-untyped-def]
        return dataclasses.replace(real(conf), dry_run_journal=real(conf).journal)

    monkeypatch.setattr(config, "state_paths", shared)
    assert checks.DRY_APART in invariants(trial.replay(BESIDE))


def test_a_journal_without_its_lock_breaks_the_one_agent_invariant(monkeypatch):
    no_lock(monkeypatch)
    assert checks.LOCK in invariants(trial.replay(BESIDE))


# --- wall-clock steps ------------------------------------------------------------------------

#: A guest misplaced by an evacuation; the agent's clock jumps 50 minutes ahead after
#: its first sighting: the 10 minutes of grace still need their 10 cycles.
CLOCK = history(
    Setup(interval=60.0, grace_period=600.0, actions=(("misplaced", "stop"),)),
    Event(1.0, "boot_here", "s1"),
    Event(2.0, "boot_here", "s2"),
    Event(3.0, "evacuate", "s2", "running"),
    Cycle(60.0),
    Event(61.0, "clock", "", "3000"),
    *cycles(2, 13),
)


def test_a_clock_stepped_forward_does_not_shorten_the_grace():
    result = trial.replay(CLOCK)
    assert result.violations == []
    assert result.counters.clock_steps == 1 and result.counters.stops == 1


def test_a_decider_that_counts_only_wall_clock_breaks_the_time_invariant(monkeypatch):
    monkeypatch.setattr(Policy, "cycles_for", lambda self, seconds: 0)
    found = trial.replay(CLOCK).violations
    assert checks.TIME in {v.invariant for v in found}
    assert "stop of s2 (misplaced)" in next(v for v in found if v.invariant == checks.TIME).detail


def test_a_clock_stepped_back_delays_the_agent_without_a_liveness_violation():
    setup = Setup(interval=60.0, grace_period=120.0, actions=(("deleted", "stop"),))
    steps = (
        Event(1.0, "boot_here", "s1"),
        Event(2.0, "boot_here", "s2"),
        Event(3.0, "local_delete", "s2"),
        Event(4.0, "clock", "", "-600"),
        *cycles(1, 16),
    )
    result = trial.replay(history(setup, *steps))
    assert result.violations == []
    assert result.counters.stops == 1


# --- generated, reproducible, excludable -----------------------------------------------------

OPERATOR_FAULTS = tuple(name for name in FAULT_NAMES if name.startswith("operator:"))


def operator_steps(steps: tuple[Event | Cycle, ...]) -> set[str]:
    """The operator's steps among ``steps``, by op (a restore with --start as "restore-start")."""
    ops = {"config", "dry_run", "second_agent", "clock", "release", "virsh_start"}
    found = {s.op for s in steps if isinstance(s, Event) and s.op in ops}
    if any(isinstance(s, Event) and s.op == "quarantine_restore" and s.arg for s in steps):
        found.add("restore-start")
    return found


def test_every_operator_fault_is_generated_and_each_can_be_excluded():
    seen: set[str] = set()
    for index in range(80):
        generator = Generator(7, index, 25)
        result = trial.run_generated(7, index)
        seen |= operator_steps(result.history.steps)
        assert generator.setup == result.history.setup
    assert seen == {"config", "dry_run", "second_agent", "clock", "release", "virsh_start",
                    "restore-start"}  # fmt: skip
    without = frozenset(OPERATOR_FAULTS)
    for index in range(20):
        steps = trial.run_generated(7, index, exclude=without).history.steps
        assert operator_steps(steps) == set()


def test_an_operator_history_is_reproduced_by_its_seed_and_index():
    index = next(
        i
        for i in range(60)
        if any(
            isinstance(s, Event) and s.op == "config"
            for s in trial.run_generated(7, i).history.steps
        )
    )
    first, second = trial.run_generated(7, index), trial.run_generated(7, index)
    assert first.history == second.history and first.counters == second.counters


# --- a clock stepped forward (the simulation found these gaps; now closed) ---------------------

#: A deleted guest, and the agent's clock 50 minutes ahead before its first sighting: the
#: grace runs from Nova's deletion time, so the agent thinks 50 minutes of it have passed.
DELETED_AFTER_A_FORWARD_STEP = history(
    Setup(interval=60.0, grace_period=600.0, actions=(("deleted", "stop"),)),
    Event(1.0, "boot_here", "s1"),
    Event(2.0, "boot_here", "s2"),
    Event(3.0, "local_delete", "s2"),
    Event(4.0, "clock", "", "3000"),
    *cycles(1, 12),
)

#: A reaped guest, then the agent's clock 50 minutes ahead: retention (10 minutes here)
#: needs its cycles as well as the wall clock, so the quarantine is not purged at once.
PURGE_AFTER_A_FORWARD_STEP = history(
    Setup(interval=60.0, actions=(("deleted", "reap"),), retention=600.0),
    Event(1.0, "boot_here", "s1"),
    Event(2.0, "boot_here", "s2"),
    Event(3.0, "local_delete", "s2"),
    *cycles(1, 3),
    Event(200.0, "clock", "", "3000"),
    *cycles(4, 6),
)


def test_a_clock_stepped_forward_before_the_first_sighting_does_not_shorten_a_deleted_grace():
    assert invariants(trial.replay(DELETED_AFTER_A_FORWARD_STEP)) == set()


def test_a_clock_stepped_forward_does_not_purge_a_quarantine_early():
    assert invariants(trial.replay(PURGE_AFTER_A_FORWARD_STEP)) == set()


def test_a_purge_that_counts_only_wall_clock_breaks_the_restore_invariant(monkeypatch):
    monkeypatch.setattr(Policy, "cycles_for", lambda self, seconds: 0)
    assert checks.RESTORE in invariants(trial.replay(PURGE_AFTER_A_FORWARD_STEP))


def test_a_grace_that_counts_only_wall_clock_breaks_the_time_invariant(monkeypatch):
    monkeypatch.setattr(Policy, "cycles_for", lambda self, seconds: 0)
    assert checks.TIME in invariants(trial.replay(DELETED_AFTER_A_FORWARD_STEP))


# --- the operator's decision: virsh start, restore, release ----------------------------------

#: The agent stops a deleted guest; the operator starts it again by hand; later releases it.
STARTED_BY_HAND = history(
    Setup(interval=60.0, actions=(("deleted", "stop"),)),
    Event(1.0, "boot_here", "s1"),
    Event(2.0, "boot_here", "s2"),
    Event(3.0, "local_delete", "s2"),
    Cycle(60.0),
    Event(70.0, "virsh_start", "s2"),
    *cycles(2, 5),
)


def test_a_guest_the_operator_started_again_is_held_and_left_alone():
    result = trial.replay(STARTED_BY_HAND)
    assert result.violations == []
    assert result.counters.stops == 1


def test_once_released_the_guest_is_an_orphan_again():
    released = dataclasses.replace(
        STARTED_BY_HAND, steps=(*STARTED_BY_HAND.steps, Event(301.0, "release"), *cycles(6, 8))
    )
    result = trial.replay(released)
    assert result.violations == []
    assert result.counters.releases == 1 and result.counters.stops == 2


def test_an_agent_that_ignores_the_operators_start_breaks_the_hold_invariant(monkeypatch):
    monkeypatch.setattr(agent_module, "started_by_someone_else", lambda *args: {})
    found = trial.replay(STARTED_BY_HAND).violations
    assert [v.invariant for v in found] == [checks.HOLD]
    assert "stop of s2, on hold" in found[0].detail


#: A guest left running here after an evacuation is reaped; the operator restores it with
#: --start while Nova runs the server on the other compute.
RESTORE_WHILE_NOVA_RUNS_IT = history(
    Setup(interval=60.0, actions=(("misplaced", "reap"),)),
    Event(1.0, "boot_here", "s1"),
    Event(2.0, "boot_here", "s2"),
    Event(3.0, "evacuate", "s2", "running"),
    *cycles(1, 3),
    Event(200.0, "quarantine_restore", "s2", "start"),
    Event(201.0, "quarantine_restore", "s2", ""),
    *cycles(4, 6),
)


def test_restore_start_of_a_server_nova_runs_is_refused_and_a_plain_restore_is_held():
    result = trial.replay(RESTORE_WHILE_NOVA_RUNS_IT)
    assert result.violations == []
    assert result.counters.restores_refused == 1 and result.counters.restores == 1
    assert result.counters.reaps == 1  # the restored guest is held: not reaped again


def test_a_restore_that_does_not_ask_nova_breaks_the_single_copy_invariant(monkeypatch):
    real = restore_module.restore_verdict

    def never_asks(uuid, server, nova_error, **kwargs):  # type: ignore[no-untyped-def]
        return real(uuid, None, None, **kwargs)

    monkeypatch.setattr(restore_module, "restore_verdict", never_asks)
    assert checks.SINGLE_COPY in invariants(trial.replay(RESTORE_WHILE_NOVA_RUNS_IT))


def test_a_restore_that_puts_no_hold_breaks_the_hold_invariant(monkeypatch):
    monkeypatch.setattr(Journal, "hold", lambda self, uuid, reason, now: Hold(uuid, now, reason))
    monkeypatch.setattr(Journal, "hold_of", lambda self, uuid: None)
    monkeypatch.setattr(Journal, "holds", lambda self: {})
    assert checks.HOLD in invariants(trial.replay(RESTORE_WHILE_NOVA_RUNS_IT))
