"""Benchmark: one host's audit against the peers' approaches, on the same simulated world.

For each size, one test:/// world of Nova-marked domains on host ``bench-1`` and
one simulated Nova that also holds ``--background`` servers on other hosts
(1 % of the host's guests deleted, 1 % purged). In the same run it measures:

- Nova requests and wall time of (a) our audit (``audit.audit``), (b) a
  per-domain lookup (one ``GET /servers/{id}`` per domain, ghost-vm-finder
  style) and (c) a full listing of every server of the cloud
  (nova-libvirt-compare style), each with a Nova that costs nothing and with
  the Nova cost model calibrated on the real Nova API (``nova_costs.json``, see
  ``nova_costs``: per endpoint, a cost per request and per record returned;
  ``--latency-ms`` charges a flat cost per request instead) serving
  ``--nova-workers`` requests at once (2 by default, as the test stack's
  nova-api); every approach includes its libvirt scan, and ours keeps as many
  lookups in flight as the CLI does;
- libvirt time per domain against the bare libvirt calls (the existing
  ``bench_libvirt_observer``);
- peak RSS of a fresh agent process (``python -m nova_orphans.cli audit``)
  talking to the simulated Nova over loopback HTTP.

Run from the repository root::

    .venv/bin/python -m benchmarks.bench_audit [--sizes 10 100 1000 10000] [--latency-ms MS]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import threading
import time
import uuid as uuidlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import libvirt

from benchmarks import bench_libvirt_observer
from benchmarks.nova_costs import DEFAULT_PATH, CostModel, records_in
from nova_orphans import audit
from nova_orphans.fakes import libvirt_node as worlds
from nova_orphans.fakes.nova import SimulatedNova
from nova_orphans.fakes.nova_reference import live_servers
from nova_orphans.observe.hypervisor import LibvirtObserver
from nova_orphans.observe.nova.api import Transport, parse_server
from nova_orphans.observe.nova.observer import LOOKUPS_AT_ONCE, NovaObserver

HOST = "bench-1"
NOW = datetime.datetime(2024, 5, 1, 12, 0, tzinfo=datetime.timezone.utc)
DEFAULT_SIZES = (10, 100, 1_000, 10_000)
RSS_SIZES = (0, 1_000, 10_000)
OTHER_HOSTS = 50
ARCHIVED_BEFORE = NOW - datetime.timedelta(days=30)
#: Requests the modelled Nova serves at once: the test stack's nova-api worker processes.
NOVA_API_WORKERS = 2


def once(call: Callable[[], Any]) -> Any:
    """No retries: a benchmark counts every request it makes."""
    return call()


class Latent:
    """A transport that answers from the simulated Nova, then waits what ``model`` says a
    real Nova's answer costs its caller (per endpoint: per request + per record returned).

    ``workers``: how many requests Nova's API serves at once (None: as many as asked); a
    request beyond them waits for one to be free, as it would for nova-api's workers."""

    def __init__(self, nova: SimulatedNova, model: CostModel, workers: int | None = None) -> None:
        self.nova, self.model = nova, model
        #: Seconds spent inside the simulator itself (its O(rows) filters, not a real Nova's).
        self.simulated = 0.0
        self._workers = threading.BoundedSemaphore(workers) if workers else None
        self._lock = threading.Lock()

    @property
    def date(self) -> datetime.datetime | None:
        """The simulated Nova's clock at its last answer."""
        return self.nova.date

    def get(self, path: str) -> tuple[int, Any]:
        """Answer from the simulated Nova, then wait the modelled cost of that answer."""
        if self._workers is None:
            return self._answer(path)
        with self._workers:
            return self._answer(path)

    def _answer(self, path: str) -> tuple[int, Any]:
        start = time.perf_counter()
        status, body = self.nova.get(path)
        with self._lock:
            self.simulated += time.perf_counter() - start
        charge = self.model.cost(path, records_in(body))
        if charge > 0:
            time.sleep(charge)
        return status, body


def domain_uuid(n: int) -> str:
    """The UUID ``worlds.nova_domains`` gives its n-th domain (1-based)."""
    return str(uuidlib.UUID(int=n))


