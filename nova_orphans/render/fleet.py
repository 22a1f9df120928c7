"""Render a fleet report: grouped by host, with a summary line, as a table or JSON.

For ``deleted`` and ``unknown`` guests the host-side leftovers from the domain
XML (volume and network disk sources, tap devices) are listed, so an operator
can finish the cleanup that Nova's local delete skipped.
"""

from __future__ import annotations

import collections
from typing import Any

from nova_orphans import shapes
from nova_orphans.classify import cost, remnants
from nova_orphans.fleet.audit import FleetScan, ScannedHost
from nova_orphans.model import Finding, Kind
from nova_orphans.render import host as render_host
from nova_orphans.render import table

#: Kinds whose guest Nova already cleaned up after on its side (or forgot).
LEFTOVER_KINDS = frozenset({Kind.DELETED, Kind.UNKNOWN})


def leftovers(finding: Finding, instances_path: str) -> list[str]:
    """Host-side pieces an operator may have to remove by hand; only for deleted/unknown."""
    if finding.domain is None or finding.kind not in LEFTOVER_KINDS:
        return []
    return remnants.remnants(finding.domain, instances_path)


def render_json(fleet: FleetScan) -> str:
    """The fleet report as one JSON document."""
    return render_host.versioned_json(
        {
            "checked_at": fleet.checked_at.isoformat(),
            "hosts": [_host_record(h, fleet.instances_path) for h in fleet.hosts],
            "summary": _summary_record(fleet),
        },
        (f.kind for f in fleet.findings),
    )


def _host_record(host: ScannedHost, instances_path: str) -> dict[str, Any]:
    return {
        "host": host.host,
        "uri": host.uri,
        "status": _status(host),
        "error": host.error,
        "known_to_nova": host.known_to_nova,
        "findings": None
        if host.findings is None
        else [
            dict(render_host.finding_record(f), leftovers=leftovers(f, instances_path))
            for f in host.findings
        ],
    }


def _status(host: ScannedHost) -> str:
    return "audited" if host.reachable else "unreachable"


def _summary_record(fleet: FleetScan) -> dict[str, Any]:
    return {
        "hosts": len(fleet.hosts),
        "audited": sum(1 for h in fleet.hosts if h.reachable),
        "unreachable": [h.host for h in fleet.unreachable],
        "unknown_to_nova": [h.host for h in fleet.hosts if not h.known_to_nova],
        "findings": {k.value: fleet.count(k) for k in Kind if fleet.count(k)},
        "nova_requests": fleet.nova_requests,
        "untracked": untracked_record(cost.total(u for _, u in _ranking(fleet))),
        "untracked_by_host": [
            {"host": host, **untracked_record(totals)} for host, totals in _ranking(fleet)
        ],
    }


def _ranking(fleet: FleetScan) -> list[tuple[str, cost.Untracked]]:
    """The audited hosts, the one holding the most memory Placement does not count first."""
    return cost.ranked(
        {h.host: cost.untracked(h.findings) for h in fleet.hosts if h.findings is not None}
    )


def untracked_record(totals: cost.Untracked) -> dict[str, Any]:
    """A host's (or the fleet's) untracked totals as JSON-ready data."""
    return {
        "guests": totals.guests,
        "vcpus": totals.vcpus,
        "memory_bytes": totals.memory_bytes,
        "disk_bytes": totals.disk_bytes,
        "unmeasured": len(totals.unmeasured),
    }


def untracked_lines(fleet: FleetScan) -> list[str]:
    """The fleet's untracked totals, then one line per host holding any, most memory first."""
    return ranking_lines(_ranking(fleet))


def ranking_lines(ranked: list[tuple[str, cost.Untracked]]) -> list[str]:
    """The untracked totals of ``ranked`` hosts, then one line per host holding any."""
    ranking = [(h, u) for h, u in ranked if u.guests]
    whole = cost.total(u for _, u in ranking)
    lines = [
        f"untracked: {whole.guests} guests Nova does not manage use {whole.vcpus} vCPUs, "
        f"{whole.memory_bytes / shapes.GIB:.1f} GiB memory, {whole.disk_bytes / shapes.GIB:.1f} "
        "GiB disk Placement does not count; by host, most memory first:"
        if ranking
        else "untracked: no guests Nova does not manage"
    ]
    lines += [
        f"  {host}: {u.memory_bytes / shapes.GIB:.1f} GiB memory, {u.vcpus} vCPUs, "
        f"{u.disk_bytes / shapes.GIB:.1f} GiB disk ({u.guests} guests)"
        for host, u in ranking
    ]
    return lines


def render_table(fleet: FleetScan, wide: bool = False) -> str:
    """The fleet report as tables with a header, one per host (each finding followed by
    its leftovers), and a summary line; within ``table.WIDTH`` columns unless ``wide``."""
    lines: list[str] = []
    for host in fleet.hosts:
        lines += table.fit(_host_line(host), wide)
        if host.findings:
            rows = [render_host.table_row(f, wide=wide) for f in host.findings]
            header, *found = table.render(render_host.columns(wide), rows, wide, indent="  ")
            lines.append(header)
            for line, finding in zip(found, host.findings, strict=True):
                lines.append(line)
                extra = leftovers(finding, fleet.instances_path)
                if extra:
                    lines += table.fit("leftovers: " + "; ".join(extra), wide, indent="    ")
    for line in untracked_lines(fleet):
        lines += table.fit(line, wide)
    lines += table.fit(summary(fleet), wide)
    return "\n".join(lines)


def _host_line(host: ScannedHost) -> str:
    head = f"== {host.host} ({host.uri})"
    notes = [] if host.known_to_nova else ["not a nova-compute host Nova knows"]
    if host.findings is None:
        notes.append(f"UNREACHABLE: {host.error}")
    else:
        notes.append(f"{len(host.findings)} finding(s)")
    return f"{head}: {'; '.join(notes)}"


def summary(fleet: FleetScan) -> str:
    """One line: hosts audited/unreachable/unknown to Nova, findings by kind, Nova requests."""
    counts = collections.Counter(f.kind for f in fleet.findings)
    found = ", ".join(f"{counts[k]} {k.value}" for k in Kind if counts[k]) or "no findings"
    hosts = f"{len(fleet.hosts)} hosts, {len(fleet.hosts) - len(fleet.unreachable)} audited"
    if fleet.unreachable:
        hosts += f", {len(fleet.unreachable)} unreachable ({_names(fleet.unreachable)})"
    unknown = [h for h in fleet.hosts if not h.known_to_nova]
    if unknown:
        hosts += f", {len(unknown)} unknown to Nova ({_names(unknown)})"
    return (
        f"fleet at {fleet.checked_at.isoformat()}: {hosts}; {found}; "
        f"{fleet.nova_requests} Nova requests"
    )


def _names(hosts: list[ScannedHost]) -> str:
    return ", ".join(h.host for h in hosts)
