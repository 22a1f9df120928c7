"""The reference the cheap listing is measured against: Nova's view of a host as it was
observed before (the host's servers in detail), for the unit and end-to-end tests."""

from __future__ import annotations

from nova_orphans.core.model import NovaView
from nova_orphans.observe.nova import BULK_LOOKUP_FROM, NovaObserver


def reference_observe(nova: NovaObserver, host: str, domain_uuids: list[str]) -> NovaView:
    """The observation before the cheap listing: the host's servers in detail."""
    servers_here = nova.servers_on_host(host)
    candidates = sorted(set(domain_uuids) - servers_here.keys())
    known = nova.deleted_on_host(host) if len(candidates) >= BULK_LOOKUP_FROM else {}
    lookups = {u: known[u] if u in known else nova.lookup(u) for u in candidates}
    migrations = nova.migrations_touching(host)
    nova.require_cells_answer(None if None in lookups.values() else host)
    return NovaView(host, servers_here, lookups, migrations)
