"""Plain, frozen records that flow through the pipeline.

Observers build them, the classifier reads them. Nothing here talks to libvirt,
Nova, the file system or the clock.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import fnmatch
import functools


class DomainState(str, enum.Enum):
    """Libvirt's domain state, in the words `virsh domstate` uses."""

    NOSTATE = "no state"
    RUNNING = "running"
    BLOCKED = "blocked"
    PAUSED = "paused"
    SHUTDOWN = "shutting down"
    SHUTOFF = "shut off"
    CRASHED = "crashed"
    PMSUSPENDED = "pmsuspended"


@dataclasses.dataclass(frozen=True)
class NovaMetadata:
    """What Nova wrote into the domain's ``<nova:instance>`` element."""

    namespace: str
    display_name: str | None = None
    creation_time: str | None = None
    project_id: str | None = None
    user_id: str | None = None
    flavor: str | None = None
    package: str | None = None


@dataclasses.dataclass(frozen=True)
class Disk:
    """One ``<disk>`` of the domain XML.

    ``source_type`` is libvirt's disk type (file, block, network, volume);
    ``source`` is the path, device, or ``protocol:name`` of a network disk;
    ``serial`` is the disk's ``<serial>`` (Nova writes a Cinder volume's id there).
    """

    target: str
    device: str
    source_type: str
    source: str | None
    protocol: str | None = None
    serial: str | None = None


@dataclasses.dataclass(frozen=True)
class Interface:
    """One ``<interface>`` of the domain XML."""

    type: str
    mac: str | None
    target_dev: str | None
    source: str | None


@dataclasses.dataclass(frozen=True)
class Usage:
    """What a domain consumes on the host, from the scan's bulk libvirt call (None: not told).

    ``memory_bytes`` is the balloon's current size (what the guest holds now);
    ``disk_bytes`` the bytes its disks have allocated on this host; ``cpu_seconds``
    the CPU time it has used since it started.
    """

    vcpus: int | None = None
    memory_bytes: int | None = None
    disk_bytes: int | None = None
    cpu_seconds: float | None = None


@dataclasses.dataclass(frozen=True)
class Domain:
    """One libvirt domain on the audited host, as observed.

    ``metadata`` is None when the domain has no Nova metadata; ``metadata_error``
    says why when the element exists but cannot be read (such a domain is never
    treated as Nova's).
    """

    uuid: str
    name: str
    state: DomainState
    persistent: bool
    job_active: bool
    metadata: NovaMetadata | None = None
    metadata_error: str | None = None
    disks: tuple[Disk, ...] = ()
    interfaces: tuple[Interface, ...] = ()
    usage: Usage = dataclasses.field(default_factory=Usage)

    @property
    def is_active(self) -> bool:
        """True when the guest is consuming CPU/memory (running, paused, blocked…)."""
        return self.state not in (DomainState.SHUTOFF, DomainState.CRASHED, DomainState.NOSTATE)


@dataclasses.dataclass(frozen=True)
class Selector:
    """A set of guests named by UUID or by domain-name pattern."""

    uuids: frozenset[str] = frozenset()
    name_patterns: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        """True when the selector names nothing."""
        return not self.uuids and not self.name_patterns

    def covers(self, domain: Domain) -> bool:
        """True when ``domain`` is named by this selector."""
        return domain.uuid in self.uuids or any(
            fnmatch.fnmatchcase(domain.name, pattern) for pattern in self.name_patterns
        )


#: Nova's vm_state of a SOFT_DELETED server (restorable; its row is not deleted).
SOFT_DELETED_VM_STATE = "soft-delete"


@dataclasses.dataclass(frozen=True)
class Server:
    """Nova's record of a server (instance), live or deleted."""

    uuid: str
    name: str | None
    host: str | None
    status: str
    vm_state: str | None
    task_state: str | None
    deleted: bool = False
    deleted_at: datetime.datetime | None = None
    #: When Nova last changed the record (its ``updated``).
    updated_at: datetime.datetime | None = None
    #: True for a record from Nova's plain listing filtered by host: it says only that
    #: the server is live (neither deleted nor SOFT_DELETED) on ``host``; no states.
    summary: bool = False


