"""Render an audit report for people (table) or programs (JSON)."""

from __future__ import annotations

import collections
import dataclasses
import json
from collections.abc import Iterable
from typing import Any

from nova_orphans import shapes
from nova_orphans.audit import HostAudit
from nova_orphans.classify import cost
from nova_orphans.classify.identity import Verdict
from nova_orphans.decide.holds import Hold
from nova_orphans.model import Danger, DangerKind, Domain, Finding, Kind, Usage
from nova_orphans.render import leftovers as render_leftovers
from nova_orphans.render import table
from nova_orphans.version import tool_version

#: Version of the JSON documents' shape (docs/schema/report.schema.json); raised on any
#: change a script could notice, other than a new optional field.
SCHEMA_VERSION = 1
#: A finding's columns by default: they fit ``table.WIDTH`` with the short reason.
COLUMNS = (table.Column("KIND", 11), table.Column("UUID"), table.Column("NAME", 20),
           table.Column("REASON"))  # fmt: skip
#: ``--wide``: everything, the whole reason.
WIDE_COLUMNS = tuple(
    table.Column(title)
    for title in ("KIND", "UUID", "NAME", "DOMAIN", "NOVA HOST", "VM STATE", "TASK", "REASON")
)


def finding_record(finding: Finding, hold: Hold | None = None) -> dict[str, Any]:
    """One finding as plain JSON-ready data (``hold``: the guest's hold, if on hold)."""
    domain, server = finding.domain, finding.server
    meta = domain.metadata if domain else None
    return {
        "uuid": finding.uuid,
        "name": finding.name,
        "kind": finding.kind.value,
        "reason": finding.reason,
        "brief": finding.short_reason,
        "domain_state": domain.state.value if domain else None,
        "domain_job_active": domain.job_active if domain else None,
        "display_name": meta.display_name if meta else (server.name if server else None),
        "project_id": meta.project_id if meta else None,
        "user_id": meta.user_id if meta else None,
        "flavor": meta.flavor if meta else None,
        "nova_host": server.host if server else None,
        "nova_status": server.status if server else None,
        "vm_state": server.vm_state if server else None,
        "task_state": server.task_state if server else None,
        "deleted_at": server.deleted_at.isoformat() if server and server.deleted_at else None,
        "disks": [vars(d) for d in domain.disks] if domain else [],
        "interfaces": [vars(i) for i in domain.interfaces] if domain else [],
        "hold": {"since": hold.since.isoformat(), "reason": hold.reason} if hold else None,
        "usage": usage_record(domain.usage) if domain else None,
        "dangers": [danger_record(d) for d in finding.dangers]
        if finding.dangers is not None
        else None,
    }


def usage_record(usage: Usage) -> dict[str, Any]:
    """What a guest consumes (null: libvirt did not say)."""
    return dataclasses.asdict(usage)


def danger_record(danger: Danger) -> dict[str, Any]:
    """One danger as plain JSON-ready data."""
    return {
        "danger": danger.kind.value,
        "subject": danger.subject,
        "detail": danger.detail,
        "other_server": danger.other_server,
        "port": danger.port,
        "fixed_ips": list(danger.fixed_ips),
    }


def cost_record(total: cost.Untracked, placement: cost.PlacementAnswer | None) -> dict[str, Any]:
    """The host's untracked totals beside Placement's view (null: Placement not asked)."""
    provider = placement.provider if placement else None
    return {
        "untracked": dataclasses.asdict(total)
        | {"unmeasured": list(total.unmeasured), "incomplete": list(total.incomplete)},
        "placement": None
        if placement is None
        else {
            "provider": provider.name if provider else None,
            "uuid": provider.uuid if provider else None,
            "error": placement.error,
            "resources": {rc: dataclasses.asdict(r) for rc, r in provider.resources.items()}
            if provider
            else {},
        },
        "summary": cost.comparison(total, placement) if placement else [],
    }


def domain_record(domain: Domain) -> dict[str, Any]:
    """One domain as the fleet merge needs it: UUID, name, libvirt state."""
    return {"uuid": domain.uuid, "name": domain.name, "state": domain.state.value}


def identity_record(verdict: Verdict) -> dict[str, Any]:
    """The identity verdict as plain JSON-ready data: state, reason, every check."""
    return {
        "state": verdict.state.value,
        "reason": verdict.reason,
        "libvirt": dataclasses.asdict(verdict.libvirt) if verdict.libvirt else None,
        "nova_nodes": [dataclasses.asdict(n) for n in verdict.nodes],
        # NOTE: the report's schema names a check's status "outcome"; it stays as published.
        "checks": [
            {"check": r.check.value, "outcome": r.status.value, "detail": r.detail}
            for r in verdict.results
        ],
    }


