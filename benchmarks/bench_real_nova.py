"""Benchmark: one host's audit against the peers' approaches, on the real Nova API.

Against the Nova control plane of ``tests/e2e/stack`` (nova-api at :8774, the
e2e tests' admin token with a project of its own, ``nova-orphans-bench``). For
each size it creates that many ACTIVE servers on one fake-driver compute
(``host1``) through the API (multi-create, after raising the quotas through
the API), plus about 2 % orphans of each kind: servers deleted on ``host1``
(deleted but running), servers running on ``host2`` (misplaced) and UUIDs Nova
never heard of (unknown). A libvirt ``test:///`` world holds one domain for
each of them. Then, side by side in one run (round after round, ``--runs``
rounds, medians reported), it measures:

- ``nova-orphans audit`` as a fresh CLI process: wall, peak RSS, Nova requests;
  its findings are checked (every planted orphan found with its kind, no
  managed server reported), so a broken audit cannot be timed;
- the same audit in-process (``audit.audit``), without start-up and imports;
- one ``GET /servers/{id}`` per domain (classic scripts), libvirt scan included;
- listing every server of the cloud in detail, libvirt scan included;
- the host's listing alone, detail view and plain view, and the UUIDs and names
  its hypervisor lists (``GET /os-hypervisors/detail?with_servers=true``);
- one cycle of a running agent (``run --dry-run``, in-process, started once per
  size), nothing changing between cycles: while the planting is younger than the
  agent's ``changes-since`` margin (5 minutes), every planted server still counts
  as changed;
- last, once Nova has changed nothing for that margin, the agent's incremental
  cycle on a quiet host (its steady state).

Nova requests are counted in nova-api's request log (the requests of the
benchmark's project), which also gives Nova's own time per request. Every
request the benchmark makes itself is timed at the client too; from both, a
cost per request and per record returned is fitted per endpoint over all sizes
(``nova_costs``); ``--calibrate`` writes that fit to ``benchmarks/nova_costs.json``
for the simulated-Nova benchmarks. ``--profile`` runs one audit per size under
cProfile and says where its time goes.

While servers exist it holds the e2e session lock (``STACK_DIR/e2e-session.lock``),
so no e2e session sees them; it deletes every server of its project at the end,
even on failure or SIGTERM, and waits until they are gone. Run from the
repository root, with the stack up::

    .venv/bin/python -m benchmarks.bench_real_nova \\
        [--sizes 100 1000] [--runs 5] [--calibrate] [--profile]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import dataclasses
import datetime
import fcntl
import json
import os
import pathlib
import platform
import pstats
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint

from benchmarks import bench_audit
from benchmarks.nova_costs import (
    DEFAULT_PATH,
    CostModel,
    LoggedRequest,
    Sample,
    endpoint_of,
    parse_request_log,
    records_in,
)
from nova_orphans import agent as agent_loop
from nova_orphans import audit, config, exits
from nova_orphans.cli import agent as agent_cli
from nova_orphans.fakes import libvirt_node as worlds
from nova_orphans.observe.errors import NovaUnreachable
from nova_orphans.observe.hypervisor import LibvirtObserver
from nova_orphans.observe.nova.api import MICROVERSION
from nova_orphans.observe.nova.observer import NovaObserver
from nova_orphans.observe.nova.tracker import SAFETY_MARGIN
from nova_orphans.record.metrics import Metrics

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "e2e" / "stack"))

import harness

PROJECT = "nova-orphans-bench"
#: The stack's test token filter makes ``admin:PROJECT`` an admin of PROJECT.
TOKEN = f"admin:{PROJECT}"
HOST = "host1"
ELSEWHERE = "host2"
NAME = "bench"
PLACEMENT = "http://127.0.0.1:8778"
REQUEST_LOG = harness.STATE / "log" / "nova-api.log"
SESSION_LOCK = harness.STACK_DIR / "e2e-session.lock"
#: Quotas the benchmark's servers need (-1: unlimited).
UNLIMITED = {"instances": -1, "cores": -1, "ram": -1}


def say(message: str) -> None:
    """Progress, on stderr (stdout holds the tables)."""
    print(f"{time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- the stack


@contextlib.contextmanager
def e2e_session_lock(wait: float) -> Iterator[None]:
    """Hold the lock e2e sessions take, so none runs into the benchmark's servers.

    NOTE: a blocking wait (with an alarm for ``wait``): a poller loses the lock to
    blocked waiters and to faster pollers, time after time.
    """
    SESSION_LOCK.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(SESSION_LOCK, os.O_RDWR | os.O_CREAT, 0o644)

    def give_up(*_: object) -> None:
        raise TimeoutError(f"an e2e session held {SESSION_LOCK} for {wait:.0f} s")

    previous = signal.signal(signal.SIGALRM, give_up)
    signal.alarm(max(1, int(wait)))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except TimeoutError as exc:
        os.close(fd)
        raise SystemExit(f"bench_real_nova: {exc}") from None
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    try:
        yield
    finally:
        os.close(fd)


class SessionTransport:
    """The observers' ``Transport`` over the e2e harness's keystoneauth session."""

    def __init__(self, nova: harness.Nova) -> None:
        self.nova = nova
        #: NOTE: its answers' Date is not read: the benchmark's own observers make full
        #: looks (the agent it measures has the product's transport).
        self.date: datetime.datetime | None = None

    def get(self, path: str) -> tuple[int, Any]:
        """GET ``path`` at the product's microversion."""
        try:
            response = self.nova.session.get(
                self.nova.endpoint + path,
                headers={"OpenStack-API-Version": f"compute {MICROVERSION}"},
                raise_exc=False,
            )
        except ks_exc.ConnectionError as exc:
            raise NovaUnreachable(endpoint=self.nova.endpoint, reason=exc) from exc
        return response.status_code, response.json() if response.content else None


