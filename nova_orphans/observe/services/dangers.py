"""Fetch what Cinder and Neutron say about the orphans' volumes and MAC addresses.

Requests: one ``GET /volumes/{id}`` per volume an orphan's disks are (Cinder's
listing filters are configurable per deployment, the id lookup is not), and one
``GET /v2.0/ports?mac_address=A&mac_address=B...`` for all the orphans' MACs (every page).
Each check fails closed on its own: its error is kept in ``Facts`` and the
findings concerned get a danger ``unknown`` (``classify/danger.py``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from nova_orphans.classify import danger
from nova_orphans.model import Finding
from nova_orphans.observe.services.client import Client, ServiceError, get_json, pages


class DangerObserver:
    """Asks Cinder and Neutron about what the orphans hold."""

    def __init__(self, volumes: Client, ports: Client) -> None:
        self._volumes = volumes
        self._ports = ports

    def look(self, findings: Iterable[Finding]) -> danger.Facts:
        """Everything Cinder and Neutron say about the checked findings' volumes and MACs."""
        checked = [f.domain for f in findings if danger.checked(f) and f.domain is not None]
        volume_ids = sorted({v for d in checked for v in danger.volume_ids(d)})
        macs = sorted({m for d in checked for m in danger.macs(d)})
        volumes: dict[str, danger.Volume | None] = {}
        volumes_error = ports_error = None
        ports: tuple[danger.Port, ...] = ()
        try:
            volumes = {v: self.volume(v) for v in volume_ids}
        except ServiceError as exc:
            volumes_error = str(exc)
        try:
            ports = self.ports_with(macs) if macs else ()
        except ServiceError as exc:
            ports_error = str(exc)
        return danger.Facts(volumes, volumes_error, ports, ports_error)

    def volume(self, volume_id: str) -> danger.Volume | None:
        """Cinder's record of one volume (all projects), None when it has none."""
        body = get_json(self._volumes, f"/volumes/{volume_id}", not_found="itemNotFound")
        if body is None:
            return None
        item = body.get("volume") if isinstance(body, dict) else None
        if not isinstance(item, dict) or item.get("id") != volume_id:
            raise ServiceError(f"Cinder's answer about volume {volume_id} is unusable")
        return danger.Volume(
            id=volume_id,
            status=str(item.get("status", "")),
            attachments=tuple(
                danger.Attachment(a.get("server_id"), a.get("host_name"))
                for a in item.get("attachments") or ()
                if isinstance(a, dict)
            ),
        )

    def ports_with(self, macs: list[str]) -> tuple[danger.Port, ...]:
        """Every port (all projects) carrying one of ``macs``: one request, and one per
        further page where Neutron pages (``pagination_max_limit``: a conflict on a later
        page is no less a conflict)."""
        query = [("mac_address", m) for m in macs]
        items = list(pages(self._ports, "/v2.0/ports", "ports", query))
        wanted = set(macs)
        ports = tuple(_port(i) for i in items)
        if any(p.mac.lower() not in wanted for p in ports):
            # NOTE: a Neutron that ignored the filter would list every port: refuse it
            # rather than flag conflicts that are not there.
            raise ServiceError("Neutron ignored the mac_address filter")
        return ports


def _port(item: dict[str, Any]) -> danger.Port:
    return danger.Port(
        id=str(item.get("id", "")),
        mac=str(item.get("mac_address", "")),
        device_id=str(item.get("device_id") or ""),
        device_owner=str(item.get("device_owner") or ""),
        fixed_ips=tuple(
            str(ip.get("ip_address")) for ip in item.get("fixed_ips") or () if isinstance(ip, dict)
        ),
        host=item.get("binding:host_id") or None,
    )
