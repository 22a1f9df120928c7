"""Benchmark: the Nova load of a fleet of agents, the steady cycle before issue 19 and now.

Agents on 1,000 and 10,000 compute hosts of 50 guests each, one cycle every ``--interval``
seconds, a full look every ``full_look_every`` cycles (6), 1 % of the cloud's servers
changing per cycle. Per host-cycle (a full look's cost shared over its six cycles) and for
the fleet: Nova requests, Nova's own seconds (the time nova-api spends: "Nova seconds per
second" is the number of nova-api workers the fleet keeps busy), requests per second.

- **now**: the request log of the product's own tracker (``observe/nova/tracker.py``)
  running ``--cycles`` cycles of one host against the simulated Nova, each of the host's
  servers changing with probability 1 % per cycle; each request is charged what the real
  Nova's answer costs (below). The agents of a fleet are alike, and a steady cycle's
  requests do not depend on the other hosts (``tests/unit/observe/test_nova_tracker.py``):
  one host's log is every host's.
- **before**: the steady cycle of the tracker before issue 19, which asked the plain listing
  of every server of the cloud changed since the last look (1 % of the cloud per cycle, over
  the interval plus the 5-minute margin: 1.5 % of the cloud at 600 s), the host's changes,
  and every cell's compute services; its full looks were today's.

Nova's costs are nova-api's own times (its request log) measured on this stack's real Nova
(``nova_costs.json``: the fits of ``bench_real_nova`` and the ``scale`` section of
``bench_nova_scale``), a line through the measured points of each request against what it
grows with: the records it returns, or for ``os-services`` the compute services of the cloud
(Nova reads every service of every cell to answer even ``?host=H``). NOTE: one cost the
stack cannot show is left out, in favour of the design before: the cloud-wide
``changes-since`` filter has no index on ``updated_at`` in Nova's schema, so each cell scans
its instances table, which grows with the cloud.

    .venv/bin/python -m benchmarks.bench_fleet_load [--hosts 1000 10000] [--interval 600]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import pathlib
import random
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks.nova_costs import DEFAULT_PATH, records_in
from nova_orphans.classify.nova_delta import FULL_LOOK_EVERY
from nova_orphans.fakes.nova import SimulatedNova
from nova_orphans.observe.nova.observer import NovaObserver
from nova_orphans.observe.nova.paging import PAGE_SIZE
from nova_orphans.observe.nova.tracker import SAFETY_MARGIN, NovaTracker

HOST = "cmp-0001"
GUESTS = 50
CHANGING = 0.01


@dataclasses.dataclass(frozen=True)
class Line:
    """Milliseconds: ``fixed`` plus ``per`` for each unit of what the request grows with."""

    fixed: float
    per: float

    def of(self, units: float) -> float:
        return self.fixed + self.per * units


def line(points: Sequence[tuple[float, float]]) -> Line:
    """Least squares through ``(units, ms)``; flat (the median) when the slope is not positive."""
    xs, ys = [x for x, _ in points], [y for _, y in points]
    if len(set(xs)) < 2:
        return Line(statistics.median(ys), 0.0)
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x in xs)
    if slope <= 0:
        return Line(statistics.median(ys), 0.0)
    return Line(max(my - slope * mx, 0.0), slope)


@dataclasses.dataclass(frozen=True)
class Costs:
    """Nova's own time per request kind, from ``nova_costs.json``."""

    host_listing: Line
    host_changes: Line
    cloud_changes: Line
    uuid_question: Line
    lookup: Line
    detail_listing: Line
    migrations: Line
    services_all: Line
    services_of_host: Line
    #: The identity check's hypervisor search, every cycle (``observe/nova/nodes.py``).
    identity: Line

    @classmethod
    def load(cls, path: pathlib.Path = DEFAULT_PATH) -> Costs:
        data = json.loads(path.read_text(encoding="utf-8"))
        scale = data["scale"]

        def ms(entry: dict[str, Any]) -> float:
            return float(entry["server_ms"])

        by_changed = scale["changes_since"]["by_changed"]
        rows = list(scale["services_and_nodes"].values())

        def by_computes(request: str) -> Line:
            """A line against the compute services (and nodes) of the cloud."""
            return line(
                [(r["compute services (both cells)"], ms(r[request]))
                 for r in rows if "server_ms" in r.get(request, {})]
            )  # fmt: skip

        changed = [e["host2, detail"] for e in by_changed.values()]
        detail = data["server"]["servers/detail"]
        return cls(
            host_listing=line([(e["records"], ms(e)) for e in scale["host_listing"].values()]),
            host_changes=line([(e["records"], ms(e)) for e in changed]),
            cloud_changes=line(
                [(e["cloud, plain"]["records"], ms(e["cloud, plain"])) for e in by_changed.values()]
            ),
            uuid_question=line([(0, ms(scale["uuid_changes_question"]["unchanged"]))]),
            lookup=line([(1, ms(e)) for k, e in scale["lookup"].items() if "uuid filter" in k]),
            detail_listing=Line(detail["fixed_ms"], detail["per_record_ms"]),
            migrations=line([(0, ms(e)) for e in scale["os_migrations_by_host"].values()]),
            services_all=by_computes("os-services?binary=nova-compute"),
            services_of_host=by_computes("os-services?binary=nova-compute&host=host1"),
            identity=by_computes("os-hypervisors/detail?hypervisor_hostname_pattern=host1"),
        )

    def of(self, path: str, records: int, computes: int) -> float:
        """Nova's milliseconds for one request of the tracker's log."""
        route, _, query = path.partition("?")
        if route == "/os-services":
            return (self.services_of_host if "host=" in query else self.services_all).of(computes)
        if route == "/os-migrations":
            return self.migrations.of(records)
        if route == "/servers":
            if "uuid=" in query:
                return self.uuid_question.of(records)
            if "host=" in query:
                return self.host_listing.of(records)
            return self.cloud_changes.of(records)
        if route == "/servers/detail":
            if "uuid=" in query:
                return self.lookup.of(records)
            if "changes-since=" in query:
                return self.host_changes.of(records)
            return self.detail_listing.of(records)
        raise ValueError(f"no cost for {path}")