class Timed:
    """A transport that records every request: endpoint, records returned, seconds."""

    def __init__(self, transport: SessionTransport) -> None:
        self.transport = transport
        self.samples: list[Sample] = []

    @property
    def date(self) -> datetime.datetime | None:
        """The wrapped transport's ``date``."""
        return self.transport.date

    def get(self, path: str) -> tuple[int, Any]:
        """GET through the wrapped transport, timed."""
        start = time.perf_counter()
        status, body = self.transport.get(path)
        seconds = time.perf_counter() - start
        self.samples.append(Sample(endpoint_of(path), records_in(body), seconds))
        return status, body


class RequestLog:
    """nova-api's request log, read from a mark on: the benchmark project's requests."""

    def __init__(self, path: pathlib.Path = REQUEST_LOG) -> None:
        self.path = path

    def mark(self) -> int:
        """Where the log ends now."""
        return self.path.stat().st_size

    def since(self, mark: int, expect: int | None = None) -> list[LoggedRequest]:
        """The project's requests logged after ``mark`` (waits briefly for ``expect`` of them).

        NOTE: nova-api logs a request before it sends the answer, so once the
        client has its answers every line is there; the wait is a safety net.
        """
        deadline = time.monotonic() + 2.0
        while True:
            with self.path.open("rb") as log:
                log.seek(mark)
                text = log.read().decode("utf-8", "replace")
            found = parse_request_log(text.splitlines(), PROJECT)
            if expect is None or len(found) >= expect or time.monotonic() > deadline:
                return found
            time.sleep(0.1)


# --------------------------------------------------------------------------- servers


def listing(nova: harness.Nova, **query: str) -> list[dict[str, Any]]:
    """Every server of the benchmark's project matching ``query`` (plain view, paged)."""
    # NOTE: the observer's paging (next links, loop guards) and retries serve the set-up too.
    observer = NovaObserver(SessionTransport(nova))
    found = observer._paged(
        "/servers", "servers", {"all_tenants": "1", "project_id": PROJECT, **query}
    )
    return list(found)


def raise_quotas(nova: harness.Nova) -> Callable[[], None]:
    """Unlimited instances, cores and RAM for the benchmark; returns how to undo it.

    NOTE: the project's own quotas need Keystone to vouch for the project, which
    the stack has not; then the default quota class is raised (and put back).
    """
    try:
        nova.request(
            "PUT", f"/os-quota-sets/{PROJECT}", json_body={"quota_set": UNLIMITED}, ok=(200,)
        )
        return lambda: nova.request("DELETE", f"/os-quota-sets/{PROJECT}", ok=(202, 204))
    except harness.StackError as exc:
        say(f"project quotas refused ({str(exc)[:120]}); raising the default quota class")
    before = nova.get("/os-quota-class-sets/default")["quota_class_set"]
    old = {key: before[key] for key in UNLIMITED}
    nova.request("PUT", "/os-quota-class-sets/default", json_body={"quota_class_set": UNLIMITED})
    return lambda: nova.request(
        "PUT", "/os-quota-class-sets/default", json_body={"quota_class_set": old}
    )


