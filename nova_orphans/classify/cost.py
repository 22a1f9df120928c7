"""What the guests Nova does not manage here cost, set beside Placement's view of the host. Pure.

A local delete releases the server's Placement allocation while its guest keeps
running; a migration leftover's allocation is on the other host; a foreign guest
never had one. So Placement schedules new guests into memory, CPUs and disk these
guests still hold. Protected guests are left out: Nova still accounts for them
(SOFT_DELETED, a migration in progress, a resize awaiting confirmation).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from nova_orphans.model import Finding, Kind, Usage
from nova_orphans.shapes import GIB, MIB

#: Kinds whose guests Placement does not count on this host.
UNTRACKED_KINDS = frozenset({Kind.DELETED, Kind.UNKNOWN, Kind.MISPLACED, Kind.FOREIGN})


@dataclasses.dataclass(frozen=True)
class Untracked:
    """What the non-managed guests of one host consume, summed.

    ``unmeasured`` names the guests one of whose numbers libvirt did not give
    (they are left out of that sum); ``incomplete`` the sums that are therefore
    lower bounds (``vcpus``, ``memory_bytes``, ``disk_bytes``).
    """

    guests: int = 0
    vcpus: int = 0
    memory_bytes: int = 0
    disk_bytes: int = 0
    unmeasured: tuple[str, ...] = ()
    incomplete: tuple[str, ...] = ()


def untracked(findings: Iterable[Finding]) -> Untracked:
    """Sum what the guests of ``UNTRACKED_KINDS`` consume (active ones: CPUs and memory)."""
    return untracked_usages(
        (f.uuid, f.kind, f.domain.usage) for f in findings if f.domain is not None
    )


def untracked_usages(guests: Iterable[tuple[str, Kind, Usage | None]]) -> Untracked:
    """``untracked`` over (UUID, kind, usage) as a host's report tells them (None: not told)."""
    count = vcpus = memory = disk = 0
    unmeasured: list[str] = []
    incomplete: set[str] = set()
    for uuid, kind, usage in guests:
        if kind not in UNTRACKED_KINDS:
            continue
        usage = usage or Usage()
        count += 1
        missing = {
            name
            for name, value in (
                ("vcpus", usage.vcpus),
                ("memory_bytes", usage.memory_bytes),
                ("disk_bytes", usage.disk_bytes),
            )
            if value is None
        }
        if missing:
            unmeasured.append(uuid)
            incomplete |= missing
        vcpus += usage.vcpus or 0
        memory += usage.memory_bytes or 0
        disk += usage.disk_bytes or 0
    return Untracked(
        count,
        vcpus,
        memory,
        disk,
        tuple(unmeasured),
        tuple(n for n in _MEASURED if n in incomplete),
    )


#: The sums, in the order they are told.
_MEASURED = ("vcpus", "memory_bytes", "disk_bytes")


def ranked(hosts: Mapping[str, Untracked]) -> list[tuple[str, Untracked]]:
    """The hosts' untracked totals, the host holding the most untracked memory first."""
    return sorted(hosts.items(), key=lambda pair: (-pair[1].memory_bytes, pair[0]))


def total(parts: Iterable[Untracked]) -> Untracked:
    """The sum of several hosts' totals."""
    parts = list(parts)
    return Untracked(
        guests=sum(p.guests for p in parts),
        vcpus=sum(p.vcpus for p in parts),
        memory_bytes=sum(p.memory_bytes for p in parts),
        disk_bytes=sum(p.disk_bytes for p in parts),
        unmeasured=tuple(u for p in parts for u in p.unmeasured),
        incomplete=tuple(
            n
            for n in ("vcpus", "memory_bytes", "disk_bytes")
            if any(n in p.incomplete for p in parts)
        ),
    )


@dataclasses.dataclass(frozen=True)
class Resource:
    """Placement's inventory and usage of one resource class of a provider."""

    total: int
    reserved: int
    allocation_ratio: float
    used: int

    @property
    def capacity(self) -> float:
        """What Placement may allocate: (total - reserved) x allocation_ratio."""
        return (self.total - self.reserved) * self.allocation_ratio


@dataclasses.dataclass(frozen=True)
class ProviderView:
    """Placement's view of the host's resource provider (its compute node)."""

    name: str
    uuid: str
    #: By resource class (``VCPU``, ``MEMORY_MB``, ``DISK_GB``...).
    resources: Mapping[str, Resource]


@dataclasses.dataclass(frozen=True)
class PlacementAnswer:
    """Placement's view, or why there is none (never read as "nothing used")."""

    provider: ProviderView | None = None
    error: str | None = None


#: Our numbers against Placement's: (resource class, label, bytes per Placement unit, ours).
COMPARED = (
    ("MEMORY_MB", "memory", MIB, "memory_bytes"),
    ("VCPU", "vCPUs", 1, "vcpus"),
    ("DISK_GB", "disk", GIB, "disk_bytes"),
)


def comparison(total: Untracked, placement: PlacementAnswer) -> list[str]:
    """One sentence per resource: what Placement counts, and what it does not know about.

    E.g. "memory: Placement counts 40.0 GiB of 64.0 GiB used; non-managed guests use
    another 12.0 GiB it does not know about".
    """
    if placement.provider is None:
        return [f"Placement not consulted: {placement.error or 'no provider'}"]
    lines = []
    for rc, label, unit, field in COMPARED:
        resource = placement.provider.resources.get(rc)
        if resource is None:
            continue
        used, capacity = resource.used * unit, resource.capacity * unit
        ours = _amount(getattr(total, field), unit)
        if field in total.incomplete:
            ours = f"at least {ours} (libvirt did not measure every guest)"
        lines.append(
            f"{label}: Placement counts {_amount(used, unit)} of {_amount(capacity, unit)} used; "
            f"non-managed guests use another {ours} it does not know about"
        )
    return lines


def _amount(value: float, unit: int) -> str:
    """Bytes as GiB, counts as they are."""
    return f"{value / GIB:.1f} GiB" if unit > 1 else f"{value:g}"
