"""Histories the simulation found breaking an invariant, replayed step by step.

Each test is named for the history (seed, index) that found it and replays the
minimal history the shrinker left; ``python -m nova_orphans.sim --seed S --index I``
replays the original.
"""

from __future__ import annotations

import pytest

from nova_orphans.sim import checks, runner
from nova_orphans.sim.steps import Cycle, Event, History, Setup


@pytest.fixture(autouse=True)
def _quiet() -> None:
    runner.quiet()


def invariants(history: History) -> set[str]:
    return {v.invariant for v in runner.replay(history).violations}


@pytest.mark.xfail(
    strict=True,
    reason="product bug: Actuator._reap journals the quarantine entry only after the file "
    "move; a move that raises EffectError leaves the guest undefined with no journal "
    "entry, so `nova-orphans restore UUID` cannot find it (and the outcome says failed)",
)
def test_seed_1_index_392_a_failed_file_move_leaves_the_reaped_guest_restorable():
    history = History(
        seed=1,
        index=392,
        setup=Setup(
            interval=300.0,
            actions=(("deleted", "reap"), ("unknown", "log"), ("misplaced", "log")),
            grace_period=300.0,
            sightings_required=1,
            reap_delay=0.0,
            max_actions_per_cycle=2,
            max_orphan_fraction=0.5,
            brake_min_orphans=100,
            page_size=5,
            retry_attempts=3,
        ),
        steps=(
            Event(at=106.5, op="boot_here", label="s7", arg="running"),
            Event(at=711.6, op="boot_here", label="s8", arg="stopped"),
            Event(at=2080.9, op="local_delete", label="s8"),
            Cycle(at=3600.0, fail=("move_instance_files",)),
        ),
    )
    assert checks.RESTORE not in invariants(history)