def create_servers(nova: harness.Nova, host: str, count: int, name: str, batch: int) -> list[str]:
    """``count`` ACTIVE servers on ``host`` named ``name-N``, created ``batch`` at a time."""
    info = harness.stack_info()
    made = 0
    while made < count:
        n = min(batch, count - made)
        body = {
            "server": {
                "name": f"{name}-{made // batch}",
                "imageRef": info["image_id"],
                "flavorRef": info["flavor_id"],
                "networks": "none",
                "availability_zone": f"nova:{host}",
                "min_count": n,
                "max_count": n,
                "return_reservation_id": True,
            }
        }
        nova.request("POST", "/servers", json_body=body, ok=(202,))
        made += n
        wait_built(nova, f"^{name}-")
    active = [s["id"] for s in listing(nova, name=f"^{name}-", status="ACTIVE")]
    if len(active) != count:
        raise harness.StackError(f"{len(active)} of {count} servers {name} ACTIVE")
    return active


def wait_built(nova: harness.Nova, name: str, timeout: float = 900) -> None:
    """Wait until no server matching ``name`` is building; one in ERROR fails at once.

    NOTE: the API records a multi-create's servers (build requests) before it
    answers, so the BUILD listing holds every server not built yet.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        failed = listing(nova, name=name, status="ERROR")
        if failed:
            raise harness.StackError(f"{len(failed)} servers went ERROR, e.g. {failed[0]['id']}")
        if not listing(nova, name=name, status="BUILD"):
            return
        time.sleep(1)
    raise harness.StackError(f"servers {name} still building after {timeout:.0f} s")


def delete_servers(nova: harness.Nova, uuids: Sequence[str]) -> None:
    """``forceDelete`` every server (a plain DELETE only soft-deletes here); wait until gone.

    NOTE: when Nova fails to delete them in time (its compute cannot reach the
    network service, say), their rows are deleted the way a local delete leaves
    them (``mark_deleted``): the benchmark must leave nothing behind. The time
    allowed grows with the count: the fake-driver compute deletes about 5 servers
    a second here, and rows marked while it still deletes make the archive fail.
    """
    timeout = 30 + 0.5 * len(uuids)

    def force(uuid: str) -> None:
        nova.request(
            "POST", f"/servers/{uuid}/action", json_body={"forceDelete": None},
            ok=(202, 404, 409),
        )  # fmt: skip

    wanted = set(uuids)
    deadline = time.monotonic() + timeout
    left = list(uuids)
    while left and time.monotonic() < deadline:
        # NOTE: a server busy with a task refuses forceDelete (409): asked again.
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            list(pool.map(force, left))
        time.sleep(2)
        left = [s["id"] for s in listing(nova) if s["id"] in wanted]
    if left:
        say(f"Nova did not delete {len(left)} servers within {timeout:.0f} s: marking their rows")
        mark_deleted(left)


def mark_deleted(uuids: Sequence[str]) -> None:
    """Delete the servers' rows in the cell database as a local delete does (then archived)."""
    for start in range(0, len(uuids), 200):
        chunk = uuids[start : start + 200]
        if not all(c in "0123456789abcdef-" for u in chunk for c in u):
            raise ValueError(f"not UUIDs: {chunk}")
        listed = ",".join(f"'{u}'" for u in chunk)
        harness.cell_sql(
            "UPDATE instances SET vm_state='deleted', task_state=NULL, power_state=0, "
            "deleted=id, deleted_at=UTC_TIMESTAMP(), terminated_at=UTC_TIMESTAMP() "
            f"WHERE uuid IN ({listed}) AND deleted=0"
        )
    # NOTE: and their Placement allocations, as Nova's delete would: left behind, they
    # fill host1's provider and later builds there find no room.
    placement = ks_session.Session(auth=token_endpoint.Token(PLACEMENT, harness.ADMIN_TOKEN))
    for uuid in uuids:
        placement.delete(f"{PLACEMENT}/allocations/{uuid}", raise_exc=False, timeout=30)


def remove_everything(nova: harness.Nova) -> None:
    """Delete every server of the benchmark's project and wait until they are gone."""
    left = [s["id"] for s in listing(nova)]
    if left:
        say(f"deleting {len(left)} servers")
        delete_servers(nova, left)


@dataclasses.dataclass(frozen=True)
class Planted:
    """The servers of one size and the orphans planted beside them, by kind."""

    managed: list[str]
    deleted: list[str]
    misplaced: list[str]
    unknown: list[str]

    @property
    def orphans(self) -> dict[str, str]:
        """Planted orphan UUID -> the kind the audit must report."""
        kinds = (
            ("deleted", self.deleted),
            ("misplaced", self.misplaced),
            ("unknown", self.unknown),
        )
        return {uuid: kind for kind, uuids in kinds for uuid in uuids}

    def domains(self) -> list[str]:
        """Every domain of the world: one per server and planted orphan."""
        every = [*self.managed, *self.deleted, *self.misplaced, *self.unknown]
        return [
            worlds.node_domain(
                uuid=uuid, name=worlds.instance_name(n + 1),
                metadata=worlds.nova_metadata(name=f"{NAME}-{n}", flavor="e2e-tiny"),
            )
            for n, uuid in enumerate(every)
        ]  # fmt: skip


