"""Read-only view of Nova's API for one compute host.

Requests per observation: one paged *plain* listing of the live servers on the
host (``GET /servers?host=H``: id and name only, several times cheaper for
Nova than the detail view), then details only where they can change a
finding: one lookup per domain that listing does not explain (when there are
many, one paged listing of the host's deleted rows first explains the deleted
ones in bulk) and per server listed with no domain here (a possible ``lost``
guest; when there are many, one detail listing of the host instead). The
migrations touching the host are listed only when there is a domain or a
server to explain. One service listing checks that the host's cell (every
cell, when a lookup found no record) answered: Nova's filtered listings skip
a cell they cannot reach. When no lookup proved that Nova applied the admin
filters, one empty probe listing does (``require_admin_filters``).
The observer fails closed: any error, timeout, refused credential, inconsistent
page or partial record (a cell Nova cannot reach) raises ``NovaError``; it
never answers "no servers" on failure (docs/design.md rules 3 and 17).
"""

from __future__ import annotations

import concurrent.futures
import datetime
import re
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

import tenacity

from nova_orphans.core.model import Migration, NovaView, Server, managed_here
from nova_orphans.observe.errors import (
    NovaAuthFailed,
    NovaBadAnswer,
    NovaCellDown,
    NovaError,
    NovaForbidden,
    NovaUnreachable,
)

#: 2.69: a cell Nova cannot reach answers ``GET /servers/{id}`` with a partial
#: record and ``GET /os-services`` with status UNKNOWN, instead of an error the
#: filtered listings would silently skip. 2.59 gave paged, typed migrations.
#: NOTE: nothing else we read changed from 2.59 to 2.69 (2.60-2.68 touch
#: multiattach, flavors, instance actions, trusted certs, server groups, aborts
#: and forced live migration; 2.66 only adds the changes-before filter).
#: Filtered or paged listings skip a down cell at every microversion
#: (``[api] list_records_by_skipping_down_cells``): see ``require_cells_answer``.
MICROVERSION = "2.69"
PAGE_SIZE = 1000
#: The most entries one listing may hold: more servers (or deleted rows, or migrations) than
#: the cloud of one Nova API holds. NOTE: every listing the tool asks for is of one host or
#: of the changes of a few minutes, except a fleet's; a listing still going past this is
#: taken for endless (docs/design.md §8).
MAX_LISTED = 100_000
#: The most pages one listing may take. NOTE: Nova's ``[api] max_limit`` can shrink a page
#: below ``limit``; from a ``max_limit`` of 100 on, ``MAX_LISTED`` comes first.
MAX_PAGES = 1000
COMPUTE_BINARY = "nova-compute"
#: From this many unexplained domains on, deleted rows are listed in bulk first.
BULK_LOOKUP_FROM = 5
#: Lookups the command line's observers keep in flight at once (see NovaObserver).
LOOKUPS_AT_ONCE = 4
#: NOTE: with changes-since Nova's listing includes deleted rows as well as live
#: ones, so one request per UUID answers "live, deleted or never heard of".
SINCE_THE_EPOCH = "1970-01-01T00:00:00Z"
#: A host name no compute host has (RFC 6761 reserves ``.invalid``): a listing
#: filtered by it is empty unless Nova dropped the filter.
PROBE_HOST = "no-such-host.invalid"
#: From this share of the host's servers (1/N) needing details on, one detail
#: listing of the host costs Nova less than a lookup each.
DETAIL_LISTING_SHARE = 4
#: NOTE: Nova does not refuse some requests it cannot fully answer to the credentials: it
#: drops admin-only filters (host, deleted, uuid) unless the credentials have this rule, and
#: blanks the host attributes (servers, migrations) unless they have the rule of the field.
#: The answers are checked, and a failure names the rule (nova_orphans/data/nova-policy.yaml).
FILTERS_RULE = "os_compute_api:servers:allow_all_filters"
SERVER_HOST_RULE = "os_compute_api:os-extended-server-attributes"
MIGRATION_HOST_RULE = "os_compute_api:os-migrations:index:host"
SERVER_MIGRATION_HOST_RULE = "os_compute_api:servers:migrations:index:host"
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


