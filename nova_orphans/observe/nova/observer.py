"""Read-only view of Nova's API for one compute host: what it asks Nova, and when.

It asks for the host's plain listing and for details only where a detail can change a
finding; docs/design.md §8 gives the request budget and why each request holds. It fails
closed: any error, timeout, refused credential, inconsistent page or partial record (a cell
Nova cannot reach) raises ``NovaError``; it never answers "no servers" on failure
(docs/design.md rules 3 and 17).
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Iterable
from typing import Any

from nova_orphans.model import Migration, NovaView, Server, managed_here
from nova_orphans.observe.errors import NovaBadAnswer
from nova_orphans.observe.nova.api import Transport, parse_migration
from nova_orphans.observe.nova.endpoints import NovaEndpoints
from nova_orphans.observe.nova.paging import PAGE_SIZE

#: From this many unexplained domains on, deleted rows are listed in bulk first.
BULK_LOOKUP_FROM = 5
#: Lookups the command line's observers keep in flight at once (see NovaObserver).
LOOKUPS_AT_ONCE = 4
#: From this share of the host's servers (1/N) needing details on, one detail
#: listing of the host costs Nova less than a lookup each.
DETAIL_LISTING_SHARE = 4


class NovaObserver(NovaEndpoints):
    """Asks Nova about one host, within the request budget of docs/design.md §8."""

    def __init__(
        self,
        transport: Transport,
        page_size: int = PAGE_SIZE,
        retry: Callable[[Callable[[], Any]], Any] | None = None,
        lookups_at_once: int = 1,
    ) -> None:
        """``lookups_at_once``: one ``GET`` per domain to explain costs the caller
        Nova's time for each (about 70 ms on a real Nova): from 2 on, that many are
        kept in flight. NOTE: 1 by default, for answers in a reproducible order (the
        simulation draws its faults request by request)."""
        super().__init__(transport, page_size, retry)
        self._lookups_at_once = max(1, lookups_at_once)

    def look(
        self,
        host: str,
        domain_uuids: Iterable[str],
        details_for: Iterable[str] = (),
        cells_from_listing: bool = False,
    ) -> NovaView:
        """Everything Nova says about ``host`` and the domains found on it.

        ``details_for``: UUIDs whose full record is wanted even when the plain
        listing explains them (the deny-listed domains, whose findings show it).
        ``cells_from_listing``: a host listing that names a server shows the host's
        cell answered (``finish``), so no service listing is asked for it.
        """
        domains = set(domain_uuids)
        self._filters_proven = False
        listing = self.summaries_on_host(host)
        servers_here, lookups = self.look_at_listing(host, domains, listing, details_for)
        self.prove_admin_filters()
        answered = cells_from_listing and bool(listing)
        return self.finish(host, servers_here, lookups, domains, host_cell_answered=answered)

    def look_at_listing(
        self,
        host: str,
        domains: set[str] | frozenset[str],
        servers_here: dict[str, Server],
        details_for: Iterable[str] = (),
    ) -> tuple[dict[str, Server], dict[str, Server | None]]:
        """The servers Nova manages on ``host`` and the records of the domains it does not,
        from the host's plain listing ``servers_here``, already asked: details only where
        they can change a finding (each domain not in it, each server in it without a
        domain here, and each of ``details_for``)."""
        wanted = (servers_here.keys() - domains) | (set(details_for) & servers_here.keys())
        if len(wanted) >= max(BULK_LOOKUP_FROM, len(servers_here) // DETAIL_LISTING_SHARE):
            # NOTE: many servers without a domain here (a libvirt that lost its
            # guests, or the wrong libvirt): one detail listing, as before.
            servers_here = self.servers_on_host(host)
            wanted = set()
        lookups = self.look_up_domains(
            host, wanted | (domains - servers_here.keys()), servers_here, domains
        )
        return servers_here, lookups

    def look_up_domains(
        self,
        host: str,
        uuids: Iterable[str],
        servers_here: dict[str, Server],
        domains: set[str] | frozenset[str],
    ) -> dict[str, Server | None]:
        """Nova's record of each of ``uuids``: domains not managed here, servers needing details.

        NOTE: many domains to explain (after an outage with local deletes) are
        explained in bulk by one listing of this host's deleted rows; the rest
        (live elsewhere, or no record at all) still get one lookup each.
        """
        candidates = set(uuids)
        unexplained = candidates & (domains - servers_here.keys())
        known = self.deleted_on_host(host) if len(unexplained) >= BULK_LOOKUP_FROM else {}
        lookups = {u: known[u] for u in unexplained if u in known}
        rest = candidates - lookups.keys()
        return {**lookups, **self.look_up_each(host, rest, servers_here, domains)}

    def look_up_each(
        self,
        host: str,
        uuids: Iterable[str],
        servers_here: dict[str, Server],
        domains: set[str] | frozenset[str],
    ) -> dict[str, Server | None]:
        """Look up each of ``uuids`` and file its record; return those of domains not managed here.

        A server still managed on ``host`` replaces its entry in ``servers_here``
        (full record); one that is not any more leaves it (it changed since the
        listing) and, when it has a domain here, is returned with the lookups.
        """
        lookups: dict[str, Server | None] = {}
        ordered = sorted(uuids)
        for uuid, record in zip(ordered, self._look_up_all(ordered), strict=True):
            servers_here.pop(uuid, None)
            if record is not None and managed_here(record, host):
                servers_here[uuid] = record
            elif uuid in domains:
                lookups[uuid] = record
        return lookups

    def finish(
        self,
        host: str,
        servers_here: dict[str, Server],
        lookups: dict[str, Server | None],
        domains: set[str] | frozenset[str],
        migrations: tuple[Migration, ...] | None = None,
        host_cell_answered: bool = False,
        kept: frozenset[str] = frozenset(),
    ) -> NovaView:
        """Add the migrations when anything needs explaining; check that the cells answered.

        ``migrations``: still true from an earlier look (None: asked when needed);
        ``host_cell_answered``: a listing already showed that the host's cell answers;
        ``kept``: the lookups carried over from earlier looks, whose cells answered then.
        """
        if migrations is None:
            migrations = self.migrations_needed(host, servers_here, lookups, domains)
        # NOTE: the host's own cell must answer for the host listings to hold, and
        # every cell for "Nova has no record"; asked last, after every listing.
        if any(record is None for u, record in lookups.items() if u not in kept):
            self.require_cells_answer()
        elif not host_cell_answered:
            self.require_cells_answer(host)
        return NovaView(host, servers_here, lookups, migrations)

    def migrations_needed(
        self,
        host: str,
        servers_here: dict[str, Server],
        lookups: dict[str, Server | None],
        domains: set[str] | frozenset[str],
    ) -> tuple[Migration, ...]:
        """The migrations touching ``host``, when a domain or a server needs explaining.

        NOTE: a migration changes a finding only for a domain Nova does not
        manage here (its protection, its reason) and for a server with no domain
        here (a migration in progress is not "lost"); a host where every domain
        is a server Nova manages here and every server has its domain needs none.
        """
        lost = servers_here.keys() - domains
        return self.migrations_touching(host) if lookups or lost else ()

    def prove_admin_filters(self) -> None:
        """``require_admin_filters``, unless a request since the last observation proved it."""
        if not self._filters_proven:
            self.require_admin_filters()

    def show_all(self, uuids: list[str]) -> list[Server | None]:
        """``show`` of each of ``uuids``, in order, ``lookups_at_once`` in flight."""
        return self._ask_each(self.show, uuids)

    def _look_up_all(self, uuids: list[str]) -> list[Server | None]:
        """``look_up`` of each of ``uuids``, in order, ``lookups_at_once`` in flight."""
        return self._ask_each(self.look_up, uuids)

    def _ask_each(
        self, ask: Callable[[str], Server | None], uuids: list[str]
    ) -> list[Server | None]:
        """``ask`` of each of ``uuids``, in order; the first failure is raised.

        NOTE: a failed request fails the whole look (fail closed) whether or not
        others were in flight; the pool waits for them before raising.
        """
        if self._lookups_at_once == 1 or len(uuids) < 2:
            return [ask(uuid) for uuid in uuids]
        workers = min(self._lookups_at_once, len(uuids))
        with concurrent.futures.ThreadPoolExecutor(workers, "nova-lookup") as pool:
            return list(pool.map(ask, uuids))

    def require_cells_answer(self, host: str | None = None) -> None:
        """Raise ``NovaCellDown`` unless ``host``'s cell (every cell when None) answers Nova.

        NOTE: filtered or paged listings skip a cell Nova cannot reach at every
        microversion (``[api] list_records_by_skipping_down_cells``), so neither
        "no servers on this host" nor "Nova has no record" holds while a cell is
        down; from 2.69 the service listing shows a down cell's compute hosts
        as UNKNOWN (built from the API database's host mappings).
        """
        self.compute_services(host)

    def fresh_view(self, host: str, uuid: str) -> NovaView:
        """A one-guest view of ``uuid`` read just now, for re-verification before a step.

        NOTE: a destructive step must not rest on one answer that could be wrong
        (an empty page is well-formed). The record is read through two endpoints
        (the listing with deleted rows, and ``GET /servers/{id}``) and they must
        agree; in-progress live migrations are read from the server's own
        ``/migrations`` as well as from ``/os-migrations``. A server in a cell
        Nova cannot reach comes back partial from ``GET /servers/{id}``: error.
        """
        record = self.look_up(uuid)
        shown = self.show(uuid)
        _require_agreement(uuid, record, shown)
        items = self._paged("/os-migrations", "migrations", {"instance_uuid": uuid})
        migrations = [parse_migration(item) for item in items]
        if shown is not None:
            migrations += self.live_migrations_in_progress(uuid)
        if record is None:
            self.require_cells_answer()
        return NovaView(host, {}, {uuid: record}, tuple(migrations))


def _require_agreement(uuid: str, record: Server | None, shown: Server | None) -> None:
    """Raise unless the listing's record and ``GET /servers/{id}`` tell the same story."""
    listed = record if record is not None and not record.deleted else None
    same = (listed is None and shown is None) or (
        listed is not None and shown is not None
        and (listed.host, listed.vm_state, listed.task_state)
        == (shown.host, shown.vm_state, shown.task_state)
    )  # fmt: skip
    if not same:
        raise NovaBadAnswer(
            request=f"the re-verification of {uuid}",
            reason="the server listing and GET /servers/{id} disagree",
        )
