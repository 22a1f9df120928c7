"""Render a fleet audit, scanning or from reports: cross-host findings first, then each host,
the untracked totals and a summary line, as tables or one JSON document.

NOTE: the fleet's only renderer (docs/design.md §9): both fleet audits end in one
``MergedFleet``, so a host reads the same whichever way it was seen. A scan's findings carry
the whole finding (this process classified it) and the remnants of deleted and unknown guests;
a report's carry only the fields the merge read from it (rule 20).
"""

from __future__ import annotations

from typing import Any

from nova_orphans import shapes
from nova_orphans.classify import cost
from nova_orphans.fleet.merge import leftover_totals
from nova_orphans.fleet.records import (
    MERGED,
    CrossHost,
    HostStanding,
    MergedFleet,
    ReportedFinding,
    ReportedLeftovers,
    Standing,
)
from nova_orphans.model import Kind
from nova_orphans.render import host as render_host
from nova_orphans.render import table


def render_json(fleet: MergedFleet) -> str:
    """The fleet as one JSON document of the versioned shape (``host.versioned_json``;
    ``counts``: one split-brain per UUID running on two trusted hosts, and the trusted hosts'
    own findings)."""
    return render_host.versioned_json(
        {
            "checked_at": fleet.checked_at.isoformat(),
            "source": fleet.source,
            "max_age_seconds": None if fleet.max_age is None else fleet.max_age.total_seconds(),
            "split_brain": [_cross(c) for c in fleet.split_brain],
            "moved_between_reports": [_cross(c) for c in fleet.moved],
            "duplicates": [_cross(c) for c in fleet.duplicates],
            "hosts": [_host(h) for h in fleet.hosts],
            "unreadable": [{"source": b.source, "reason": b.reason} for b in fleet.unattributed],
            "summary": _summary_record(fleet),
        },
        fleet.counts().elements(),
    )


def _cross(item: CrossHost) -> dict[str, Any]:
    return {
        "uuid": item.uuid,
        "name": item.name,
        "hosts": list(item.hosts),
        "running_on": list(item.running_on),
        "reason": item.reason,
    }


def _host(host: HostStanding) -> dict[str, Any]:
    seen = host.report
    return {
        "host": host.host,
        "uri": host.uri,
        "status": host.standing.value,
        "error": host.error,
        "known_to_nova": host.known_to_nova,
        "report": None
        if seen is None or host.standing is Standing.AUDITED
        else {
            "source": seen.source,
            "checked_at": seen.checked_at.isoformat(),
            "identity": seen.identity,
        },
        "notes": list(host.notes),
        # NOTE: only a trusted report's findings are shown as findings.
        "findings": [_finding(f) for f in seen.findings] if host.trusted and seen else None,
        "leftovers": _leftovers(host.leftovers),
    }


def _finding(found: ReportedFinding) -> dict[str, Any]:
    if found.finding is None:
        return {
            "uuid": found.uuid,
            "name": found.name,
            "kind": found.kind.value,
            "reason": found.reason,
            "usage": render_host.usage_record(found.usage) if found.usage else None,
            "brief": found.brief,
        }
    # NOTE: "leftovers" is the earlier name of "remnants" (docs/reference/json.md).
    remnants = list(found.remnants)
    return dict(render_host.finding_record(found.finding), remnants=remnants, leftovers=remnants)


def _leftovers(told: ReportedLeftovers | None) -> dict[str, Any] | None:
    """A trusted host's leftovers (no commands: its own audit prints them); null otherwise."""
    if told is None:
        return None
    return {
        "counts": {k.value: n for k, n in told.counts.items()},
        "items": [
            {"kind": i.kind.value, "subject": i.subject, "server": i.server} for i in told.items
        ],
    }


def leftovers_line(counts: dict[Any, int | None]) -> str:
    """``leftovers: stray-files 1, stray-port not checked, ...``."""
    parts = [f"{k.value} {'not checked' if n is None else n}" for k, n in counts.items()]
    return "leftovers: " + ", ".join(parts)


def _by_standing(fleet: MergedFleet, standing: Standing) -> list[str]:
    return [h.host for h in fleet.hosts if h.standing is standing]


def _unknown_to_nova(fleet: MergedFleet) -> list[str]:
    return [h.host for h in fleet.hosts if not h.known_to_nova]


def _summary_record(fleet: MergedFleet) -> dict[str, Any]:
    per_host = fleet.counts()
    per_host.pop(Kind.SPLIT_BRAIN, None)
    ranking = _ranking(fleet)
    return {
        "hosts": len(fleet.hosts),
        # NOTE: merged hosts are counted, the others named.
        **{s.value: len(_by_standing(fleet, s)) for s in Standing if s in MERGED},
        **{s.value: _by_standing(fleet, s) for s in Standing if s not in MERGED},
        "unknown_to_nova": _unknown_to_nova(fleet),
        "unreadable_reports": len(fleet.unattributed),
        "split_brain": len(fleet.split_brain),
        "duplicates": len(fleet.duplicates),
        "findings": {k.value: n for k, n in per_host.items()},
        "nova_requests": fleet.nova_requests,
        "leftovers": {k.value: n for k, n in leftover_totals(fleet.hosts).items()},
        "untracked": untracked_record(cost.total(u for _, u in ranking)),
        "untracked_by_host": [
            {"host": host, **untracked_record(totals)} for host, totals in ranking
        ],
    }


