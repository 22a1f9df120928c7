"""In-process simulated Placement, Cinder and Neutron, answering at the HTTP-path level.

Each follows the ``Client`` contract of ``nova_orphans.observe.services``:
``get(path)`` returns ``(HTTP status, decoded JSON body)`` with the shapes of the
real APIs for the requests nova-orphans makes (Placement's resource providers,
inventories, usages and allocations; Cinder's ``GET /volumes/{id}`` and its paged
attachment listing; Neutron's port listing filtered by ``mac_address``, repeated for
several, or by ``binding:host_id``, paged when ``pagination_max_limit`` is set, with
inactive port bindings as a live migration leaves them). ``fail`` makes every request
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
    #: By attachment id: the host of the connector that attached it (None: none yet).
    connectors: dict[str, str | None] = dataclasses.field(default_factory=dict)

    def add_attachment(
        self, attachment_id: str, volume_id: str, server: str, status: str, host: str | None = None
    ) -> None:
        """Register one attachment of ``volume_id`` to ``server``, through ``host``'s
        connector; the volume too, in use, when Cinder has no record of it yet."""
        self.attachments.append(
            {"id": attachment_id, "status": status, "instance": server, "volume_id": volume_id}
        )
        self.connectors[attachment_id] = host
        self.volumes.setdefault(volume_id, {"id": volume_id, "status": "in-use", "attachments": []})

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
                return 200, {"volume": self._volume_view(parts[1])}
            message = f"Volume {parts[1]} could not be found."
            return 404, {"itemNotFound": {"code": 404, "message": message}}
        return 404, {"itemNotFound": {"code": 404, "message": route}}

    def _volume_view(self, volume_id: str) -> dict[str, Any]:
        # NOTE: as Cinder's v3 volume view: of the new-attach attachments only those whose
        # attach_status is 'attached', each with the connector's host as host_name (to
        # admin credentials, as these are).
        volume = self.volumes[volume_id]
        attached = [
            {
                "id": volume_id,
                "attachment_id": a["id"],
                "volume_id": volume_id,
                "server_id": a["instance"],
                "host_name": self.connectors.get(a["id"]),
                "device": "/dev/vdb",
                "attached_at": "2024-04-01T00:00:00.000000",
            }
            for a in self.attachments
            if a["volume_id"] == volume_id and a["status"] == "attached"
        ]
        return {**volume, "attachments": list(volume["attachments"]) + attached}

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
    #: ``pagination_max_limit``: the most ports one page holds (None: Neutron's default,
    #: no paging).
    pagination_max_limit: int | None = None
    #: By port id: the hosts of its inactive bindings (the multiple port bindings extension).
    inactive: dict[str, set[str]] = dataclasses.field(default_factory=dict)

    def add_port(
        self,
        port_id: str,
        mac: str,
        device_id: str,
        ips: tuple[str, ...] = (),
        host: str = "",
        vif_type: str = "ovs",
        zone: str = "nova",
    ) -> None:
        """Register a port of server ``device_id`` (in availability zone ``zone``) bound
        to ``host``."""
        self.ports.append(
            {
                "id": port_id,
                "mac_address": mac,
                "device_id": device_id,
                "device_owner": f"compute:{zone}" if device_id else "",
                "fixed_ips": [{"subnet_id": "subnet-1", "ip_address": ip} for ip in ips],
                "binding:host_id": host,
                "binding:vif_type": vif_type if host else "unbound",
            }
        )

    def bind_inactive(self, port_id: str, host: str) -> None:
        """Give the port an inactive binding on ``host``, as Nova does on a live
        migration's destination (``POST /v2.0/ports/{id}/bindings``)."""
        self.inactive.setdefault(port_id, set()).add(host)

    def activate(self, port_id: str, host: str) -> None:
        """Activate the port's binding on ``host``: its active one becomes inactive
        (``PUT /v2.0/ports/{id}/bindings/{host}/activate``, at a live migration's switch)."""
        port = next(p for p in self.ports if p["id"] == port_id)
        bindings = self.inactive.setdefault(port_id, set())
        bindings.discard(host)
        bindings.add(port["binding:host_id"])
        port["binding:host_id"] = host

    def answer(self, route: str, query: dict[str, list[str]]) -> Response:
        if route != "/v2.0/ports":
            return 404, {"NeutronError": {"type": "HTTPNotFound", "message": route}}
        macs = set(query.get("mac_address", []))
        hosts = set(query.get("binding:host_id", []))
        # NOTE: ML2's binding:host_id filter matches any of the port's bindings, active or
        # not; the port shows its active one's host.
        found = [
            p
            for p in self.ports
            if (not macs or p["mac_address"] in macs)
            and (not hosts or {p["binding:host_id"], *self.inactive.get(p["id"], ())} & hosts)
        ]
        return 200, self._page(found, query)

    def _page(self, found: list[dict[str, Any]], query: dict[str, list[str]]) -> dict[str, Any]:
        # NOTE: neutron/api/api_common.py: the page size is min(pagination_max_limit,
        # limit) or pagination_max_limit; paged by id ascending after ``marker``; a full
        # page links the next by its last id (and every page the previous).
        limit = int(query.get("limit", ["0"])[0])
        if self.pagination_max_limit:
            limit = min(self.pagination_max_limit, limit) or self.pagination_max_limit
        if not limit:
            return {"ports": found}
        ordered = sorted(found, key=lambda p: str(p["id"]))
        marker = query.get("marker", [""])[0]
        page = [p for p in ordered if str(p["id"]) > marker][:limit]
        params = {k: v for k, v in query.items() if k != "marker"}
        links = []
        if len(page) >= limit:
            links.append({"rel": "next", "href": _href(params, page[-1]["id"])})
        first = page[0]["id"] if page else marker
        links.append(
            {"rel": "previous", "href": _href({**params, "page_reverse": ["True"]}, first)}
        )
        return {"ports": page, "ports_links": links}


def _href(params: dict[str, list[str]], marker: str) -> str:
    query = urllib.parse.urlencode({**params, "marker": [marker]}, doseq=True)
    return f"http://neutron.sim:9696/v2.0/ports?{query}"
