"""Benchmark: the fleet audit's Nova side against the detail listing it replaced, and peers.

For 100 and 1,000 hosts x 50 domains (one libvirt test:/// node file per host,
one simulated Nova for the cloud; every 10th host has one deleted guest and one
guest runs on two hosts) it measures Nova requests and wall time of:

- ours: ``fleet audit`` (parallel scans; each host's plain listing as soon as
  its scan ends, details only where they change a finding), once per
  ``--nova-workers`` value: how many requests Nova's API serves at once. "scan s"
  runs until the last scan ended (the listings overlap it), "Nova s" after it;
- the detail listing it replaced: the same scans, then every server of the
  cloud in detail (paged), a lookup per UUID it does not explain, every
  migration. Its findings must be ours (checked);
- per-domain GET (``bench_audit``'s peer) host after host: exact request count,
  wall time measured on 10 hosts and scaled; and a full detail listing per host,
  derived from the detail listing's measured Nova time (one per host).

Then (``--reports``) the report-based fleet audit: 1,000 per-host reports of 50
domains each, rendered by the real ``audit --format json`` renderer, read from a
directory and merged with Nova's host list (target: <= 10 s).

Run from the repository root::

    .venv/bin/python -m benchmarks.bench_fleet [--hosts 100 1000] [--reports 1000]
    .venv/bin/python -m benchmarks.bench_fleet --hosts --reports 1000   # the merge only

Nova's answers cost what the model calibrated on the real Nova API says
(``nova_costs.json``; ``--latency-ms`` charges a flat cost per request instead).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import pathlib
import sys
import tempfile
import time
import uuid as uuidlib
from collections.abc import Sequence

from benchmarks import bench_audit
from benchmarks.bench_audit import NOW, Approach, Latent, add_model_options, cost_model, once
from benchmarks.nova_costs import CostModel
from nova_orphans.audit import HostAudit
from nova_orphans.classify.guests import classify
from nova_orphans.classify.identity import State, Verdict
from nova_orphans.cli import fleet as fleet_cli
from nova_orphans.fakes import libvirt_node as worlds
from nova_orphans.fakes.nova import SimulatedNova
from nova_orphans.fakes.nova_reference import reference_fleet_views
from nova_orphans.fleet import reports as fleet_reports
from nova_orphans.fleet.from_reports import merge_reports
from nova_orphans.fleet.records import MergedFleet
from nova_orphans.fleet.scan import HostScan, Progress, libvirt_scan
from nova_orphans.model import Domain, DomainState, Finding, Kind
from nova_orphans.observe.hypervisor import LibvirtObserver
from nova_orphans.observe.nova.fleet import NOVA_CONCURRENCY, FleetNovaObserver
from nova_orphans.observe.nova.observer import NovaObserver
from nova_orphans.render import host as audit_report

DOMAINS_PER_HOST = 50
SPLIT = str(uuidlib.UUID(int=(1 << 96) + 1))
PAGE = 1_000
#: Reports are written as of NOW; the merge runs as of NOW too, so none is stale.
MAX_AGE = datetime.timedelta(minutes=30)


def host_name(n: int) -> str:
    """The n-th compute host of the benchmark fleet."""
    return f"cmp-{n:04d}"


def build_fleet(hosts: int, directory: pathlib.Path) -> tuple[SimulatedNova, float]:
    """Nova and one node file per host; returns Nova and the seconds spent writing files."""
    nova = SimulatedNova()
    files = 0.0
    for n in range(hosts):
        start = 1 + n * 100
        for i in range(DOMAINS_PER_HOST):
            nova.boot(host_name(n), uuid=bench_audit.domain_uuid(start + i))
        if n % 10 == 0:
            nova.local_delete(bench_audit.domain_uuid(start))
        domains = worlds.nova_domains(DOMAINS_PER_HOST, start=start)
        if n < 2:
            domains.append(worlds.node_domain(uuid=SPLIT, name="instance-split",
                                              metadata=worlds.nova_metadata()))  # fmt: skip
        begin = time.perf_counter()
        worlds.write_node_file(directory, domains, name=f"{host_name(n)}.xml")
        files += time.perf_counter() - begin
    nova.boot(host_name(0), uuid=SPLIT)
    return nova, files


@dataclasses.dataclass(frozen=True)
class Row:
    """One approach's Nova requests, seconds scanning libvirt and asking Nova, and the
    seconds of the latter spent inside the simulator (not a real Nova's cost)."""

    requests: int
    scan: float
    nova: float
    simulated: float


def ours(
    nova: SimulatedNova, template: str, model: CostModel, concurrency: int, workers: int
) -> tuple[Row, MergedFleet, tuple[HostScan, ...]]:
    """One ``fleet_cli.run_audit``: its requests, seconds until the last scan ended, seconds
    after it (Nova; the host listings overlap the scans), its report and its scans."""
    settings = fleet_cli.FleetSettings(None, template, concurrency, 600.0)
    transport = Latent(nova, model, workers)
    scanned: list[float] = []
    seen: dict[str, tuple[Domain, ...]] = {}

    def scanner(uri: str) -> tuple[Domain, ...]:
        seen[uri] = libvirt_scan(uri)
        return seen[uri]

    def progress(where: Progress) -> None:
        if where.done == where.total and not scanned:
            scanned.append(time.perf_counter())

    before = nova.request_count
    start = time.perf_counter()
    report = fleet_cli.run_audit(settings, transport, NOW, scanner, retry=once, progress=progress)
    done = time.perf_counter()
    row = Row(nova.request_count - before, scanned[0] - start, done - scanned[0],
              transport.simulated)  # fmt: skip
    scans = tuple(
        HostScan(h.host, h.uri or "", seen.get(h.uri or ""), h.error) for h in report.hosts
    )
    return row, report, scans


def detail_listing(
    nova: SimulatedNova, scans: Sequence[HostScan], model: CostModel, workers: int
) -> tuple[Row, dict[str, list[Finding]]]:
    """The fleet's Nova side before the plain listings, for the same scans (+1 request:
    the service listing that found the hosts)."""
    transport = Latent(nova, model, workers)
    domains_by_host = {s.host: s.domains for s in scans if s.domains is not None}
    before = nova.request_count
    start = time.perf_counter()
    views = reference_fleet_views(NovaObserver(transport, retry=once), domains_by_host)
    findings = {h: classify(d, views[h]) for h, d in domains_by_host.items()}
    wall = time.perf_counter() - start
    return Row(nova.request_count - before + 1, 0.0, wall, transport.simulated), findings


def scanned_findings(report: MergedFleet) -> dict[str, list[Finding]]:
    """Each audited host's findings as its scan classified them."""
    return {
        h.host: [f.finding for f in h.findings if f.finding is not None]
        for h in report.hosts
        if h.trusted
    }


def peer(
    approach: Approach,
    nova: SimulatedNova,
    template: str,
    sample: int,
    model: CostModel,
) -> tuple[float, float]:
    """Wall and simulator seconds of ``approach`` on the first ``sample`` hosts, one by one."""
    transport = Latent(nova, model)
    start = time.perf_counter()
    for n in range(sample):
        with LibvirtObserver.open(template.replace("{host}", host_name(n))) as observer:
            approach(observer, transport, host_name(n))
    return time.perf_counter() - start, transport.simulated


def bench(
    hosts: int, model: CostModel, concurrency: int, workers: list[int], tmp: pathlib.Path
) -> None:
    """Print the rows of one fleet size."""
    directory = tmp / f"fleet-{hosts}"
    directory.mkdir()
    nova, files = build_fleet(hosts, directory)
    template = f"test://{directory.resolve()}/{{host}}.xml"
    row, report, scans = ours(nova, template, model, concurrency, workers[0])
    counts = report.counts()
    found = (
        f"{counts[Kind.SPLIT_BRAIN]} split-brain, {counts[Kind.DELETED]} deleted, "
        f"{len(report.incomplete)} unreachable"
    )
    print(_line(hosts, f"ours, {workers[0]} workers", row, f"measured; {found}"))
    for more in workers[1:]:
        again, _, _ = ours(nova, template, model, concurrency, more)
        print(_line(hosts, f"ours, {more} workers", again, "measured"))
    detail, findings = detail_listing(nova, scans, model, max(workers))
    same = findings == scanned_findings(report)
    detail = dataclasses.replace(detail, scan=row.scan)
    note = f"measured (Nova side; same scans); same findings as ours: {same}"
    print(_line(hosts, "detail listing", detail, note))
    if not same:
        raise SystemExit("the detail listing and ours disagree")
    sample = min(hosts, 10)
    slow_s, sim_s = peer(bench_audit.APPROACHES["per-domain GET"], nova, template, sample, model)
    scale = hosts / sample
    requests = hosts * DOMAINS_PER_HOST + 2  # + the two split-brain copies
    per_domain = Row(requests, 0.0, slow_s * scale, sim_s * scale)
    print(_line(hosts, "per-domain GET", per_domain, f"scaled from {sample} hosts, in turn"))
    live = sum(1 for s in nova.servers.values() if not s.deleted)
    listing = Row(hosts * (live // PAGE + 1), 0.0, detail.nova * hosts, detail.simulated * hosts)
    print(_line(hosts, "detail per host", listing, "derived: the detail listing, once per host"))
    print(f"{'':>6}  (writing {hosts:,} node files took {files:.2f} s, not counted)")


def _line(hosts: int, name: str, row: Row, note: str) -> str:
    total = row.scan + row.nova
    return (
        f"{hosts:>6}  {name:<17} {row.requests:>9,} {row.scan:>7.2f} {row.nova:>9.2f} "
        f"{total:>9.2f} {row.simulated:>8.2f}  {note}"
    )


def write_reports(hosts: int, directory: pathlib.Path) -> SimulatedNova:
    """One report per host, as ``audit --format json`` renders it; Nova runs every
    reported server on its host (so a listing of them costs what the model says).

    The first two hosts both run ``SPLIT`` (one split-brain candidate)."""
    nova = SimulatedNova()
    verified = Verdict("", State.VERIFIED, (), "identity verified")
    for n in range(hosts):
        host = host_name(n)
        nova.add_compute(host)
        uuids = [bench_audit.domain_uuid(1 + n * 100 + i) for i in range(DOMAINS_PER_HOST)]
        for uuid in uuids[:-1]:
            nova.boot(host, uuid=uuid)
        if n < 2:
            uuids[-1] = SPLIT
        else:
            nova.boot(host, uuid=uuids[-1])
        domains = tuple(
            Domain(u, f"instance-{u[-8:]}", DomainState.RUNNING, True, False) for u in uuids
        )
        report = HostAudit(host, NOW, [], verified, domains=domains)
        (directory / f"{host}.json").write_text(audit_report.render_json(report))
    nova.boot(host_name(0), uuid=SPLIT)
    return nova


def bench_reports(hosts: int, model: CostModel, tmp: pathlib.Path) -> None:
    """Print the wall time of reading and merging ``hosts`` per-host reports."""
    directory = tmp / f"reports-{hosts}"
    directory.mkdir()
    nova = write_reports(hosts, directory)
    transport = Latent(nova, model)
    start = time.perf_counter()
    parsed = fleet_reports.read_directory(str(directory))
    read = time.perf_counter() - start
    merged = merge_reports(parsed, FleetNovaObserver(transport, retry=once), NOW, MAX_AGE)
    wall = time.perf_counter() - start
    size = sum(p.stat().st_size for p in directory.iterdir()) / 2**20
    print(
        f"{hosts:,} reports x {DOMAINS_PER_HOST} domains ({size:.1f} MiB of JSON): read "
        f"{read:.2f} s, read + merge {wall:.2f} s (target <= 10 s); "
        f"{merged.nova_requests} Nova requests; {len(merged.split_brain)} split-brain, "
        f"{len(merged.incomplete)} hosts not merged"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, nargs="*", default=[100, 1_000])
    add_model_options(parser)
    parser.add_argument("--concurrency", type=int, default=8, help="hosts scanned at once")
    parser.add_argument(
        "--nova-workers", type=int, nargs="+", default=[NOVA_CONCURRENCY, 4, 1],
        help="requests Nova's API serves at once (ours is measured with each)",
    )  # fmt: skip
    parser.add_argument("--reports", type=int, metavar="HOSTS", default=1_000,
                        help="merge HOSTS reports (0: none)")  # fmt: skip
    args = parser.parse_args()
    model = cost_model(args)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; {DOMAINS_PER_HOST} domains "
          f"per host; Nova model: {model.describe()}; fleet concurrency {args.concurrency}, "
          f"{NOVA_CONCURRENCY} Nova requests at once; (sim s) = time inside the simulated "
          "Nova, whose filters scan every row (while the scans run: waiting for the CPU "
          "too)")  # fmt: skip
    with tempfile.TemporaryDirectory() as directory:
        if args.hosts:
            print(f"{'hosts':>6}  {'approach':<17} {'requests':>9} {'scan s':>7} "
                  f"{'Nova s':>9} {'total s':>9} {'(sim s)':>8}  how")  # fmt: skip
        for hosts in args.hosts:
            bench(hosts, model, args.concurrency, args.nova_workers, pathlib.Path(directory))
        if args.reports:
            bench_reports(args.reports, model, pathlib.Path(directory))


if __name__ == "__main__":
    main()