def _ranking(fleet: MergedFleet) -> list[tuple[str, cost.Untracked]]:
    """The trusted hosts, the one holding the most untracked memory first."""
    return cost.ranked(
        {
            h.host: cost.untracked_usages((f.uuid, f.kind, f.usage) for f in h.findings)
            for h in fleet.hosts
            if h.trusted
        }
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


#: Findings across hosts: split-brain, moved between reports, duplicates.
CROSS_COLUMNS = (table.Column("ACROSS HOSTS", 12), table.Column("UUID"), table.Column("NAME", 20),
                 table.Column("REASON"))  # fmt: skip
#: Each trusted host's own findings, as its audit classified them.
HOST_COLUMNS = (table.Column("KIND", 11), table.Column("UUID"), table.Column("NAME", 20),
                table.Column("REASON"))  # fmt: skip


def render_table(fleet: MergedFleet, wide: bool = False) -> str:
    """The fleet for people: cross-host findings, each host, the untracked totals and a
    summary line, with a header over each table; within ``table.WIDTH`` columns unless
    ``wide``."""
    cross = [("SPLIT-BRAIN", c.uuid, c.name, c.reason) for c in fleet.split_brain]
    cross += [("moved", c.uuid, c.name, c.reason) for c in fleet.moved]
    cross += [("duplicate", c.uuid, c.name, f"defined on {c.reason}") for c in fleet.duplicates]
    lines = table.render(CROSS_COLUMNS, cross, wide) if cross else []
    for host in fleet.hosts:
        lines += _host_lines(host, wide)
    for bad in fleet.unattributed:
        lines += table.fit(f"UNREADABLE {bad.source}: {bad.reason}", wide)
    for line in ranking_lines(_ranking(fleet)):
        lines += table.fit(line, wide)
    if any(h.leftovers is not None for h in fleet.hosts):
        totals = dict(leftover_totals(fleet.hosts))
        lines += table.fit("across trusted hosts, " + leftovers_line(totals), wide)
    lines += table.fit(summary(fleet), wide)
    return "\n".join(lines)


def _host_lines(host: HostStanding, wide: bool) -> list[str]:
    """One host: its line, its notes, its findings' table, the remnants, its leftovers."""
    lines = table.fit(_host_line(host), wide)
    for note in host.notes:
        lines += table.fit(f"note: {note}", wide, indent="    ")
    rows = [(f.kind.value, f.uuid, f.name, f.reason if wide else f.brief or f.reason)
            for f in host.findings]  # fmt: skip
    lines += table.render(HOST_COLUMNS, rows, wide, indent="  ") if rows else []
    # NOTE: under the table, each naming its guest: a table may fold or note its rows.
    for found in host.findings:
        if found.remnants:
            text = f"remnants of {found.uuid}: " + "; ".join(found.remnants)
            lines += table.fit(text, wide, indent="    ")
    if host.leftovers is not None:
        lines += table.fit(leftovers_line(dict(host.leftovers.counts)), wide, indent="  ")
        for item in host.leftovers.items if wide else ():
            whose = f" (server {item.server})" if item.server else ""
            lines += table.fit(f"{item.kind.value} {item.subject}{whose}", wide, "    ")
    return lines


def _host_line(host: HostStanding) -> str:
    uri = f" ({host.uri})" if host.uri else ""
    when = ""
    if host.report and host.standing is not Standing.AUDITED:
        when = f" at {host.report.checked_at.isoformat()}"
    known = "" if host.known_to_nova else ", not a nova-compute host Nova knows"
    found = f", {len(host.findings)} finding(s)" if host.trusted else ""
    return f"== {host.host}{uri}: {host.standing.value}{when}{known}{found}"


def summary(fleet: MergedFleet) -> str:
    """One line: hosts by standing, cross-host findings, findings by kind, Nova requests."""
    merged = sum(1 for h in fleet.hosts if h.trusted)
    read = "audited" if fleet.source == "scan" else "trusted"
    parts = [f"{len(fleet.hosts)} hosts, {merged} {read}"]
    for standing in Standing:
        names = _by_standing(fleet, standing)
        if names and standing not in MERGED:
            parts.append(f"{len(names)} {standing.value} ({', '.join(names)})")
    unknown = [h.host for h in fleet.hosts if h.trusted and not h.known_to_nova]
    if unknown:
        parts.append(f"{len(unknown)} unknown to Nova ({', '.join(unknown)})")
    if fleet.unattributed:
        parts.append(f"{len(fleet.unattributed)} unreadable report(s)")
    counts = fleet.counts()
    found = [f"{counts[k]} {k.value}" for k in Kind if counts[k]]
    if fleet.duplicates:
        found.append(f"{len(fleet.duplicates)} duplicate(s)")
    origin = "fleet" if fleet.source == "scan" else "fleet from reports"
    return (
        f"{origin} at {fleet.checked_at.isoformat()}: {', '.join(parts)}; "
        f"{', '.join(found) or 'no findings'}; {fleet.nova_requests} Nova requests"
    )


def problems(fleet: MergedFleet) -> str:
    """One line naming every host and report that could not be merged, and why (for stderr;
    a missing host's why is its standing)."""
    parts = [
        f"{h.host} {h.standing.value}"
        + (f" ({h.notes[0]})" if h.notes and h.standing is not Standing.MISSING else "")
        for h in fleet.incomplete
    ]
    parts += [f"{b.source} unreadable ({b.reason})" for b in fleet.unattributed]
    what = "host(s) not audited" if fleet.source == "scan" else "report(s) not merged"
    return f"{len(parts)} {what}: {'; '.join(parts)}"