def build_nova(size: int, background: int, host: str = HOST, start: int = 1) -> SimulatedNova:
    """Nova with ``size`` servers on ``host`` (2 % orphaned) and ``background`` elsewhere."""
    nova = SimulatedNova()
    # NOTE: Nova's node of the audited host is what Nova's libvirt driver would report for
    # the benchmark's libvirt (the test driver): its hostname and type.
    conn = libvirt.openReadOnly("test:///default")
    nova.add_compute(host, node=conn.getHostname(), hypervisor_type=conn.getType())
    conn.close()
    populate(nova, host, size, start)
    for i in range(background):
        nova.boot(f"other-{i % OTHER_HOSTS}", uuid=str(uuidlib.UUID(int=(1 << 64) + i)))
    nova.archive(before=ARCHIVED_BEFORE)
    return nova


def populate(nova: SimulatedNova, host: str, size: int, start: int) -> None:
    """Boot ``size`` servers on ``host``; every 100th is deleted, every 100th+50 purged."""
    for i in range(size):
        nova.boot(host, uuid=domain_uuid(start + i))
    for i in range(50, size, 100):
        nova.local_delete(domain_uuid(start + i), at=NOW - datetime.timedelta(days=60))
    for i in range(0, size, 100):
        nova.local_delete(domain_uuid(start + i), at=NOW - datetime.timedelta(days=1))
    # The purged ones go with the next archive(before=ARCHIVED_BEFORE).


def ours(observer: LibvirtObserver, transport: Transport, host: str = HOST) -> int:
    """Our audit: one paged host listing, one lookup per unexplained domain, migrations.

    As the CLI asks: ``LOOKUPS_AT_ONCE`` lookups in flight."""
    nova = NovaObserver(transport, retry=once, lookups_at_once=LOOKUPS_AT_ONCE)
    report = audit.audit(observer, nova, host, NOW)
    return len(report.findings)


def per_domain(observer: LibvirtObserver, transport: Transport, host: str = HOST) -> int:
    """One ``GET /servers/{id}`` per domain; a 404 or another host is a suspect."""
    suspects = 0
    for domain in observer.look():
        status, body = transport.get(f"/servers/{domain.uuid}")
        if status == 404:
            suspects += 1
        elif status == 200:
            suspects += parse_server(body["server"]).host != host
        else:
            raise RuntimeError(f"HTTP {status}")
    return suspects


def full_listing(observer: LibvirtObserver, transport: Transport, host: str = HOST) -> int:
    """List every server of the cloud, then compare with the domains."""
    domains = observer.look()
    servers = live_servers(NovaObserver(transport, retry=once))
    return sum(1 for d in domains if d.uuid not in servers or servers[d.uuid].host != host)


#: Each approach audits one host: (libvirt observer, Nova transport, host) -> suspects.
Approach = Callable[[LibvirtObserver, Transport, str], int]
APPROACHES: dict[str, Approach] = {
    "ours": ours,
    "per-domain GET": per_domain,
    "full listing": full_listing,
}


def measure(
    approach: Approach,
    observer: LibvirtObserver,
    nova: SimulatedNova,
    model: CostModel,
    repeats: int,
    workers: int | None = NOVA_API_WORKERS,
) -> tuple[int, float, float]:
    """Requests of one run; the best wall time of ``repeats`` runs and its simulator share."""
    best, simulated = float("inf"), 0.0
    for _ in range(repeats):
        before = nova.request_count
        transport = Latent(nova, model, workers)
        start = time.perf_counter()
        approach(observer, transport, HOST)
        wall = time.perf_counter() - start
        if wall < best:
            best, simulated = wall, transport.simulated
        requests = nova.request_count - before
    return requests, best, simulated


HEADER = (
    "domains  approach         requests  wall s 0ms  wall s model  (sim s)  wall-sim model"
    "  req x  wall x 0ms  wall x model  wall-sim x model"
)


def bench_requests(
    sizes: list[int], model: CostModel, background: int, tmp: pathlib.Path, workers: int
) -> None:
    """Print the requests/wall-time table of the three approaches."""
    print(
        f"\n# Nova requests and wall time, 1 host; cloud = the host + {background:,} servers on "
        f"{OTHER_HOSTS} other hosts; model = {model.describe()}, serving {workers} requests at "
        "once; every approach includes its libvirt scan;\n# (sim s) = time inside the "
        "simulated Nova, whose filters scan every row (a real Nova uses indexes); "
        "x = approach / ours"
    )
    print(HEADER)
    for size in sizes:
        nova = build_nova(size, background)
        uri = worlds.write_node_file(tmp, worlds.nova_domains(size), name=f"audit-{size}.xml")
        with LibvirtObserver.open(uri) as observer:
            rows = _rows(observer, nova, model, 3 if size <= 1_000 else 1, workers)
        for name, row in rows.items():
            print(_line(size, name, row, rows["ours"]))


