"""Ground truth: what each guest on the audited host really is, read from the simulation's rows.

Written from docs/design.md's table of kinds, independently of ``core.classify``: it
reads the simulated Nova's database rows and the simulated host's domains
directly, never an observer's answer, so an observer or classifier that goes
wrong disagrees with it.
"""

from __future__ import annotations

import enum

from nova_orphans.fakes.host import SimulatedHost
from nova_orphans.fakes.nova_views import SimMigration
from nova_orphans.model import Domain
from nova_orphans.sim.cloud import HOST, Cloud

#: Migration statuses during which Nova still works on the instance (both ends may hold
#: a domain), or waits for the user to confirm or revert a resize.
BUSY_MIGRATION = frozenset(
    {"queued", "accepted", "pre-migrating", "preparing", "running", "migrating",
     "post-migrating", "confirming", "reverting", "finished"}
)  # fmt: skip


class Truth(str, enum.Enum):
    """What a domain on the audited host is, in docs/design.md's words."""

    MANAGED = "managed"  # Nova's live record places it here: not a finding
    PROTECTED = "protected"
    FOREIGN = "foreign"
    DELETED = "deleted"
    UNKNOWN = "unknown"
    MISPLACED = "misplaced"


ORPHANS = frozenset({Truth.DELETED, Truth.UNKNOWN, Truth.MISPLACED})


def truth_of(
    cloud: Cloud, domain: Domain, denied: bool, any_host: bool = False, host: str = HOST
) -> Truth:
    """What ``domain``, defined in ``host``'s libvirt, is now.

    ``any_host``: count migrations of the instance between any two hosts as Nova
    being busy with it (the strict reading, for the safety invariant); otherwise only
    migrations touching the audited host (what the agent's scan is meant to see).
    """
    row = cloud.nova.servers.get(domain.uuid)
    if denied:
        return Truth.PROTECTED
    live = row is not None and not row.deleted
    if live and row is not None and row.host == host and row.vm_state != "soft-delete":
        return Truth.MANAGED
    if domain.metadata is None:
        return Truth.FOREIGN
    if live and row is not None and (row.vm_state in ("soft-delete", "resized") or row.task_state):
        return Truth.PROTECTED
    if any(m.status in BUSY_MIGRATION for m in migrations_of(cloud, domain.uuid, any_host)):
        return Truth.PROTECTED
    if row is None:
        return Truth.UNKNOWN
    return Truth.DELETED if row.deleted else Truth.MISPLACED


def migrations_of(cloud: Cloud, uuid: str, any_host: bool) -> list[SimMigration]:
    """Nova's visible (not deleted) migrations of ``uuid``."""
    return [
        m
        for m in cloud.nova.migrations.values()
        if m.instance_uuid == uuid
        and not m.deleted
        and (any_host or HOST in (m.source_compute, m.dest_compute))
    ]


def still_managed(cloud: Cloud, domain: Domain, denied: bool, host: str = HOST) -> str | None:
    """Why Nova still manages (or protects) this guest of ``host``'s libvirt, or None.

    The safety invariant's test: ``host`` is the hypervisor the domain truly is on,
    whatever host the agent was configured as.
    """
    truth = truth_of(cloud, domain, denied, any_host=True, host=host)
    if truth in ORPHANS:
        return None
    row = cloud.nova.servers.get(domain.uuid)
    state = f"vm_state={row.vm_state} task_state={row.task_state} host={row.host}" if row else ""
    return f"{truth.value} {state}".strip()


def lost(cloud: Cloud) -> set[str]:
    """Servers Nova places here (not building, not migrating) without a domain on the host."""
    return {
        row.uuid
        for row in cloud.nova.servers.values()
        if not row.deleted
        and row.host == HOST
        and row.vm_state not in ("soft-delete", "building")
        and row.uuid not in cloud.hv.domains
        and not any(
            m.status in BUSY_MIGRATION - {"finished"}
            for m in migrations_of(cloud, row.uuid, any_host=False)
        )
    }


def shares_a_volume(cloud: Cloud, domain: Domain) -> bool:
    """True when Cinder has one of the domain's volumes attached to another server."""
    for disk in domain.disks:
        volume = cloud.cinder.volumes.get(disk.serial or "")
        if volume and any(a["server_id"] != domain.uuid for a in volume["attachments"]):
            return True
    return False


def stops_at_once(
    cloud: Cloud, domain: Domain, stop_shared_volume_at_once: bool, host: str = HOST
) -> bool:
    """True when docs/design.md rule 18 lets the agent stop this guest without its wait:
    opted in, truly ``deleted``, running, and a volume of it written by another server."""
    return (
        stop_shared_volume_at_once
        and domain.is_active
        and truth_of(cloud, domain, False, any_host=True, host=host) is Truth.DELETED
        and shares_a_volume(cloud, domain)
    )


def outside(host: SimulatedHost, path: str) -> bool:
    """True when ``path`` leads (through the host's symlinks) anywhere but a file under
    the host's instances_path: a host file, a device, a URL."""
    if ":" in path.split("/", 1)[0]:
        return True
    real, base = host.real_path(path), host.instances_path
    return real == base or not real.startswith(base.rstrip("/") + "/")
