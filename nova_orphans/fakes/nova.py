"""An in-process simulated Nova compute API, answering at the HTTP-path level.

``SimulatedNova.get(path)`` follows the ``Transport`` contract of
``nova_orphans.observe.nova``: it returns ``(HTTP status, decoded JSON body)``
with the shapes and filter semantics of a real Nova (admin credentials,
microversion 2.69), so the real Nova adapter runs on top of it unchanged.
Mutators speak the operator's words (``boot``, ``local_delete``, ``archive``,
``live_migrate``…); a fault queue makes the next request(s) fail on purpose.
Deployment settings a real Nova has are attributes: ``max_limit`` (``[api]
max_limit``), ``skip_down_cells`` (``[api] list_records_by_skipping_down_cells``)
``down_cells`` (cells whose database does not answer), ``allow_all_filters`` (the
``os_compute_api:servers:allow_all_filters`` policy of the credentials: without it Nova
silently drops the admin-only filters such as ``host``) and ``zones`` (each compute host's
availability zone, ``nova`` when it names none: fakes/nova_zones.py). ``date`` is
the HTTP ``Date`` of the last answer: the API node's clock, the simulated one (which stamps
every row and every service report) plus ``api_clock_offset`` (an API node whose clock runs
ahead, or behind).

Facts below marked NOTE were checked in openstack/nova (API and DB layers).
"""

from __future__ import annotations

import collections
import datetime
import enum
import re
import threading
import urllib.parse
import uuid as uuidlib
from collections.abc import Callable
from typing import Any

from nova_orphans.fakes import nova_views as views
from nova_orphans.fakes import nova_zones
from nova_orphans.fakes.nova_views import SimCompute, SimMigration, SimServer
from nova_orphans.observe.errors import NovaUnreachable

START = datetime.datetime(2024, 4, 1, tzinfo=views.UTC)
_UUID_NS = uuidlib.UUID("6f2b5c4e-3f0a-4e0b-9d55-8a8f7e3c1d20")
_SHOW = re.compile(r"^/servers/([^/]+)$")
_SERVER_MIGRATIONS = re.compile(r"^/servers/([^/]+)/migrations$")
Response = views.Response


class Fault(str, enum.Enum):
    """What an injected fault does to one request."""

    SERVER_ERROR = "500"  # HTTP 500 computeFault
    UNAUTHORIZED = "401"  # HTTP 401 from the auth middleware
    TIMEOUT = "timeout"  # raises NovaUnreachable
    EMPTY = "empty"  # 200 with an empty list (404 for a single server)
    DROP_PAGE = "drop-page"  # a listing skips one page: answers with the page after
    REPEAT_PAGE = "repeat-page"  # a listing answers with the previous page again
    ENDLESS_LINKS = "endless-links"  # an empty page whose next link names a new marker