def plant(
    nova: harness.Nova, size: int, percent: float, batch: int, reuse: bool = False
) -> Planted:
    """Create ``size`` servers on HOST and ``percent`` % orphans of each kind.

    ``reuse``: the ACTIVE servers an interrupted run left on HOST are the managed
    ones, however many (``size`` is then their count).
    """
    t0 = time.monotonic()
    if reuse:
        wait_built(nova, f"^{NAME}-")
        managed = [s["id"] for s in listing(nova, name=f"^{NAME}-.*-managed-", status="ACTIVE")]
        size = len(managed)
    else:
        managed = create_servers(nova, HOST, size, f"{NAME}-{size}-managed", batch)
    say(f"{len(managed)} servers ACTIVE on {HOST} in {time.monotonic() - t0:.0f} s")
    orphans = max(1, round(size * percent / 100))
    deleted = create_servers(nova, HOST, orphans, f"{NAME}-{size}-deleted", batch)
    delete_servers(nova, deleted)
    misplaced = create_servers(nova, ELSEWHERE, orphans, f"{NAME}-{size}-misplaced", batch)
    unknown = [worlds.random_uuid() for _ in range(orphans)]
    say(f"orphans planted: {orphans} deleted, {orphans} misplaced, {orphans} unknown")
    return Planted(managed, deleted, misplaced, unknown)


# --------------------------------------------------------------------------- approaches


@dataclasses.dataclass
class Run:
    """One run of one approach."""

    wall: float
    requests: list[LoggedRequest]
    samples: list[Sample]
    peak_mib: float | None = None

    @property
    def nova_seconds(self) -> float:
        """Nova's own time for the run's requests (its request log)."""
        return sum(r.seconds for r in self.requests)