@dataclasses.dataclass
class Cycle:
    """One host-cycle's requests, as ``(path, records)``."""

    full: bool
    asked: list[tuple[str, int]]


def one_host(cycles: int, seed: int) -> list[Cycle]:
    """The product's tracker on one host of ``GUESTS``, its servers changing 1 % per cycle."""
    nova = SimulatedNova()
    nova.add_compute(HOST)
    uuids = [nova.boot(HOST) for _ in range(GUESTS)]
    nova.clock += datetime.timedelta(hours=1)
    tracker = NovaTracker(NovaObserver(nova, retry=lambda c: c()), FULL_LOOK_EVERY)
    rng = random.Random(seed)
    asked: list[tuple[str, int]] = []
    real = nova.get

    def counting(path: str) -> tuple[int, Any]:
        status, body = real(path)
        asked.append((path, records_in(body)))
        return status, body

    nova.get = counting  # type: ignore[method-assign]
    found = []
    for _ in range(cycles):
        for uuid in uuids:
            if rng.random() < CHANGING:
                task = nova.server(uuid).task_state
                nova.set_task_state(uuid, None if task else "rebooting")
        asked.clear()
        tracker.look(HOST, uuids, ())
        found.append(Cycle(tracker.last_was_full, list(asked)))
        nova.clock += datetime.timedelta(seconds=600)
    return found[FULL_LOOK_EVERY:]  # NOTE: from the second full look on: the steady state


@dataclasses.dataclass(frozen=True)
class Load:
    """What one design asks of Nova, per host-cycle and for the fleet."""

    requests: float
    nova_ms: float
    quiet_steady_ms: float

    def fleet(self, hosts: int, interval: float) -> tuple[float, float]:
        """(requests per second, Nova seconds per second) of ``hosts`` agents."""
        return hosts * self.requests / interval, hosts * self.nova_ms / 1e3 / interval


