"""Read-only view of Nova's API for a whole fleet of compute hosts.

Each host is asked about exactly as a single host's audit asks (``NovaObserver.
look_at_listing``: the host's plain listing, details only where they can change a
finding), at most ``concurrency`` requests at a time over the same session. A
host's plain listing may start as soon as its libvirt scan ends
(``list_host_soon``: the scans and the listings overlap); then:

- one lookup per UUID however many hosts need it (a split-brain pair, a
  duplicate, a deleted guest defined on two hosts);
- the migrations touching a host, only for a host with something to explain;
- the admin-filter probe, unless a lookup or a listing proved the filters;
- one listing of every cell's compute services, after every other request.

NOTE: why per-host plain listings and not one listing of the whole cloud. The
plain view has no host attribute, so a cloud-wide plain listing cannot tell
which host runs a server: every domain would still need its own lookup. The
cloud-wide detail listing tells, but Nova renders every server of the cloud in
detail (≈ 5 ms each, several times the plain view's cost per server) on
``ceil(servers / 1000)`` pages that can only be asked one after the other (each
page's marker comes from the one before). The per-host listings return each
live server once, in the cheap view, and run side by side; they cost one more
request per host, which ``benchmarks/bench_fleet.py`` measures against the
detail listing with the calibrated cost model (docs/design.md §9).

Like ``NovaObserver`` it fails closed: any error, and any cell Nova cannot
reach, raises ``NovaError`` (docs/design.md rules 3 and 17).
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, TypeVar

from nova_orphans.model import Migration, NovaView, Server
from nova_orphans.observe.nova.api import parse_migration
from nova_orphans.observe.nova.observer import NovaObserver

#: Requests in flight at once against Nova. NOTE: each host's listing costs Nova a
#: fixed ≈ 0.2 s (calibrated model), so a 1,000-host fleet needs its listings side by
#: side; 8 is about half the API workers of a small HA control plane (3 controllers of
#: up to 5 workers), leaving the rest to everyone else.
NOVA_CONCURRENCY = 8

_In = TypeVar("_In")
_Out = TypeVar("_Out")


class FleetNovaObserver(NovaObserver):
    """Asks Nova about every host of a fleet; counts the requests it makes.

    ``requests_made`` counts requests, not the retries of one request.
    """

    def __init__(self, *args: Any, concurrency: int = NOVA_CONCURRENCY, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        self.concurrency = concurrency
        self.requests_made = 0
        self._lock = threading.Lock()
        self._in_flight = threading.BoundedSemaphore(concurrency)
        self._lookups: dict[str, concurrent.futures.Future[Server | None]] = {}
        self._listings: dict[str, concurrent.futures.Future[dict[str, Server]]] = {}
        self._listing_pool: concurrent.futures.ThreadPoolExecutor | None = None

    def compute_hosts(self) -> tuple[str, ...]:
        """Hosts that run a nova-compute service, sorted (``GET /os-services``).

        NOTE: the fleet listings below are filtered and paged, so Nova skips a
        cell it cannot reach in them; its hosts show up here as UNKNOWN
        services instead, and ``compute_services`` raises for them.
        """
        services = self.compute_services()
        return tuple(sorted({str(s["host"]) for s in services if s.get("host")}))

    def look_at_hosts(
        self,
        domains_by_host: Mapping[str, Collection[str]],
        details_for: Mapping[str, Iterable[str]],
    ) -> dict[str, NovaView]:
        """The ``NovaView`` each host's own audit would build, for its domains' UUIDs.

        ``details_for``: per host, the UUIDs whose full record its findings show
        (split-brain copies, deny-listed domains).
        """
        self._filters_proven = False

        def one(host: str) -> NovaView:
            domains = frozenset(domains_by_host[host])
            servers, lookups = self.look_at_listing(
                host, domains, self._listing_of(host), details_for.get(host, ())
            )
            migrations = self.migrations_needed(host, servers, lookups, domains)
            return NovaView(host, servers, lookups, migrations)

        try:
            views = self.in_parallel(one, sorted(domains_by_host))
        finally:
            self._stop_listings()
        self.prove_admin_filters()
        # NOTE: the host listings skip a cell Nova cannot reach, and "no record"
        # needs every cell: every cell's services, after every listing (rule 17).
        self.require_cells_answer()
        return {view.host: view for view in views}

    def list_host_soon(self, host: str) -> None:
        """Start ``host``'s plain listing in the background, for ``look_at_hosts`` to use.

        NOTE: called when the host's scan has ended, so the listing is never
        older than the domains it is compared with.
        """
        with self._lock:
            if host in self._listings:
                return
            if self._listing_pool is None:
                self._listing_pool = concurrent.futures.ThreadPoolExecutor(
                    self.concurrency, "nova-list"
                )
            self._listings[host] = self._listing_pool.submit(self.summaries_on_host, host)

    def _listing_of(self, host: str) -> dict[str, Server]:
        """The host's plain listing: the one started for it, or asked now."""
        with self._lock:
            started = self._listings.pop(host, None)
        return self.summaries_on_host(host) if started is None else started.result()

    def _stop_listings(self) -> None:
        """Drop the listings no view used (hosts not asked about, or after an error)."""
        with self._lock:
            pool, self._listing_pool = self._listing_pool, None
            self._listings.clear()
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def in_parallel(self, work: Callable[[_In], _Out], items: Iterable[_In]) -> list[_Out]:
        """``work`` on each item, ``concurrency`` at a time; the first error is raised.

        NOTE: on an error the items not started are dropped: the fleet's view
        fails as a whole (fail closed), so their answers would be thrown away.
        """
        pool = concurrent.futures.ThreadPoolExecutor(self.concurrency, "nova")
        try:
            return list(pool.map(work, items))
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def look_up(self, uuid: str) -> Server | None:
        """``NovaObserver.look_up``, asked once per UUID however many hosts need it."""
        with self._lock:
            pending = self._lookups.get(uuid)
            mine = pending is None
            if pending is None:
                pending = self._lookups[uuid] = concurrent.futures.Future()
        if mine:
            try:
                pending.set_result(super().look_up(uuid))
            except BaseException as exc:
                pending.set_exception(exc)
        return pending.result()

    def look_up_with_migrations(self, uuid: str) -> tuple[Server | None, tuple[Migration, ...]]:
        """The server's record and its migrations: what the fleet merge asks about each
        split-brain candidate (``fleet.merge.AskNova``), for a scan and for reports alike."""
        return self.look_up(uuid), self.migrations_of(uuid)

    def migrations_of(self, uuid: str) -> tuple[Migration, ...]:
        """Every migration of one server (``/os-migrations?instance_uuid=``), paged."""
        items = self._paged("/os-migrations", "migrations", {"instance_uuid": uuid})
        return tuple(parse_migration(item) for item in items)

    def _get(self, request: str, missing_ok: bool = False) -> Any:
        with self._lock:
            self.requests_made += 1
        with self._in_flight:
            return super()._get(request, missing_ok)
