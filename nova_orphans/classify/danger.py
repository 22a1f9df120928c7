"""What an orphan can break now, from what Cinder and Neutron said. Pure.

A local delete releases the server's volume attachments and ports while its guest
keeps running. Cinder may then attach the volume elsewhere (two writers on one
disk) and Neutron may hand the MAC address to another port. The facts are fetched
by ``observe/services/dangers.py``; here they become dangers. A check that could not be
made is a danger ``unknown`` with its reason, never "none" (docs/design.md rule 3).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Collection, Iterable, Mapping

from nova_orphans.model import Danger, DangerKind, Domain, Finding, Kind
from nova_orphans.shapes import UUID

#: Findings whose guest may still hold a volume or an address someone else was given.
CHECKED_KINDS = frozenset({Kind.DELETED, Kind.UNKNOWN, Kind.MISPLACED})
#: Cinder statuses in which a volume with no other attachment may be attached at any moment.
ATTACHABLE = frozenset({"available", "reserved", "attaching"})
#: RBD volume images as Cinder's RBD driver names them (``volume_name_template``).
_RBD_VOLUME = re.compile(rf"(?:^|/)volume-({UUID.pattern})$")


@dataclasses.dataclass(frozen=True)
class Attachment:
    """One of a Cinder volume's attachments."""

    server_id: str | None
    host: str | None


@dataclasses.dataclass(frozen=True)
class Volume:
    """Cinder's record of one volume."""

    id: str
    status: str
    attachments: tuple[Attachment, ...] = ()


@dataclasses.dataclass(frozen=True)
class Port:
    """Neutron's record of one port."""

    id: str
    mac: str
    device_id: str
    device_owner: str
    fixed_ips: tuple[str, ...] = ()
    host: str | None = None


@dataclasses.dataclass(frozen=True)
class Facts:
    """What Cinder and Neutron said about the findings of one host.

    ``volumes``: by volume id, None when Cinder has no such volume;
    ``volumes_error`` / ``ports_error``: why that check could not be made.
    """

    volumes: Mapping[str, Volume | None] = dataclasses.field(default_factory=dict)
    volumes_error: str | None = None
    ports: tuple[Port, ...] = ()
    ports_error: str | None = None


def checked(finding: Finding) -> bool:
    """True when the finding's dangers are looked for (an orphan with a domain)."""
    return finding.kind in CHECKED_KINDS and finding.domain is not None


def volume_ids(domain: Domain) -> tuple[str, ...]:
    """The Cinder volumes the domain's disks are, in disk order.

    NOTE: Nova writes a volume's id as the disk's ``<serial>``; an RBD volume's
    image is ``volume-<id>`` whatever the serial says.
    """
    found: list[str] = []
    for disk in domain.disks:
        candidates = [disk.serial or ""]
        if disk.protocol == "rbd" and disk.source:
            match = _RBD_VOLUME.search(disk.source)
            candidates.append(match.group(1) if match else "")
        for candidate in candidates:
            if UUID.fullmatch(candidate.lower()) and candidate.lower() not in found:
                found.append(candidate.lower())
    return tuple(found)


def macs(domain: Domain) -> tuple[str, ...]:
    """The domain's MAC addresses, lower case."""
    return tuple(i.mac.lower() for i in domain.interfaces if i.mac)


def assess(
    finding: Finding, facts: Facts, host: str, managed_here: Collection[str]
) -> tuple[Danger, ...]:
    """The dangers of one finding, the worst first (empty: none found).

    ``managed_here``: UUIDs of the servers Nova manages on this host.
    """
    domain = finding.domain
    if domain is None:
        return ()
    found = [
        *_volume_dangers(finding, domain, facts, host),
        *_address_dangers(finding, domain, facts, managed_here),
    ]
    if not domain.is_active:
        # NOTE: a stopped guest writes nothing and sends nothing now; starting it would.
        found = [
            d
            if d.kind is DangerKind.UNKNOWN
            else dataclasses.replace(d, detail=f"{d.detail} (once the guest is started again)")
            for d in found
        ]
    order = list(DangerKind)
    return tuple(sorted(found, key=lambda d: order.index(d.kind)))