def now_load(cycles: list[Cycle], costs: Costs, hosts: int) -> Load:
    """Today's design: the tracker's own requests, and the identity check's, every cycle."""
    spent = [_cycle_ms(c.asked, costs, hosts) for c in cycles]
    quiet = [ms for c, ms in zip(cycles, spent, strict=True) if _quiet(c)]
    return Load(
        statistics.fmean(len(c.asked) + 1 for c in cycles),
        statistics.fmean(spent),
        statistics.median(quiet) if quiet else math.nan,
    )


def before_load(cycles: list[Cycle], costs: Costs, hosts: int, interval: float) -> Load:
    """The design before (module doc): the same cycles, asked as it asked them."""
    window = (interval + SAFETY_MARGIN.total_seconds()) / interval
    cloud_changed = round(hosts * GUESTS * CHANGING * window)
    pages = [
        min(PAGE_SIZE, cloud_changed - k * PAGE_SIZE) for k in range(cloud_changed // PAGE_SIZE + 1)
    ]
    asked: list[list[tuple[str, int]]] = []
    for c in cycles:
        if c.full:
            # NOTE: every full look ended with the host's service listing
            kept = [(p, n) for p, n in c.asked if not p.startswith("/os-services?")]
            asked.append(kept + [(f"/os-services?binary=nova-compute&host={HOST}", 1)])
            continue
        here = [(p, n) for p, n in c.asked if p.startswith(("/servers/detail?", "/os-migrations"))]
        cloud = [
            (f"/servers?all_tenants=1&changes-since=T&page={k}", n) for k, n in enumerate(pages)
        ]
        asked.append(cloud + here + [("/os-services?binary=nova-compute", hosts)])
    spent = [_cycle_ms(a, costs, hosts) for a in asked]
    quiet = [ms for c, ms in zip(cycles, spent, strict=True) if _quiet(c)]
    return Load(
        statistics.fmean(len(a) + 1 for a in asked),
        statistics.fmean(spent),
        statistics.median(quiet) if quiet else math.nan,
    )


def _cycle_ms(asked: list[tuple[str, int]], costs: Costs, hosts: int) -> float:
    """Nova's milliseconds for one cycle's requests, the identity check's included."""
    return costs.identity.of(hosts) + sum(costs.of(p, n, hosts) for p, n in asked)


def _quiet(c: Cycle) -> bool:
    """A steady cycle on a host where nothing changed."""
    return not c.full and all(n == 0 for p, n in c.asked if "changes-since" in p)


def main(argv: Sequence[str] | None = None, out: Callable[[str], None] = print) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--interval", type=float, default=600.0)
    parser.add_argument("--cycles", type=int, default=606)
    parser.add_argument("--seed", type=int, default=19)
    parser.add_argument("--costs", type=pathlib.Path, default=DEFAULT_PATH)
    args = parser.parse_args(argv)
    costs = Costs.load(args.costs)
    cycles = one_host(args.cycles, args.seed)
    out(f"{len(cycles)} host-cycles of {GUESTS} guests, 1 % changing per cycle, a full look "
        f"every {FULL_LOOK_EVERY}, {args.interval:.0f} s interval; Nova's own time")  # fmt: skip
    out("")
    out("| hosts | design | requests per host-cycle | Nova ms per host-cycle | quiet steady "
        "cycle, Nova ms | fleet requests/s | fleet Nova s/s (busy workers) |")  # fmt: skip
    out("|---|---|---|---|---|---|---|")
    rows = {}
    for hosts in args.hosts:
        for name, load in (
            ("before", before_load(cycles, costs, hosts, args.interval)),
            ("now", now_load(cycles, costs, hosts)),
        ):
            rate, busy = load.fleet(hosts, args.interval)
            rows[(hosts, name)] = load
            out(f"| {hosts:,} | {name} | {load.requests:.2f} | {load.nova_ms:.1f} | "
                f"{load.quiet_steady_ms:.1f} | {rate:.1f} | {busy:.2f} |")  # fmt: skip
    if len(args.hosts) >= 2:
        small, large = min(args.hosts), max(args.hosts)
        out("")
        for name in ("before", "now"):
            growth = rows[(large, name)].nova_ms / rows[(small, name)].nova_ms
            out(f"{name}: Nova time per host-cycle grows {growth:.2f}x from {small:,} to "
                f"{large:,} hosts")  # fmt: skip


if __name__ == "__main__":
    main()
