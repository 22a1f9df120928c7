"""Read-only view of Nova's API for a whole fleet of compute hosts.

Requests per fleet audit, whatever the number of hosts: one listing of the
nova-compute services, one paged listing of every live server of the cloud,
one paged listing of every migration, and one lookup per domain that the
server listing does not explain (deleted, purged, or soft-deleted; two when
Nova has no record). Like ``NovaObserver`` it fails closed: any error, and any
cell Nova cannot reach, raises ``NovaError``.
"""

from __future__ import annotations

from typing import Any

from nova_orphans.core.model import Migration, Server
from nova_orphans.observe.nova import NovaObserver, parse_migration, parse_server


class FleetNovaObserver(NovaObserver):
    """Asks Nova about every host at once; counts the requests it makes.

    ``requests_made`` counts requests, not the retries of one request.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.requests_made = 0

    def compute_hosts(self) -> tuple[str, ...]:
        """Hosts that run a nova-compute service, sorted (``GET /os-services``).

        NOTE: the fleet listings below are filtered and paged, so Nova skips a
        cell it cannot reach in them; its hosts show up here as UNKNOWN
        services instead, and ``compute_services`` raises for them.
        """
        services = self.compute_services()
        return tuple(sorted({str(s["host"]) for s in services if s.get("host")}))

    def live_servers(self) -> dict[str, Server]:
        """Every live server of the cloud (all projects, every host), by UUID."""
        items = self._paged("/servers/detail", "servers", {"all_tenants": "1"})
        return {server.uuid: server for server in map(parse_server, items)}

    def all_migrations(self) -> tuple[Migration, ...]:
        """Every migration Nova lists, whatever its hosts.

        NOTE: one paged listing for the fleet instead of ``?host=H`` per host:
        each migration touches at most two hosts, so the rows are no more than
        the per-host listings hold together, in ``ceil(rows / page)`` requests
        instead of at least one per host.
        """
        items = self._paged("/os-migrations", "migrations", {})
        return tuple(parse_migration(item) for item in items)

    def migrations_of(self, uuid: str) -> tuple[Migration, ...]:
        """Every migration of one server (``/os-migrations?instance_uuid=``), paged."""
        items = self._paged("/os-migrations", "migrations", {"instance_uuid": uuid})
        return tuple(parse_migration(item) for item in items)

    def _get(self, request: str, missing_ok: bool = False) -> Any:
        self.requests_made += 1
        return super()._get(request, missing_ok)