@dataclasses.dataclass
class Bench:
    """One size's world and the means to run each approach on it."""

    nova: harness.Nova
    planted: Planted
    uri: str
    conf: pathlib.Path
    log: RequestLog
    agent: agent_loop.Agent | None = None
    endpoint: str = harness.NOVA_ENDPOINT

    def timed(self, body: Callable[[Timed], object]) -> Run:
        """Run ``body`` with a fresh timed transport; its requests from the log."""
        transport = Timed(SessionTransport(self.nova))
        mark = self.log.mark()
        start = time.perf_counter()
        body(transport)
        wall = time.perf_counter() - start
        logged = self.log.since(mark, len(transport.samples))
        return Run(wall, logged, with_server_time(transport.samples, logged))

    def audit_cli(self) -> Run:
        """``nova-orphans audit`` as a fresh process; its findings are checked."""
        mark = self.log.mark()
        child = bench_audit.child_run(self.audit_argv())
        if child.code not in (exits.OK, exits.FOUND):
            raise SystemExit(f"audit exited {child.code}: {child.last_line}")
        check_findings(self.planted, json.loads(child.stdout)["findings"])
        return Run(child.wall, self.log.since(mark), [], child.peak_mib)

    def audit_argv(self) -> list[str]:
        """The audit's command line."""
        return [str(harness.CLI), "audit", "--config-file", str(self.conf), "--host", HOST,
                "--libvirt-uri", self.uri, "--format", "json"]  # fmt: skip

    def audit_in_process(self) -> Run:
        """The same audit in this process: no interpreter start-up, no imports."""

        def body(transport: Timed) -> None:
            with LibvirtObserver.open(self.uri) as observer:
                report = audit.audit(
                    observer, NovaObserver(transport, retry=bench_audit.once), HOST, now()
                )
            found = [{"uuid": f.uuid, "kind": f.kind.value} for f in report.findings]
            check_findings(self.planted, found)

        return self.timed(body)

    def peer(self, approach: bench_audit.Approach) -> Run:
        """A peer approach of ``bench_audit`` (libvirt scan included); its suspects checked."""

        def body(transport: Timed) -> None:
            with LibvirtObserver.open(self.uri) as observer:
                suspects = approach(observer, transport, HOST)
            if suspects != len(self.planted.orphans):
                raise SystemExit(f"{approach.__name__} found {suspects} suspects, "
                                 f"planted {len(self.planted.orphans)}")  # fmt: skip

        return self.timed(body)

    def agent_cycle(self) -> Run:
        """One cycle of the agent started by ``start_agent``; its findings checked."""
        if self.agent is None:
            raise RuntimeError("start_agent first")
        mark = self.log.mark()
        start = time.perf_counter()
        result = self.agent.cycle()
        wall = time.perf_counter() - start
        if result.report is None:
            raise SystemExit(f"agent cycle failed: {result.error}")
        found = [{"uuid": f.uuid, "kind": f.kind.value} for f in result.report.findings]
        check_findings(self.planted, found)
        return Run(wall, self.log.since(mark), [])

    def quiet_cycles(self, runs: int, quiet_since: float) -> list[Run]:
        """``runs`` incremental agent cycles once Nova has changed nothing for the margin.

        NOTE: the agent asks for the changes since its last look less ``SAFETY_MARGIN``,
        so for that long after the planting every planted server and orphan is "changed";
        a steady cycle on a quiet host comes only after it. Full looks (every
        ``full_look_every`` cycles) are run but not counted. (nova-compute's periodic
        clean-up of deleted instances still saves each deleted row once, within 5
        minutes of its deletion: those rows may count as changed in these cycles.)
        """
        if self.agent is None:
            raise RuntimeError("start_agent first")
        wait = quiet_since + SAFETY_MARGIN.total_seconds() + 10 - time.monotonic()
        if wait > 0:
            say(f"waiting {wait:.0f} s until Nova has changed nothing for {SAFETY_MARGIN}")
            time.sleep(wait)
        quiet: list[Run] = []
        every: list[Run] = []
        for _ in range(runs + self.agent.full_look_every):
            every.append(self.agent_cycle())
            if not self.agent.nova_views.last_was_full:
                quiet.append(every[-1])
            if len(quiet) == runs:
                return quiet
        # NOTE: reported, not fatal: the other rows of the run still stand.
        say(f"only {len(quiet)} of {len(every)} agent cycles were incremental")
        return quiet or every

    @contextlib.contextmanager
    def start_agent(self, state: pathlib.Path) -> Iterator[None]:
        """A dry-run agent on the world (as ``run --dry-run`` wires it), past its first cycle."""
        conf_file = harness.write_cli_config(
            state.with_suffix(".conf"), host=HOST, libvirt_uri=self.uri, token=TOKEN,
            endpoint=self.endpoint, extra=f"[agent]\nstate_dir = {state}\ndry_run = true\n",
        )  # fmt: skip
        conf = config.load([str(conf_file)])
        args = argparse.Namespace(host=HOST, libvirt_uri=self.uri, dry_run=True)
        self.agent = agent_cli.build_agent(conf, args, Metrics())
        try:
            self.agent.reconcile()
            self.agent_cycle()
            yield
        finally:
            self.agent.effects.close()
            self.agent.journal.close()
            self.agent = None

    def host_listing(self, path: str) -> Run:
        """The host's listing alone (``/servers/detail`` or plain ``/servers``), paged."""

        def body(transport: Timed) -> None:
            observer = NovaObserver(transport, retry=bench_audit.once)
            query = {"all_tenants": "1", "host": HOST}
            listed = {s["id"] for s in observer._paged(path, "servers", query)}
            if not listed >= set(self.planted.managed):
                raise SystemExit(f"{path}?host={HOST} misses servers of the benchmark")

        return self.timed(body)

    def libvirt_scan(self) -> Run:
        """A bare libvirt scan of the host (connection and every domain): the libvirt floor."""
        start = time.perf_counter()
        with LibvirtObserver.open(self.uri) as observer:
            scanned = observer.look()
        wall = time.perf_counter() - start
        if len(scanned) != len(self.planted.domains()):
            raise SystemExit(f"the scan read {len(scanned)} domains")
        return Run(wall, [], [])

    def hypervisor_servers(self) -> Run:
        """The host's servers as its hypervisor lists them (``with_servers``: UUID and name).

        NOTE: not a path the audit takes (it includes SOFT_DELETED servers, which the
        plain listing leaves out); measured beside the listings as the cheapest answer
        to "which servers are on this host" Nova has. Its samples stay out of the cost
        model: one hypervisor record carrying the servers would skew that endpoint's fit.
        """
        path = f"/os-hypervisors/detail?hypervisor_hostname_pattern={HOST}&with_servers=true"
        mark = self.log.mark()
        start = time.perf_counter()
        body = self.nova.get(path)
        wall = time.perf_counter() - start
        listed = {s["uuid"] for h in body["hypervisors"] for s in h.get("servers", [])}
        if not listed >= set(self.planted.managed):
            raise SystemExit(f"{path} misses servers of the benchmark")
        return Run(wall, self.log.since(mark, 1), [])


def now() -> datetime.datetime:
    """The audit's clock."""
    return datetime.datetime.now(datetime.timezone.utc)


def with_server_time(samples: list[Sample], logged: list[LoggedRequest]) -> list[Sample]:
    """The client's samples with nova-api's time of the same requests (logged in order)."""
    if len(samples) != len(logged) or any(
        s.endpoint != r.endpoint for s, r in zip(samples, logged, strict=True)
    ):
        say(f"request log does not match the client's requests ({len(logged)} vs {len(samples)})")
        return samples
    return [dataclasses.replace(s, server=r.seconds) for s, r in zip(samples, logged, strict=True)]


