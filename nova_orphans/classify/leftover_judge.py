"""Which of what the host holds are leftovers, judged against Nova's records. Pure.

In-flight work is never a leftover: a server Nova is building, migrating, resizing,
shelving or evacuating (the guests' protections, ``classify/guests.py``), a port not
bound yet, an attachment attaching or detaching, an allocation held by a migration in
progress. Only validated UUIDs (and a plain host name) go into a printed command
(docs/design.md rules 20 and 21).
"""

from __future__ import annotations

import posixpath
from collections.abc import Collection, Iterable, Mapping

from nova_orphans.classify.guests import (
    BUILDING_VM_STATE,
    MIGRATION_AWAITING_CONFIRM,
    MIGRATION_IN_PROGRESS,
    protection,
)
from nova_orphans.classify.leftover import (
    NOVA_RESOURCE_CLASSES,
    Allocation,
    BoundPort,
    Held,
    InstanceDir,
    Leftover,
    LeftoverKind,
    Leftovers,
    Remedy,
    Seen,
    Verb,
    VolumeAttachment,
    not_checked,
)
from nova_orphans.model import Migration, NovaView, Server, managed_here
from nova_orphans.shapes import GIB, UUID, plain_host

#: Cinder attachment statuses of an attach or a detach under way.
ATTACHMENT_IN_FLIGHT = frozenset({"attaching", "detaching"})
#: A port Neutron has not bound yet (Nova binds it while it builds or migrates a server).
PORT_BEING_BOUND = frozenset({"unbound"})
#: Migration statuses during which its allocation and its files are Nova's work.
MIGRATION_BUSY = MIGRATION_IN_PROGRESS | MIGRATION_AWAITING_CONFIRM


def wanted(seen: Seen, view: NovaView, domains: Collection[str]) -> set[str]:
    """The UUIDs whose Nova record the leftovers need, beyond those ``view`` holds.

    ``view``'s migrations must be those touching the host (an allocation may be held
    by one). Attachments add none: Cinder lists every attachment of the cloud, so an
    attachment is judged here only when its server is this host's deleted server or
    has another trace here (``_tied_here``).
    """
    here = view.servers_here
    consumers = {a.consumer for a in seen.allocations or () if _nova_consumer(a)}
    found = {d.uuid for d in seen.dirs or () if d.uuid not in domains}
    found |= {p.device_id for p in seen.ports or () if _server_port(p)}
    found |= consumers - {m.uuid for m in view.migrations if m.uuid}
    found -= here.keys()
    if seen.allocations is not None:
        # NOTE: a server here without an allocation: its states tell whether Nova is busy.
        found |= {u for u in here.keys() - consumers if here[u].summary}
    return {u for u in found if UUID.fullmatch(u)} - view.lookups.keys()


def attachment_servers(seen: Seen) -> set[str]:
    """The servers Cinder's attachments name (candidates for the host's deleted servers)."""
    return {a.server_id for a in seen.attachments or () if UUID.fullmatch(a.server_id)}


