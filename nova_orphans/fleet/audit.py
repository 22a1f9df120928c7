"""The fleet audit: scan every host's libvirt, ask Nova about each, classify; changes nothing."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping, Sequence

from nova_orphans.config.nova_compute import DEFAULT_INSTANCES_PATH
from nova_orphans.fleet import split_brain
from nova_orphans.fleet.scan import HostScan
from nova_orphans.model import ORPHAN_KINDS, Domain, Finding, Kind, Selector
from nova_orphans.observe.nova.fleet import FleetNovaObserver


@dataclasses.dataclass(frozen=True)
class ScannedHost:
    """One host of the fleet: its findings, or why it could not be audited.

    ``findings`` is None when the host's libvirt could not be read: that is
    never the same as "no domains". ``known_to_nova`` is False for a host that
    runs no nova-compute service Nova knows of.
    """

    host: str
    uri: str
    findings: list[Finding] | None
    error: str | None
    known_to_nova: bool

    @property
    def reachable(self) -> bool:
        """True when the host's libvirt was read and its guests classified."""
        return self.findings is not None


@dataclasses.dataclass(frozen=True)
class FleetScan:
    """The outcome of one fleet audit."""

    checked_at: datetime.datetime
    hosts: list[ScannedHost]
    #: Requests made to Nova's API by the observer, host discovery included.
    nova_requests: int
    #: Where Nova keeps instance directories on the hosts (for the leftovers).
    instances_path: str = DEFAULT_INSTANCES_PATH

    @property
    def unreachable(self) -> list[ScannedHost]:
        """Hosts whose libvirt could not be read (exit code 1)."""
        return [h for h in self.hosts if not h.reachable]

    @property
    def findings(self) -> list[Finding]:
        """Every finding of every reachable host."""
        return [f for h in self.hosts for f in h.findings or []]

    @property
    def has_orphans(self) -> bool:
        """True when some host holds an orphan, split-brain included (exit code 3)."""
        return any(f.kind in ORPHAN_KINDS for f in self.findings)

    def count(self, kind: Kind) -> int:
        """How many findings of ``kind``, over all hosts."""
        return sum(1 for f in self.findings if f.kind is kind)


def fleet_audit(
    scans: Sequence[HostScan],
    nova: FleetNovaObserver,
    known_hosts: Sequence[str],
    now: datetime.datetime,
    deny: Selector | None = None,
    instances_path: str = DEFAULT_INSTANCES_PATH,
) -> FleetScan:
    """Classify the scanned hosts against Nova's view of each (``FleetNovaObserver.host_views``).

    The scans come first, so Nova's answers are never older than the domains
    they are compared with. Raises ``NovaError`` when Nova fails (fail closed).
    """
    domains_by_host = {s.host: s.domains for s in scans if s.domains is not None}
    views = nova.host_views(
        {host: [d.uuid for d in domains] for host, domains in domains_by_host.items()},
        _details_for(domains_by_host, deny),
    )
    findings = split_brain.classify_fleet(domains_by_host, views, deny)
    known = set(known_hosts)
    hosts = [
        ScannedHost(s.host, s.uri, findings.get(s.host), s.error, s.host in known) for s in scans
    ]
    return FleetScan(now, hosts, nova.requests_made, instances_path)


def _details_for(
    domains_by_host: Mapping[str, Sequence[Domain]], deny: Selector | None
) -> dict[str, list[str]]:
    """Per host, the domains whose finding shows Nova's full record even where the host's
    plain listing explains them: a copy running on two hosts (split-brain) and a
    deny-listed domain (protected)."""
    split = split_brain.running_copies(domains_by_host)
    return {
        host: [d.uuid for d in domains if d.uuid in split or (deny and deny.covers(d))]
        for host, domains in domains_by_host.items()
    }
