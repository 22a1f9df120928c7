"""Benchmark: the fleet audit against per-host peer approaches, on the same simulated fleet.

Also (``--reports``) the report-based fleet audit: 1,000 per-host reports of 50
domains each, rendered by the real ``audit --format json`` renderer, read from a
directory and merged with Nova's host list (target: <= 10 s).

For 100 and 1,000 hosts x 50 domains (one libvirt test:/// node file per host,
one simulated Nova for the cloud; every 10th host has one deleted guest and one
guest runs on two hosts) it measures Nova requests and wall time of:

- ours: ``fleet audit`` (parallel scans, one paged listing for the fleet);
- per-domain GET and full listing per host (``bench_audit``'s peers) run host
  after host. Their request counts are exact; their wall time is measured on a
  sample of hosts and scaled to the fleet (a full listing per host costs the
  simulator seconds per host at 1,000 hosts).

Run from the repository root::

    .venv/bin/python -m benchmarks.bench_fleet [--hosts 100 1000] [--latency-ms MS]
    .venv/bin/python -m benchmarks.bench_fleet --reports 1000

Nova's answers cost what the model calibrated on the real Nova API says
(``nova_costs.json``; ``--latency-ms`` charges a flat cost per request instead).
"""

from __future__ import annotations

import argparse
import datetime
import os
import pathlib
import sys
import tempfile
import time
import uuid as uuidlib

from benchmarks import bench_audit
from benchmarks.bench_audit import NOW, Approach, Latent, add_model_options, cost_model, once
from benchmarks.nova_costs import CostModel
from nova_orphans import report as audit_report
from nova_orphans.cli import fleet as fleet_cli
from nova_orphans.core.identity import State, Verdict
from nova_orphans.core.model import Domain, DomainState, Kind
from nova_orphans.demo.simnova import SimulatedNova
from nova_orphans.fleet import reports as fleet_reports
from nova_orphans.fleet.audit import FleetReport
from nova_orphans.fleet.from_reports import merge_reports
from nova_orphans.observe.hypervisor import LibvirtObserver
from nova_orphans.observe.nova_fleet import FleetNovaObserver
from nova_orphans.pipeline import AuditReport
from tests import worlds

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
        domains = worlds.nova_world(DOMAINS_PER_HOST, start=start)
        if n < 2:
            domains.append(worlds.node_domain(uuid=SPLIT, name="instance-split",
                                              metadata=worlds.nova_metadata()))  # fmt: skip
        begin = time.perf_counter()
        worlds.write_world(directory, domains, name=f"{host_name(n)}.xml")
        files += time.perf_counter() - begin
    nova.boot(host_name(0), uuid=SPLIT)
    return nova, files


def ours(
    nova: SimulatedNova, template: str, model: CostModel, concurrency: int
) -> tuple[int, float, float, FleetReport]:
    """Requests, wall and simulator seconds of one fleet audit, and its report."""
    settings = fleet_cli.FleetSettings(None, template, concurrency, 60.0)
    transport = Latent(nova, model)
    before = nova.request_count
    start = time.perf_counter()
    report = fleet_cli.run_audit(settings, transport, NOW, retry=once)
    wall = time.perf_counter() - start
    return nova.request_count - before, wall, transport.simulated, report


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


def bench(hosts: int, model: CostModel, concurrency: int, tmp: pathlib.Path) -> None:
    """Print the rows of one fleet size."""
    directory = tmp / f"fleet-{hosts}"
    directory.mkdir()
    nova, files = build_fleet(hosts, directory)
    template = f"test://{directory.resolve()}/{{host}}.xml"
    requests, zero, _, report = ours(nova, template, CostModel.flat(0.0), concurrency)
    _, slow, sim, _ = ours(nova, template, model, concurrency)
    found = (
        f"{report.count(Kind.SPLIT_BRAIN)} split-brain, {report.count(Kind.DELETED)} deleted, "
        f"{len(report.unreachable)} unreachable"
    )
    print(_line(hosts, "ours (fleet)", requests, zero, slow, sim, f"measured; {found}"))
    live = sum(1 for s in nova.servers.values() if not s.deleted)
    exact = {
        "per-domain GET": hosts * DOMAINS_PER_HOST + 2,  # + the two split-brain copies
        "full listing": hosts * (live // PAGE + 1),  # a full last page needs one more
    }
    for name, count in exact.items():
        sample = min(hosts, 10 if name == "per-domain GET" or hosts <= 100 else 3)
        approach = bench_audit.APPROACHES[name]
        zero_s, _ = peer(approach, nova, template, sample, CostModel.flat(0.0))
        slow_s, sim_s = peer(approach, nova, template, sample, model)
        scale = hosts / sample
        note = f"scaled from {sample} hosts, host after host"
        print(_line(hosts, name, count, zero_s * scale, slow_s * scale, sim_s * scale, note))
    print(f"{'':>6}  (writing {hosts:,} node files took {files:.2f} s, not counted)")


def _line(
    hosts: int, name: str, requests: int, zero: float, slow: float, sim: float, note: str
) -> str:
    return (
        f"{hosts:>6}  {name:<15} {requests:>9,} {zero:>10.2f} {slow:>12.2f} {sim:>8.2f} "
        f"{slow - sim:>14.2f}  {note}"
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
        report = AuditReport(host, NOW, [], verified, domains=domains)
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
    parser.add_argument("--hosts", type=int, nargs="+", default=[100, 1_000])
    add_model_options(parser)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--reports", type=int, metavar="HOSTS", help="merge HOSTS reports")
    args = parser.parse_args()
    model = cost_model(args)
    if args.reports:
        with tempfile.TemporaryDirectory() as directory:
            bench_reports(args.reports, model, pathlib.Path(directory))
        return
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; {DOMAINS_PER_HOST} domains "
          f"per host; Nova model: {model.describe()}; fleet concurrency "
          f"{args.concurrency}; (sim s) = time inside the simulated Nova")  # fmt: skip
    print(f"{'hosts':>6}  {'approach':<15} {'requests':>9} {'wall s 0ms':>10} "
          f"{'wall s model':>12} {'(sim s)':>8} {'wall-sim model':>14}  how")  # fmt: skip
    with tempfile.TemporaryDirectory() as directory:
        for hosts in args.hosts:
            bench(hosts, model, args.concurrency, pathlib.Path(directory))


if __name__ == "__main__":
    main()
