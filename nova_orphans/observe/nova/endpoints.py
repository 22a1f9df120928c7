"""Each of Nova's endpoints the observers read: one request or paged listing, its answer checked.

``NovaObserver`` decides which of them to ask (docs/design.md §8); here each answer is read
and checked on its own: a listing that shows Nova dropped an admin-only filter, a partial
record or an ``UNKNOWN`` service (a cell Nova cannot reach) raises ``NovaError``.
"""

from __future__ import annotations

import datetime
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any

from nova_orphans.model import Migration, Server
from nova_orphans.observe.errors import NovaBadAnswer, NovaCellDown
from nova_orphans.observe.nova.api import (
    FILTERS_RULE,
    SERVER_MIGRATION_HOST_RULE,
    Transport,
    checked,
    default_retry,
    isotime,
    list_in,
    parse_migration,
    parse_server,
    parse_time,
    uuid_of,
)
from nova_orphans.observe.nova.paging import PAGE_SIZE, paged

COMPUTE_BINARY = "nova-compute"
#: NOTE: with changes-since Nova's listing includes deleted rows as well as live
#: ones, so one request per UUID answers "live, deleted or never heard of".
SINCE_THE_EPOCH = "1970-01-01T00:00:00Z"
#: A host name no compute host has (RFC 6761 reserves ``.invalid``): a listing
#: filtered by it is empty unless Nova dropped the filter.
PROBE_HOST = "no-such-host.invalid"
#: NOTE: Nova keeps an availability zone's name in 255 characters (instances.availability_zone).
MAX_ZONE_NAME = 255


class NovaEndpoints:
    """Nova's endpoints, each read with its answer checked; the clocks of the answers."""

    def __init__(
        self,
        transport: Transport,
        page_size: int = PAGE_SIZE,
        retry: Callable[[Callable[[], Any]], Any] | None = None,
    ) -> None:
        self._transport = transport
        self._page_size = page_size
        self._retry = retry or default_retry()
        #: Whether a request since the last observation proved the admin-only filters.
        self._filters_proven = False
        #: Nova's clock (HTTP Date) at the first answer since ``restart_clock``.
        self.first_answer_at: datetime.datetime | None = None
        #: The newest ``updated_at`` of a compute service listed since ``restart_clock``:
        #: the time of Nova's writers (a service reports every ``report_interval``).
        self.newest_report_at: datetime.datetime | None = None

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
        if list_in(body, "servers", "the host filter probe"):
            raise NovaBadAnswer(
                request="the host listing",
                reason="Nova ignored the host filter (do the credentials have the admin role?)",
            )
        self._filters_proven = True

    def changed_since(self, since: datetime.datetime) -> set[str]:
        """UUIDs of every server of the cloud Nova changed or deleted since ``since``.

        NOTE: the plain listing (ids only) without a host filter; ``changes-since``
        returns deleted rows too and compares each row's ``updated_at``.
        """
        query = {"all_tenants": "1", "changes-since": isotime(since)}
        return {uuid_of(item) for item in self._paged("/servers", "servers", query)}

    def changes_on_host(self, host: str, since: datetime.datetime) -> Iterator[dict[str, Any]]:
        """Detail records of the servers on ``host`` changed since ``since``, deleted ones too."""
        query = {"all_tenants": "1", "host": host, "changes-since": isotime(since)}
        return self._paged("/servers/detail", "servers", query)

    def summaries_on_host(self, host: str) -> dict[str, Server]:
        """Live servers Nova places on ``host`` (all projects), from the plain listing.

        NOTE: the same filters as the detail listing (servers.py index and detail
        share _get_servers); each record is a summary: live, not SOFT_DELETED, on
        ``host`` (see ``core.model.managed_here``), with its name and no states.
        """
        servers: dict[str, Server] = {}
        for item in self._paged("/servers", "servers", {"all_tenants": "1", "host": host}):
            uuid = uuid_of(item)
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

    def look_up(self, uuid: str) -> Server | None:
        """Nova's record of ``uuid`` (live anywhere, or deleted), or None if it has none.

        A None answer holds only with every cell answering: see ``require_cells_answer``.
        """
        query = {"all_tenants": "1", "uuid": uuid, "changes-since": SINCE_THE_EPOCH}
        body = self._get("/servers/detail?" + urllib.parse.urlencode(query))
        items = list_in(body, "servers", f"the lookup of {uuid}")
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
        items = list_in(self._get(request), "migrations", request)
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
        services = list_in(self._get(request), "services", "the service listing")
        for service in services:
            if service.get("status") == "UNKNOWN":
                raise NovaCellDown(
                    what=f"compute host {service.get('host')!r} came back partial "
                    "from the service listing (status UNKNOWN)"
                )
            self._note_report(service.get("updated_at"))
        return services

    def availability_zones(self) -> frozenset[str]:
        """The names of the availability zones Nova lists (``GET /os-availability-zone``).

        NOTE: availability_zone.py index (any user's policy): the zone of every service
        of the cells that answer, ``available`` when one of its services is enabled,
        unavailable when all are disabled, both named here; Nova's internal zone
        (``[DEFAULT] internal_service_availability_zone``, "internal": the scheduler's,
        the conductor's) is not listed, nor a zone no service is in, nor the zones of a
        cell Nova cannot reach. A compute in several zones' aggregates is in one zone
        whose name joins theirs with commas.
        """
        request = "the availability zone listing"
        zones = list_in(self._get("/os-availability-zone"), "availabilityZoneInfo", request)
        names = set()
        for zone in zones:
            name = zone.get("zoneName")
            if not isinstance(name, str) or not 0 < len(name) <= MAX_ZONE_NAME:
                shown = name[:MAX_ZONE_NAME] if isinstance(name, str) else type(name).__name__
                raise NovaBadAnswer(request=request, reason=f"a zone's name is unusable: {shown!r}")
            names.add(name)
        return frozenset(names)

    def _note_report(self, value: Any) -> None:
        """Keep a service's report time when it is the newest since ``restart_clock``.

        NOTE: a time that does not parse is no report: it proves nothing about the clocks.
        """
        try:
            reported = parse_time(value)
        except NovaBadAnswer:
            return
        if reported is not None and (
            self.newest_report_at is None or reported > self.newest_report_at
        ):
            self.newest_report_at = reported

    def _paged(self, path: str, key: str, query: dict[str, str]) -> Iterator[dict[str, Any]]:
        """Every item of a listing, its pages asked through ``_get`` (``paging.paged``)."""
        return paged(self._get, path, key, query, self._page_size)

    def restart_clock(self) -> None:
        """Forget ``first_answer_at`` and ``newest_report_at``: the next answers set them."""
        self.first_answer_at = None
        self.newest_report_at = None

    def _get(self, request: str, missing_ok: bool = False) -> Any:
        body = self._retry(lambda: checked(self._transport, request, missing_ok))
        if self.first_answer_at is None:
            self.first_answer_at = getattr(self._transport, "date", None)
        return body