def check_findings(planted: Planted, findings: list[dict[str, Any]]) -> None:
    """Every planted orphan reported with its kind, and no managed server reported at all."""
    kinds = {f["uuid"]: f["kind"] for f in findings}
    wrong = {u: (k, kinds.get(u)) for u, k in planted.orphans.items() if kinds.get(u) != k}
    managed = [u for u in planted.managed if u in kinds]
    if wrong or managed:
        raise SystemExit(
            f"the audit is wrong: {len(wrong)} planted orphans misreported "
            f"(e.g. {next(iter(wrong.items()), None)}), {len(managed)} managed servers reported"
        )


APPROACHES: dict[str, Callable[[Bench], Run]] = {
    "audit (fresh CLI process)": Bench.audit_cli,
    "audit (in-process)": Bench.audit_in_process,
    "one GET per domain": lambda b: b.peer(bench_audit.per_domain),
    "every server, detail": lambda b: b.peer(bench_audit.full_listing),
    "host listing, detail": lambda b: b.host_listing("/servers/detail"),
    "host listing, plain": lambda b: b.host_listing("/servers"),
    "host's hypervisor, servers": Bench.hypervisor_servers,
    "bare libvirt scan": Bench.libvirt_scan,
    "agent cycle (dry run)": Bench.agent_cycle,
}
#: The agent's incremental cycle once nothing changed for ``SAFETY_MARGIN`` (run last).
QUIET_CYCLE = "agent cycle, Nova quiet (dry run)"


def measure(bench: Bench, runs: int) -> dict[str, list[Run]]:
    """Every approach ``runs`` times, round after round (so load drifts hit all alike)."""
    results: dict[str, list[Run]] = {name: [] for name in APPROACHES}
    for round_ in range(runs):
        for name, approach in APPROACHES.items():
            results[name].append(approach(bench))
        say(f"round {round_ + 1}/{runs} done")
    return results


# --------------------------------------------------------------------------- profile


#: (label, file suffix, function name) of the profile's rows; cumulative seconds.
PROFILE_ROWS = (
    ("imports", "<frozen importlib._bootstrap>", "_find_and_load"),
    ("config (oslo.config)", "nova_orphans/cli/configure.py", "load_conf"),
    ("keystoneauth requests (all)", "keystoneauth1/session.py", "request"),
    ("  of which waiting on the socket", "~", "<method 'recv_into' of '_socket.socket' objects>"),
    ("  of which JSON decoding", "json/__init__.py", "loads"),
    ("libvirt scan", "nova_orphans/observe/hypervisor.py", "look"),
    ("classification", "nova_orphans/classify/guests.py", "classify"),
    ("report rendering", "nova_orphans/render/host.py", "render_json"),
)


def profile_audit(bench: Bench, directory: pathlib.Path) -> dict[str, float]:
    """One audit under cProfile: cumulative seconds per PROFILE_ROWS, total and Nova's time."""
    out = directory / "audit.prof"
    argv = bench.audit_argv()
    mark = bench.log.mark()
    done = bench_audit.child_run(
        [sys.executable, "-m", "cProfile", "-o", str(out), "-m", "nova_orphans.cli", *argv[1:]]
    )
    if done.code not in (exits.OK, exits.FOUND):
        raise SystemExit(f"profiled audit exited {done.code}: {done.last_line}")
    stats: Any = pstats.Stats(str(out))
    rows: dict[str, float] = {
        "wall (profiled, fresh process)": done.wall,
        "python start-up alone (-c pass)": bench_audit.child_run(
            [sys.executable, "-c", "pass"]
        ).wall,
    }
    for label, suffix, function in PROFILE_ROWS:
        rows[label] = sum(
            value[3]
            for (file, _line, name), value in stats.stats.items()
            if file.endswith(suffix) and name == function
        )
    rows["Nova's own time (request log)"] = sum(r.seconds for r in bench.log.since(mark))
    return rows


# --------------------------------------------------------------------------- report


def median(values: Sequence[float]) -> float:
    """The median, 0 for nothing."""
    return statistics.median(values) if values else 0.0


