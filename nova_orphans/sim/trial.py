"""A trial of one history: played live, then the same steps dry, compared; a failure shrunk to a
minimal replay."""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Callable, Iterable, Iterator

from nova_orphans.sim import checks
from nova_orphans.sim.generate import Generator
from nova_orphans.sim.play import Counters, CycleRecord, Run
from nova_orphans.sim.steps import Cycle, History, Step

#: Cycles per history unless told otherwise.
CYCLES = 25
#: A guest's label in a violation's detail (``cloud.Cloud.labels``: s1, s2, ...).
_GUEST = re.compile(r"\bs\d+\b")


@dataclasses.dataclass
class Result:
    """One history played: its counters, its violations, and the history to replay it."""

    history: History
    counters: Counters
    violations: list[checks.Violation]

    @property
    def failed(self) -> bool:
        """True when an invariant broke."""
        return bool(self.violations)


def quiet() -> None:
    """The agent logs every cycle; thousands of histories want silence."""
    logging.disable(logging.CRITICAL)


def run_generated(
    seed: int, index: int, cycles: int = CYCLES, exclude: frozenset[str] = frozenset()
) -> Result:
    """Draw history ``(seed, index)`` while playing it, then check dry run against it."""
    generator = Generator(seed, index, cycles, exclude)
    live = Run(generator.setup)
    try:
        live.play(generator.steps(live.cloud))
    finally:
        live.close()
    history = History(seed, index, generator.setup, tuple(live.played))
    return _finish(history, live)


def replay(history: History) -> Result:
    """Play a recorded history again (a sub-list of its steps is fine)."""
    live = Run(history.setup)
    try:
        live.play(history.steps)
    finally:
        live.close()
    return _finish(history, live)


def _finish(history: History, live: Run) -> Result:
    violations = live.violations + compare_dry_run(history, live.records)
    live.counters.violations = len(violations)
    return Result(history, live.counters, violations)


def compare_dry_run(history: History, live: list[CycleRecord]) -> list[checks.Violation]:
    """Invariant 5: a dry run of the same history decides what the live run decided.

    The two runs see the same world until the live run's effects first change it, so
    they must agree, cycle by cycle, up to and including the first cycle in which the
    live run called an effect (cycle k): the same plan (every finding, decision, step
    and reason, the same brake) in every cycle up to k, and the same error and the same
    outcomes in every cycle before k (in which no step passed re-verification, or the
    live run would have called an effect). Past k the worlds differ, so plans may too.
    """
    acted = [c for c, record in enumerate(live) if record.acted]
    last = acted[0] if acted else len(live) - 1
    if last < 0:
        return []
    dry = Run(history.setup, dry_run=True)
    try:
        dry.play(history.steps, until_cycle=last)
    finally:
        dry.close()
    found = []
    for c, (was, dry_was) in enumerate(zip(live[: last + 1], dry.records, strict=False)):
        why = _difference(was, dry_was, outcomes=c < last)
        if why:
            found.append(checks.Violation(checks.DRY_RUN, was.step, f"cycle {c}: {why}"))
    return found


def _difference(live: CycleRecord, dry: CycleRecord, outcomes: bool) -> str | None:
    # NOTE: in cycle k the live run may crash after its first effect; only its plan counts.
    if outcomes and live.error != dry.error:
        return f"error {live.error!r} live, {dry.error!r} dry"
    if live.plan != dry.plan:
        if live.plan is None or dry.plan is None:
            return "one run planned, the other did not"
        if live.plan.brake != dry.plan.brake:
            return f"brake {live.plan.brake!r} live, {dry.plan.brake!r} dry"
        pairs = zip(live.plan.decisions, dry.plan.decisions, strict=False)
        a, b = next(((a, b) for a, b in pairs if a != b), (live.plan, dry.plan))
        return f"plans differ: live {a}, dry {b}"
    if outcomes:
        mine = [(o.uuid, o.kind, o.step, o.outcome, o.detail) for o in live.outcomes]
        theirs = [(o.uuid, o.kind, o.step, o.outcome, o.detail) for o in dry.outcomes]
        if mine != theirs:
            return f"outcomes differ: live {mine}, dry {theirs}"
    return None


def shrink(
    history: History,
    still_fails: Callable[[History], bool],
    budget: int = 300,
    keep_cycles: bool = False,
) -> History:
    """A shorter history that still fails: drop chunks of steps, then strip cycles' faults.

    ``keep_cycles``: drop only world events, never an agent cycle.
    """
    fixed = {i for i, s in enumerate(history.steps) if keep_cycles and isinstance(s, Cycle)}
    droppable = [i for i in range(len(history.steps)) if i not in fixed]
    tries = 0

    def of(kept: list[int]) -> list[Step]:
        return [s for i, s in enumerate(history.steps) if i in fixed or i in kept]

    def fails(candidate: list[Step]) -> bool:
        nonlocal tries
        tries += 1
        return still_fails(dataclasses.replace(history, steps=tuple(candidate)))

    parts = 2
    while len(droppable) > 1 and tries < budget:
        size = max(1, len(droppable) // parts)
        for start in range(0, len(droppable), size):
            candidate = droppable[:start] + droppable[start + size :]
            if tries < budget and fails(of(candidate)):
                droppable, parts = candidate, max(parts - 1, 2)
                break
        else:
            if size == 1:
                break
            parts = min(len(droppable), parts * 2)
    steps = of(droppable)
    for i, step in enumerate(steps):
        for simpler in _simpler(step):
            if tries < budget and fails(steps[:i] + [simpler] + steps[i + 1 :]):
                steps[i] = step = simpler
    return dataclasses.replace(history, steps=tuple(steps))


def _simpler(step: Step) -> Iterator[Step]:
    if isinstance(step, Cycle) and step.faulty:
        yield dataclasses.replace(
            step, nova_faults=(), reads=(), crash=None, fail=(), cell_down="", services=()
        )
        yield dataclasses.replace(step, nova_faults=())
        yield dataclasses.replace(step, reads=())
        yield dataclasses.replace(step, crash=None)
        yield dataclasses.replace(step, fail=())
        yield dataclasses.replace(step, cell_down="")
        yield dataclasses.replace(step, services=())


def minimal(result: Result, budget: int = 300) -> History:
    """Shrink a failing history, keeping a violation of its first invariant about the
    same guest (the first one its detail names, if any).

    NOTE: dropping steps can break the same invariant about another guest, and
    liveness judges true time with cycles every interval, so dropping cycles makes any
    orphan late: either is another failure, and a minimal replay of it misleads (seed 7
    index 858). A liveness failure keeps every cycle.
    """
    first = result.violations[0]
    guest = _GUEST.search(first.detail)
    about = re.compile(rf"\b{guest.group()}\b") if guest else None

    def still_fails(history: History) -> bool:
        return any(
            v.invariant == first.invariant and (about is None or about.search(v.detail))
            for v in replay(history).violations
        )

    return shrink(
        result.history, still_fails, budget, keep_cycles=first.invariant == checks.LIVENESS
    )


def describe(result: Result, smallest: History | None) -> Iterable[str]:
    """The lines that report a failing history: seed, index, violations, replay."""
    h = result.history
    yield f"FAILED history seed={h.seed} index={h.index} ({len(h.steps)} steps)"
    for violation in result.violations[:10]:
        yield f"  {violation}"
    yield f"  replay: python -m nova_orphans.sim --seed {h.seed} --index {h.index}"
    if smallest is not None:
        yield f"  minimal replay ({len(smallest.steps)} steps), setup {smallest.setup}:"
        for step in smallest.steps:
            yield f"    {step!r},"