class SimulatedNova:
    """An in-memory cloud behind Nova's compute API; see the module docstring.

    ``faults`` is a queue of ``(Fault, path_prefix)``: each request takes the
    first entry whose prefix matches its path. ``fault_hook``, when set, is
    asked about every request the queue left alone (for randomized runs).
    ``requests`` counts requests per endpoint; ``request_count`` is the total.
    """

    def __init__(self, start: datetime.datetime = START) -> None:
        self.clock = start
        self.servers: dict[str, SimServer] = {}
        self.migrations: dict[int, SimMigration] = {}
        self.computes: dict[str, SimCompute] = {}
        self.faults: collections.deque[tuple[Fault, str]] = collections.deque()
        self.fault_hook: Callable[[str], Fault | None] | None = None
        self.requests: collections.Counter[str] = collections.Counter()
        self.log: list[str] = []
        self._next_id = 1
        self._previous_page: dict[str, list[Any]] = {}
        self._endless = 0
        self.max_limit = views.MAX_LIMIT
        self.skip_down_cells = True
        self.down_cells: set[str] = set()
        self.allow_all_filters = True
        self.zones: dict[str, str] = {}
        self.date: datetime.datetime | None = None
        self.api_clock_offset = datetime.timedelta(0)
        self._answering = threading.Lock()

    # -- the Transport contract ------------------------------------------------

    def get(self, path: str) -> tuple[int, Any]:
        """Answer ``GET path`` like Nova would; see ``Transport.get``.

        NOTE: one request at a time (a fleet asks from several threads): the
        counters, the log and the paging state stay consistent.
        """
        with self._answering:
            return self._answer(path)

    def _answer(self, path: str) -> tuple[int, Any]:
        route, _, query_string = path.partition("?")
        endpoint, handler = self._route(route)
        self.requests[endpoint] += 1
        self.log.append(path)
        # NOTE: the API node's clock, as the HTTP Date header gives it: whole seconds.
        self.date = (self.clock + self.api_clock_offset).replace(microsecond=0)
        fault = self._take_fault(path)
        if fault is Fault.TIMEOUT:
            raise NovaUnreachable(endpoint=views.ENDPOINT, reason="timed out (injected)")
        if fault is Fault.SERVER_ERROR:
            return views.error(500, "computeFault", "Unexpected API Error (injected).")
        if fault is Fault.UNAUTHORIZED:
            return 401, {
                "error": {
                    "code": 401,
                    "title": "Unauthorized",
                    "message": "The request you have made requires authentication.",
                }
            }
        try:
            query = views.parse_query(query_string)
            return handler(route, query, fault)
        except views.BadRequest as exc:
            return views.error(400, "badRequest", str(exc))

    @property
    def request_count(self) -> int:
        """Total requests answered (faulted ones included)."""
        return sum(self.requests.values())

    def inject(self, fault: Fault, times: int = 1, path: str = "/") -> None:
        """Make the next ``times`` requests under ``path`` suffer ``fault``."""
        self.faults.extend([(fault, path)] * times)

    def _take_fault(self, path: str) -> Fault | None:
        for entry in self.faults:
            if path.startswith(entry[1]):
                self.faults.remove(entry)
                return entry[0]
        return self.fault_hook(path) if self.fault_hook else None

    def _route(
        self, route: str
    ) -> tuple[str, Callable[[str, dict[str, str], Fault | None], Response]]:
        """The endpoint's counter name and its handler."""
        if route == "/servers/detail":
            return "servers/detail", self._list_servers
        if route == "/servers":
            return "servers", self._list_servers
        if _SHOW.match(route):
            return "servers/show", self._show_server
        if route == "/os-migrations":
            return "os-migrations", self._list_migrations
        if _SERVER_MIGRATIONS.match(route):
            return "servers/migrations", self._server_migrations
        if route == "/os-hypervisors/detail":
            return "os-hypervisors/detail", self._list_hypervisors
        if route == "/os-services":
            return "os-services", self._list_services
        if route == "/os-availability-zone":
            return "os-availability-zone", self._list_zones
        return "other", _not_found

    # -- endpoints -------------------------------------------------------------

    def _list_servers(self, route: str, query: dict[str, str], fault: Fault | None) -> Response:
        """``GET /servers/detail`` or ``GET /servers`` (the plain listing: id, name, links).

        NOTE: servers.py index and detail share _get_servers: the same filters,
        paging and down-cell handling; only the view (views/servers.py basic or
        show) and the next link's collection differ.
        """
        views.reject_unknown(query, views.SERVER_QUERY | views.PAGING)
        asked = query  # NOTE: the next link repeats the request's own parameters
        if fault is Fault.ENDLESS_LINKS:
            return 200, self._endless_page("servers", route, asked)
        if not self.allow_all_filters:
            # NOTE: servers.py remove_invalid_options: without allow_all_filters
            # every filter a user may not use is dropped silently.
            query = {k: v for k, v in query.items() if k in views.USER_SERVER_QUERY | views.PAGING}
        detail = route == "/servers/detail"
        # NOTE: Nova's instances table is indexed by uuid and by host; checking every
        # filter on every row for a uuid= lookup or a host= listing would charge the
        # simulator's slowness to its callers.
        candidates = (
            [self.servers[query["uuid"]]] if query.get("uuid") in self.servers
            else [] if "uuid" in query
            else [s for s in self.servers.values() if s.host == query["host"]] if "host" in query
            else self.servers.values()
        )  # fmt: skip
        rows = [s for s in candidates if views.server_matches(s, query)]
        up = [s for s in rows if s.cell not in self.down_cells]
        # NOTE: servers.py _is_cell_down_supported: partial records (2.69+) only
        # for a listing with no filter but all_tenants and no paging; otherwise
        # multi_cell_list skips a down cell, or fails when
        # list_records_by_skipping_down_cells is False.
        if self.down_cells and set(query) - {"all_tenants"}:
            if not self.skip_down_cells:
                return views.error(500, "computeFault", "Unexpected API Error.")
            rows = up
        page = self._page(up, query, fault, route, views.server_sort_key, self._server_marker)
        # NOTE: compute/api.py get_all prefixes the down cells' non-deleted
        # instance mappings, up to what the limit leaves.
        down = [s for s in rows if s.cell in self.down_cells and not s.deleted]
        partial = down[: self.max_limit - len(page)]
        full_view = views.server_view if detail else views.plain_server_view
        partial_view = views.partial_server_view if detail else views.plain_partial_server_view
        body: dict[str, Any] = {
            "servers": [partial_view(s, shown=False) for s in partial]
            + [full_view(s) for s in page]
        }
        views.add_next_link(
            body, "servers", route, asked, partial + page, lambda s: s.uuid, self.max_limit
        )
        return 200, body

    def _show_server(self, route: str, query: dict[str, str], fault: Fault | None) -> Response:
        match = _SHOW.match(route)
        row = self.servers.get(match.group(1)) if match else None
        # NOTE: servers.py show -> common.get_instance reads with read_deleted='no':
        # a deleted (even unarchived) server is 404; SOFT_DELETED (deleted=0) is 200.
        # In a down cell (2.69+) a partial record, or 404 when queued for delete.
        if row is None or row.deleted or fault is Fault.EMPTY:
            uuid = match.group(1) if match else route
            return views.error(404, "itemNotFound", f"Instance {uuid} could not be found.")
        if row.cell in self.down_cells:
            return 200, {"server": views.partial_server_view(row, shown=True)}
        return 200, {"server": views.server_view(row)}

    def _server_migrations(
        self, route: str, query: dict[str, str], fault: Fault | None
    ) -> Response:
        # NOTE: server_migrations.py index lists only the server's in-progress live
        # migrations (2.23+), and 404s for a server that does not exist (any more).
        # It reads the server without down-cell support: a down cell is a 500.
        views.reject_unknown(query, frozenset())
        match = _SERVER_MIGRATIONS.match(route)
        uuid = match.group(1) if match else ""
        row = self.servers.get(uuid)
        if row is None or row.deleted:
            return views.error(404, "itemNotFound", f"Instance {uuid} could not be found.")
        if row.cell in self.down_cells:
            return views.error(500, "computeFault", "Unexpected API Error.")
        rows = [] if fault is Fault.EMPTY else [
            m for m in self.migrations.values()
            if m.instance_uuid == uuid and not m.deleted and views.live_in_progress(m)
        ]  # fmt: skip
        return 200, {"migrations": [views.server_migration_view(m) for m in rows]}

    def _list_migrations(self, route: str, query: dict[str, str], fault: Fault | None) -> Response:
        # NOTE: from 2.59 the os-migrations query schema has additionalProperties=False.
        views.reject_unknown(query, views.MIGRATION_QUERY | views.PAGING)
        if fault is Fault.ENDLESS_LINKS:
            return 200, self._endless_page("migrations", route, query)
        since = views.changes_since(query)
        rows = [
            m
            for m in self.migrations.values()
            # NOTE: instance_destroy soft-deletes the instance's migrations, so a
            # deleted server's migrations vanish from the listing.
            if not m.deleted
            and views.migration_matches(m, query)
            and (since is None or m.updated_at >= since)
        ]
        # NOTE: the migrations are in their instance's cell; the cross-cell
        # listing skips (or fails on) a down cell at every microversion.
        up = [m for m in rows if self._cell_of(m.instance_uuid) not in self.down_cells]
        if self.down_cells and not self.skip_down_cells:
            return views.error(500, "computeFault", "Unexpected API Error.")
        page = self._page(up, query, fault, route, views.migration_sort_key, self._migration_marker)
        body: dict[str, Any] = {"migrations": [views.migration_view(m) for m in page]}
        # NOTE: the next link and the marker use the migration's uuid, not its id.
        views.add_next_link(
            body, "migrations", route, query, page, lambda m: m.uuid, self.max_limit
        )
        return 200, body

    def _list_hypervisors(self, route: str, query: dict[str, str], fault: Fault | None) -> Response:
        # NOTE: hypervisors.py _get_hypervisors (2.53+): hypervisor_hostname_pattern is a
        # LIKE '%pattern%' search on node names, 404 when nothing matches, 400 with paging;
        # otherwise nodes are paged by id with the node uuid as marker.
        views.reject_unknown(query, frozenset({"hypervisor_hostname_pattern"}) | views.PAGING)
        # NOTE: a down cell's nodes are skipped (scatter-gather over the cells).
        items = [] if fault is Fault.EMPTY else sorted(
            (c for c in self.computes.values() if c.cell not in self.down_cells),
            key=lambda c: c.id,
        )  # fmt: skip
        pattern = query.get("hypervisor_hostname_pattern")
        if pattern is not None:
            if "limit" in query or "marker" in query:
                raise views.BadRequest("Paging over hypervisors with the pattern is not supported.")
            items = [c for c in items if pattern in c.node]
            if not items:
                return views.error(404, "itemNotFound", f"No hypervisor matching {pattern!r}.")
        elif "marker" in query:
            ids = [c.node_uuid for c in items]
            if query["marker"] not in ids:
                raise views.BadRequest(f"marker [{query['marker']}] not found")
            items = items[ids.index(query["marker"]) + 1 :]
        if pattern is None:
            items = items[: views.page_limit(query, self.max_limit)]
        body: dict[str, Any] = {
            "hypervisors": [views.hypervisor_view(c, self._running_on(c.node)) for c in items]
        }
        if pattern is None:
            views.add_next_link(
                body, "hypervisors", route, query, items, lambda c: c.node_uuid, self.max_limit
            )
        return 200, body

    def _list_services(self, route: str, query: dict[str, str], fault: Fault | None) -> Response:
        views.reject_unknown(query, frozenset({"binary", "host"}))
        items = [
            c
            for c in self.computes.values()
            if query.get("binary", "nova-compute") == "nova-compute"
            and query.get("host", c.host) == c.host
            and fault is not Fault.EMPTY
        ]
        return 200, {
            "services": [
                views.service_view(c, self.clock, c.cell in self.down_cells) for c in items
            ]
        }

    def _list_zones(self, route: str, query: dict[str, str], fault: Fault | None) -> Response:
        views.reject_unknown(query, frozenset())
        computes = [] if fault is Fault.EMPTY else self.computes.values()
        return 200, nova_zones.zone_listing(computes, self.zones, self.down_cells)

    # -- paging and its faults -------------------------------------------------

    def _page(
        self,
        rows: list[Any],
        query: dict[str, str],
        fault: Fault | None,
        route: str,
        sort_key: Callable[[Any], tuple[datetime.datetime, int]],
        find_marker: Callable[[str], Any],
    ) -> list[Any]:
        if fault is Fault.EMPTY:
            return []
        limit = views.page_limit(query, self.max_limit)
        # NOTE: sort is created_at desc, id desc (db_utils.process_sort_params
        # with default_dir='desc'); paginate_query resumes strictly after the
        # marker row's sort key, so a marker that no longer matches still works.
        rows = sorted(rows, key=sort_key, reverse=True)
        page = views.after(
            rows, sort_key, find_marker(query["marker"]) if "marker" in query else None
        )
        if fault is Fault.DROP_PAGE and limit and len(page) >= limit:
            page = views.after(page, sort_key, page[limit - 1])
        key = views.page_key(route, query)
        if fault is Fault.REPEAT_PAGE and key in self._previous_page:
            return self._previous_page[key]
        self._previous_page[key] = page[:limit]
        return page[:limit]

    def _endless_page(self, key: str, route: str, query: dict[str, str]) -> dict[str, Any]:
        """An empty page linking to a next one under a marker never given before.

        NOTE: not Nova (it links only a full page, by its last entry): a broken proxy or a
        hostile endpoint, whose listing never ends.
        """
        self._endless += 1
        params = dict(sorted(query.items()), marker=self._uuid(f"endless-{self._endless}"))
        href = f"{views.ENDPOINT}{route}?{urllib.parse.urlencode(params)}"
        return {key: [], f"{key}_links": [{"rel": "next", "href": href}]}

    def _server_marker(self, marker: str) -> SimServer:
        # NOTE: the marker is looked up with read_deleted='yes': a deleted row
        # still works, an archived one gives 400 "marker [...] not found".
        if marker not in self.servers:
            raise views.BadRequest(f"marker [{marker}] not found")
        return self.servers[marker]

    def _migration_marker(self, marker: str) -> SimMigration:
        for m in self.migrations.values():
            if m.uuid == marker and not m.deleted:
                return m
        raise views.BadRequest(f"Marker {marker} could not be found.")

    def _cell_of(self, uuid: str) -> str:
        row = self.servers.get(uuid)
        return row.cell if row is not None else views.DEFAULT_CELL

    def _running_on(self, node: str) -> int:
        return sum(1 for s in self.servers.values() if s.node == node and not s.deleted)

    # -- the cloud, in operator's words ----------------------------------------

    def add_compute(
        self,
        host: str,
        node: str | None = None,
        hypervisor_type: str = "QEMU",
        cell: str = views.DEFAULT_CELL,
    ) -> SimCompute:
        """Register a nova-compute service (and its node, in ``cell``) if it is not known yet.

        ``hypervisor_type``: "QEMU" as Nova's libvirt driver reports it, or e.g.
        "fake" for Nova's fake driver.
        """
        if host not in self.computes:
            n = len(self.computes) + 1
            self.computes[host] = SimCompute(
                n, host, node or host, self._uuid(f"service-{n}"), self._uuid(f"node-{n}"),
                hypervisor_type=hypervisor_type, cell=cell,
            )  # fmt: skip
        return self.computes[host]

    def set_compute(
        self, host: str, *, up: bool | None = None, forced_down: bool | None = None
    ) -> None:
        """Mark a compute service up/down or forced down (PUT /os-services, 2.53)."""
        compute = self.add_compute(host)
        compute.up = compute.up if up is None else up
        compute.forced_down = compute.forced_down if forced_down is None else forced_down

    def boot(
        self,
        host: str,
        name: str | None = None,
        uuid: str | None = None,
        *,
        project_id: str = "demo-project",
        user_id: str = "demo-user",
        at: datetime.datetime | None = None,
    ) -> str:
        """Create an ACTIVE server on ``host``; returns its UUID."""
        db_id = self._next_id
        self._next_id += 1
        uuid = uuid or self._uuid(f"server-{db_id}")
        if uuid in self.servers:
            raise ValueError(f"server {uuid} exists")
        compute = self.add_compute(host)
        when = self._now(at)
        self.servers[uuid] = SimServer(
            db_id, uuid, name or f"server-{db_id}", host, compute.node, project_id, user_id,
            created_at=when, updated_at=when, launched_at=when, cell=compute.cell,
        )  # fmt: skip
        return uuid

    def local_delete(self, uuid: str, at: datetime.datetime | None = None) -> None:
        """Delete while the compute is down: the row is marked deleted, the guest keeps running.

        From the API this is indistinguishable from an ordinary delete.
        """
        # NOTE: compute/api.py _local_delete sets vm_state 'deleted', task_state
        # None, terminated_at, then instance.destroy() sets deleted/deleted_at and
        # soft-deletes the instance's migrations. Host and node are kept.
        when = self._now(at)
        self._update(uuid, when, vm_state="deleted", task_state=None, power_state=0,
                     terminated_at=when, deleted=True, deleted_at=when)  # fmt: skip
        for m in self.migrations.values():
            if m.instance_uuid == uuid:
                m.deleted = True

    def soft_delete(self, uuid: str, at: datetime.datetime | None = None) -> None:
        """Soft delete (reclaim_instance_interval > 0): restorable, row not deleted."""
        when = self._now(at)
        self._update(uuid, when, vm_state="soft-delete", task_state=None, power_state=4,
                     deleted_at=when)  # fmt: skip

    def restore(self, uuid: str, at: datetime.datetime | None = None) -> None:
        """Restore a SOFT_DELETED server: ACTIVE again."""
        self._update(uuid, self._now(at), vm_state="active", task_state=None, power_state=1,
                     deleted_at=None)  # fmt: skip

    def archive(self, before: datetime.datetime | None = None) -> int:
        """``nova-manage db archive_deleted_rows --purge``: deleted rows vanish for good.

        SOFT_DELETED servers are not deleted rows and stay. Returns how many went.
        """
        gone = [
            s.uuid
            for s in self.servers.values()
            if s.deleted and (before is None or (s.deleted_at and s.deleted_at < before))
        ]
        for uuid in gone:
            del self.servers[uuid]
        for mid in [k for k, m in self.migrations.items() if m.instance_uuid in gone]:
            del self.migrations[mid]
        return len(gone)

    def live_migrate(
        self,
        uuid: str,
        dest: str,
        *,
        cleanup_failed: bool = False,
        finish: bool = True,
        at: datetime.datetime | None = None,
    ) -> int:
        """Live-migrate to ``dest``; returns the migration id.

        ``finish=False`` leaves it running (task_state 'migrating', host unchanged).
        ``cleanup_failed=True``: the guest moved but the source's post-migration
        step raised; Nova still points to ``dest`` and marks migration and server error.
        """
        when = self._now(at)
        mid = self._migrate(uuid, dest, "live-migration", "running", when)
        if not finish:
            self._update(uuid, when, task_state="migrating")
            return mid
        # NOTE: manager._post_live_migration_update_host sets host=dest even when
        # _post_live_migration fails; _do_live_migration then sets the migration
        # to 'error' and the instance to ERROR. On success the status is 'completed'.
        self._move(uuid, dest, when, vm_state="error" if cleanup_failed else None)
        self.set_migration_status(mid, "error" if cleanup_failed else "completed", at=when)
        return mid

    def evacuate(self, uuid: str, dest: str, at: datetime.datetime | None = None) -> int:
        """Rebuild on ``dest`` while the source is down; returns the migration id.

        The migration stays 'done' until the source compute restarts and cleans up
        (manager._destroy_evacuated_instances then sets 'completed').
        """
        when = self._now(at)
        mid = self._migrate(uuid, dest, "evacuation", "done", when)
        self._move(uuid, dest, when)
        return mid

    def resize(
        self,
        uuid: str,
        dest: str,
        *,
        migration_type: str = "resize",
        at: datetime.datetime | None = None,
    ) -> int:
        """Resize (or cold-migrate, ``migration_type='migration'``) to ``dest``.

        Ends in VERIFY_RESIZE awaiting confirm/revert; returns the migration id.
        """
        # NOTE: manager._finish_resize sets migration 'finished', vm_state
        # 'resized' and host/node to the destination.
        when = self._now(at)
        mid = self._migrate(uuid, dest, migration_type, "finished", when)
        self._move(uuid, dest, when, vm_state="resized")
        return mid

    def confirm(self, uuid: str, at: datetime.datetime | None = None) -> None:
        """Confirm a resize: migration 'confirmed', server ACTIVE on the destination."""
        when = self._now(at)
        self.set_migration_status(self._awaiting_confirm(uuid).id, "confirmed", at=when)
        self._update(uuid, when, vm_state="active", task_state=None)

    def revert(self, uuid: str, at: datetime.datetime | None = None) -> None:
        """Revert a resize: migration 'reverted', server ACTIVE back on the source."""
        when = self._now(at)
        migration = self._awaiting_confirm(uuid)
        self.set_migration_status(migration.id, "reverted", at=when)
        self._move(uuid, migration.source_compute or "", when, vm_state="active")

    def shelve_offload(self, uuid: str, at: datetime.datetime | None = None) -> None:
        """Shelve and offload: SHELVED_OFFLOADED, no host, no node."""
        # NOTE: manager._shelve_offload_instance nulls host and node.
        self._update(uuid, self._now(at), vm_state="shelved_offloaded", task_state=None,
                     power_state=4, host=None, node=None)  # fmt: skip

    def set_task_state(
        self, uuid: str, task_state: str | None, at: datetime.datetime | None = None
    ) -> None:
        """Set the server's task_state (e.g. 'migrating', 'rebooting', 'deleting')."""
        self._update(uuid, self._now(at), task_state=task_state)

    def set_migration_status(
        self, migration_id: int, status: str, at: datetime.datetime | None = None
    ) -> None:
        """Move a migration to ``status`` (e.g. 'completed' after an evacuation cleanup)."""
        migration = self.migrations[migration_id]
        migration.status = status
        migration.updated_at = self._now(at)

    def server(self, uuid: str) -> SimServer:
        """The row of ``uuid`` (KeyError if archived or never booted)."""
        return self.servers[uuid]

    # -- helpers ---------------------------------------------------------------

    def _now(self, at: datetime.datetime | None) -> datetime.datetime:
        """The time of the next change: ``at``, or one simulated second later."""
        self.clock = max(self.clock, at) if at else self.clock + datetime.timedelta(seconds=1)
        return at or self.clock

    def _uuid(self, name: str) -> str:
        return str(uuidlib.uuid5(_UUID_NS, name))

    def _update(self, uuid: str, when: datetime.datetime, **changes: Any) -> None:
        row = self.servers[uuid]
        for field, value in changes.items():
            setattr(row, field, value)
        row.updated_at = when

    def _move(
        self, uuid: str, dest: str, when: datetime.datetime, vm_state: str | None = None
    ) -> None:
        state = {"vm_state": vm_state} if vm_state else {}
        compute = self.add_compute(dest)
        # NOTE: a move to another cell (cross-cell resize) moves the row to that cell.
        self._update(
            uuid, when, host=dest, node=compute.node, cell=compute.cell, task_state=None, **state
        )

    def _migrate(
        self, uuid: str, dest: str, kind: str, status: str, when: datetime.datetime
    ) -> int:
        row = self.servers[uuid]
        mid = len(self.migrations) + 1
        while mid in self.migrations:
            mid += 1
        self.migrations[mid] = SimMigration(
            mid, self._uuid(f"migration-{mid}"), uuid, row.host, dest, row.node,
            self.add_compute(dest).node, kind, status, when, when,
        )  # fmt: skip
        return mid

    def _awaiting_confirm(self, uuid: str) -> SimMigration:
        for m in sorted(self.migrations.values(), key=lambda m: m.id, reverse=True):
            if m.instance_uuid == uuid and m.status == "finished":
                return m
        raise ValueError(f"server {uuid} has no resize awaiting confirmation")


def _not_found(route: str, query: dict[str, str], fault: Fault | None) -> Response:
    return views.error(404, "itemNotFound", f"{route} is not a resource SimulatedNova knows")