def _volume_dangers(finding: Finding, domain: Domain, facts: Facts, host: str) -> Iterable[Danger]:
    ids = volume_ids(domain)
    if ids and facts.volumes_error:
        yield Danger(DangerKind.UNKNOWN, "volumes", f"Cinder not asked: {facts.volumes_error}")
        return
    for volume_id in ids:
        if volume_id not in facts.volumes:
            yield Danger(DangerKind.UNKNOWN, volume_id, f"Cinder was not asked about {volume_id}")
            continue
        volume = facts.volumes[volume_id]
        if volume is not None:
            yield from _volume_danger(finding, volume, host)


def _volume_danger(finding: Finding, volume: Volume, host: str) -> Iterable[Danger]:
    others = [a for a in volume.attachments if a.server_id != finding.uuid]
    for attachment in others:
        where = f" on {attachment.host}" if attachment.host else ""
        yield Danger(
            DangerKind.SHARED_VOLUME,
            volume.id,
            f"volume {volume.id} is attached to server {attachment.server_id}{where} while "
            "this guest still holds it: two writers on one disk",
            other_server=attachment.server_id,
        )
    for attachment in volume.attachments:
        if attachment.server_id == finding.uuid and attachment.host not in (None, host):
            # NOTE: a duplicate of a server Nova runs elsewhere (a migration leftover):
            # the live copy writes the same volume (the split-brain copy on shared storage).
            yield Danger(
                DangerKind.SHARED_VOLUME,
                volume.id,
                f"volume {volume.id} is attached to this server's live copy on "
                f"{attachment.host} while this copy still holds it: two writers on one disk",
                other_server=finding.uuid,
            )
    if not volume.attachments and volume.status in ATTACHABLE:
        yield Danger(
            DangerKind.SHARED_VOLUME,
            volume.id,
            f"volume {volume.id} is {volume.status} in Cinder while this guest still holds "
            "it: Cinder may attach it to any server at any moment",
        )


def _address_dangers(
    finding: Finding, domain: Domain, facts: Facts, managed_here: Collection[str]
) -> Iterable[Danger]:
    mine = macs(domain)
    if mine and facts.ports_error:
        yield Danger(DangerKind.UNKNOWN, "ports", f"Neutron not asked: {facts.ports_error}")
        return
    for port in facts.ports:
        if port.mac.lower() not in mine or not port.device_id:
            continue
        if port.device_id == finding.uuid and finding.kind is not Kind.MISPLACED:
            continue
        if port.device_id == finding.uuid:
            owner = "this server's live copy" + (f" on {port.host}" if port.host else "")
        elif port.device_id in managed_here:
            owner = f"server {port.device_id}, which Nova manages on this host"
        else:
            owner = f"{_device(port)} {port.device_id}" + (f" on {port.host}" if port.host else "")
        ips = f" ({', '.join(port.fixed_ips)})" if port.fixed_ips else ""
        yield Danger(
            DangerKind.ADDRESS_CONFLICT,
            port.mac.lower(),
            f"MAC {port.mac.lower()} is port {port.id}{ips} of {owner}: the same address on "
            "the network twice",
            other_server=port.device_id,
            port=port.id,
            fixed_ips=port.fixed_ips,
        )


def _device(port: Port) -> str:
    return "server" if port.device_owner.startswith("compute:") else (port.device_owner or "device")


def worst(dangers: Iterable[Danger] | None) -> DangerKind | None:
    """The most urgent danger kind, or None."""
    kinds = {d.kind for d in dangers or ()}
    return next((k for k in DangerKind if k in kinds), None)


def with_dangers(
    findings: Iterable[Finding], facts: Facts, host: str, managed_here: Collection[str]
) -> list[Finding]:
    """The findings with their dangers; those endangering a shared volume listed first.

    Otherwise the order is kept (kinds, then UUIDs: ``classify``'s order).
    """
    assessed = [
        dataclasses.replace(f, dangers=assess(f, facts, host, managed_here)) if checked(f) else f
        for f in findings
    ]
    return sorted(assessed, key=lambda f: worst(f.dangers) is not DangerKind.SHARED_VOLUME)