def find(
    seen: Seen,
    view: NovaView,
    records: Mapping[str, Server | None],
    domains: Collection[str],
    instances_path: str,
    shared_storage: str | None = None,
    nova_error: str | None = None,
    zones: Collection[str] | None = None,
) -> Leftovers:
    """The host's leftovers from what was seen and what Nova says, each with the step
    that would remove it (its ``remedy``); no command: ``decide/told.py`` tells them.

    ``records``: Nova's record of each UUID ``wanted`` asked for (None: no record at all);
    the host's deleted servers among the attachments' servers are in it too.
    ``shared_storage``: why ``instances_path`` may be shared between hosts (then a
    directory of a server Nova runs elsewhere is that host's, not a leftover).
    ``nova_error``: Nova could not be asked for the records: nothing is checked.
    ``zones``: Nova's availability zones (a port is Nova's only when its owner is
    ``compute:<zone>``); None: not read, and the ports are not checked.
    """
    if nova_error:
        return not_checked(f"Nova not asked: {nova_error}")
    known: dict[str, Server | None] = {**view.lookups, **records}
    known.update({u: s for u, s in view.servers_here.items() if u not in records})
    judge = _Judge(view, known, domains)
    items: list[Leftover] = []
    skipped = dict(seen.not_read)
    if seen.dirs is not None:
        items += _files(seen.dirs, judge, instances_path, shared_storage)
    if seen.ports is not None and zones is not None:
        items += _ports(seen.ports, judge, frozenset(zones), seen.dirs)
    elif seen.ports is not None:
        skipped.setdefault(LeftoverKind.PORT, "Nova's availability zones were not read")
        skipped.setdefault(LeftoverKind.FOREIGN_PORT, "Nova's availability zones were not read")
    if seen.attachments is not None:
        items += _attachments(seen.attachments, judge)
    if seen.allocations is not None and seen.provider:
        items += _allocations(seen.allocations, seen.provider, judge)
    elif LeftoverKind.ALLOCATION not in skipped:
        skipped[LeftoverKind.ALLOCATION] = "Placement named no resource provider for this host"
    if LeftoverKind.PORT in skipped:
        skipped.setdefault(LeftoverKind.FOREIGN_PORT, skipped[LeftoverKind.PORT])
    for kind, attr in _READ:
        if getattr(seen, attr) is None and kind not in skipped:
            skipped[kind] = "not read"
    return Leftovers(tuple(items), skipped)


_READ = (
    (LeftoverKind.FILES, "dirs"),
    (LeftoverKind.PORT, "ports"),
    (LeftoverKind.FOREIGN_PORT, "ports"),
    (LeftoverKind.ATTACHMENT, "attachments"),
    (LeftoverKind.ALLOCATION, "allocations"),
)


class _Judge:
    """Whose a UUID is, and whether Nova is busy with it, from one host's records."""

    def __init__(
        self, view: NovaView, known: Mapping[str, Server | None], domains: Collection[str]
    ) -> None:
        self.view = view
        self.known = known
        self.domains = set(domains)
        self.migrations = {m.uuid: m for m in view.migrations if m.uuid}

    def busy(self, uuid: str) -> str | None:
        """Why Nova is working on server ``uuid`` now (building, migrating…), or None."""
        record = self.known.get(uuid)
        if record is not None and not record.deleted and record.vm_state == BUILDING_VM_STATE:
            return "vm_state building"
        why = protection(uuid, record, self.view)
        return why[1] if why else None

    def gone(self, uuid: str) -> tuple[str, str | None] | None:
        """(why the server is not Nova's here, where Nova runs it) — None when it is
        managed here, unknown to this look, or Nova is busy with it."""
        if uuid not in self.known or self.busy(uuid):
            return None
        record = self.known[uuid]
        if record is None:
            return "Nova has no record of server " + uuid + " (archived or purged)", None
        if managed_here(record, self.view.host):
            return None
        if record.deleted:
            when = f" at {record.deleted_at.isoformat()}" if record.deleted_at else ""
            return f"Nova deleted server {uuid}{when}", None
        where = f"on {record.host}" if record.host else "on no host"
        state = f" ({record.vm_state})" if record.vm_state else ""
        return f"Nova runs server {uuid} {where}{state}", record.host

    def last_here(self, uuid: str) -> bool:
        """Whether Nova's record places ``uuid`` on this host (or Nova has none at all)."""
        record = self.known.get(uuid)
        return record is None or record.host == self.view.host

    def managed(self, uuid: str) -> bool:
        record = self.known.get(uuid)
        return record is not None and managed_here(record, self.view.host)