def render_json(report: HostAudit) -> str:
    """The report as one JSON document."""
    return versioned_json(
        {
            "host": report.host,
            "checked_at": report.checked_at.isoformat(),
            "identity": identity_record(report.identity),
            "findings": [finding_record(f, report.holds.get(f.uuid)) for f in report.findings],
            "domains": [domain_record(d) for d in report.domains],
            "cost": cost_record(report.untracked, report.placement),
            "shared_volume": report.shared_volumes > 0,
            "dangers": {k.value: report.dangers(k) for k in DangerKind},
            "leftovers": render_leftovers.record(report.leftovers),
        },
        (f.kind for f in report.findings),
    )


def columns(wide: bool) -> tuple[table.Column, ...]:
    """A finding's columns: ``WIDE_COLUMNS`` for ``--wide``, else ``COLUMNS``."""
    return WIDE_COLUMNS if wide else COLUMNS


def table_row(f: Finding, hold: Hold | None = None, wide: bool = False) -> tuple[str, ...]:
    """One finding as the cells of ``columns(wide)``; a hold is told with the reason."""
    if not wide:
        return (f.kind.value, f.uuid, f.name,
                f"ON HOLD; {f.short_reason}" if hold else f.short_reason)  # fmt: skip
    return (
        f.kind.value,
        f.uuid,
        f.name,
        f.domain.state.value if f.domain else "-",
        (f.server.host or "-") if f.server else "-",
        (f.server.vm_state or "-") if f.server else "-",
        (f.server.task_state or "-") if f.server else "-",
        f"{f.reason}; {hold.describe()}" if hold else f.reason,
    )


def render_table(report: HostAudit, wide: bool = False, leftovers: bool = False) -> str:
    """The report as a table with a header (none when nothing was found), its dangers, one
    line per kind of leftover (each leftover listed with ``leftovers`` or ``wide``), the
    identity verdict, a summary line and what non-managed guests cost; within
    ``table.WIDTH`` columns unless ``wide`` (a removal command is never cut)."""
    rows = [table_row(f, report.holds.get(f.uuid), wide) for f in report.findings]
    lines = table.render(columns(wide), rows, wide) if rows else []
    for line in danger_lines(report.findings):
        lines += table.fit(line, wide)
    lines += render_leftovers.lines(report.leftovers, leftovers or wide, wide)
    for line in [
        report.identity.reason,
        _summary(report),
        *cost_lines(report.untracked, report.placement),
    ]:
        lines += table.fit(line, wide)
    return "\n".join(lines)


def danger_lines(findings: Iterable[Finding]) -> list[str]:
    """One line per danger: ``DANGER shared-volume <uuid> (<name>): <detail>``."""
    return [
        f"DANGER {d.kind.value} {f.uuid} ({f.name}): {d.detail}"
        for f in findings
        for d in f.dangers or ()
    ]


def cost_lines(total: cost.Untracked, placement: cost.PlacementAnswer | None) -> list[str]:
    """What the non-managed guests consume, and Placement's view beside it."""
    line = (
        f"untracked: {total.guests} guests Nova does not manage here use {total.vcpus} vCPUs, "
        f"{total.memory_bytes / shapes.GIB:.1f} GiB memory, "
        f"{total.disk_bytes / shapes.GIB:.1f} GiB disk"
    )
    if total.unmeasured:
        line += f" (at least: libvirt did not measure {len(total.unmeasured)} of them)"
    return [line, *(cost.comparison(total, placement) if placement else [])]


def _summary(report: HostAudit) -> str:
    counts = collections.Counter(f.kind.value for f in report.findings)
    parts = ", ".join(f"{n} {kind}" for kind, n in counts.items()) or "no findings"
    return f"host {report.host} at {report.checked_at.isoformat()}: {parts}"


def versioned_json(body: dict[str, Any], kinds: Iterable[Kind]) -> str:
    """One JSON document: ``schema_version``, ``tool_version``, ``body``, then ``counts``
    (of ``kinds``, one per finding).

    ``counts`` holds every kind, zero included, so a script never needs a default.
    """
    counts = collections.Counter(kinds)
    document = versioned({**body, "counts": {kind.value: counts[kind] for kind in Kind}})
    return json.dumps(document, indent=2)


def versioned(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` after ``schema_version`` and ``tool_version``: every JSON document's envelope."""
    return {"schema_version": SCHEMA_VERSION, "tool_version": tool_version(), **body}
