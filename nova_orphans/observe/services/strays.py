"""Read what Neutron, Cinder and Placement hold for this host: the leftovers' raw facts.

Requests, one listing per service per host, never one per server (docs/design.md §8b):

- Neutron: ``GET /v2.0/ports?binding:host_id=<host>`` (every port bound to the host);
- Cinder: ``GET /attachments?all_tenants=1`` at volume 3.27, its summary view (id,
  status, server, volume: no connection data), following ``attachments_links``:
  Cinder's attachment filters (``volume_id``, ``status``, ``instance_id``,
  ``attach_status``) name no host, and one per server is what this avoids;
- Placement: ``GET /resource_providers/{uuid}/allocations`` of the host's provider.

Each fails closed on its own: its kind is "not checked" with the reason, never "none".
Every field is bounded and checked before it is kept (docs/design.md rule 20).
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator
from typing import Any

from nova_orphans.core import strays
from nova_orphans.core.strays import StrayKind
from nova_orphans.observe.services.client import Client, ServiceError, get_json

#: Cinder's attachments API (3.27, "new attach").
VOLUME_MICROVERSION = {"OpenStack-API-Version": "volume 3.27"}
#: Cinder's attachment pages followed at most (1,000 each by default: a million attachments).
MAX_PAGES = 1000
#: The longest field kept from a service's answer (a name, an id, a status).
MAX_FIELD = 255


class StrayObserver:
    """Asks Neutron, Cinder and Placement what they hold for one host."""

    def __init__(self, ports: Client, volumes: Client, placement: Client) -> None:
        self._ports = ports
        self._volumes = volumes
        self._placement = placement

    def seen(self, host: str, provider: str | None) -> strays.Seen:
        """Ports bound to ``host``, the cloud's attachments, ``provider``'s allocations."""
        not_read: dict[StrayKind, str] = {}
        ports = attachments = allocations = None
        try:
            ports = self.ports_bound_to(host)
        except ServiceError as exc:
            not_read[StrayKind.PORT] = str(exc)
        try:
            attachments = self.attachments()
        except ServiceError as exc:
            not_read[StrayKind.ATTACHMENT] = str(exc)
        if provider is None:
            not_read[StrayKind.ALLOCATION] = "Placement named no resource provider for this host"
        else:
            try:
                allocations = self.allocations(provider)
            except ServiceError as exc:
                not_read[StrayKind.ALLOCATION] = str(exc)
        return strays.Seen(
            ports=ports,
            attachments=attachments,
            allocations=allocations,
            provider=provider,
            not_read=not_read,
        )

    def ports_bound_to(self, host: str) -> tuple[strays.BoundPort, ...]:
        """Every port (all projects) whose ``binding:host_id`` is ``host``: one request."""
        query = urllib.parse.urlencode({"binding:host_id": host})
        body = get_json(self._ports, f"/v2.0/ports?{query}")
        items = body.get("ports") if isinstance(body, dict) else None
        if not isinstance(items, list):
            raise ServiceError("Neutron's port listing has no 'ports' list")
        found = []
        for item in items:
            if not isinstance(item, dict):
                raise ServiceError("Neutron's port listing holds an entry that is no port")
            if item.get("binding:host_id") != host:
                # NOTE: a Neutron that ignored the filter (or hid the binding from these
                # credentials) would list ports of other hosts: refuse rather than guess.
                raise ServiceError(
                    "Neutron ignored the binding:host_id filter (do the credentials see "
                    "port bindings?)"
                )
            found.append(
                strays.BoundPort(
                    id=_field(item.get("id")),
                    device_id=_field(item.get("device_id")),
                    device_owner=_field(item.get("device_owner")),
                    vif_type=_field(item.get("binding:vif_type")),
                    mac=_field(item.get("mac_address")),
                    fixed_ips=tuple(
                        _field(ip.get("ip_address"))
                        for ip in item.get("fixed_ips") or ()
                        if isinstance(ip, dict)
                    )[:16],
                )
            )
        return tuple(found)

    def attachments(self) -> tuple[strays.VolumeAttachment, ...]:
        """Every attachment Cinder records, all projects (summary view), every page."""
        return tuple(
            strays.VolumeAttachment(
                id=_field(item.get("id")),
                volume_id=_field(item.get("volume_id")),
                server_id=_field(item.get("instance")),
                status=_field(item.get("status")),
            )
            for item in self._attachment_pages()
        )

    def _attachment_pages(self) -> Iterator[dict[str, Any]]:
        query: dict[str, str] = {"all_tenants": "1"}
        seen: set[str] = set()
        for _ in range(MAX_PAGES):
            path = f"/attachments?{urllib.parse.urlencode(query)}"
            body = get_json(self._volumes, path, headers=VOLUME_MICROVERSION)
            items = body.get("attachments") if isinstance(body, dict) else None
            if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
                raise ServiceError("Cinder's attachment listing has no 'attachments' list")
            for item in items:
                key = _field(item.get("id"))
                if key in seen:
                    raise ServiceError(f"Cinder listed attachment {key!r} twice")
                seen.add(key)
                yield item
            marker = _next_marker(body.get("attachments_links"))
            if marker is None:
                return
            if not items or marker != _field(items[-1].get("id")):
                raise ServiceError("Cinder's attachment listing links to a page it did not end")
            query = {"all_tenants": "1", "marker": marker}
        raise ServiceError(f"Cinder's attachment listing goes on past {MAX_PAGES} pages")

    def allocations(self, provider: str) -> tuple[strays.Allocation, ...]:
        """Every consumer's allocation of ``provider`` (a validated UUID): one request."""
        if not strays.UUID.fullmatch(provider):
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
            allocations.append(strays.Allocation(_field(consumer), amounts))
        return tuple(allocations)


def _field(value: Any) -> str:
    """A service's field as bounded text ('' when absent)."""
    return "" if value is None else str(value)[:MAX_FIELD]


def _next_marker(links: Any) -> str | None:
    """The ``marker`` of a ``next`` link, None when there is none."""
    for link in links or ():
        if isinstance(link, dict) and link.get("rel") == "next":
            query = urllib.parse.urlparse(str(link.get("href", ""))).query
            markers = urllib.parse.parse_qs(query).get("marker")
            if not markers:
                raise ServiceError("Cinder's next link names no marker")
            return markers[0]
    return None