def _files(
    dirs: Iterable[InstanceDir], judge: _Judge, instances_path: str, shared: str | None
) -> Iterable[Leftover]:
    for found in dirs:
        if not UUID.fullmatch(found.uuid) or found.uuid in judge.domains:
            continue
        gone = judge.gone(found.uuid)
        if gone is None or (shared and not judge.last_here(found.uuid)):
            # NOTE: on shared storage a directory of a server another host ran (live or
            # deleted there) is that host's to tell.
            continue
        path = posixpath.join(posixpath.normpath(instances_path), found.uuid)
        what = f" ({', '.join(found.files)})" if found.files else " (empty)"
        record = judge.known.get(found.uuid)
        live = record is not None and not record.deleted
        yield Leftover(
            LeftoverKind.FILES,
            path,
            found.uuid,
            f"{gone[0]}; no domain here holds {path}{what}",
            # NOTE: docs/design.md rule 22: a server Nova still has (elsewhere, shelved
            # offloaded) never gets a delete told; nova-compute cleans a finished move's
            # source files itself.
            None if live else Remedy(Verb.REMOVE_FILES, found.uuid),
            held_by=Held.LIVE if live else None,
            why=f"Nova still has server {found.uuid}: no delete is told for its files"
            if live
            else None,
            server_host=gone[1],
            disk_bytes=found.disk_bytes,
        )


def _server_port(port: BoundPort) -> bool:
    """A port bound to a compute device (``compute:<zone>``) whose device is a UUID."""
    return port.device_owner.startswith("compute:") and bool(UUID.fullmatch(port.device_id))


def _ports(
    ports: Iterable[BoundPort],
    judge: _Judge,
    zones: frozenset[str],
    dirs: Iterable[InstanceDir] | None,
) -> Iterable[Leftover]:
    """The ports Nova is shown to own that lost servers left bound here, and the foreign
    ports (told, never given a step).

    NOTE: docs/design.md rule 22: Nova creates a server's port with the owner
    ``compute:<the server's zone>``; Zun (kuryr) binds ``compute:kuryr`` ports of
    containers Nova never heard of to the same hosts. A port is Nova's only when its
    owner names one of Nova's zones and its device is a server Nova has a record of, or
    had one on this host (its instance directory is here).
    """
    traces = {d.uuid for d in dirs or ()}
    for port in ports:
        if not _server_port(port) or not UUID.fullmatch(port.id):
            continue
        if port.vif_type in PORT_BEING_BOUND:
            continue
        if judge.managed(port.device_id):
            continue
        zone = port.device_owner.partition(":")[2]
        record = judge.known.get(port.device_id, ...)
        ips = f" ({', '.join(port.fixed_ips)})" if port.fixed_ips else ""
        if zone not in zones:
            yield _foreign(port, ips, f"its owner {port.device_owner!r} names no zone of Nova's")
            continue
        if record is None and port.device_id not in traces:
            yield _foreign(port, ips, f"Nova never knew {port.device_id} here")
            continue
        gone = judge.gone(port.device_id)
        if gone is None or port.device_id in judge.domains:
            # NOTE: a guest still defined here holds its port: its finding tells it.
            continue
        yield Leftover(
            LeftoverKind.PORT,
            port.id,
            port.device_id,
            f"port {port.id}{ips} is bound to this host; {gone[0]}",
            _port_remedy(port, record if isinstance(record, Server) else None),
            server_host=gone[1],
        )


def _port_remedy(port: BoundPort, record: Server | None) -> Remedy:
    """The least destructive step for a port left bound here (docs/design.md rule 22).

    A server Nova still has (elsewhere, or on no host: shelved offloaded) keeps its
    port: rebound to the server's host, or unbound. A deleted server's port is only
    unbound: Nova keeps the ports a user made (``preserve_on_delete``, in Nova's own
    network cache, which no API shows), so no answer proves Nova made this one.
    """
    if record is not None and not record.deleted:
        host = plain_host(record.host)
        if host:
            return Remedy(Verb.REBIND_PORT, port.id, host=host)
    return Remedy(Verb.UNBIND_PORT, port.id)


def _foreign(port: BoundPort, ips: str, why: str) -> Leftover:
    return Leftover(
        LeftoverKind.FOREIGN_PORT,
        port.id,
        None,
        f"port {port.id}{ips} of device {port.device_id} is bound to this host; {why}: "
        "not Nova's to clean up",
    )


