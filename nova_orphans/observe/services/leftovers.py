"""Read what Neutron, Cinder and Placement hold for this host: the leftovers' raw facts.

Requests, one listing per service per host, never one per server (docs/design.md §8b):

- Neutron: ``GET /v2.0/ports?binding:host_id=<host>`` (every port with a binding on the
  host), following ``ports_links`` (Neutron pages when ``pagination_max_limit`` is set);
- Cinder: ``GET /attachments?all_tenants=1`` at volume 3.27, its summary view (id,
  status, server, volume: no connection data), following ``attachments_links``:
  Cinder's attachment filters (``volume_id``, ``status``, ``instance_id``,
  ``attach_status``) name no host, and one per server is what this avoids;
- Placement: ``GET /resource_providers/{uuid}/allocations`` of the host's provider.

And, for the attachments the caller needs it of, ``GET /volumes/{id}`` once per volume: the
host whose connector attached each (``attachment_hosts``).

Each fails closed on its own: its kind is "not checked" with the reason, never "none".
Every field is bounded and checked before it is kept (docs/design.md rule 20).
"""

from __future__ import annotations

import dataclasses
import itertools
import urllib.parse
from collections.abc import Iterable
from typing import Any

from nova_orphans import shapes
from nova_orphans.classify import leftover
from nova_orphans.classify.leftover import LeftoverKind
from nova_orphans.observe.services.client import (
    Client,
    ServiceError,
    get_json,
    pages,
)

#: Cinder's attachments API (3.27, "new attach").
VOLUME_MICROVERSION = {"OpenStack-API-Version": "volume 3.27"}
#: The longest field kept from a service's answer (a name, an id, a status).
MAX_FIELD = 255
#: The fixed IPs kept of one port.
MAX_FIXED_IPS = 16
#: A host name no compute host has (RFC 6761 reserves ``.invalid``): a port listing
#: filtered by it is empty unless Neutron ignored the filter.
PROBE_HOST = "no-such-host.invalid"
HOST_KEY = "binding:host_id"
NO_BINDINGS = (
    "Neutron's port listing shows no binding:host_id (the credentials do not see port "
    "bindings: Neutron's get_port:binding:host_id policy)"
)


@dataclasses.dataclass(frozen=True)
class HostPorts:
    """The ports Neutron lists with a binding on one host."""

    #: The ports whose active binding is the host (their ``binding:host_id``).
    bound: tuple[leftover.BoundPort, ...]
    #: The ids of the ports whose binding on the host is not their active one: with
    #: Neutron's multiple port bindings, a live migration's port has an inactive binding
    #: on the destination (and, once activated there, on the source). In-flight work,
    #: never a leftover.
    moving: frozenset[str] = frozenset()