def _line(size: int, name: str, row: tuple[float, ...], base: tuple[float, ...]) -> str:
    requests, zero, slow, sim = row
    net = slow - sim
    return (
        f"{size:>7}  {name:<15} {int(requests):>9,} {zero:>11.3f} {slow:>13.3f} {sim:>8.3f}"
        f" {net:>15.3f} {requests / base[0]:>6.1f} {zero / base[1]:>11.1f}"
        f" {slow / base[2]:>13.1f} {net / (base[2] - base[3]):>17.1f}"
    )


def _rows(
    observer: LibvirtObserver, nova: SimulatedNova, model: CostModel, repeats: int, workers: int
) -> dict[str, tuple[float, ...]]:
    rows: dict[str, tuple[float, ...]] = {}
    for name, approach in APPROACHES.items():
        free = CostModel.flat(0.0)
        requests, zero, _ = measure(approach, observer, nova, free, repeats, workers)
        _, slow, simulated = measure(approach, observer, nova, model, repeats, workers)
        rows[name] = (requests, zero, slow, simulated)
    return rows


def bench_libvirt(sizes: list[int], tmp: pathlib.Path) -> None:
    """libvirt time per domain against the bare calls, via bench_libvirt_observer."""
    print("\n# libvirt: look() per domain vs the bare libvirt calls (floor), test:///")
    print(f"{'domains':>8} {'ours µs/dom':>12} {'floor µs/dom':>13} {'ratio':>6}")
    for size in sizes:
        _opened, ours_s, floor_s, _memory = bench_libvirt_observer.bench_size(size, tmp)
        print(f"{size:>8} {ours_s / size * 1e6:>12.1f} {floor_s / size * 1e6:>13.1f} "
              f"{ours_s / floor_s:>6.2f}")  # fmt: skip


