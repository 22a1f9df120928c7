"""In-process simulated Placement, Cinder and Neutron, answering at the HTTP-path level.

Each follows the ``Client`` contract of ``nova_orphans.observe.services``:
``get(path)`` returns ``(HTTP status, decoded JSON body)`` with the shapes of the
real APIs for the requests nova-orphans makes (Placement's resource providers,
inventories and usages; Cinder's ``GET /volumes/{id}``; Neutron's port listing
filtered by ``mac_address``, repeated for several). ``fail`` makes every request
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

    def get(self, path: str) -> Response:
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
        return 404, {"errors": [{"status": 404, "title": "Not Found", "detail": route}]}


@dataclasses.dataclass
class SimCinder(_Service):
    """Volumes by id: ``status`` and ``attachments`` [(server_id, host_name)]."""

    name: str = "Cinder"
    volumes: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)

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
        if len(parts) == 2 and parts[0] == "volumes":
            if parts[1] in self.volumes:
                return 200, {"volume": self.volumes[parts[1]]}
            message = f"Volume {parts[1]} could not be found."
            return 404, {"itemNotFound": {"code": 404, "message": message}}
        return 404, {"itemNotFound": {"code": 404, "message": route}}


@dataclasses.dataclass
class SimNeutron(_Service):
    """Ports: ``mac_address``, ``device_id``, ``device_owner``, ``fixed_ips``, host."""

    name: str = "Neutron"
    ports: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    def add_port(
        self, port_id: str, mac: str, device_id: str, ips: tuple[str, ...] = (), host: str = ""
    ) -> None:
        """Register a port of server ``device_id`` on ``host``."""
        self.ports.append(
            {
                "id": port_id,
                "mac_address": mac,
                "device_id": device_id,
                "device_owner": "compute:nova" if device_id else "",
                "fixed_ips": [{"subnet_id": "subnet-1", "ip_address": ip} for ip in ips],
                "binding:host_id": host,
            }
        )

    def answer(self, route: str, query: dict[str, list[str]]) -> Response:
        if route != "/v2.0/ports":
            return 404, {"NeutronError": {"type": "HTTPNotFound", "message": route}}
        macs = set(query.get("mac_address", []))
        return 200, {"ports": [p for p in self.ports if not macs or p["mac_address"] in macs]}
