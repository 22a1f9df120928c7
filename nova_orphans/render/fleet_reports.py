"""Render a report-based fleet audit: cross-host findings first, then each host."""

from __future__ import annotations

import collections
from typing import Any

from nova_orphans.classify import cost
from nova_orphans.fleet.merge import leftover_totals
from nova_orphans.fleet.records import (
    CrossHost,
    HostStanding,
    MergedFleet,
    ReportedLeftovers,
    Standing,
)
from nova_orphans.model import Kind
from nova_orphans.render import fleet as render
from nova_orphans.render import host as render_host
from nova_orphans.render import table


def render_json(fleet: MergedFleet) -> str:
    """The merged fleet as one JSON document of the versioned shape (``report.versioned_json``;
    ``counts``: one split-brain per UUID running on two trusted hosts, and the trusted hosts'
    own findings)."""
    kinds = [Kind.SPLIT_BRAIN] * len(fleet.split_brain) + list(_kinds(fleet).elements())
    return render_host.versioned_json(
        {
            "checked_at": fleet.checked_at.isoformat(),
            "source": "reports",
            "max_age_seconds": fleet.max_age.total_seconds(),
            "split_brain": [_cross(c) for c in fleet.split_brain],
            "moved_between_reports": [_cross(c) for c in fleet.moved],
            "duplicates": [_cross(c) for c in fleet.duplicates],
            "hosts": [_host(h) for h in fleet.hosts],
            "unreadable": [{"source": b.source, "reason": b.reason} for b in fleet.unattributed],
            "summary": _summary_record(fleet),
        },
        kinds,
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
        "status": host.standing.value,
        "known_to_nova": host.known_to_nova,
        "report": None
        if seen is None
        else {
            "source": seen.source,
            "checked_at": seen.checked_at.isoformat(),
            "identity": seen.identity,
        },
        "notes": list(host.notes),
        # NOTE: only a trusted report's findings are shown as findings.
        "findings": [
            vars(f) | {"kind": f.kind.value, "usage": vars(f.usage) if f.usage else None}
            for f in seen.findings
        ]
        if host.trusted and seen is not None
        else None,
        "leftovers": _leftovers(host.leftovers),
    }


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


def _kinds(fleet: MergedFleet) -> collections.Counter[Kind]:
    return collections.Counter(f.kind for h in fleet.hosts for f in h.findings)


def _summary_record(fleet: MergedFleet) -> dict[str, Any]:
    return {
        "hosts": len(fleet.hosts),
        **{s.value: _by_standing(fleet, s) for s in Standing if s is not Standing.TRUSTED},
        "trusted": len(_by_standing(fleet, Standing.TRUSTED)),
        "unreadable_reports": len(fleet.unattributed),
        "split_brain": len(fleet.split_brain),
        "duplicates": len(fleet.duplicates),
        "findings": {k.value: n for k, n in _kinds(fleet).items()},
        "nova_requests": fleet.nova_requests,
        "leftovers": {k.value: n for k, n in leftover_totals(fleet.hosts).items()},
        "untracked": render.untracked_record(cost.total(u for _, u in _ranking(fleet))),
        "untracked_by_host": [
            {"host": host, **render.untracked_record(totals)} for host, totals in _ranking(fleet)
        ],
    }


def _ranking(fleet: MergedFleet) -> list[tuple[str, cost.Untracked]]:
    """The trusted hosts, the one whose report shows the most untracked memory first."""
    return cost.ranked(
        {
            h.host: cost.untracked_usages((f.uuid, f.kind, f.usage) for f in h.findings)
            for h in fleet.hosts
            if h.trusted
        }
    )


#: Findings across hosts: split-brain, moved between reports, duplicates.
CROSS_COLUMNS = (table.Column("ACROSS HOSTS", 12), table.Column("UUID"), table.Column("NAME", 20),
                 table.Column("REASON"))  # fmt: skip
#: Each trusted host's own findings, as its audit classified them.
HOST_COLUMNS = (table.Column("KIND", 11), table.Column("UUID"), table.Column("NAME", 20),
                table.Column("REASON"))  # fmt: skip


def render_table(fleet: MergedFleet, wide: bool = False) -> str:
    """The merged fleet for people: cross-host findings, each host, a summary line, with
    a header over each table; within ``table.WIDTH`` columns unless ``wide``."""
    cross = [("SPLIT-BRAIN", c.uuid, c.name, c.reason) for c in fleet.split_brain]
    cross += [("moved", c.uuid, c.name, c.reason) for c in fleet.moved]
    cross += [("duplicate", c.uuid, c.name, f"defined on {c.reason}") for c in fleet.duplicates]
    lines = table.render(CROSS_COLUMNS, cross, wide) if cross else []
    for host in fleet.hosts:
        lines += table.fit(_host_line(host), wide)
        for note in host.notes:
            lines += table.fit(f"note: {note}", wide, indent="    ")
        rows = [(f.kind.value, f.uuid, f.name, f.reason if wide else f.brief or f.reason)
                for f in host.findings]  # fmt: skip
        lines += table.render(HOST_COLUMNS, rows, wide, indent="  ") if rows else []
        if host.leftovers is not None:
            lines += table.fit(leftovers_line(dict(host.leftovers.counts)), wide, indent="  ")
            for item in host.leftovers.items if wide else ():
                whose = f" (server {item.server})" if item.server else ""
                lines += table.fit(f"{item.kind.value} {item.subject}{whose}", wide, "    ")
    for bad in fleet.unattributed:
        lines += table.fit(f"UNREADABLE {bad.source}: {bad.reason}", wide)
    for line in render.ranking_lines(_ranking(fleet)):
        lines += table.fit(line, wide)
    if any(h.leftovers is not None for h in fleet.hosts):
        totals = dict(leftover_totals(fleet.hosts))
        lines += table.fit("across trusted hosts, " + leftovers_line(totals), wide)
    lines += table.fit(summary(fleet), wide)
    return "\n".join(lines)


def _host_line(host: HostStanding) -> str:
    known = "" if host.known_to_nova else ", not a nova-compute host Nova knows"
    when = f" at {host.report.checked_at.isoformat()}" if host.report else ""
    return f"== {host.host}: {host.standing.value}{when}{known}"


def summary(fleet: MergedFleet) -> str:
    """One line: hosts by standing, cross-host findings, findings by kind, Nova requests."""
    parts = [f"{len(fleet.hosts)} hosts, {len(_by_standing(fleet, Standing.TRUSTED))} trusted"]
    for standing in Standing:
        names = _by_standing(fleet, standing)
        if names and standing is not Standing.TRUSTED:
            parts.append(f"{len(names)} {standing.value} ({', '.join(names)})")
    if fleet.unattributed:
        parts.append(f"{len(fleet.unattributed)} unreadable report(s)")
    counts = _kinds(fleet)
    found = [f"{len(fleet.split_brain)} split-brain"] if fleet.split_brain else []
    found += [f"{counts[k]} {k.value}" for k in Kind if counts[k]]
    if fleet.duplicates:
        found.append(f"{len(fleet.duplicates)} duplicate(s)")
    return (
        f"fleet from reports at {fleet.checked_at.isoformat()}: {', '.join(parts)}; "
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
    return f"{len(parts)} report(s) not merged: {'; '.join(parts)}"
