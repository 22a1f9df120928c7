"""Shared by the simulation's tests: a quiet product log, and histories written by hand."""

from __future__ import annotations

import pytest

from nova_orphans.sim import trial
from nova_orphans.sim.steps import Cycle, Event, History, Setup


@pytest.fixture(autouse=True)
def _quiet() -> None:
    trial.quiet()


def history(setup: Setup, *steps: Event | Cycle) -> History:
    """A hand-written history (seed and index 0) of ``steps`` under ``setup``."""
    return History(0, 0, setup, steps)


def cycles(first: int, last: int, interval: float = 60.0) -> tuple[Cycle, ...]:
    """Agent cycles number ``first`` to ``last``, ``interval`` seconds apart."""
    return tuple(Cycle(k * interval) for k in range(first, last + 1))


def invariants(result: trial.Result) -> set[str]:
    """The invariants a played history broke."""
    return {v.invariant for v in result.violations}
