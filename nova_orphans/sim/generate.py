"""Random histories from a seed: a setup, then steps drawn from the cloud's current state.

Everything is drawn from ``random.Random(f"{seed}:{index}")``, and steps depend only
on that and on the cloud (which depends only on earlier steps), so (seed, index)
reproduces a history exactly. Steps are drawn lazily, while the history is played,
so that most of them are operations that apply to the cloud as it is.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Iterator

from nova_orphans.fakes.nova import Fault
from nova_orphans.model import Kind
from nova_orphans.sim import leftovers
from nova_orphans.sim.cloud import CELLS, HOST, HOSTILE_DISKS, OTHER, Cloud, uuid_of
from nova_orphans.sim.operator import OTHER_CLOUD, TYPOS
from nova_orphans.sim.play import FORGERIES
from nova_orphans.sim.steps import Cycle, Event, Setup, Step

#: (weight, candidate test, arguments to draw from) per operation.
Candidates = Callable[[Cloud, str], bool]


def _idle_here(c: Cloud, label: str) -> bool:
    return c.idle(label, HOST) is not None


def _idle_other(c: Cloud, label: str) -> bool:
    return c.idle(label, OTHER) is not None


def _idle(c: Cloud, label: str) -> bool:
    return c.idle(label) is not None


def _soft(c: Cloud, label: str) -> bool:
    row = c.live(label)
    return row is not None and row.vm_state == "soft-delete"


def _deleted(c: Cloud, label: str) -> bool:
    row = c.row(label)
    return (row is not None and row.deleted) or uuid_of(label) in c.archived


def _live(c: Cloud, label: str) -> bool:
    return c.live(label) is not None


def _domain(c: Cloud, label: str) -> bool:
    return c.has_domain(label)


def _migrating(c: Cloud, label: str) -> bool:
    return uuid_of(label) in c.live_migrations


def _evacuated(c: Cloud, label: str) -> bool:
    return uuid_of(label) in c.evacuations


def _resized(c: Cloud, label: str) -> bool:
    return uuid_of(label) in c.resizes


def _stopped_orphan(c: Cloud, label: str) -> bool:
    domain = c.hv.domains.get(uuid_of(label))
    row = c.live(label)
    return domain is not None and not domain.is_active and (row is None or row.host != HOST)


def _reaped(c: Cloud, label: str) -> bool:
    uuid = uuid_of(label)
    return uuid in c.hv.quarantine and uuid not in c.hv.domains


OPS: dict[str, tuple[float, Candidates | None, tuple[str, ...]]] = {
    "boot_here": (8, None, ("running",) * 4 + ("stopped",)),
    "boot_other": (3, None, ("",)),
    "foreign": (1.5, None, ("running", "shutoff")),
    "delete": (3, _idle, ("",)),
    "local_delete": (5, _live, ("",)),
    "soft_delete": (3, _idle, ("",)),
    "restore": (3, _soft, ("",)),
    "reclaim": (1, _soft, ("",)),
    "archive": (2, None, ("",)),
    "db_restore": (0.7, _deleted, ("",)),
    "live_migrate": (5, _idle_here, ("ok", "ok", "cleanup_failed", "cleanup_failed:running",
                                     "start", "start")),
    "migrate_in": (2, _idle_other, ("",)),
    "migration_ends": (6, _migrating, ("post", "post", "ok", "ok", "cleanup_failed",
                                       "cleanup_failed:running", "rollback")),
    "evacuate": (2, _idle_here, ("running", "shutoff")),
    "evacuation_cleanup": (2, _evacuated, ("ok", "fail")),
    "evacuate_in": (1, _idle_other, ("",)),
    "resize": (3, _idle_here, ("resize", "migration")),
    "resize_in": (2, _idle_other, ("",)),
    "confirm": (3, _resized, ("ok", "ok", "cleanup_failed")),
    "revert": (2, _resized, ("",)),
    "shelve": (2, _idle, ("ok", "cleanup_failed")),
    "task": (3, _live, ("rebooting", "powering-off", "image_snapshot", "")),
    "power": (2, _idle_here, ("stop", "start")),
    "undefine": (0.7, _domain, ("",)),
    "lose": (0.4, _idle_here, ("",)),
    "toggle": (2, _domain, ("",)),
    "corrupt": (0.4, _domain, ("",)),
    "quarantine_restore": (2, _reaped, ("", "", "start")),
    "virsh_start": (1.5, _stopped_orphan, ("",)),
    "suspend": (2, _idle_here, ("",)),
    "snapshot": (1.5, _domain, ("",)),
    "image_cache": (1.5, None, ("",)),
    "hostile_disk": (1.2, _domain, tuple(HOSTILE_DISKS)),
    "share_volume": (1, _domain, ("",)),
}  # fmt: skip
#: Event ops, and the ``--without`` name that leaves each out.
_EXCLUDABLE_OPS = {"virsh_start": "operator:virsh-start", "hostile_disk": "disk:hostile",
                   "share_volume": "cinder:shared-volume"}  # fmt: skip
_WEATHER = {"calm": 0.0, "light": 0.12, "stormy": 0.35}
#: NOTE: an endless listing fails the look at its first page, as any unusable answer does
#: (``tests/unit/test_nova_observer.py``); it stays out of the draw so that the seeded
#: histories stay what they were.
_FAULTS = tuple(f.value for f in Fault if f is not Fault.ENDLESS_LINKS)
_RACES = ("vanish", "db_restore", "migrate", "toggle")
_FAILING = ("stop", "domain_xml", "save_xml", "keep_state", "undefine", "move_instance_files",
            "purge")  # fmt: skip
#: Every fault a history may inject, by the name ``--without`` takes.
FAULT_NAMES = (
    tuple(f"nova:{f}" for f in _FAULTS)
    + ("nova:cell-down", "nova:short-pages", "nova:api-clock-skew", "drop", "crash")
    + ("disk:hostile", "cinder:shared-volume")
    + tuple(f"race:{r}" for r in _RACES)
    + tuple(f"fail:{m}" for m in _FAILING)
    + tuple(f"operator:{o}" for o in ("wrong-host", "wrong-libvirt", "wrong-cloud", "typo",
                                       "dry-run", "second-agent", "clock-forward",
                                       "clock-back", "virsh-start", "restore-start",
                                       "release", "fleet-forged", "no-compute-id"))
    + leftovers.FAULT_NAMES
)  # fmt: skip


def setup_for(rng: random.Random) -> Setup:
    """A random policy and wiring: every option drawn, each history its own combination.

    NOTE: ``stop_shared_volume_at_once`` with every action setting, ``dry_run``, the allow
    and deny lists and retention are drawn independently, so that no combination can
    route around the gate (docs/design.md rule 19) unseen; so are the proof of identity
    this machine holds (nova-compute's compute_id, a pinned node UUID, or neither) and
    the clock of Nova's API node against its database's.
    """
    interval = rng.choice((60.0, 300.0, 600.0))
    compute_id = rng.random() < 0.9
    actions = [(k.value, rng.choice(("log", "stop", "reap", "reap"))) for k in _ACTIONABLE]
    if rng.random() < 0.2:  # the operator asks for the impossible; it must be ignored
        actions += [(k.value, "reap") for k in (Kind.FOREIGN, Kind.LOST, Kind.PROTECTED)]
    return Setup(
        interval=interval,
        actions=tuple(actions),
        grace_period=rng.choice((0.0, 0.0, interval / 2, interval, 3 * interval)),
        sightings_required=rng.choice((1, 1, 2, 3)),
        reap_delay=rng.choice((0.0, 0.0, interval, 2.5 * interval)),
        max_actions_per_cycle=rng.choice((1, 2, 3, 100)),
        max_orphan_fraction=rng.choice((0.5, 0.75, 1.0)),
        brake_min_orphans=rng.choice((2, 3, 100, 100)),
        allow_patterns=("instance-s1*", "instance-s3*") if rng.random() < 0.15 else (),
        deny_patterns=("instance-s2*",) if rng.random() < 0.15 else (),
        page_size=rng.randint(2, 5),
        retry_attempts=rng.choice((1, 1, 3)),
        retention=rng.choice((0.0, 2 * interval, 5 * interval)),
        max_limit=rng.choice((0, 0, 1, 2)),
        stop_shared_volume_at_once=rng.random() < 0.35,
        dry_run=rng.random() < 0.05,
        api_clock_offset=(
            rng.choice((-1, 1)) * rng.choice((30.0, 240.0, 600.0, 1800.0))
            if rng.random() < 0.2
            else 0.0
        ),
        compute_id=compute_id,
        pin_node=rng.random() < (0.5 if not compute_id else 0.1),
    )


_ACTIONABLE = (Kind.DELETED, Kind.UNKNOWN, Kind.MISPLACED)


class Generator:
    """Draws a history's steps; ``steps(cloud)`` yields them while the history is played."""

    def __init__(
        self, seed: int, index: int, cycles: int, exclude: frozenset[str] = frozenset()
    ) -> None:
        self.rng = random.Random(f"{seed}:{index}")
        #: Faults never injected, named as in ``FAULT_NAMES``.
        self.exclude = exclude
        self.setup = setup_for(self.rng)
        if "nova:short-pages" in exclude:
            self.setup = dataclasses.replace(self.setup, max_limit=0)
        if "nova:api-clock-skew" in exclude:
            self.setup = dataclasses.replace(self.setup, api_clock_offset=0.0)
        if "operator:no-compute-id" in exclude:
            self.setup = dataclasses.replace(self.setup, compute_id=True)
        self.leftovers = leftovers.Stream(random.Random(f"{seed}:{index}:leftovers"), exclude)
        self.setup = self.leftovers.setup(self.setup)
        self.cycles = cycles
        self.weather = _WEATHER[self.rng.choice(("calm", "light", "light", "stormy"))]
        self._servers = self._foreign = 0
        self.operator = Operator(random.Random(f"{seed}:{index}:operator"), self.setup, exclude)

    def steps(self, cloud: Cloud) -> Iterator[Step]:
        """The history's steps, drawn one by one from the cloud as it is when asked."""
        interval = self.setup.interval
        first = interval / 4
        yield from self.operator.at_start()
        for at in sorted(self.rng.uniform(0, first) for _ in range(self.rng.randint(3, 8))):
            yield Event(at, *self._boot())
        for k in range(1, self.cycles + 1):
            times = sorted(
                self.rng.uniform((k - 1) * interval + (first if k == 1 else 0), k * interval - 1)
                for _ in range(self.rng.choice((0, 1, 1, 2, 3)))
            )
            for at in times:
                yield Event(at, *self._event(cloud))
            yield from self.leftovers.before_cycle(k * interval - 0.75, cloud)
            yield from self.operator.before_cycle(k, k * interval - 0.5)
            yield self.leftovers.cycle(self._cycle(k * interval))

    def _boot(self) -> tuple[str, str, str]:
        if self.rng.random() < 0.12:
            self._foreign += 1
            return "foreign", f"f{self._foreign}", self.rng.choice(("running", "shutoff"))
        self._servers += 1
        op = "boot_here" if self.rng.random() < 0.8 else "boot_other"
        return op, f"s{self._servers}", "running"

    def _event(self, cloud: Cloud) -> tuple[str, str, str]:
        labels = [f"s{i}" for i in range(1, self._servers + 1)]
        labels += [f"f{i}" for i in range(1, self._foreign + 1)]
        names = list(OPS)
        weights = [OPS[n][0] for n in names]
        for _ in range(8):
            op = self.rng.choices(names, weights)[0]
            _, test, args = OPS[op]
            arg = self.rng.choice(args)
            if _EXCLUDABLE_OPS.get(op) in self.exclude:
                continue
            if arg == "start" and "operator:restore-start" in self.exclude:
                arg = ""
            if op == "foreign":
                self._foreign += 1
                return op, f"f{self._foreign}", arg
            if op in ("boot_here", "boot_other"):
                self._servers += 1
                return op, f"s{self._servers}", arg
            if test is None:
                return op, "", arg
            fitting = [label for label in labels if test(cloud, label)]
            if fitting:
                return op, self.rng.choice(fitting), arg
        return self._boot()

    def _cycle(self, at: float) -> Cycle:
        rng, p = self.rng, self.weather
        nova = tuple(
            (rng.randint(0, 14), rng.choice(_FAULTS))
            for _ in range(rng.randint(1, 3) if rng.random() < p else 0)
        )
        reads: list[tuple[int, str]] = []
        if rng.random() < p / 2:
            reads.append((rng.randint(0, 4), "drop"))
        if rng.random() < p:
            reads.append((rng.randint(0, 3), rng.choice(_RACES)))
        crash = (
            (rng.randint(0, 5), rng.choice(("before", "after"))) if rng.random() < p / 2 else None
        )
        fail = (rng.choice(_FAILING),) if rng.random() < p / 3 else ()
        down = rng.choice(sorted(CELLS)) if rng.random() < p / 3 else ""
        cycle = Cycle(at, tuple(sorted(dict(nova).items())), tuple(reads), crash, fail, down)
        return self._without_excluded(cycle) if self.exclude else cycle

    def _without_excluded(self, cycle: Cycle) -> Cycle:
        x = self.exclude
        return Cycle(
            cycle.at,
            tuple(f for f in cycle.nova_faults if f"nova:{f[1]}" not in x),
            tuple(r for r in cycle.reads if (r[1] if r[1] == "drop" else f"race:{r[1]}") not in x),
            None if "crash" in x else cycle.crash,
            tuple(f for f in cycle.fail if f"fail:{f}" not in x),
            "" if "nova:cell-down" in x else cycle.cell_down,
        )


class Operator:
    """The operator's part of a history, drawn from its own random stream.

    Each history has a few habits, each independently on or off (and off when named in
    ``exclude``): a wrong ``host`` or a wrong libvirt URI in the config, for the whole
    history or from some cycle on (and maybe corrected later); a typo'd config at a
    restart (and maybe corrected later); dry runs and second live agents started
    beside the live one; wall-clock steps of the agent's machine.
    """

    def __init__(self, rng: random.Random, setup: Setup, exclude: frozenset[str]) -> None:
        self.rng, self.interval = rng, setup.interval

        def on(name: str, p: float) -> bool:
            return rng.random() < p and f"operator:{name}" not in exclude

        wrong = [w for w in ("host", "libvirt", "cloud") if on(f"wrong-{w}", 0.08)]
        self.wrong = rng.choice(wrong) if wrong else None
        self.whole = rng.random() < 0.4
        self.typo = rng.choice(sorted(TYPOS)) if on("typo", 0.12) else None
        self.dry_runs = 0.15 if on("dry-run", 0.2) else 0.0
        self.second_agents = 0.1 if on("second-agent", 0.15) else 0.0
        self.releases = 0.15 if on("release", 0.3) else 0.0
        self.fleet = 0.15 if on("fleet-forged", 0.25) else 0.0
        self.forward = 0.12 if on("clock-forward", 0.15) else 0.0
        self.back = 0.08 if on("clock-back", 0.1) else 0.0
        self.edit_at = {rng.randint(2, 15): "wrong"} if self.wrong and not self.whole else {}
        if self.typo:
            self.edit_at[rng.randint(2, 15)] = "typo"
        for k in list(self.edit_at):
            if rng.random() < 0.6:
                self.edit_at.setdefault(k + rng.randint(1, 6), "right")

    def _edit(self, what: str) -> str:
        if what == "wrong":
            return f"{self.wrong}:{OTHER_CLOUD if self.wrong == 'cloud' else OTHER}"
        return f"typo:{self.typo}" if what == "typo" else "right"

    def at_start(self) -> Iterator[Event]:
        """The config the agent starts with, when it is wrong from the first cycle on."""
        if self.wrong and self.whole:
            yield Event(0.0, "config", "", self._edit("wrong"))

    def before_cycle(self, k: int, at: float) -> Iterator[Event]:
        """What the operator does just before cycle ``k`` (at true time ``at``)."""
        rng = self.rng
        if k in self.edit_at:
            yield Event(at, "config", "", self._edit(self.edit_at[k]))
        for sign, p in ((1, self.forward), (-1, self.back)):
            if rng.random() < p:
                yield Event(at, "clock", "", f"{sign * rng.uniform(0.3, 4.0) * self.interval:.0f}")
        if rng.random() < self.dry_runs:
            yield Event(at, "dry_run")
        if rng.random() < self.second_agents:
            yield Event(at, "second_agent")
        if rng.random() < self.releases:
            yield Event(at, "release")
        if rng.random() < self.fleet:
            yield Event(at, "fleet", "", rng.choice(FORGERIES))
