"""In-process simulated Placement, Cinder and Neutron, answering at the HTTP-path level.

Each follows the ``Client`` contract of ``nova_orphans.observe.services``:
``get(path)`` returns ``(HTTP status, decoded JSON body)`` with the shapes of the
real APIs for the requests nova-orphans makes (Placement's resource providers,
inventories, usages and allocations; Cinder's ``GET /volumes/{id}`` and its paged
attachment listing; Neutron's port listing filtered by ``mac_address``, repeated for
several, or by ``binding:host_id``). ``fail`` makes every request
fail on purpose: an HTTP status, or ``"timeout"`` / ``"no-endpoint"`` (raised as
keystoneauth's failures are reported).
"""

from __future__ import annotations

import dataclasses
import urllib.parse
from typing import Any

from nova_orphans.observe.services.client import ServiceError

Response = tuple[int, Any]


@dataclasses.dataclass
class _Service:
    name: str
    #: An HTTP status to answer every request with, "timeout" or "no-endpoint"; None: answer.
    fail: int | str | None = None
    requests: list[str] = dataclasses.field(default_factory=list)

    def get(self, path: str, headers: dict[str, str] | None = None) -> Response:
        """Answer ``GET path``; see the module docstring."""
        self.requests.append(path)
        if self.fail == "timeout":
            raise ServiceError(f"{self.name} unreachable: Request to {path} timed out")
        if self.fail == "no-endpoint":
            raise ServiceError(f"{self.name}: no endpoint in the service catalog")
        if isinstance(self.fail, int):
            return self.fail, {"error": {"code": self.fail, "message": "injected failure"}}
        route, _, query = path.partition("?")
        return self.answer(route, urllib.parse.parse_qs(query))

    def answer(self, route: str, query: dict[str, list[str]]) -> Response:
        raise NotImplementedError


@dataclasses.dataclass
class SimPlacement(_Service):
    """Resource providers by name: ``inventories`` {rc: {total, reserved, allocation_ratio}}
    and ``usages`` {rc: used}."""

    name: str = "Placement"
    providers: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    #: By provider UUID: {consumer: {resource class: amount}}.
    allocations: dict[str, dict[str, dict[str, int]]] = dataclasses.field(default_factory=dict)

    def allocate(self, provider: str, consumer: str, resources: dict[str, int]) -> None:
        """Record ``consumer``'s allocation of ``provider`` (a provider UUID)."""
        self.allocations.setdefault(provider, {})[consumer] = resources

    def add_provider(
        self, name: str, uuid: str, inventories: dict[str, dict[str, Any]], usages: dict[str, int]
    ) -> None:
        """Register one resource provider (a compute node)."""
        self.providers[name] = {"uuid": uuid, "inventories": inventories, "usages": usages}

    def answer(self, route: str, query: dict[str, list[str]]) -> Response:
        if route == "/resource_providers":
            names = query.get("name", list(self.providers))
            found = [
                {"uuid": p["uuid"], "name": n, "generation": 1}
                for n, p in self.providers.items()
                if n in names
            ]
            return 200, {"resource_providers": found}
        parts = route.strip("/").split("/")
        by_uuid = {p["uuid"]: p for p in self.providers.values()}
        if len(parts) == 3 and parts[0] == "resource_providers" and parts[1] in by_uuid:
            provider = by_uuid[parts[1]]
            if parts[2] == "inventories":
                return 200, {"inventories": provider["inventories"]}
            if parts[2] == "usages":
                return 200, {"usages": provider["usages"]}
            if parts[2] == "allocations":
                held = self.allocations.get(parts[1], {})
                body = {c: {"resources": r, "generation": 1} for c, r in held.items()}
                return 200, {"allocations": body, "resource_provider_generation": 1}
        return 404, {"errors": [{"status": 404, "title": "Not Found", "detail": route}]}


@dataclasses.dataclass
class SimCinder(_Service):
    """Volumes by id: ``status`` and ``attachments`` [(server_id, host_name)]."""

    name: str = "Cinder"
    volumes: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    #: Attachments of the new attach API (3.27): id, status, instance, volume_id.
    attachments: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    #: The most attachments one page holds (``osapi_max_limit``).
    max_limit: int = 1000

    def add_attachment(self, attachment_id: str, volume_id: str, server: str, status: str) -> None:
        """Register one attachment of ``volume_id`` to ``server``."""
        self.attachments.append(
            {"id": attachment_id, "status": status, "instance": server, "volume_id": volume_id}
        )

    def add_volume(
        self, volume_id: str, status: str, attached: tuple[tuple[str, str], ...] = ()
    ) -> None:
        """Register a volume and its attachments (server id, host)."""
        attachments = [
            {
                "server_id": s,
                "host_name": h,
                "attachment_id": f"att-{s[:8]}",
                "volume_id": volume_id,
            }
            for s, h in attached
        ]
        self.volumes[volume_id] = {"id": volume_id, "status": status, "attachments": attachments}

    def answer(self, route: str, query: dict[str, list[str]]) -> Response:
        parts = route.strip("/").split("/")
        if route == "/attachments":
            return self._attachment_page(query)
        if len(parts) == 2 and parts[0] == "volumes":
            if parts[1] in self.volumes:
                return 200, {"volume": self.volumes[parts[1]]}
            message = f"Volume {parts[1]} could not be found."
            return 404, {"itemNotFound": {"code": 404, "message": message}}
        return 404, {"itemNotFound": {"code": 404, "message": route}}

    def _attachment_page(self, query: dict[str, list[str]]) -> Response:
        # NOTE: as Cinder: an admin's all_tenants lists every project's; a full page links
        # the next by its last entry's id.
        items = self.attachments
        if "marker" in query:
            ids = [a["id"] for a in items]
            items = items[ids.index(query["marker"][0]) + 1 :]
        page = items[: self.max_limit]
        body: dict[str, Any] = {"attachments": page}
        if len(page) == self.max_limit and page:
            href = f"http://cinder/v3/p/attachments?all_tenants=1&marker={page[-1]['id']}"
            body["attachments_links"] = [{"rel": "next", "href": href}]
        return 200, body


@dataclasses.dataclass
class SimNeutron(_Service):
    """Ports: ``mac_address``, ``device_id``, ``device_owner``, ``fixed_ips``, host."""

    name: str = "Neutron"
    ports: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    def add_port(
        self,
        port_id: str,
        mac: str,
        device_id: str,
        ips: tuple[str, ...] = (),
        host: str = "",
        vif_type: str = "ovs",
    ) -> None:
        """Register a port of server ``device_id`` bound to ``host``."""
        self.ports.append(
            {
                "id": port_id,
                "mac_address": mac,
                "device_id": device_id,
                "device_owner": "compute:nova" if device_id else "",
                "fixed_ips": [{"subnet_id": "subnet-1", "ip_address": ip} for ip in ips],
                "binding:host_id": host,
                "binding:vif_type": vif_type if host else "unbound",
            }
        )

    def answer(self, route: str, query: dict[str, list[str]]) -> Response:
        if route != "/v2.0/ports":
            return 404, {"NeutronError": {"type": "HTTPNotFound", "message": route}}
        macs = set(query.get("mac_address", []))
        hosts = set(query.get("binding:host_id", []))
        return 200, {
            "ports": [
                p
                for p in self.ports
                if (not macs or p["mac_address"] in macs)
                and (not hosts or p["binding:host_id"] in hosts)
            ]
        }
