"""What lost servers leave on and around the host besides a guest: the records. Pure.

A local delete, an evacuation whose source came back, a failed build or a failed
migration clean-up leave an instance directory under ``instances_path``, a Neutron
port bound to the host, a Cinder attachment, or a Placement allocation against the
host's provider. Each is told with the server it belongs to, what it costs and the
command an operator would run to remove it; the tool removes nothing (docs/design.md
rule 21). ``classify/leftover_judge.py`` judges them against Nova's records; a check that could
not be made is "not checked", never "nothing left" (docs/design.md §8b).
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
from collections.abc import Mapping

#: Resource classes Nova allocates for a server (nova-manage placement audit's NOVA_RCS).
NOVA_RESOURCE_CLASSES = frozenset(
    {
        "VCPU",
        "PCPU",
        "MEMORY_MB",
        "DISK_GB",
        "VGPU",
        "NET_BW_EGR_KILOBIT_PER_SEC",
        "NET_BW_IGR_KILOBIT_PER_SEC",
        "MEM_ENCRYPTION_CONTEXT",
    }
)


class LeftoverKind(str, enum.Enum):
    """Kinds of leftover, in the order they are told."""

    FILES = "stray-files"
    PORT = "stray-port"
    ATTACHMENT = "stray-attachment"
    ALLOCATION = "stray-allocation"
    #: A port bound to this host that Nova is not shown to own (another service's, such
    #: as a container's, or of a UUID Nova never knew): told, never given a command.
    FOREIGN_PORT = "foreign-port"


#: The kinds that are something to clean up (a foreign port is only told).
CLEANUP_KINDS = (
    LeftoverKind.FILES,
    LeftoverKind.PORT,
    LeftoverKind.ATTACHMENT,
    LeftoverKind.ALLOCATION,
)


class Verb(str, enum.Enum):
    """What a told step would do (``decide/told.py`` writes its command, or says why not)."""

    REMOVE_FILES = "remove-files"
    #: Clear the port's binding to this host (least destructive: the port stays).
    UNBIND_PORT = "unbind-port"
    #: Bind the port to the host Nova runs its server on.
    REBIND_PORT = "rebind-port"
    DELETE_ATTACHMENT = "delete-attachment"
    UNSET_ALLOCATION = "unset-allocation"
    #: Have Nova's own audit judge the provider's allocations against its database (a
    #: consumer of no server Nova has a record of may be a migration's, which only Nova's
    #: database names for sure: a look at its API may miss one).
    AUDIT_ALLOCATIONS = "audit-allocations"
    HEAL_ALLOCATION = "heal-allocation"


@dataclasses.dataclass(frozen=True)
class Remedy:
    """The step that would remove one leftover, before it is told (no command yet).

    ``target``: a canonical UUID (the instance directory's, port's, attachment's or
    consumer's); ``provider``: the allocation's resource provider; ``host``: where a
    port is rebound.
    """

    verb: Verb
    target: str
    provider: str | None = None
    host: str | None = None


class Held(str, enum.Enum):
    """Why a leftover is told without a command (docs/design.md rule 22)."""

    #: The cycle's told verdict is not clear: identity not proven, or a brake holds.
    GATE = "gate"
    #: Carried from an earlier look: only this cycle's own look gives commands.
    CARRIED = "carried"
    QUARANTINE = "quarantine"
    HOLD = "hold"
    DENY = "deny"
    #: Nova is not shown to own it (a foreign port, another connector's attachment).
    OWNER = "owner"
    #: Nova still has the server (elsewhere, shelved offloaded): no delete is told for it.
    LIVE = "live"
    #: The allocation's provider is not the proven compute node.
    PROVIDER = "provider"
    #: The path seen here is not one an operator can paste on the host (a container).
    PATH = "path"
    #: Not seen in enough looks across the grace period yet.
    PENDING = "pending"


@dataclasses.dataclass(frozen=True)
class InstanceDir:
    """``<instances_path>/<uuid>``: a directory read without following any link."""

    uuid: str
    path: str
    #: Bytes its files take on disk (``st_blocks``), None when not measured.
    disk_bytes: int | None
    #: Its entries' names (at most a few, for the operator).
    files: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class BoundPort:
    """A Neutron port whose ``binding:host_id`` is this host."""

    id: str
    device_id: str
    device_owner: str
    vif_type: str = ""
    mac: str = ""
    fixed_ips: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class VolumeAttachment:
    """One of Cinder's attachments (its summary view: no connection data)."""

    id: str
    volume_id: str
    server_id: str
    status: str


@dataclasses.dataclass(frozen=True)
class Allocation:
    """What one consumer holds of the host's resource provider, by resource class."""

    consumer: str
    resources: Mapping[str, int]


@dataclasses.dataclass(frozen=True)
class Seen:
    """What the observers read for the leftovers; each ``None`` means not read, and why
    is in ``not_read`` (by kind)."""

    dirs: tuple[InstanceDir, ...] | None = None
    ports: tuple[BoundPort, ...] | None = None
    attachments: tuple[VolumeAttachment, ...] | None = None
    allocations: tuple[Allocation, ...] | None = None
    #: The resource provider the allocations are of.
    provider: str | None = None
    not_read: Mapping[LeftoverKind, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Leftover:
    """One leftover, with its owner, cost and the command that removes it."""

    kind: LeftoverKind
    #: The directory's path, the port's, attachment's or consumer's id.
    subject: str
    #: The server it belongs to, when known, and where Nova places that server now.
    server: str | None
    reason: str
    #: The step that would remove it; None for what gets no step at all (a foreign port).
    remedy: Remedy | None = None
    #: The command an operator runs to remove it (the tool runs nothing): set only by
    #: ``decide/told.py``, when every proof holds; else ``held_by`` and ``why`` say why not.
    command: str | None = None
    held_by: Held | None = None
    why: str | None = None
    #: Looks this leftover was seen in, this one included (0: not counted).
    seen: int = 0
    server_host: str | None = None
    disk_bytes: int | None = None
    vcpus: int | None = None
    memory_mb: int | None = None
    #: The volume an attachment holds, the migration an allocation is held by.
    volume: str | None = None
    migration: str | None = None
    #: True for a server here whose allocation is missing (Placement under-counts).
    missing: bool = False


@dataclasses.dataclass(frozen=True)
class Leftovers:
    """Every leftover of one host, and the kinds that could not be checked (and why)."""

    items: tuple[Leftover, ...] = ()
    not_checked: Mapping[LeftoverKind, str] = dataclasses.field(default_factory=dict)
    #: When the look that found them was made (None: not said); a cycle that did not look
    #: carries an earlier look's leftovers with that look's time (docs/design.md rule 22).
    looked_at: datetime.datetime | None = None
    #: True when these are an earlier look's, carried into a cycle that did not look.
    carried: bool = False
    #: The host whose connector made each attachment leftover (Cinder's ``host_name``), by
    #: attachment id; a string: why Cinder could not say.
    attachment_hosts: Mapping[str, str | None] | str = dataclasses.field(default_factory=dict)

    def of(self, kind: LeftoverKind) -> tuple[Leftover, ...]:
        """The leftovers of ``kind``."""
        return tuple(i for i in self.items if i.kind is kind)

    def count(self, kind: LeftoverKind) -> int | None:
        """How many leftovers of ``kind``; None when that kind was not checked."""
        return None if kind in self.not_checked else len(self.of(kind))


#: Leftovers when no service was asked at all (no keystoneauth session).
NOT_ASKED = "Placement, Cinder and Neutron were not asked"


def not_checked(reason: str) -> Leftovers:
    """Every kind not checked, for ``reason``."""
    return Leftovers((), {kind: reason for kind in LeftoverKind})


def totals(leftovers: Leftovers) -> dict[str, int]:
    """What the leftovers cost, summed: disk bytes, vCPUs and memory of the allocations."""
    return {
        "disk_bytes": sum(i.disk_bytes or 0 for i in leftovers.items),
        "vcpus": sum(i.vcpus or 0 for i in leftovers.items),
        "memory_mb": sum(i.memory_mb or 0 for i in leftovers.items),
    }
