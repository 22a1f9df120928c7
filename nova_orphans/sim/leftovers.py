"""The leftovers' part of a history: the world's events no Nova operation makes, the
services' faults, and the options of the leftovers, drawn from a stream of their own.

Events (``OPS``, played on ``services.World``): a container's port bound to the host
(``compute:kuryr``, a device Nova never knew) or a ``compute:nova`` port of a UUID Nova never
knew (``foreign_port``); an instance directory left by a deleted or archived server, a moved
one or one Nova still places here (``stray_dir``: deleted, moved, lost); a second
attachment of a server here, made through the other host's connector, through this host's,
or still attaching (``attach``); Placement of another region, whose provider has the host's
name and another UUID (``region_split`` on/off). Faults of one cycle
(``services.SERVICE_FAULTS``): a service that answers 503, a next link that does not go on
from its page or names no marker. Options (``Setup``): the pages of Neutron and Cinder, the
leftovers' own sightings and grace, a deny rule by UUID, and whether failed clean-ups leave
what the server held (``services``).

NOTE: drawn from ``random.Random(f"{seed}:{index}:leftovers")``, so that the other streams,
and the histories drawn from them, stay what they were.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator

from nova_orphans.fakes.nova_views import SimServer
from nova_orphans.sim.cloud import HOST, OTHER, Cloud, uuid_of
from nova_orphans.sim.services import FLAVOR, INVENTORY, SERVICE_FAULTS, World, uuid_for
from nova_orphans.sim.steps import Cycle, Event, Setup

OPS = frozenset({"foreign_port", "stray_dir", "attach", "region_split"})
#: The args of each event, as drawn.
ARGS = {
    "foreign_port": ("kuryr", "nova"),
    "stray_dir": ("deleted", "moved", "lost"),
    "attach": ("other", "here", "attaching"),
    "region_split": ("on", "off"),
}
#: What ``--without`` can leave out of the leftovers' part, by name.
FAULT_NAMES = (
    "leftovers:leak", "leftovers:foreign-port", "leftovers:stray-dir",
    "leftovers:attachment", "leftovers:region-split", "services:paging",
    "services:broken-link", "services:error", "operator:deny-uuid",
)  # fmt: skip
_HABITS = {
    "foreign_port": ("leftovers:foreign-port", 0.5, 0.05),
    "stray_dir": ("leftovers:stray-dir", 0.7, 0.15),
    "attach": ("leftovers:attachment", 0.5, 0.08),
    "region_split": ("leftovers:region-split", 0.15, 0.04),
}


def apply(world: World, op: str, label: str, arg: str) -> bool:
    """Play event ``op`` on ``world``; False when its precondition does not hold."""
    if op == "foreign_port":
        n = len(world.foreign) + 1
        port, device = uuid_for(f"foreign-port-{n}"), uuid_for(f"{arg}-device-{n}")
        zone = "kuryr" if arg == "kuryr" else "nova"
        world.neutron.add_port(port, f"fa:16:3f:00:00:{n % 256:02x}", device, ("10.9.0.9",),
                               HOST, zone=zone)  # fmt: skip
        world.foreign.add(port)
        return True
    if op == "region_split":
        return _split(world, arg == "on")
    uuid = uuid_of(label)
    row = world.cloud.nova.servers.get(uuid)
    if op == "attach":
        if row is None or row.deleted or row.host != HOST:
            return False
        status = "attaching" if arg == "attaching" else "attached"
        world.attach(row, OTHER if arg == "other" else HOST, status, f"{uuid}:{arg}")
        return True
    return op == "stray_dir" and _stray_dir(world, uuid, row, arg)


def _stray_dir(world: World, uuid: str, row: SimServer | None, arg: str) -> bool:
    """An instance directory left here: of a deleted (or archived), a moved or a lost server."""
    hv = world.cloud.hv
    if uuid in hv.domains or uuid in hv.files or uuid in hv.quarantine:
        return False
    live = row is not None and not row.deleted
    fits = {
        "deleted": (row is None and uuid in world.cloud.archived) or (row is not None and not live),
        "moved": live and row is not None and row.host == OTHER,
        "lost": live and row is not None and row.host == HOST,
    }
    if not fits.get(arg):
        return False
    hv.files[uuid] = f"left-{arg}-{uuid}"
    return True


def _split(world: World, on: bool) -> bool:
    """Placement of another region: a provider named as the host's node with another UUID,
    holding that region's consumers and (copied when it split) the host's."""
    if on == world.region_split:
        return False
    compute = world.cloud.nova.computes[HOST]
    other = uuid_for("other-region-provider")
    if on:
        held = dict(world.placement.allocations.get(compute.node_uuid, {}))
        held.update({uuid_for(f"other-region-server-{n}"): dict(FLAVOR) for n in range(2)})
        world.placement.allocations[other] = held
    world.placement.add_provider(compute.node, other if on else compute.node_uuid, INVENTORY, {})
    world.region_split = on
    return True


def labels(cloud: Cloud) -> list[str]:
    """The labels of every server Nova has or had (archived ones too), in a fixed order."""
    rows = [*cloud.nova.servers.values(), *cloud.archived.values()]
    return sorted(
        {r.name.removeprefix("instance-") for r in rows if r.name.startswith("instance-")}
    )


class Stream:
    """Draws the leftovers' options, events and faults of one history (module docstring)."""

    def __init__(self, rng: random.Random, exclude: frozenset[str]) -> None:
        self.rng, self.exclude = rng, exclude

        def on(name: str, p: float) -> bool:
            return rng.random() < p and name not in exclude

        self.rates = {op: rate if on(name, p) else 0.0 for op, (name, p, rate) in _HABITS.items()}
        faults = [f for f in SERVICE_FAULTS if self._fault_name(f) not in exclude]
        self.faults = faults if on("services", 0.5) else []

    @staticmethod
    def _fault_name(fault: str) -> str:
        return "services:error" if fault.endswith(":error") else "services:broken-link"

    def setup(self, setup: Setup) -> Setup:
        """``setup`` with the leftovers' options drawn."""
        rng, x = self.rng, self.exclude
        paging = "services:paging" not in x
        deny = rng.random() < 0.12 and "operator:deny-uuid" not in x
        return dataclasses.replace(
            setup,
            neutron_page=rng.choice((0, 0, 1, 2, 3)) if paging else 0,
            cinder_page=rng.choice((0, 0, 1, 2)) if paging else 0,
            leftover_sightings_required=rng.choice((None, None, 1, 2)),
            leftover_grace_period=rng.choice((None, None, 0.0, setup.interval)),
            deny_labels=(f"s{rng.randint(1, 5)}",) if deny else (),
            leaks="leftovers:leak" not in x,
            leak_seed=rng.randrange(2**31),
        )

    def before_cycle(self, at: float, cloud: Cloud) -> Iterator[Event]:
        """The leftovers' events just before a cycle (at true time ``at``)."""
        rng = self.rng
        for op, rate in self.rates.items():
            if rate and rng.random() < rate:
                arg = rng.choice(ARGS[op])
                names = labels(cloud) if op in ("stray_dir", "attach") else [""]
                if names:
                    yield Event(at, op, rng.choice(names), arg)

    def cycle(self, cycle: Cycle) -> Cycle:
        """``cycle`` with the services' faults drawn for it."""
        if self.faults and self.rng.random() < 0.1:
            return dataclasses.replace(cycle, services=(self.rng.choice(self.faults),))
        return cycle