def print_table(size: int, results: dict[str, list[Run]], planted: Planted) -> None:
    """The side-by-side table of one size."""
    per_domain = median([r.wall for r in results["one GET per domain"]])
    rounds = len(next(iter(results.values())))
    print(f"\n# {size:,} servers on {HOST} + {len(planted.orphans)} planted orphans "
          f"({len(planted.deleted)} deleted, {len(planted.misplaced)} misplaced, "
          f"{len(planted.unknown)} unknown); {rounds} runs, medians")  # fmt: skip
    print(f"{'approach':<28} {'requests':>8} {'wall s':>8} {'(min-max)':>15} "
          f"{'Nova s':>8} {'vs per-domain':>14} {'peak RSS MiB':>13}")  # fmt: skip
    for name, runs in results.items():
        walls = [r.wall for r in runs]
        wall = median(walls)
        requests = int(median([len(r.requests) for r in runs]))
        nova_s = median([r.nova_seconds for r in runs])
        rss = [r.peak_mib for r in runs if r.peak_mib is not None]
        peak = f"{median(rss):.1f}" if rss else "-"
        print(f"{name:<28} {requests:>8,} {wall:>8.3f} {min(walls):>7.3f}-{max(walls):<7.3f} "
              f"{nova_s:>8.3f} {per_domain / wall:>13.1f}x {peak:>13}")  # fmt: skip
    audit = results["audit (fresh CLI process)"]
    candidates = len(planted.orphans)
    requests = max(len(r.requests) for r in audit)
    print(f"audit requests: {requests} (target <= 3 + candidates = {3 + candidates}); "
          "by endpoint, Nova's time (median run):")  # fmt: skip
    by_endpoint: dict[str, list[float]] = {}
    middle = sorted(audit, key=lambda r: r.wall)[len(audit) // 2]
    for request in middle.requests:
        by_endpoint.setdefault(request.endpoint, []).append(request.seconds)
    for endpoint, seconds in sorted(by_endpoint.items(), key=lambda kv: -sum(kv[1])):
        print(f"  {endpoint:<24} {len(seconds):>5} requests {sum(seconds):>8.3f} s")


def print_costs(model: CostModel, samples: list[Sample]) -> None:
    """The per-endpoint cost breakdown fitted from every timed request."""
    print("\n# Cost per request, fitted per endpoint over every size: fixed + per record returned")
    print(f"{'endpoint':<24} {'samples':>8} {'records':>11} {'client fixed ms':>16} "
          f"{'client ms/record':>17} {'Nova fixed ms':>14} {'Nova ms/record':>15}")  # fmt: skip
    for endpoint in sorted(model.client):
        got = [s for s in samples if s.endpoint == endpoint]
        client, server = model.client[endpoint], model.server.get(endpoint)
        records = f"{min(s.records for s in got)}-{max(s.records for s in got)}"
        nova = f"{server.fixed * 1e3:>14.2f} {server.per_record * 1e3:>15.3f}" if server else ""
        print(f"{endpoint:<24} {len(got):>8} {records:>11} {client.fixed * 1e3:>16.2f} "
              f"{client.per_record * 1e3:>17.3f} {nova}")  # fmt: skip


def machine() -> str:
    """This machine, in one line."""
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return f"{cpu}, {os.cpu_count()} CPUs, Python {platform.python_version()}"


def nova_answers(nova: harness.Nova) -> bool:
    """The stack's nova-api answers an authenticated request and the stack was bootstrapped."""
    try:
        nova.get("/os-services?binary=nova-compute")
    except (harness.StackError, ks_exc.ClientException):
        return False
    return (harness.STATE / "stack.json").exists()


def nova_version() -> str:
    """The stack's Nova package version and its API's maximum microversion."""
    package = "?"
    metadata = list((harness.NOVA_VENV / "lib").glob("python3*/site-packages/nova-*.dist-info"))
    if metadata:
        package = metadata[0].name.removeprefix("nova-").removesuffix(".dist-info")
    versions = harness.Nova(token=TOKEN).session.get("http://127.0.0.1:8774/", raise_exc=False)
    api = max((v.get("version", "") for v in versions.json().get("versions", [])), default="?")
    return f"nova {package} (API up to {api})"


# --------------------------------------------------------------------------- main


def run_size(
    nova: harness.Nova, size: int, args: argparse.Namespace, tmp: pathlib.Path
) -> tuple[dict[str, list[Run]], Planted, dict[str, float] | None]:
    """Plant one size, measure it, profile it; the servers are deleted whatever happens."""
    try:
        planted = plant(nova, size, args.orphan_percent, args.batch, args.reuse)
        size = len(planted.managed)
        uri = worlds.write_node_file(tmp, planted.domains(), name=f"{HOST}-{size}.xml")
        conf = harness.write_cli_config(
            tmp / f"bench-{size}.conf", host=HOST, libvirt_uri=uri, token=TOKEN
        )
        bench = Bench(nova, planted, uri, conf, RequestLog())
        quiet_since = time.monotonic()  # NOTE: the planting was Nova's last change
        with bench.start_agent(tmp / f"agent-{size}"):
            results = measure(bench, args.runs)
            results[QUIET_CYCLE] = bench.quiet_cycles(args.runs, quiet_since)
        profile = profile_audit(bench, tmp) if args.profile else None
        return results, planted, profile
    finally:
        remove_everything(nova)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1_000])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--orphan-percent", type=float, default=2.0)
    parser.add_argument("--batch", type=int, default=100, help="servers per multi-create")
    parser.add_argument("--lock-wait", type=float, default=1800)
    parser.add_argument("--calibrate", action="store_true", help=f"write {DEFAULT_PATH.name}")
    parser.add_argument("--costs-out", type=pathlib.Path, default=DEFAULT_PATH)
    parser.add_argument("--profile", action="store_true", help="profile one audit per size")
    parser.add_argument(
        "--reuse", action="store_true",
        help="measure the servers an interrupted run left on host1 (one size: their count)",
    )  # fmt: skip
    parser.add_argument(
        "--lock-held", action="store_true",
        help="another process holds the e2e session lock for this run (a stopped earlier run)",
    )  # fmt: skip
    args = parser.parse_args()
    # NOTE: a fresh child imports the code checked out here, whatever the venv installed.
    root = str(pathlib.Path(__file__).resolve().parents[1])
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("bench_real_nova: terminated"))
    nova = harness.Nova(token=TOKEN)
    samples: list[Sample] = []
    measured: list[int] = []
    held = contextlib.nullcontext() if args.lock_held else e2e_session_lock(args.lock_wait)
    with held, tempfile.TemporaryDirectory() as directory:
        # NOTE: asked under the lock (a restart of the stack holds it too); started here
        # when down, as an e2e session would, and left running for the others. The API
        # is asked, not stack.sh status: a stack started by newer scripts has other pieces.
        if not nova_answers(nova):
            say("starting the Nova stack")
            done = harness.stack_cmd("start", timeout=900)
            if done.returncode != 0:
                raise SystemExit(f"bench_real_nova: the stack did not start: {done.stderr[-300:]}")
        about = {"date": datetime.date.today().isoformat(), "nova": nova_version(),
                 "machine": machine()}  # fmt: skip
        print(f"{about['nova']}; {about['machine']}", flush=True)
        restore_quotas = raise_quotas(nova)
        try:
            if not args.reuse:
                remove_everything(nova)
            archive()
            for size in args.sizes:
                results, planted, profile = run_size(nova, size, args, pathlib.Path(directory))
                size = len(planted.managed)  # --reuse: the servers found
                print_table(size, results, planted)
                archive()
                if profile:
                    print_profile(size, profile)
                samples += [s for runs in results.values() for r in runs for s in r.samples]
                measured.append(size)
                # NOTE: after each size, so that a long run's first sizes are kept.
                calibrate(samples, dict(about), measured, args)
        finally:
            remove_everything(nova)
            restore_quotas()


