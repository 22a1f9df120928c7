"""Classify every domain (and every missing domain) on one host into a kind of finding.

A pure function of what the observers saw: no I/O, no clock, no configuration
object. Protections are checked before anything that could be acted on, so a
guest Nova is still busy with can never come out as an orphan.
"""

from __future__ import annotations

from collections.abc import Iterable

from nova_orphans.model import (
    SOFT_DELETED_VM_STATE,
    Domain,
    Finding,
    Kind,
    Migration,
    NovaView,
    Selector,
    Server,
    managed_here,
)

#: Migration statuses during which the source and destination both legitimately
#: hold a domain. NOTE: "finished" means a resize/cold migration waits for the
#: user to confirm or revert; the source domain must survive until then.
MIGRATION_IN_PROGRESS = frozenset(
    {
        "queued",
        "accepted",
        "pre-migrating",
        "preparing",
        "running",
        "migrating",
        "post-migrating",
        "confirming",
        "reverting",
    }
)
MIGRATION_AWAITING_CONFIRM = frozenset({"finished"})

#: Nova's migration types in the operator's words ("migration" is a cold migration).
MIGRATION_NAMES = {
    "live-migration": "live-migration",
    "evacuation": "evacuation",
    "migration": "cold migration",
    "resize": "resize",
}

RESIZED_VM_STATE = "resized"
SHELVED_OFFLOADED_VM_STATE = "shelved_offloaded"
#: A server still being built has no domain yet; it is not "lost".
BUILDING_VM_STATE = "building"


def classify(
    domains: Iterable[Domain], nova: NovaView, deny: Selector | None = None
) -> list[Finding]:
    """Return the findings for one host, most urgent kinds first.

    Domains whose server Nova manages on this host produce no finding.
    """
    deny = deny or Selector()
    domains = list(domains)
    findings = [f for d in domains if (f := _classify_domain(d, nova, deny)) is not None]
    findings.extend(_lost(domains, nova))
    order = list(Kind)
    return sorted(findings, key=lambda f: (order.index(f.kind), f.uuid))


def _classify_domain(domain: Domain, nova: NovaView, deny: Selector) -> Finding | None:
    server = nova.servers_here.get(domain.uuid) or nova.lookups.get(domain.uuid)

    def finding(kind: Kind, reason: str, brief: str) -> Finding:
        return Finding(domain.uuid, domain.name, kind, reason, domain, server, brief=brief)

    if deny.covers(domain):
        return finding(Kind.PROTECTED, "deny-listed by the operator", "deny-listed")
    if server is not None and managed_here(server, nova.host):
        return None
    if domain.metadata is None:
        if domain.metadata_error:
            why = f"unreadable Nova metadata ({domain.metadata_error}); treated as not Nova's"
            return finding(Kind.FOREIGN, why, "unreadable Nova metadata")
        why = "no Nova metadata in the domain XML: treated as made outside Nova"
        return finding(Kind.FOREIGN, why, "no Nova metadata")
    protected = protection(domain.uuid, server, nova)
    if protected:
        return finding(Kind.PROTECTED, *protected)
    if server is None:
        # NOTE: archived or purged rows are the usual cause, but a restored database
        # or another cloud's guest look the same: the reason states only the fact.
        why = "Nova has no record of this server, live or deleted"
        return finding(Kind.UNKNOWN, why, "no Nova record")
    if server.deleted:
        when = server.deleted_at.isoformat() if server.deleted_at else "an unknown time"
        reason = f"Nova deleted the server at {when}; the guest was left behind"
        brief = f"deleted {server.deleted_at:%Y-%m-%d %H:%M}" if server.deleted_at else "deleted"
        return finding(Kind.DELETED, reason, brief)
    return finding(Kind.MISPLACED, *_misplaced_reason(domain.uuid, server, nova))


def protection(uuid: str, server: Server | None, nova: NovaView) -> tuple[str, str] | None:
    """Why this guest must not be treated as an orphan now (reason, brief), or None."""
    if server is not None and not server.deleted:
        if server.vm_state == SOFT_DELETED_VM_STATE:
            return "SOFT_DELETED: the server can still be restored", "SOFT_DELETED"
        if server.task_state:
            why = f"task_state {server.task_state}: Nova is working on this server"
            return why, f"task_state {server.task_state}"
        if server.vm_state == RESIZED_VM_STATE:
            why = "vm_state RESIZED: a resize or cold migration awaits confirmation"
            return why, "vm_state RESIZED"
    for migration in nova.migrations_of(uuid):
        if migration.status in MIGRATION_IN_PROGRESS:
            return (
                f"{_name(migration)} in progress "
                f"({migration.source_compute} -> {migration.dest_compute}, {migration.status})",
                f"{_name(migration)} in progress",
            )
        if migration.status in MIGRATION_AWAITING_CONFIRM:
            # NOTE: until confirm or revert, either end may be the one Nova keeps.
            return (
                f"{_name(migration)} awaits confirmation "
                f"({migration.source_compute} -> {migration.dest_compute})"
                + _role(migration, nova.host),
                f"{_name(migration)} awaits confirmation",
            )
    return None


def _name(migration: Migration) -> str:
    return MIGRATION_NAMES.get(migration.migration_type, migration.migration_type)


def _role(migration: Migration, host: str) -> str:
    """ "; this host is its source/destination", or nothing when it is neither."""
    if migration.source_compute == host:
        return "; this host is its source"
    if migration.dest_compute == host:
        return "; this host is its destination"
    return ""


def _misplaced_reason(uuid: str, server: Server, nova: NovaView) -> tuple[str, str]:
    """(reason, brief) of a guest Nova places elsewhere or nowhere."""
    if server.vm_state == SHELVED_OFFLOADED_VM_STATE:
        return "shelved-offloaded: Nova keeps no guest on any host for it", "shelved-offloaded"
    if server.host is None:
        # NOTE: e.g. a build that failed after defining the domain: Nova puts the
        # server in ERROR with no host, and the domain stays behind.
        return (
            f"Nova places this server on no host (vm_state {server.vm_state}): "
            "no guest of it should exist on any host",
            f"Nova: on no host ({server.vm_state})",
        )
    touching = [
        m for m in nova.migrations_of(uuid) if nova.host in (m.source_compute, m.dest_compute)
    ]
    where, brief = f"Nova places this server on {server.host}, not here", f"Nova: on {server.host}"
    if not touching:
        return f"{where}; Nova lists no migration of it touching this host", brief
    latest = max(touching, key=lambda m: m.created_at or "")
    role = "source" if latest.source_compute == nova.host else "destination"
    return f"{_name(latest)} {role}: {where} (migration {latest.status})", brief


def _lost(domains: list[Domain], nova: NovaView) -> list[Finding]:
    present = {d.uuid for d in domains}
    return [
        Finding(
            uuid,
            server.name or uuid,
            Kind.LOST,
            f"Nova places this server here (vm_state {server.vm_state}) "
            "but libvirt has no such domain",
            None,
            server,
            brief=f"no domain (Nova: here, {server.vm_state})",
        )
        for uuid, server in nova.servers_here.items()
        if uuid not in present
        and server.vm_state != BUILDING_VM_STATE
        and not any(m.status in MIGRATION_IN_PROGRESS for m in nova.migrations_of(uuid))
    ]