class Transport(Protocol):
    """The one call the observer makes: an HTTP GET on the compute endpoint.

    A transport also carries ``date``: the HTTP ``Date`` of its last answer (Nova's
    clock), which incremental observations need (``nova_tracker``). NOTE: declared
    here so that the type checker refuses a wrapper that drops it (the agent's metrics
    wrapper once did, and every cycle of ``run`` was a full look); the observer still
    reads it with a default, so a test double without it gets full looks.
    """

    @property
    def date(self) -> datetime.datetime | None:
        """Nova's clock at the last answer; None when that answer had no ``Date``."""

    def get(self, path: str) -> tuple[int, Any]:
        """Return (HTTP status, decoded JSON body or None) for ``path``.

        Raises ``NovaUnreachable`` when Nova cannot be reached in time.
        """


class _Transient(NovaError):
    msg_fmt = "Nova answered %(request)s with HTTP %(status)s"


class NovaObserver:
    """Asks Nova about one host; see the module docstring for the request budget."""

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
        self._transport = transport
        self._lookups_at_once = max(1, lookups_at_once)
        self._page_size = page_size
        self._retry = retry or default_retry()
        self._filters_proven = False
        #: Nova's clock (HTTP Date) at the first answer since ``restart_clock``.
        self.first_answer_at: datetime.datetime | None = None
        #: The newest ``updated_at`` of a compute service listed since ``restart_clock``:
        #: the time of Nova's writers (a service reports every ``report_interval``).
        self.newest_report_at: datetime.datetime | None = None

    def observe(
        self, host: str, domain_uuids: Iterable[str], details_for: Iterable[str] = ()
    ) -> NovaView:
        """Everything Nova says about ``host`` and the domains found on it.

        ``details_for``: UUIDs whose full record is wanted even when the plain
        listing explains them (the deny-listed domains, whose findings show it).
        """
        domains = set(domain_uuids)
        self._filters_proven = False
        servers_here, lookups = self.explain_host(host, domains, details_for)
        self.prove_admin_filters()
        return self.finish(host, servers_here, lookups, domains)

    def explain_host(
        self, host: str, domains: set[str] | frozenset[str], details_for: Iterable[str] = ()
    ) -> tuple[dict[str, Server], dict[str, Server | None]]:
        """The servers Nova manages on ``host`` and the records of the domains it does not.

        The plain listing of the host, then details only where they can change a
        finding: each domain not in it, each server in it without a domain here,
        and each of ``details_for`` (see the module docstring).
        """
        return self.explain_listing(host, domains, self.summaries_on_host(host), details_for)

    def explain_listing(
        self,
        host: str,
        domains: set[str] | frozenset[str],
        servers_here: dict[str, Server],
        details_for: Iterable[str] = (),
    ) -> tuple[dict[str, Server], dict[str, Server | None]]:
        """``explain_host`` for the host's plain listing ``servers_here``, already asked."""
        wanted = (servers_here.keys() - domains) | (set(details_for) & servers_here.keys())
        if len(wanted) >= max(BULK_LOOKUP_FROM, len(servers_here) // DETAIL_LISTING_SHARE):
            # NOTE: many servers without a domain here (a libvirt that lost its
            # guests, or the wrong libvirt): one detail listing, as before.
            servers_here = self.servers_on_host(host)
            wanted = set()
        lookups = self.explain_domains(
            host, wanted | (domains - servers_here.keys()), servers_here, domains
        )
        return servers_here, lookups

    def explain_domains(
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
        return {**lookups, **self.explain(host, candidates - lookups.keys(), servers_here, domains)}

    def explain(
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
        every_cell: bool = False,
        migrations: tuple[Migration, ...] | None = None,
    ) -> NovaView:
        """Add the migrations when anything needs explaining; check that the cells answered.

        ``every_cell``: the view rests on a listing of the whole cloud (changes-since);
        ``migrations``: still true from an earlier look (None: asked when needed).
        """
        if migrations is None:
            migrations = self.migrations_needed(host, servers_here, lookups, domains)
        # NOTE: the host's own cell must answer for the host listings to hold, and
        # every cell for "Nova has no record"; asked last, after every listing.
        self.require_cells_answer(None if every_cell or None in lookups.values() else host)
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

    def require_admin_filters(self) -> None:
        """Raise unless Nova applies the admin-only filters (``host``, ``uuid``, ``deleted``).

        NOTE: credentials without the ``allow_all_filters`` policy make Nova drop
        them silently (servers.py remove_invalid_options), and the plain listing
        has no host attribute to check: a listing of a host no compute has must
        come back empty. A lookup by ``uuid``, a deleted listing or a detail
        listing checked record by record prove the same, and spare this request.
        """
        query = {"all_tenants": "1", "host": PROBE_HOST, "limit": "1"}
        body = self._get("/servers?" + urllib.parse.urlencode(query))
        if _list_in(body, "servers", "the host filter probe"):
            raise NovaBadAnswer(
                request="the host listing",
                reason="Nova ignored the host filter (do the credentials have the admin role?)",
            )
        self._filters_proven = True

    def changed_since(self, since: datetime.datetime) -> set[str]:
        """UUIDs of every server of the cloud Nova changed or deleted since ``since``.

        NOTE: the plain listing (ids only) without a host filter: a server that
        left the host no longer matches ``host=H``. ``changes-since`` returns
        deleted rows too and compares each row's ``updated_at``.
        """
        query = {"all_tenants": "1", "changes-since": _isotime(since)}
        return {_uuid_of(item) for item in self._paged("/servers", "servers", query)}

    def changes_on_host(self, host: str, since: datetime.datetime) -> Iterator[dict[str, Any]]:
        """Detail records of the servers on ``host`` changed since ``since``, deleted ones too."""
        query = {"all_tenants": "1", "host": host, "changes-since": _isotime(since)}
        return self._paged("/servers/detail", "servers", query)

    def summaries_on_host(self, host: str) -> dict[str, Server]:
        """Live servers Nova places on ``host`` (all projects), from the plain listing.

        NOTE: the same filters as the detail listing (servers.py index and detail
        share _get_servers); each record is a summary: live, not SOFT_DELETED, on
        ``host`` (see ``core.model.managed_here``), with its name and no states.
        """
        servers: dict[str, Server] = {}
        for item in self._paged("/servers", "servers", {"all_tenants": "1", "host": host}):
            uuid = _uuid_of(item)
            servers[uuid] = Server(uuid, item.get("name"), host, "", None, None, summary=True)
        return servers

    def deleted_on_host(self, host: str) -> dict[str, Server]:
        """Deleted (not yet archived) and SOFT_DELETED servers Nova records on ``host``."""
        records: dict[str, Server] = {}
        query = {"all_tenants": "1", "host": host, "deleted": "1"}
        for item in self._paged("/servers/detail", "servers", query):
            server = parse_server(item)
            if server.host != host or not (server.deleted or server.vm_state == "soft-delete"):
                raise NovaBadAnswer(
                    request="the deleted-server listing",
                    reason=f"server {server.uuid} is live or not on {host!r} "
                    f"(Nova ignored the filters: do the credentials have {FILTERS_RULE}?)",
                )
            records[server.uuid] = server
        # NOTE: a deleted row in a listing filtered by deleted=1 and host proves both
        # were applied (dropped, Nova would list live rows only).
        self._filters_proven = self._filters_proven or bool(records)
        return records

    def servers_on_host(self, host: str) -> dict[str, Server]:
        """Live servers Nova places on ``host`` (all projects), by UUID."""
        servers: dict[str, Server] = {}
        query = {"all_tenants": "1", "host": host}
        for item in self._paged("/servers/detail", "servers", query):
            server = parse_server(item)
            if server.host != host:
                # NOTE: without FILTERS_RULE Nova silently ignores the host
                # filter; trusting such a list would make every guest look
                # like an orphan.
                raise NovaBadAnswer(
                    request="the host listing",
                    reason=f"server {server.uuid} is on {server.host!r}, not {host!r} "
                    f"(Nova ignored the host filter: do the credentials have {FILTERS_RULE}?)",
                )
            servers[server.uuid] = server
        # NOTE: every record checked on ``host``: the answer a host filter gives.
        self._filters_proven = True
        return servers

    def lookup(self, uuid: str) -> Server | None:
        """Nova's record of ``uuid`` (live anywhere, or deleted), or None if it has none.

        A None answer holds only with every cell answering: see ``require_cells_answer``.
        """
        query = {"all_tenants": "1", "uuid": uuid, "changes-since": SINCE_THE_EPOCH}
        body = self._get("/servers/detail?" + urllib.parse.urlencode(query))
        items = _list_in(body, "servers", f"the lookup of {uuid}")
        records = [parse_server(item) for item in items]
        if any(r.uuid != uuid for r in records) or len(records) > 1:
            raise NovaBadAnswer(
                request=f"the lookup of {uuid}",
                reason=f"Nova ignored the uuid filter (do the credentials have {FILTERS_RULE}?)",
            )
        # NOTE: uuid is admin-only like host: an answer that holds (nothing, or
        # this server alone) shows Nova applied the filter, or that the filter
        # could not have changed the answer (see require_admin_filters).
        self._filters_proven = True
        return records[0] if records else None

    def _look_up_all(self, uuids: list[str]) -> list[Server | None]:
        """``lookup`` of each of ``uuids``, in order; the first failure is raised.

        NOTE: a failed lookup fails the whole look (fail closed) whether or not
        others were in flight; the pool waits for them before raising.
        """
        if self._lookups_at_once == 1 or len(uuids) < 2:
            return [self.lookup(uuid) for uuid in uuids]
        workers = min(self._lookups_at_once, len(uuids))
        with concurrent.futures.ThreadPoolExecutor(workers, "nova-lookup") as pool:
            return list(pool.map(self.lookup, uuids))

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
        record = self.lookup(uuid)
        shown = self.show(uuid)
        _require_agreement(uuid, record, shown)
        items = self._paged("/os-migrations", "migrations", {"instance_uuid": uuid})
        migrations = [parse_migration(item) for item in items]
        if shown is not None:
            migrations += self.live_migrations_in_progress(uuid)
        if record is None:
            self.require_cells_answer()
        return NovaView(host, {}, {uuid: record}, tuple(migrations))

    def show(self, uuid: str) -> Server | None:
        """``GET /servers/{uuid}``: the live (or SOFT_DELETED) record, None when 404."""
        body = self._get(f"/servers/{uuid}", missing_ok=True)
        if body is None:
            return None
        server = body.get("server") if isinstance(body, dict) else None
        if not isinstance(server, dict):
            raise NovaBadAnswer(request=f"GET /servers/{uuid}", reason="no 'server' in the answer")
        return parse_server(server)

    def live_migrations_in_progress(self, uuid: str) -> list[Migration]:
        """The server's in-progress live migrations (``GET /servers/{uuid}/migrations``)."""
        request = f"/servers/{uuid}/migrations"
        items = _list_in(self._get(request), "migrations", request)
        return [
            parse_migration(
                dict(item, instance_uuid=uuid, migration_type="live-migration"),
                host_rule=SERVER_MIGRATION_HOST_RULE,
            )
            for item in items
        ]

    def migrations_touching(self, host: str) -> tuple[Migration, ...]:
        """Migrations whose source or destination is ``host``."""
        items = self._paged("/os-migrations", "migrations", {"host": host})
        return tuple(parse_migration(item) for item in items)

    def compute_services(self, host: str | None = None) -> list[dict[str, Any]]:
        """Nova's nova-compute services (of ``host`` only, when given).

        Raises ``NovaCellDown`` when a service's cell did not answer (status UNKNOWN).
        """
        query = {"binary": COMPUTE_BINARY, **({"host": host} if host else {})}
        request = "/os-services?" + urllib.parse.urlencode(query)
        services = _list_in(self._get(request), "services", "the service listing")
        for service in services:
            if service.get("status") == "UNKNOWN":
                raise NovaCellDown(
                    what=f"compute host {service.get('host')!r} came back partial "
                    "from the service listing (status UNKNOWN)"
                )
            self._note_report(service.get("updated_at"))
        return services

    def _note_report(self, value: Any) -> None:
        """Keep a service's report time when it is the newest since ``restart_clock``.

        NOTE: a time that does not parse is no report: it proves nothing about the clocks.
        """
        try:
            reported = _parse_time(value)
        except NovaBadAnswer:
            return
        if reported is not None and (
            self.newest_report_at is None or reported > self.newest_report_at
        ):
            self.newest_report_at = reported

    def _paged(self, path: str, key: str, query: dict[str, str]) -> Iterator[dict[str, Any]]:
        """Every item of a listing, following Nova's next links until there are none.

        NOTE: Nova clamps ``limit`` to its ``[api] max_limit``, so a page shorter
        than asked is not the end of the listing: only a page without a
        ``<key>_links`` rel=next is (docs/design.md rule 17). A next link must
        continue after the page's last entry (``_next_marker``), so an endless or
        looping one fails at once; a listing of fresh entries without end fails at
        ``MAX_LISTED`` entries or ``MAX_PAGES`` pages, whichever comes first.
        """
        base = dict(query, limit=str(self._page_size))
        request = f"{path}?{urllib.parse.urlencode(base)}"
        seen: set[str] = set()
        for _ in range(MAX_PAGES):
            body = self._get(request)
            page = _list_in(body, key, request)
            if len(page) > self._page_size:
                raise NovaBadAnswer(request=request, reason="page longer than the limit asked")
            for item in page:
                ident = _ident(item)
                if ident in seen:
                    raise NovaBadAnswer(request=request, reason=f"{ident} listed twice")
                seen.add(ident)
            if len(seen) > MAX_LISTED:
                raise NovaBadAnswer(
                    request=f"{path}?{urllib.parse.urlencode(base)}",
                    reason=f"more than {MAX_LISTED} entries, more than a listing can hold",
                )
            yield from page
            marker = _next_marker(body, key, path, base, request)
            if marker is None:
                return
            request = f"{path}?{urllib.parse.urlencode(dict(base, marker=marker))}"
        raise NovaBadAnswer(
            request=f"{path}?{urllib.parse.urlencode(base)}",
            reason=f"still a next link after {MAX_PAGES} pages",
        )

    def restart_clock(self) -> None:
        """Forget ``first_answer_at`` and ``newest_report_at``: the next answers set them."""
        self.first_answer_at = None
        self.newest_report_at = None

    def _get(self, request: str, missing_ok: bool = False) -> Any:
        body = self._retry(lambda: _checked(self._transport, request, missing_ok))
        if self.first_answer_at is None:
            self.first_answer_at = getattr(self._transport, "date", None)
        return body


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


def _checked(transport: Transport, request: str, missing_ok: bool = False) -> Any:
    status, body = transport.get(request)
    if missing_ok and status == 404:
        return None
    if status == 403:
        raise NovaForbidden(request=request, reason=_fault_message(body))
    if status == 401:
        raise NovaAuthFailed(status=status, reason=_fault_message(body))
    if status >= 500:
        raise _Transient(request=request, status=status)
    if status != 200:
        raise NovaBadAnswer(request=request, reason=f"HTTP {status}: {_fault_message(body)}")
    return body


def default_retry(
    attempts: int = 3, wait_seconds: float = 1.0
) -> Callable[[Callable[[], Any]], Any]:
    """Retry server errors and unreachable Nova a few times, then give up loudly."""
    retrying = tenacity.Retrying(
        retry=tenacity.retry_if_exception_type((_Transient, NovaUnreachable)),
        stop=tenacity.stop_after_attempt(attempts),
        wait=tenacity.wait_exponential(multiplier=wait_seconds, max=10),
        reraise=True,
    )
    return lambda call: retrying(call)


def _fault_message(body: Any) -> str:
    if isinstance(body, dict):
        for fault in body.values():
            if isinstance(fault, dict) and "message" in fault:
                return str(fault["message"])
    return "no details"


def _next_marker(
    body: dict[str, Any], key: str, path: str, query: dict[str, str], request: str
) -> str | None:
    """The marker of the page's rel=next link, or None when it has none.

    NOTE: the link must continue the same listing (same path and query, a new
    marker); we request it ourselves so that only the marker comes from Nova.
    """
    links = body.get(f"{key}_links", [])
    if not isinstance(links, list):
        raise NovaBadAnswer(request=request, reason=f"'{key}_links' is not a list")
    hrefs = [str(link.get("href", "")) for link in links
             if isinstance(link, dict) and link.get("rel") == "next"]  # fmt: skip
    if not hrefs:
        return None
    url = urllib.parse.urlsplit(hrefs[0])
    params = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
    marker = params.pop("marker", "")
    if not url.path.endswith(path) or not marker or params != query:
        raise NovaBadAnswer(
            request=request, reason=f"the next link {hrefs[0]} does not continue the listing"
        )
    # NOTE: common.ViewBuilder._get_collection_links: Nova links a next page only to a
    # full page, with the id of its last entry as the marker. Any other link (after an
    # empty page, to an entry already listed or never listed) does not advance.
    page = body.get(key)
    if not page:
        raise NovaBadAnswer(request=request, reason="a next link after an empty page")
    if marker != _ident(page[-1]):
        raise NovaBadAnswer(
            request=request, reason=f"the next link's marker {marker} is not the page's last entry"
        )
    return marker


def _ident(item: dict[str, Any]) -> str:
    """The id a listing's marker names an entry by (a migration's uuid, not its number)."""
    return str(item.get("uuid") or item.get("id"))


def _list_in(body: Any, key: str, request: str) -> list[dict[str, Any]]:
    items = body.get(key) if isinstance(body, dict) else None
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise NovaBadAnswer(request=request, reason=f"no '{key}' list in the answer")
    return items


def _uuid_of(item: dict[str, Any]) -> str:
    """The server's id, checked; a partial record (a cell Nova cannot reach) raises."""
    uuid = str(item.get("id", ""))
    if not _UUID.match(uuid):
        raise NovaBadAnswer(request="a server listing", reason=f"server id {uuid!r} is no UUID")
    if item.get("status") == "UNKNOWN" and "OS-EXT-STS:vm_state" not in item:
        # NOTE: views/servers.py _show_from_down_cell (basic: id, status UNKNOWN,
        # links; show adds tenant_id, created and a few request spec fields), but
        # no host and no states: nothing can be concluded.
        raise NovaCellDown(what=f"server {uuid} came back partial (status UNKNOWN)")
    return uuid


def parse_server(item: dict[str, Any]) -> Server:
    """Build a ``Server`` from one entry of Nova's server detail view."""
    uuid = _uuid_of(item)
    if "OS-EXT-SRV-ATTR:host" not in item:
        raise NovaBadAnswer(
            request="a server listing",
            reason=f"no host attribute (do the credentials have {SERVER_HOST_RULE}?)",
        )
    status = str(item.get("status", ""))
    vm_state = item.get("OS-EXT-STS:vm_state")
    deleted = status == "DELETED" or vm_state == "deleted"
    return Server(
        uuid=uuid,
        name=item.get("name"),
        host=item.get("OS-EXT-SRV-ATTR:host"),
        status=status,
        vm_state=vm_state,
        task_state=item.get("OS-EXT-STS:task_state"),
        deleted=deleted,
        deleted_at=_parse_time(item.get("OS-SRV-USG:terminated_at") or item.get("updated"))
        if deleted
        else None,
        updated_at=_parse_time(item.get("updated")),
    )


def parse_migration(item: dict[str, Any], host_rule: str = MIGRATION_HOST_RULE) -> Migration:
    """Build a ``Migration`` from one entry of ``/os-migrations``.

    ``host_rule``: the policy rule without which Nova blanks the migration's hosts.
    """
    uuid = str(item.get("instance_uuid", ""))
    if not _UUID.match(uuid):
        raise NovaBadAnswer(request="the migration listing", reason=f"bad instance {uuid!r}")
    if not item.get("source_compute") and not item.get("dest_compute"):
        # NOTE: every migration Nova records has a source host; without host_rule Nova
        # answers with both hosts null, and a migration to or from nowhere would hide
        # that a guest is being moved here (docs/design.md rule 3).
        raise NovaBadAnswer(
            request="the migration listing",
            reason=f"the migration of {uuid} has no hosts (do the credentials have {host_rule}?)",
        )
    return Migration(
        instance_uuid=uuid,
        source_compute=item.get("source_compute"),
        dest_compute=item.get("dest_compute"),
        migration_type=str(item.get("migration_type", "migration")),
        status=str(item.get("status", "")),
        created_at=item.get("created_at"),
        updated_at=item.get("updated_at"),
    )


def _isotime(when: datetime.datetime) -> str:
    """``when`` as Nova's filters take it, in whole seconds (rounded down: never later)."""
    return when.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_time(value: Any) -> datetime.datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError as exc:
        raise NovaBadAnswer(request="a server listing", reason=f"bad time {value!r}") from exc
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.timezone.utc)
