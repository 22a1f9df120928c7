"""Prometheus metrics of the agent, on a registry of its own."""

from __future__ import annotations

import prometheus_client as prom

from nova_orphans.core.model import Kind


class Metrics:
    """The agent's metrics; one instance per process."""

    def __init__(self) -> None:
        self.registry = prom.CollectorRegistry()
        self.findings = prom.Gauge(
            "nova_orphans_findings",
            "Findings of the last completed cycle, by kind.",
            ["kind"],
            registry=self.registry,
        )
        self.actions = prom.Counter(
            "nova_orphans_actions",
            "Destructive steps, by step, outcome and dry run.",
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
        for kind in Kind:
            self.findings.labels(kind=kind.value)

    def set_findings(self, counts: dict[Kind, int]) -> None:
        """Publish the number of findings of each kind (zero for kinds not seen)."""
        for kind in Kind:
            self.findings.labels(kind=kind.value).set(counts.get(kind, 0))

    def serve(self, address: str, port: int) -> None:
        """Expose the metrics over HTTP (loopback by default)."""
        prom.start_http_server(port, addr=address, registry=self.registry)

    def write_textfile(self, path: str) -> None:
        """Write the metrics for node-exporter's textfile collector (atomically)."""
        prom.write_to_textfile(path, self.registry)
