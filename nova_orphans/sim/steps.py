"""The steps of a history and the setup it runs under, as plain, printable data.

A history is ``(Setup, [Step, ...])``; replaying the same steps under the same
setup reproduces it exactly. Steps name guests by label ("s3", "f1"), never by
what happened before, and a step whose precondition does not hold when it is
replayed does nothing, so any sub-list of steps is a valid history too (that is
what makes shrinking possible).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from nova_orphans.decide.policy import Action, Policy
from nova_orphans.model import Kind, Selector
from nova_orphans.sim.cloud import uuid_of


@dataclasses.dataclass(frozen=True)
class Event:
    """A change in the cloud at ``at`` seconds after the history's start.

    ``op`` is one of ``cloud.OPERATIONS``; ``arg`` refines it (e.g. "cleanup_failed").
    """

    at: float
    op: str
    label: str = ""
    arg: str = ""


@dataclasses.dataclass(frozen=True)
class Cycle:
    """One agent cycle at ``at`` seconds, and the faults injected into it.

    ``nova_faults``: (n, fault) — the n-th Nova request of the cycle suffers ``fault``
    (a ``Fault`` value). ``reads``: (n, action) — at the n-th libvirt read, or for a
    race the first per-domain lookup from the n-th read on, ``action`` happens:
    "drop" (the connection drops), or a race on the looked-up guest ("vanish",
    "db_restore", "migrate", "toggle"). ``crash``: (n, "before"|"after") — the agent
    dies before or after its n-th effect call and restarts. ``fail``: effect methods
    that fail (``EffectError``) this cycle. ``cell_down``: the compute host whose
    Nova cell does not answer during the cycle ("" for none).
    """

    at: float
    nova_faults: tuple[tuple[int, str], ...] = ()
    reads: tuple[tuple[int, str], ...] = ()
    crash: tuple[int, str] | None = None
    fail: tuple[str, ...] = ()
    cell_down: str = ""
    services: tuple[str, ...] = ()

    @property
    def faulty(self) -> bool:
        """True when anything is injected into this cycle."""
        return bool(
            self.nova_faults or self.reads or self.crash or self.fail or self.cell_down
            or self.services
        )  # fmt: skip


Step = Event | Cycle


@dataclasses.dataclass(frozen=True)
class Setup:
    """How the agent is configured and wired for one history."""

    interval: float = 300.0
    actions: tuple[tuple[str, str], ...] = ()
    grace_period: float = 0.0
    sightings_required: int = 1
    reap_delay: float = 0.0
    max_actions_per_cycle: int = 100
    max_orphan_fraction: float = 1.0
    brake_min_orphans: int = 100
    allow_patterns: tuple[str, ...] = ()
    deny_patterns: tuple[str, ...] = ()
    page_size: int = 3
    retry_attempts: int = 1
    #: Seconds a quarantine entry is kept before the agent purges it (0: forever).
    retention: float = 0.0
    #: Nova's ``[api] max_limit`` (0: Nova's default, 1000); below page_size pages run short.
    max_limit: int = 0
    #: ``[agent] stop_shared_volume_at_once`` (docs/design.md rule 18).
    stop_shared_volume_at_once: bool = False
    #: ``[agent] dry_run``: the configured agent itself only reports.
    dry_run: bool = False
    #: Seconds the clock of Nova's API node (its ``Date``) runs ahead of its database's.
    api_clock_offset: float = 0.0
    #: Whether this machine holds nova-compute's ``compute_id`` (the proof of identity).
    compute_id: bool = True
    #: Whether the config pins ``[DEFAULT] compute_node_uuid`` (this cloud's node of the host).
    pin_node: bool = False
    #: Guests deny-listed by UUID (``[DEFAULT] deny_uuids``), by label.
    deny_labels: tuple[str, ...] = ()
    #: ``[leftovers] sightings_required`` and ``grace_period`` (None: as for the guests).
    leftover_sightings_required: int | None = None
    leftover_grace_period: float | None = None
    #: Neutron's ``pagination_max_limit`` and Cinder's ``osapi_max_limit`` (0: no paging,
    #: Cinder's 1000).
    neutron_page: int = 0
    cinder_page: int = 0
    #: Whether clean-ups that fail in real clouds leave what the server held
    #: (``sim.leftovers``), and the seed that says which ones do.
    leaks: bool = False
    leak_seed: int = 0

    def policy(self) -> Policy:
        """The ``Policy`` this setup describes."""
        return Policy(
            actions={Kind(k): Action(a) for k, a in self.actions},
            grace_period=self.grace_period,
            sightings_required=self.sightings_required,
            reap_delay=self.reap_delay,
            max_actions_per_cycle=self.max_actions_per_cycle,
            max_orphan_fraction=self.max_orphan_fraction,
            brake_min_orphans=self.brake_min_orphans,
            allow=Selector(name_patterns=self.allow_patterns),
            interval=self.interval,
            stop_shared_volume_at_once=self.stop_shared_volume_at_once,
            leftover_sightings_required=self.leftover_sightings_required,
            leftover_grace_period=self.leftover_grace_period,
        )

    def deny(self) -> Selector:
        """The agent's deny list."""
        uuids = frozenset(uuid_of(label) for label in self.deny_labels)
        return Selector(uuids, name_patterns=self.deny_patterns)


@dataclasses.dataclass(frozen=True)
class History:
    """A replayable history: where it came from, its setup and its steps."""

    seed: int
    index: int
    setup: Setup
    steps: tuple[Step, ...]

    def to_json(self) -> str:
        """The history as JSON (``from_json`` reads it back)."""
        return json.dumps(
            {
                "seed": self.seed,
                "index": self.index,
                "setup": dataclasses.asdict(self.setup),
                "steps": [_step_to_dict(s) for s in self.steps],
            },
            indent=1,
        )

    @classmethod
    def from_json(cls, text: str) -> History:
        """Read a history written by ``to_json``."""
        data = json.loads(text)
        setup = data["setup"]
        for key in ("actions",):
            setup[key] = tuple(tuple(pair) for pair in setup[key])
        for key in ("allow_patterns", "deny_patterns", "deny_labels"):
            setup[key] = tuple(setup[key])
        steps = tuple(_step_from_dict(s) for s in data["steps"])
        return cls(data["seed"], data["index"], Setup(**setup), steps)


def _step_to_dict(step: Step) -> dict[str, Any]:
    return {"type": type(step).__name__, **dataclasses.asdict(step)}


def _step_from_dict(data: dict[str, Any]) -> Step:
    kind = data.pop("type")
    if kind == "Event":
        return Event(**data)
    data["nova_faults"] = tuple(tuple(p) for p in data.get("nova_faults", ()))
    data["reads"] = tuple(tuple(p) for p in data.get("reads", ()))
    data["crash"] = tuple(data["crash"]) if data.get("crash") else None
    data["fail"] = tuple(data.get("fail", ()))
    data["services"] = tuple(data.get("services", ()))
    return Cycle(**data)
