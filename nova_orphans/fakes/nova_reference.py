"""The reference the cheap listing is measured against: Nova's view of a host as it was
observed before (the host's servers in detail), for the unit and end-to-end tests; and the
fleet's as it was (every server of the cloud in detail), for the fleet tests and benchmark."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from nova_orphans.model import Domain, Migration, NovaView, Server
from nova_orphans.observe.nova.api import parse_migration, parse_server
from nova_orphans.observe.nova.observer import BULK_LOOKUP_FROM, NovaObserver


def reference_observe(nova: NovaObserver, host: str, domain_uuids: list[str]) -> NovaView:
    """The observation before the cheap listing: the host's servers in detail."""
    servers_here = nova.servers_on_host(host)
    candidates = sorted(set(domain_uuids) - servers_here.keys())
    known = nova.deleted_on_host(host) if len(candidates) >= BULK_LOOKUP_FROM else {}
    lookups = {u: known[u] if u in known else nova.look_up(u) for u in candidates}
    migrations = nova.migrations_touching(host)
    nova.require_cells_answer(None if None in lookups.values() else host)
    return NovaView(host, servers_here, lookups, migrations)


def live_servers(nova: NovaObserver) -> dict[str, Server]:
    """Every live server of the cloud (all projects, every host) in detail, by UUID."""
    items = nova._paged("/servers/detail", "servers", {"all_tenants": "1"})
    return {server.uuid: server for server in map(parse_server, items)}


def reference_fleet_views(
    nova: NovaObserver, domains_by_host: Mapping[str, Iterable[Domain]]
) -> dict[str, NovaView]:
    """The fleet's views before the cheap listing: one detail listing of the whole cloud,
    one lookup per UUID it does not explain, every migration, every cell."""
    live = live_servers(nova)
    unexplained = {d.uuid for ds in domains_by_host.values() for d in ds} - live.keys()
    looked_up = {uuid: nova.look_up(uuid) for uuid in sorted(unexplained)}
    items = nova._paged("/os-migrations", "migrations", {})
    migrations = tuple(parse_migration(item) for item in items)
    nova.require_cells_answer()
    return {
        host: nova_view_for(host, domains, live, looked_up, migrations)
        for host, domains in domains_by_host.items()
    }


def nova_view_for(
    host: str,
    domains: Iterable[Domain],
    live_servers: Mapping[str, Server],
    looked_up: Mapping[str, Server | None],
    migrations: Iterable[Migration],
) -> NovaView:
    """The ``NovaView`` a single-host agent on ``host`` would have built from the fleet-wide
    detail listing (``live_servers``, by UUID) and the lookups of the domains it does not
    explain (``looked_up``)."""
    here = {u: s for u, s in live_servers.items() if s.host == host}
    lookups = {
        d.uuid: live_servers.get(d.uuid) or looked_up.get(d.uuid)
        for d in domains
        if d.uuid not in here
    }
    touching = tuple(m for m in migrations if host in (m.source_compute, m.dest_compute))
    return NovaView(host, here, lookups, touching)
