"""Placement's view of one compute node's resource provider: inventory and usages.

Requests: ``GET /resource_providers?name=<hypervisor_hostname>`` (Nova names a
compute node's provider after its node), then the provider's ``inventories`` and
``usages``: three per audit.
"""

from __future__ import annotations

import urllib.parse
from typing import Any

from nova_orphans.classify.cost import PlacementAnswer, ProviderView, Resource
from nova_orphans.observe.services.client import Client, ServiceError, get_json


class PlacementObserver:
    """Asks Placement about the resource provider of one compute node."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def look(self, node_name: str | None) -> PlacementAnswer:
        """Placement's view of the provider named ``node_name``, or why there is none."""
        if not node_name:
            return PlacementAnswer(error="Nova names no single compute node for this host")
        try:
            return PlacementAnswer(provider=self.provider(node_name))
        except ServiceError as exc:
            return PlacementAnswer(error=str(exc))

    def provider(self, name: str) -> ProviderView:
        """Inventory and usages of the provider ``name``; raises ``ServiceError``."""
        query = urllib.parse.urlencode({"name": name})
        body = get_json(self._client, f"/resource_providers?{query}")
        providers = body.get("resource_providers") if isinstance(body, dict) else None
        if not isinstance(providers, list) or len(providers) != 1:
            found = len(providers) if isinstance(providers, list) else "no list of"
            raise ServiceError(f"Placement has {found} resource providers named {name!r}")
        uuid = str(providers[0].get("uuid", ""))
        inventories = _mapping(
            get_json(self._client, f"/resource_providers/{uuid}/inventories"), "inventories"
        )
        usages = _mapping(get_json(self._client, f"/resource_providers/{uuid}/usages"), "usages")
        try:
            resources = {
                rc: Resource(
                    total=int(inv["total"]),
                    reserved=int(inv.get("reserved", 0)),
                    allocation_ratio=float(inv.get("allocation_ratio", 1.0)),
                    used=int(usages.get(rc, 0)),
                )
                for rc, inv in inventories.items()
            }
        except (KeyError, TypeError, ValueError) as exc:
            raise ServiceError(f"Placement's inventory of {name!r} is unusable: {exc}") from exc
        return ProviderView(name, uuid, resources)


def _mapping(body: Any, key: str) -> dict[str, Any]:
    found = body.get(key) if isinstance(body, dict) else None
    if not isinstance(found, dict):
        raise ServiceError(f"Placement's answer has no {key!r}")
    return found
