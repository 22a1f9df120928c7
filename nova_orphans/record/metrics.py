"""Prometheus metrics of the agent, on a registry of its own.

The node-exporter textfile carries only the tool's own series: node_exporter exports its own
``process_*`` (a second set collides on every scrape), and the ``*_created`` series a counter
or histogram has by default double its series for no operator's use. The HTTP endpoint adds
the process's own ``process_*``, as every exporter does (docs/admin/metrics.md).
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping

import prometheus_client as prom

from nova_orphans.classify.cost import Untracked
from nova_orphans.classify.leftover import LeftoverKind, Leftovers
from nova_orphans.decide.policy import Step
from nova_orphans.model import DangerKind, Kind
from nova_orphans.record import files
from nova_orphans.version import tool_version

#: Why a cycle acted on nothing (``nova_orphans_cycles_aborted_total{reason}``).
ABORT_REASONS = ("nova", "libvirt", "identity", "journal", "brake")
#: How a destructive step ended (``nova_orphans_actions_total{outcome}``).
OUTCOMES = ("done", "skipped", "failed", "refused")
#: What the agent looks at, and how it read it (``nova_orphans_looks_total``).
LOOK_SOURCES = ("nova", "libvirt")
LOOK_READS = ("full", "changes")
#: The agent's output files (``nova_orphans_output_write_failures_total{file}``).
OUTPUT_FILES = ("textfile", "report")
#: The textfile's mode: node_exporter's own user reads it, whatever the agent's umask.
TEXTFILE_MODE = 0o644
#: The kinds of Nova request the tool makes (``nova_orphans_nova_requests_total{endpoint}``).
NOVA_ENDPOINTS = (
    "servers",  # GET /servers/detail: the listings
    "server",  # GET /servers/{id}: one lookup
    "server-migrations",  # GET /servers/{id}/migrations
    "migrations",  # GET /os-migrations
    "services",  # GET /os-services
    "hypervisors",  # GET /os-hypervisors/detail
    "other",
)
#: How a Nova request ended: its HTTP status class, or ``error`` when no answer came.
NOVA_STATUSES = ("2xx", "3xx", "4xx", "5xx", "error")
# NOTE: no ``*_created`` series (a per-process setting of prometheus_client, read at collect
# time, so it holds for every registry here however early it was made).
prom.disable_created_metrics()

_COLLECTIONS = {"os-migrations": "migrations", "os-services": "services",
                "os-hypervisors": "hypervisors"}  # fmt: skip


def nova_endpoint(request: str) -> str:
    """The kind of a Nova request (one of ``NOVA_ENDPOINTS``), from its path or next link."""
    segments = [s for s in urllib.parse.urlsplit(request).path.split("/") if s]
    for i, segment in enumerate(segments):
        if segment in _COLLECTIONS:
            return _COLLECTIONS[segment]
        if segment == "servers":
            rest = segments[i + 1 :]
            if not rest or rest[0] == "detail":
                return "servers"
            return "server-migrations" if rest[1:2] == ["migrations"] else "server"
    return "other"


def nova_status(status: int | None) -> str:
    """The status class of an HTTP status (one of ``NOVA_STATUSES``); None: no answer."""
    if status is None or not 200 <= status < 600:
        return "error"
    return f"{status // 100}xx"


class Metrics:
    """The agent's metrics; one instance per process."""

    def __init__(self) -> None:
        #: The tool's own series: the textfile and, with the process's, the HTTP endpoint.
        self.registry = prom.CollectorRegistry()
        self.served = prom.CollectorRegistry()
        self.served.register(self.registry)
        # NOTE: the process's CPU, memory, open files and start time, as every exporter has;
        # never in the textfile, where node_exporter's own process_* would collide.
        prom.ProcessCollector(registry=self.served)
        self.build_info = prom.Gauge(
            "nova_orphans_build_info",
            "Always 1; the version label is the installed nova-orphans.",
            ["version"],
            registry=self.registry,
        )
        self.build_info.labels(version=tool_version()).set(1)
        self.last_cycle_success = prom.Gauge(
            "nova_orphans_last_cycle_success",
            "1 when the last cycle observed Nova and libvirt and ran to its end; 0 when it "
            "was aborted (then the findings are those of the last successful cycle).",
            registry=self.registry,
        )
        self.brake_engaged = prom.Gauge(
            "nova_orphans_brake_engaged",
            "1 while a brake holds the agent to reporting only (last planned cycle); else 0.",
            registry=self.registry,
        )
        self.findings = prom.Gauge(
            "nova_orphans_findings",
            "Findings of the last completed cycle, by kind.",
            ["kind"],
            registry=self.registry,
        )
        self.actions = prom.Counter(
            "nova_orphans_actions",
            "Destructive steps (stop, reap, purge, restore), by step, outcome and dry run.",
            ["action", "outcome", "dry_run"],
            registry=self.registry,
        )
        self.cycle_duration = prom.Histogram(
            "nova_orphans_cycle_duration_seconds",
            "Duration of a cycle.",
            registry=self.registry,
            buckets=(0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300),
        )
        self.cycles_aborted = prom.Counter(
            "nova_orphans_cycles_aborted",
            "Cycles that acted on nothing, by reason (nova, libvirt, identity, journal, brake).",
            ["reason"],
            registry=self.registry,
        )
        self.identity_verified = prom.Gauge(
            "nova_orphans_identity_verified",
            "1 when the last cycle proved the libvirt read is the hypervisor Nova calls "
            "this host; 0 on a mismatch or when no check could prove it (nothing is done).",
            registry=self.registry,
        )
        self.last_success = prom.Gauge(
            "nova_orphans_last_success_timestamp_seconds",
            "Unix time of the last cycle that observed Nova and libvirt successfully.",
            registry=self.registry,
        )
        self.on_hold = prom.Gauge(
            "nova_orphans_guests_on_hold",
            "Guests on hold (started by someone else after the agent stopped them, or "
            "restored): never acted on until `nova-orphans release UUID`.",
            registry=self.registry,
        )
        self.untracked_vcpus = prom.Gauge(
            "nova_orphans_untracked_vcpus",
            "vCPUs of the running guests Nova does not manage here (deleted, unknown, "
            "misplaced, foreign): Placement does not count them.",
            registry=self.registry,
        )
        self.untracked_memory = prom.Gauge(
            "nova_orphans_untracked_memory_bytes",
            "Memory (current balloon) of the running guests Nova does not manage here: "
            "Placement does not count it.",
            registry=self.registry,
        )
        self.untracked_disk = prom.Gauge(
            "nova_orphans_untracked_disk_bytes",
            "Bytes the file-backed disks of the guests Nova does not manage here take on "
            "this host.",
            registry=self.registry,
        )
        self.dangers = prom.Gauge(
            "nova_orphans_dangers",
            "Findings of the last completed cycle carrying each danger: shared-volume (a "
            "volume another server may write), address-conflict (a MAC another port has), "
            "unknown (Cinder or Neutron could not be asked).",
            ["danger"],
            registry=self.registry,
        )
        self.leftovers = prom.Gauge(
            "nova_orphans_leftovers",
            "What lost servers left on and around this host at the last completed cycle, "
            "by kind: stray-files, stray-port, stray-attachment, stray-allocation (report "
            "only). NaN: that kind was not checked (a service could not be asked).",
            ["kind"],
            registry=self.registry,
        )
        self.nova_requests = prom.Counter(
            "nova_orphans_nova_requests",
            "Requests to Nova's API, by endpoint and status class (error: no answer).",
            ["endpoint", "status"],
            registry=self.registry,
        )
        self.nova_request_duration = prom.Histogram(
            "nova_orphans_nova_request_duration_seconds",
            "Duration of a request to Nova's API, by endpoint.",
            ["endpoint"],
            registry=self.registry,
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )
        self.looks = prom.Counter(
            "nova_orphans_looks",
            "Completed looks at Nova and at libvirt, by source (nova, libvirt) and read "
            "(full: all the host holds, read afresh; changes: brought up to date from what "
            "changed since the last look).",
            ["source", "read"],
            registry=self.registry,
        )
        self.interval = prom.Gauge(
            "nova_orphans_config_interval_seconds",
            "[agent] interval: seconds between two cycles (the alert rules derive their "
            "thresholds from it).",
            registry=self.registry,
        )
        self.grace_period = prom.Gauge(
            "nova_orphans_config_grace_period_seconds",
            "[agent] grace_period: seconds a finding must exist before any step.",
            registry=self.registry,
        )
        self.nova_clock_ahead = prom.Gauge(
            "nova_orphans_nova_clock_ahead_seconds",
            "How far Nova's clock (the HTTP Date of the last look's first answer) ran ahead "
            "of the newest report time of its compute services (negative: behind). Beyond "
            "300 s either way, every look at Nova is full until they agree.",
            registry=self.registry,
        )
        for kind in Kind:
            self.findings.labels(kind=kind.value)
        for danger in DangerKind:
            self.dangers.labels(danger=danger.value)
        for stray in LeftoverKind:
            self.leftovers.labels(kind=stray.value)
        for endpoint in NOVA_ENDPOINTS:
            self.nova_request_duration.labels(endpoint=endpoint)
            for status in NOVA_STATUSES:
                self.nova_requests.labels(endpoint=endpoint, status=status)
        # NOTE: every labelled series exists from the start at 0 (findings above), so
        # rate() and alerts see the first event, and a missing series never reads as "none".
        for step in Step:
            for outcome in OUTCOMES:
                for dry_run in ("true", "false"):
                    self.actions.labels(action=step.value, outcome=outcome, dry_run=dry_run)
        self.output_write_failures = prom.Counter(
            "nova_orphans_output_write_failures",
            "Writes of the agent's output files that failed (the [metrics] textfile, the "
            "[agent] report_file), by file; the agent carries on.",
            ["file"],
            registry=self.registry,
        )
        for file in OUTPUT_FILES:
            self.output_write_failures.labels(file=file)
        for reason in ABORT_REASONS:
            self.cycles_aborted.labels(reason=reason)
        for source in LOOK_SOURCES:
            for read in LOOK_READS:
                self.looks.labels(source=source, read=read)

    def set_config(self, interval: float, grace_period: float) -> None:
        """Publish the configured interval and grace period (the alerts' time scale)."""
        self.interval.set(interval)
        self.grace_period.set(grace_period)

    def set_findings(self, counts: dict[Kind, int]) -> None:
        """Publish the number of findings of each kind (zero for kinds not seen)."""
        for kind in Kind:
            self.findings.labels(kind=kind.value).set(counts.get(kind, 0))

    def set_costs(self, untracked: Untracked, dangers: Mapping[DangerKind, int]) -> None:
        """Publish what non-managed guests consume and how many findings carry each danger."""
        self.untracked_vcpus.set(untracked.vcpus)
        self.untracked_memory.set(untracked.memory_bytes)
        self.untracked_disk.set(untracked.disk_bytes)
        for danger in DangerKind:
            self.dangers.labels(danger=danger.value).set(dangers.get(danger, 0))

    def set_leftovers(self, leftovers: Leftovers | None) -> None:
        """Publish how many leftovers of each kind; NaN for a kind not checked (docs/design.md
        rule 21: a look not made never reads as 0), every kind when none was looked for."""
        for kind in LeftoverKind:
            count = leftovers.count(kind) if leftovers is not None else None
            self.leftovers.labels(kind=kind.value).set(float("nan") if count is None else count)

    def looked(self, source: str, full: bool) -> None:
        """Count one completed look at ``source`` (``LOOK_SOURCES``), full or from changes."""
        self.looks.labels(source=source, read="full" if full else "changes").inc()

    def nova_request(self, request: str, status: int | None, seconds: float) -> None:
        """Count and time one Nova request (``status`` None: no answer came)."""
        endpoint = nova_endpoint(request)
        self.nova_requests.labels(endpoint=endpoint, status=nova_status(status)).inc()
        self.nova_request_duration.labels(endpoint=endpoint).observe(seconds)

    def serve(self, address: str, port: int) -> None:
        """Expose the metrics over HTTP (loopback by default)."""
        prom.start_http_server(port, addr=address, registry=self.served)

    def write_textfile(self, path: str) -> None:
        """Write the tool's own metrics for node-exporter's textfile collector: replaced
        whole, mode 0644 whatever the umask (``files.write_whole``); raises ``OSError``."""
        files.write_whole(path, prom.generate_latest(self.registry).decode("utf-8"), TEXTFILE_MODE)

    def output_write_failed(self, file: str) -> None:
        """Count one failed write of the output file ``file`` (one of ``OUTPUT_FILES``)."""
        self.output_write_failures.labels(file=file).inc()


