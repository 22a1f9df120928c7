"""The scanning fleet audit: read every host's libvirt, ask Nova about each, classify each host
as its own audit would, then the one merge the reports go through; changes nothing.

NOTE: one fleet path (docs/design.md §9). A scan makes the same per-host records a host's
report is read into (``fleet/records.py``), so the split-brain rule, the duplicates, the
totals and the rendering are the merge's and the renderer's alone, whichever way the hosts
were seen. What a scan adds is only what it knows first hand: each host was read just now by
this process (``audited``) or could not be read (``unreachable``).
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping, Sequence

from nova_orphans.classify.guests import classify
from nova_orphans.classify.remnants import remnants
from nova_orphans.config.nova_compute import DEFAULT_INSTANCES_PATH
from nova_orphans.fleet import merge
from nova_orphans.fleet.records import (
    HostStanding,
    MergedFleet,
    PerHostReport,
    ReportedFinding,
    SeenDomain,
    Standing,
)
from nova_orphans.fleet.scan import HostScan
from nova_orphans.model import Domain, Finding, Kind, NovaView, Selector
from nova_orphans.observe.nova.fleet import FleetNovaObserver

#: Kinds whose guest Nova already cleaned up after on its side (or never knew): their
#: domain XML's remnants are shown, so an operator can finish what Nova's local delete skipped.
REMNANT_KINDS = frozenset({Kind.DELETED, Kind.UNKNOWN})


def fleet_audit(
    scans: Sequence[HostScan],
    nova: FleetNovaObserver,
    known_hosts: Sequence[str],
    now: datetime.datetime,
    deny: Selector | None = None,
    instances_path: str = DEFAULT_INSTANCES_PATH,
) -> MergedFleet:
    """Classify the scanned hosts against Nova's view of each (``FleetNovaObserver.look_at_hosts``)
    and merge them (``merge.merge``). Hosts keep the order of ``scans``.

    The scans come first, so Nova's answers are never older than the domains
    they are compared with. Raises ``NovaError`` when Nova fails (fail closed).
    """
    domains_by_host = {s.host: s.domains for s in scans if s.domains is not None}
    denied = {
        host: [d.uuid for d in domains if deny and deny.covers(d)]
        for host, domains in domains_by_host.items()
    }
    views = nova.look_at_hosts(
        {host: [d.uuid for d in domains] for host, domains in domains_by_host.items()}, denied
    )
    merged = merge_scans(
        scans, views, known_hosts, now, nova.look_up_with_migrations, deny, instances_path
    )
    return dataclasses.replace(merged, nova_requests=nova.requests_made)


def merge_scans(
    scans: Sequence[HostScan],
    views: Mapping[str, NovaView],
    known_hosts: Sequence[str],
    now: datetime.datetime,
    ask_nova: merge.AskNova,
    deny: Selector | None = None,
    instances_path: str = DEFAULT_INSTANCES_PATH,
) -> MergedFleet:
    """Each scanned host classified against its ``NovaView`` exactly as its own audit would,
    then the reports' merge (``merge.merge``: Nova asked about split-brain candidates only).
    Pure: what the scans and Nova's answers say."""
    known = set(known_hosts)
    hosts = tuple(
        _standing(s, views.get(s.host), s.host in known, now, deny, instances_path) for s in scans
    )
    return dataclasses.replace(merge.merge(hosts, (), ask_nova, now, None), source="scan")


def _standing(
    scan: HostScan,
    view: NovaView | None,
    known: bool,
    now: datetime.datetime,
    deny: Selector | None,
    instances_path: str,
) -> HostStanding:
    if scan.domains is None or view is None:
        why = scan.error or "libvirt not read"
        return HostStanding(scan.host, Standing.UNREACHABLE, None, (why,), known, scan.uri, why)
    # NOTE: in classify's order (most urgent kinds first), as a host's own audit lists them.
    findings = tuple(_reported(f, instances_path) for f in classify(scan.domains, view, deny))
    report = PerHostReport(
        source=f"libvirt {scan.uri}",
        host=scan.host,
        checked_at=now,
        # NOTE: a scan reads the URI the operator's template names; it proves no identity
        # (docs/design.md rule 10), and is merged because this process read it just now.
        identity="unproven",
        identity_reason="read by the fleet scan over its libvirt URI",
        domains=tuple(_seen(d) for d in scan.domains),
        findings=findings,
    )
    return HostStanding(scan.host, Standing.AUDITED, report, (), known, scan.uri)


def _seen(domain: Domain) -> SeenDomain:
    return SeenDomain(domain.uuid, domain.name, domain.state)


def _reported(finding: Finding, instances_path: str) -> ReportedFinding:
    domain = finding.domain
    left = remnants(domain, instances_path) if domain and finding.kind in REMNANT_KINDS else []
    return ReportedFinding(
        finding.uuid,
        finding.name,
        finding.kind,
        finding.reason,
        usage=domain.usage if domain else None,
        brief=finding.short_reason,
        remnants=tuple(left),
        finding=finding,
    )