@contextmanager
def serve(
    nova: SimulatedNova,
    model: CostModel | None = None,
    answered: list[tuple[str, int]] | None = None,
) -> Iterator[str]:
    """Serve the simulated Nova on loopback HTTP; yields the compute endpoint URL.

    With ``model``, each answer is held back for what nova-api itself spent on such
    an answer (the model's server side: the HTTP client's work is real here).
    ``answered`` gets each request's path and the records its answer carried."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            start = time.perf_counter()
            status, body = nova.get(self.path.removeprefix("/v2.1"))
            data = json.dumps(body).encode()
            if answered is not None:
                answered.append((self.path, records_in(body)))
            if model is not None:
                charge = model.cost(self.path, records_in(body), side="server")
                time.sleep(max(charge - (time.perf_counter() - start), 0.0))
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v2.1"
    finally:
        server.shutdown()
        server.server_close()


#: Runs its arguments as a child and reports that child's peak RSS. NOTE: a process
#: forked from this (large) benchmark process inherits its RSS high-water mark across
#: exec, so the measured child is started from this small launcher instead.
LAUNCHER = """
import json, resource, subprocess, sys, time
start = time.perf_counter()
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
wall = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps([peak, wall, done.returncode, done.stdout, done.stderr]))
"""


@dataclasses.dataclass(frozen=True)
class ChildRun:
    """One fresh process: peak RSS (MiB), wall seconds, exit code and what it printed."""

    peak_mib: float
    wall: float
    code: int
    stdout: str
    stderr: str

    @property
    def last_line(self) -> str:
        """The last line it printed (stdout, then stderr)."""
        return ((self.stdout + self.stderr).strip().splitlines() or [""])[-1]


def child_run(argv: list[str]) -> ChildRun:
    """Run ``argv`` as a fresh process (from the small launcher) and measure it."""
    launched = subprocess.run(
        [sys.executable, "-c", LAUNCHER, *argv], capture_output=True, text=True, check=True
    )
    peak_kib, wall, code, stdout, stderr = json.loads(launched.stdout)
    return ChildRun(peak_kib / 1024, wall, code, stdout, stderr)


def child_rss(argv: list[str]) -> tuple[float, float, int, str]:
    """Peak RSS (MiB) and wall time of one fresh process, its exit code and last line."""
    run = child_run(argv)
    return run.peak_mib, run.wall, run.code, run.last_line


def agent_rss(
    size: int, background: int, model: CostModel, tmp: pathlib.Path
) -> tuple[float, float, float, str]:
    """A fresh ``nova-orphans audit``: peak RSS, wall, test-driver world RSS, last line."""
    nova = build_nova(size, background)
    uri = worlds.write_node_file(tmp, worlds.nova_domains(size), name=f"rss-{size}.xml")
    with serve(nova, model) as endpoint:
        conf = tmp / f"rss-{size}.conf"
        conf.write_text(f"[nova]\nauth_type = none\nendpoint = {endpoint}\n", encoding="utf-8")
        argv = [sys.executable, "-m", "nova_orphans.cli", "audit", "--config-file", str(conf),
                "--host", HOST, "--libvirt-uri", uri]  # fmt: skip
        peak, wall, code, last = child_rss(argv)
    if code not in (0, 3):
        raise SystemExit(f"agent exited {code}: {last}")
    driver, _, _, _ = child_rss([sys.executable, "-c", DRIVER_ONLY, uri])
    return peak, wall, driver, last


#: A process that only loads the world into libvirt's in-process test driver.
DRIVER_ONLY = "import libvirt, sys; libvirt.openReadOnly(sys.argv[1]).listAllDomains(0)"


def bench_rss(background: int, model: CostModel, tmp: pathlib.Path) -> None:
    """Print peak RSS of a fresh agent process per domain count."""
    print(
        "\n# Peak RSS and wall of a fresh agent process (python -m nova_orphans.cli audit, Nova "
        f"over loopback HTTP, model = {model.describe()}, server side).\n"
        "# libvirt's test driver runs inside the agent and holds the world;\n"
        "# 'driver world' = RSS of a process that only loads that world, minus the same for "
        "0 domains; 'agent - world' = what the agent itself holds"
    )
    print(" domains  peak RSS MiB  driver world MiB  agent - world MiB  wall s  last line")
    base = None
    for size in RSS_SIZES:
        peak, wall, driver, last = agent_rss(size, background, model, tmp)
        base = driver if base is None else base
        world = driver - base
        print(
            f"{size:>8} {peak:>13.1f} {world:>17.1f} {peak - world:>18.1f} {wall:>7.2f}  "
            f"{last[:80]}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(DEFAULT_SIZES))
    add_model_options(parser)
    parser.add_argument("--background", type=int, default=5_000)
    parser.add_argument(
        "--nova-workers", type=int, default=NOVA_API_WORKERS,
        help="requests the modelled Nova API serves at once",
    )  # fmt: skip
    parser.add_argument("--skip", nargs="*", default=[], choices=("requests", "libvirt", "rss"))
    args = parser.parse_args()
    model = cost_model(args)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; Nova model: {model.describe()}")
    with tempfile.TemporaryDirectory() as directory:
        tmp = pathlib.Path(directory)
        if "requests" not in args.skip:
            bench_requests(args.sizes, model, args.background, tmp, args.nova_workers)
        if "libvirt" not in args.skip:
            bench_libvirt(args.sizes, tmp)
        if "rss" not in args.skip:
            bench_rss(args.background, model, tmp)


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """``--nova-costs FILE`` (the calibrated model) or ``--latency-ms MS`` (a flat one)."""
    parser.add_argument(
        "--nova-costs", type=pathlib.Path, default=DEFAULT_PATH,
        help="calibrated Nova cost model (bench_real_nova --calibrate writes it)",
    )  # fmt: skip
    parser.add_argument(
        "--latency-ms", type=float, help="charge a flat cost per request instead of the model"
    )


def cost_model(args: argparse.Namespace) -> CostModel:
    """The Nova cost model the options choose."""
    if args.latency_ms is not None:
        return CostModel.flat(args.latency_ms / 1e3)
    if not args.nova_costs.exists():
        raise SystemExit(
            f"{args.nova_costs}: no calibrated Nova model (bench_real_nova --calibrate writes "
            "it); --latency-ms MS charges a flat cost instead"
        )
    return CostModel.load(args.nova_costs)


if __name__ == "__main__":
    main()