def archive() -> None:
    """Archive and purge Nova's deleted rows, asked again when a run fails.

    NOTE: ``nova-manage db archive_deleted_rows`` fails (exit 255) when a compute
    still works on the rows it archives; a few seconds later it succeeds.
    """
    for attempt in range(3):
        try:
            harness.archive_deleted_rows()
            return
        except harness.StackError as error:
            say(f"archive failed (attempt {attempt + 1} of 3): {str(error)[:120]}")
            time.sleep(10)
    harness.archive_deleted_rows()


def calibrate(
    samples: list[Sample], about: dict[str, str], sizes: list[int], args: argparse.Namespace
) -> None:
    """Fit the cost model to the samples so far, print it, and write it with ``--calibrate``."""
    about["model"] = (f"calibrated on the real Nova API ({about['date']}, {about['nova']}, "
                      f"sizes {' and '.join(map(str, sizes))})")  # fmt: skip
    model = CostModel.fitted(samples, about)
    print_costs(model, samples)
    if args.calibrate:
        written = json.loads(model.to_json())
        if args.costs_out.exists():
            # NOTE: the `scale` section is bench_nova_scale's, measured by another run.
            earlier = json.loads(args.costs_out.read_text(encoding="utf-8"))
            written.update({k: v for k, v in earlier.items() if k == "scale"})
        args.costs_out.write_text(json.dumps(written, indent=2) + "\n", encoding="utf-8")
        print(f"\nwrote {args.costs_out}", flush=True)


def print_profile(size: int, rows: dict[str, float]) -> None:
    """Where one fresh audit's time goes."""
    print(f"\n# Profile of one fresh audit at {size:,} servers (cProfile, cumulative s)")
    for label, seconds in rows.items():
        print(f"  {label:<36} {seconds:>8.3f}")


if __name__ == "__main__":
    main()