class LeftoverObserver:
    """Asks Neutron, Cinder and Placement what they hold for one host."""

    def __init__(self, ports: Client, volumes: Client, placement: Client) -> None:
        self._ports = ports
        self._volumes = volumes
        self._placement = placement

    def look(self, host: str, provider: str | None) -> leftover.Seen:
        """Ports bound to ``host``, the cloud's attachments, ``provider``'s allocations."""
        not_read: dict[LeftoverKind, str] = {}
        ports = attachments = allocations = None
        try:
            ports = self.ports_bound_to(host)
        except ServiceError as exc:
            not_read[LeftoverKind.PORT] = str(exc)
        try:
            attachments = self.attachments()
        except ServiceError as exc:
            not_read[LeftoverKind.ATTACHMENT] = str(exc)
        if provider is None:
            not_read[LeftoverKind.ALLOCATION] = "Placement named no resource provider for this host"
        else:
            try:
                allocations = self.allocations(provider)
            except ServiceError as exc:
                not_read[LeftoverKind.ALLOCATION] = str(exc)
        return leftover.Seen(
            ports=ports,
            attachments=attachments,
            allocations=allocations,
            provider=provider,
            not_read=not_read,
        )

    def ports_bound_to(self, host: str) -> tuple[leftover.BoundPort, ...]:
        """Every port (all projects) whose active binding is ``host`` (``host_ports``)."""
        return self.host_ports(host).bound

    def host_ports(self, host: str) -> HostPorts:
        """Every port (all projects) with a binding on ``host``: one listing, every page.

        NOTE: ML2 filters ``binding:host_id`` on any of the port's bindings, active or
        not, and shows the active one's host: a port listed with another host has only an
        inactive binding here (``HostPorts.moving``). So would every port of a Neutron
        that ignored the filter: then one more listing, of a host no port is bound to,
        must come back empty.
        """
        items = list(pages(self._ports, "/v2.0/ports", "ports", {HOST_KEY: host}))
        for item in items:
            if HOST_KEY not in item:
                raise ServiceError(NO_BINDINGS)
            if not _text_or_none(item[HOST_KEY]):
                raise ServiceError(
                    f"Neutron's port {_field(item.get('id'))!r} names no usable binding host"
                )
        if items and not any(item[HOST_KEY] for item in items):
            raise ServiceError(NO_BINDINGS)
        bound = tuple(_bound_port(item) for item in items if item[HOST_KEY] == host)
        moving = frozenset(_field(item.get("id")) for item in items if item[HOST_KEY] != host)
        if moving:
            self._require_host_filter()
        return HostPorts(bound, moving)

    def _require_host_filter(self) -> None:
        """Raise unless Neutron applies the ``binding:host_id`` filter."""
        query = urllib.parse.urlencode({HOST_KEY: PROBE_HOST, "limit": "1"})
        body = get_json(self._ports, f"/v2.0/ports?{query}")
        items = body.get("ports") if isinstance(body, dict) else None
        if not isinstance(items, list):
            raise ServiceError("Neutron's port listing has no 'ports' list")
        if items:
            # NOTE: a Neutron that ignored the filter lists every port of the cloud, and
            # its ports of other hosts are no inactive bindings here: refuse, not guess.
            raise ServiceError(
                "Neutron ignored the binding:host_id filter (it lists ports bound to a "
                f"host no port is bound to, {PROBE_HOST})"
            )

    def attachments(self) -> tuple[leftover.VolumeAttachment, ...]:
        """Every attachment Cinder records, all projects (summary view), every page."""
        return tuple(
            leftover.VolumeAttachment(
                id=_field(item.get("id")),
                volume_id=_field(item.get("volume_id")),
                server_id=_field(item.get("instance")),
                status=_field(item.get("status")),
            )
            for item in pages(
                self._volumes,
                "/attachments",
                "attachments",
                {"all_tenants": "1"},
                VOLUME_MICROVERSION,
            )
        )

    def attachment_hosts(self, pairs: Iterable[tuple[str, str]]) -> dict[str, str | None]:
        """The host whose connector attached each of ``pairs`` (volume id, attachment id):
        ``GET /volumes/{id}`` once per distinct volume.

        By attachment id: the connector's host (Nova's ``[DEFAULT] host`` of the compute
        that attached it), None when Cinder names none. NOTE: Cinder's volume view lists
        only the attachments whose ``attach_status`` is ``attached`` (a reserved, attaching
        or detached one is not), and gives ``host_name`` only to admin or service
        credentials (None to others): an attachment the volume does not list, or of a
        volume Cinder has no more, is absent.
        """
        by_volume: dict[str, set[str]] = {}
        for volume_id, attachment_id in pairs:
            if not (shapes.UUID.fullmatch(volume_id) and shapes.UUID.fullmatch(attachment_id)):
                raise ServiceError(
                    f"Cinder's attachment {attachment_id[:64]!r} of volume {volume_id[:64]!r} "
                    "is not named by UUIDs"
                )
            by_volume.setdefault(volume_id, set()).add(attachment_id)
        hosts: dict[str, str | None] = {}
        for volume_id in sorted(by_volume):
            listed = self._volume_attachments(volume_id)
            hosts.update({a: listed[a] for a in sorted(by_volume[volume_id]) if a in listed})
        return hosts

    def _volume_attachments(self, volume_id: str) -> dict[str, str | None]:
        """Each attachment ``GET /volumes/{volume_id}`` lists, with its host_name."""
        body = get_json(self._volumes, f"/volumes/{volume_id}", not_found="itemNotFound")
        if body is None:
            return {}
        volume = body.get("volume") if isinstance(body, dict) else None
        if not isinstance(volume, dict) or volume.get("id") != volume_id:
            raise ServiceError(f"Cinder's answer about volume {volume_id} is unusable")
        items = volume.get("attachments")
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise ServiceError(f"Cinder's volume {volume_id} has no 'attachments' list")
        found: dict[str, str | None] = {}
        for item in items:
            key, host = item.get("attachment_id"), item.get("host_name")
            if not isinstance(key, str) or key in found:
                raise ServiceError(f"Cinder's volume {volume_id} lists an unusable attachment")
            if not _text_or_none(host):
                raise ServiceError(
                    f"Cinder's volume {volume_id} names no usable host of attachment "
                    f"{_field(key)!r}"
                )
            found[key] = host or None
        return found

    def allocations(self, provider: str) -> tuple[leftover.Allocation, ...]:
        """Every consumer's allocation of ``provider`` (a validated UUID): one request."""
        if not shapes.UUID.fullmatch(provider):
            raise ServiceError(f"Placement's provider id {provider!r} is not a UUID")
        body = get_json(self._placement, f"/resource_providers/{provider}/allocations")
        found = body.get("allocations") if isinstance(body, dict) else None
        if not isinstance(found, dict):
            raise ServiceError("Placement's answer has no 'allocations'")
        allocations = []
        for consumer, held in found.items():
            resources = held.get("resources") if isinstance(held, dict) else None
            if not isinstance(resources, dict):
                raise ServiceError(f"Placement's allocation of {_field(consumer)!r} is unusable")
            try:
                amounts = {_field(rc): int(n) for rc, n in resources.items()}
            except (TypeError, ValueError) as exc:
                raise ServiceError(
                    f"Placement's allocation of {_field(consumer)!r}: {exc}"
                ) from exc
            allocations.append(leftover.Allocation(_field(consumer), amounts))
        return tuple(allocations)


def _bound_port(item: dict[str, Any]) -> leftover.BoundPort:
    ips = item.get("fixed_ips")
    return leftover.BoundPort(
        id=_field(item.get("id")),
        device_id=_field(item.get("device_id")),
        device_owner=_field(item.get("device_owner")),
        vif_type=_field(item.get("binding:vif_type")),
        mac=_field(item.get("mac_address")),
        fixed_ips=tuple(
            _field(ip.get("ip_address"))
            for ip in itertools.islice(ips if isinstance(ips, list) else (), MAX_FIXED_IPS * 4)
            if isinstance(ip, dict)
        )[:MAX_FIXED_IPS],
    )


def _text_or_none(value: Any) -> bool:
    """Whether a service's field is absent (None) or text of at most ``MAX_FIELD``."""
    return value is None or (isinstance(value, str) and len(value) <= MAX_FIELD)


def _field(value: Any) -> str:
    """A service's field as bounded text ('' when absent)."""
    return "" if value is None else str(value)[:MAX_FIELD]