def _attachments(attachments: Iterable[VolumeAttachment], judge: _Judge) -> Iterable[Leftover]:
    for attachment in attachments:
        server = attachment.server_id
        if not (UUID.fullmatch(attachment.id) and UUID.fullmatch(server)):
            continue
        if attachment.status in ATTACHMENT_IN_FLIGHT or not _tied_here(server, judge):
            continue
        if server in judge.domains:
            # NOTE: the guest still holds the volume: its finding tells its danger.
            continue
        gone = judge.gone(server)
        if gone is None or gone[1] is not None:
            # NOTE: the summary listing names no connector: an attachment of a server
            # Nova runs elsewhere is that host's to judge.
            continue
        volume = attachment.volume_id if UUID.fullmatch(attachment.volume_id) else None
        yield Leftover(
            LeftoverKind.ATTACHMENT,
            attachment.id,
            server,
            f"attachment {attachment.id} ({attachment.status}) of volume "
            f"{volume or '?'}; {gone[0]}",
            Remedy(Verb.DELETE_ATTACHMENT, attachment.id) if volume else None,
            volume=volume,
        )


def _tied_here(server: str, judge: _Judge) -> bool:
    """Whether this host is where ``server``'s attachment is judged: Nova's deleted row
    names this host, or the server has a trace here (a directory, port, allocation)."""
    return server in judge.known and judge.last_here(server)


def _allocations(
    allocations: Iterable[Allocation], provider: str, judge: _Judge
) -> Iterable[Leftover]:
    allocations = list(allocations)
    holders = {a.consumer for a in allocations}
    for allocation in allocations:
        if not _nova_consumer(allocation):
            continue
        consumer = allocation.consumer
        migration = judge.migrations.get(consumer)
        if migration is not None:
            if migration.status in MIGRATION_BUSY:
                continue
            why = (
                f"held by migration {consumer} of server {migration.instance_uuid} "
                f"({migration.source_compute} -> {migration.dest_compute}, {migration.status})"
            )
            server, host = migration.instance_uuid, None
        else:
            gone = judge.gone(consumer)
            if gone is None or consumer in judge.domains:
                # NOTE: a guest still defined here uses what its allocation counts.
                continue
            why, server, host = gone[0], consumer, gone[1]
        yield Leftover(
            LeftoverKind.ALLOCATION,
            consumer,
            server if UUID.fullmatch(server) else None,
            f"allocation on provider {provider}: {why}",
            Remedy(_allocation_verb(consumer, migration, judge), consumer, provider=provider),
            server_host=host,
            vcpus=_vcpus(allocation),
            memory_mb=allocation.resources.get("MEMORY_MB"),
            disk_bytes=allocation.resources["DISK_GB"] * GIB
            if "DISK_GB" in allocation.resources
            else None,
            migration=consumer if migration is not None else None,
        )
    for uuid in sorted(judge.view.servers_here.keys() - holders):
        if not UUID.fullmatch(uuid) or not judge.managed(uuid) or judge.busy(uuid):
            continue
        if _moving(judge.view.migrations_of(uuid)):
            continue
        yield Leftover(
            LeftoverKind.ALLOCATION,
            uuid,
            uuid,
            f"server {uuid} runs here with no allocation on provider {provider}: "
            "Placement does not count what it uses",
            Remedy(Verb.HEAL_ALLOCATION, uuid, provider=provider),
            missing=True,
        )


def _allocation_verb(consumer: str, migration: Migration | None, judge: _Judge) -> Verb:
    """Unset only what Nova's own record names: a deleted or moved server's, a finished
    migration's. A consumer with no record may be a migration a look missed (a listing
    that silently skipped a page): Nova's audit checks its database's migrations first."""
    if migration is None and judge.known.get(consumer) is None:
        return Verb.AUDIT_ALLOCATIONS
    return Verb.UNSET_ALLOCATION


def _moving(migrations: Iterable[Migration]) -> bool:
    return any(m.status in MIGRATION_BUSY for m in migrations)


def _nova_consumer(allocation: Allocation) -> bool:
    return bool(UUID.fullmatch(allocation.consumer)) and bool(
        NOVA_RESOURCE_CLASSES & allocation.resources.keys()
    )


def _vcpus(allocation: Allocation) -> int | None:
    found = [allocation.resources[rc] for rc in ("VCPU", "PCPU") if rc in allocation.resources]
    return sum(found) if found else None