def managed_here(server: Server, host: str) -> bool:
    """Whether Nova manages ``server`` on ``host``: live, placed there, not SOFT_DELETED.

    NOTE: exactly what Nova's listing ``?host=H`` without ``deleted`` or
    ``changes-since`` returns (servers.py sets deleted=False, which also hides
    SOFT_DELETED rows), so a summary record of that listing is managed here.
    """
    return not server.deleted and server.host == host and server.vm_state != SOFT_DELETED_VM_STATE


@dataclasses.dataclass(frozen=True)
class Migration:
    """One entry of Nova's ``/os-migrations`` touching the audited host."""

    instance_uuid: str
    source_compute: str | None
    dest_compute: str | None
    migration_type: str
    status: str
    created_at: str | None = None
    #: When Nova last changed the migration (its ``updated_at``).
    updated_at: str | None = None
    #: The migration's own UUID (2.59+): the Placement consumer of the source's allocation.
    uuid: str | None = None


@dataclasses.dataclass(frozen=True)
class NovaView:
    """Everything Nova told us about one host, gathered in one observation.

    ``servers_here``: live servers Nova places on the host, by UUID.
    ``lookups``: for each domain UUID not in ``servers_here``, Nova's record
    (live anywhere, or deleted) or None when Nova has no record at all.
    """

    host: str
    servers_here: dict[str, Server]
    lookups: dict[str, Server | None]
    migrations: tuple[Migration, ...] = ()

    def migrations_of(self, uuid: str) -> tuple[Migration, ...]:
        """The migrations of one instance (indexed once: a busy host has thousands)."""
        return self._migrations_by_uuid.get(uuid, ())

    @functools.cached_property
    def _migrations_by_uuid(self) -> dict[str, tuple[Migration, ...]]:
        index: dict[str, list[Migration]] = {}
        for migration in self.migrations:
            index.setdefault(migration.instance_uuid, []).append(migration)
        return {uuid: tuple(found) for uuid, found in index.items()}


class Kind(str, enum.Enum):
    """Kinds of finding; see docs/design.md §3."""

    SPLIT_BRAIN = "split-brain"
    DELETED = "deleted"
    UNKNOWN = "unknown"
    MISPLACED = "misplaced"
    LOST = "lost"
    FOREIGN = "foreign"
    PROTECTED = "protected"


#: Kinds that are orphans an operator should act on (audit exit code 3).
ORPHAN_KINDS = frozenset({Kind.SPLIT_BRAIN, Kind.DELETED, Kind.UNKNOWN, Kind.MISPLACED, Kind.LOST})

#: Kinds that may ever be acted on, whatever the configuration says.
ACTIONABLE_KINDS = frozenset({Kind.DELETED, Kind.UNKNOWN, Kind.MISPLACED})


class DangerKind(str, enum.Enum):
    """What an orphan endangers; the order is the urgency."""

    SHARED_VOLUME = "shared-volume"
    ADDRESS_CONFLICT = "address-conflict"
    UNKNOWN = "unknown"


@dataclasses.dataclass(frozen=True)
class Danger:
    """One danger of one finding, with the evidence an operator needs."""

    kind: DangerKind
    #: The volume id, or the MAC address, concerned (for ``unknown``: the check).
    subject: str
    detail: str
    #: The server that holds the volume or the port, when one does.
    other_server: str | None = None
    port: str | None = None
    fixed_ips: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Finding:
    """One guest (or missing guest) that is not plainly managed by Nova on this host."""

    uuid: str
    name: str
    kind: Kind
    reason: str
    domain: Domain | None
    server: Server | None
    #: What the guest can break now (``classify/danger.py``), the worst first; None when
    #: its dangers were not looked for (not an orphan with a domain, or no services asked).
    dangers: tuple[Danger, ...] | None = None
    #: The reason in a few words, for a table that fits a terminal (empty: the reason).
    brief: str = ""

    @property
    def short_reason(self) -> str:
        """``brief``, or the whole reason when the finding has no brief one."""
        return self.brief or self.reason