class FleetMetrics:
    """Metrics of one ``fleet audit``, for node-exporter's textfile collector.

    NOTE: separate names from the agent's, so one node-exporter can carry both.
    """

    def __init__(self) -> None:
        self.registry = prom.CollectorRegistry()
        self.findings = prom.Gauge(
            "nova_orphans_fleet_findings",
            "Findings of the last fleet audit, by kind (split-brain: UUIDs running on "
            "two or more hosts, once each).",
            ["kind"],
            registry=self.registry,
        )
        self.hosts = prom.Gauge(
            "nova_orphans_fleet_hosts",
            "Hosts of the last fleet audit, by status (audited: scanned or its report "
            "merged; unreachable: not scanned, or its report not merged).",
            ["status"],
            registry=self.registry,
        )
        self.last_audit = prom.Gauge(
            "nova_orphans_fleet_last_audit_timestamp_seconds",
            "Unix time of the last fleet audit for which Nova answered.",
            registry=self.registry,
        )
        for kind in Kind:
            self.findings.labels(kind=kind.value)
        for status in ("audited", "unreachable"):
            self.hosts.labels(status=status)

    def record(self, counts: dict[Kind, int], audited: int, unreachable: int, at: float) -> None:
        """Publish one fleet audit's result."""
        for kind in Kind:
            self.findings.labels(kind=kind.value).set(counts.get(kind, 0))
        self.hosts.labels(status="audited").set(audited)
        self.hosts.labels(status="unreachable").set(unreachable)
        self.last_audit.set(at)

    def text(self) -> str:
        """The metrics in node-exporter's textfile format (the caller writes it whole)."""
        return prom.generate_latest(self.registry).decode("utf-8")
