"""How the simulated Nova stores, filters, pages and renders its rows.

The rows mirror Nova's ``instances``, ``migrations`` and ``services``/compute
node tables; the functions mirror what Nova's API and DB layers do with them
(admin credentials, microversion 2.69). Facts marked NOTE were checked in
openstack/nova. ``SimulatedNova`` (fakes/nova.py) is the only user.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import urllib.parse
from collections.abc import Callable, Iterable
from typing import Any

UTC = datetime.timezone.utc
ENDPOINT = "http://nova.sim/v2.1"
ADMIN_PROJECT = "admin-project"
#: NOTE: CONF.api.max_limit defaults to 1000; a larger ``limit`` is capped to it.
MAX_LIMIT = 1000
DEFAULT_CELL = "cell1"
_TRUE = {"1", "t", "true", "on", "y", "yes"}
_FALSE = {"0", "f", "false", "off", "n", "no"}

# NOTE: nova/api/openstack/common.py _STATE_MAP (the subset a compute host sees).
_STATUS = {
    "active": "ACTIVE",
    "building": "BUILD",
    "stopped": "SHUTOFF",
    "resized": "VERIFY_RESIZE",
    "paused": "PAUSED",
    "suspended": "SUSPENDED",
    "rescued": "RESCUE",
    "error": "ERROR",
    "deleted": "DELETED",
    "soft-delete": "SOFT_DELETED",
    "shelved": "SHELVED",
    "shelved_offloaded": "SHELVED_OFFLOADED",
}
_TASK_STATUS = {
    "migrating": "MIGRATING",
    "resize_prep": "RESIZE",
    "resize_migrating": "RESIZE",
    "resize_migrated": "RESIZE",
    "resize_finish": "RESIZE",
    "rebooting": "REBOOT",
    "rebooting_hard": "HARD_REBOOT",
    "rebuilding": "REBUILD",
}
#: NOTE: migrations.py _output: only in-progress live migrations get ``links``.
_LIVE_IN_PROGRESS = frozenset({"queued", "preparing", "running", "post-migrating"})
SERVER_QUERY = frozenset({"all_tenants", "host", "uuid", "deleted", "changes-since"})
#: NOTE: servers.py _get_server_search_options (2.69): of the filters modelled, those a
#: caller without the allow_all_filters policy keeps (all_tenants has its own policy).
USER_SERVER_QUERY = frozenset({"all_tenants", "changes-since"})
MIGRATION_QUERY = frozenset(
    {"host", "instance_uuid", "status", "migration_type", "source_compute", "changes-since"}
)
PAGING = frozenset({"limit", "marker"})


@dataclasses.dataclass
class SimServer:
    """One row of Nova's ``instances`` table."""

    db_id: int
    uuid: str
    name: str
    host: str | None
    node: str | None
    project_id: str
    user_id: str
    created_at: datetime.datetime
    updated_at: datetime.datetime
    vm_state: str = "active"
    task_state: str | None = None
    power_state: int = 1
    deleted: bool = False
    deleted_at: datetime.datetime | None = None
    launched_at: datetime.datetime | None = None
    terminated_at: datetime.datetime | None = None
    #: The cell whose database holds the row (its instance mapping's cell).
    cell: str = DEFAULT_CELL


@dataclasses.dataclass
class SimMigration:
    """One row of Nova's ``migrations`` table."""

    id: int
    uuid: str
    instance_uuid: str
    source_compute: str | None
    dest_compute: str | None
    source_node: str | None
    dest_node: str | None
    migration_type: str
    status: str
    created_at: datetime.datetime
    updated_at: datetime.datetime
    deleted: bool = False


@dataclasses.dataclass
class SimCompute:
    """One nova-compute service and its hypervisor (compute node)."""

    id: int
    host: str
    node: str
    service_uuid: str
    node_uuid: str
    up: bool = True
    enabled: bool = True
    forced_down: bool = False
    #: What the node's driver reports: "QEMU" for libvirt/QEMU, "fake" for Nova's fake driver.
    hypervisor_type: str = "QEMU"
    cell: str = DEFAULT_CELL


Response = tuple[int, Any]


class BadRequest(Exception):
    """The request is malformed; answered with HTTP 400."""


def error(status: int, kind: str, message: str) -> Response:
    return status, {kind: {"code": status, "message": message}}


def parse_query(query_string: str) -> dict[str, str]:
    # NOTE: servers.py _get_servers does search_opts.update(req.GET): a repeated
    # parameter (e.g. uuid=) keeps its last value.
    return dict(urllib.parse.parse_qsl(query_string, keep_blank_values=True))


def reject_unknown(query: dict[str, str], known: frozenset[str]) -> None:
    """Raise BadRequest for a query parameter the simulation does not model."""
    # NOTE: real Nova (servers, before 2.75) silently ignores unknown filters; the
    # simulation refuses them instead so that an adapter typo cannot pass unseen.
    unknown = sorted(set(query) - known)
    if unknown:
        raise BadRequest(f"SimulatedNova does not model the query parameter(s) {unknown}")


def _bool(value: str, name: str) -> bool:
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise BadRequest(f"Invalid value {value!r} for {name}")


def _all_tenants(query: dict[str, str]) -> bool:
    # NOTE: common.is_all_tenants: present and empty, or a true value.
    value = query.get("all_tenants")
    return value is not None and (value == "" or _bool(value, "all_tenants"))


def changes_since(query: dict[str, str]) -> datetime.datetime | None:
    """The ``changes-since`` filter as an aware datetime, or None."""
    if "changes-since" not in query:
        return None
    value = query["changes-since"].replace("Z", "+00:00")
    try:
        parsed = datetime.datetime.fromisoformat(value)
    except ValueError as exc:
        raise BadRequest("Invalid filter field: changes-since.") from exc
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def page_limit(query: dict[str, str], max_limit: int) -> int:
    """The page size: ``limit`` capped to ``max_limit`` (``max_limit`` when absent)."""
    # NOTE: common.get_limit_and_marker: min(max_limit, limit or max_limit).
    try:
        limit = int(query.get("limit", max_limit))
    except ValueError as exc:
        raise BadRequest("limit param must be an integer") from exc
    if limit < 0:
        raise BadRequest("limit param must be positive")
    return min(limit or max_limit, max_limit)


def server_matches(s: SimServer, query: dict[str, str]) -> bool:
    """Whether ``GET /servers/detail?query`` lists ``s`` (before paging)."""
    # NOTE: servers.py _get_servers: without 'deleted' and without changes-since
    # only live rows; with changes-since live AND deleted rows; deleted=1 gives
    # deleted rows plus vm_state 'soft-delete' (instance_get_all_by_filters_sort);
    # deleted=0 (and the default) hides SOFT_DELETED too. changes-since compares
    # updated_at >= value. Without all_tenants an admin sees its own project only.
    soft = s.vm_state == "soft-delete"
    if "deleted" in query:
        if (s.deleted or soft) != _bool(query["deleted"], "deleted"):
            return False
    elif "changes-since" not in query and (s.deleted or soft):
        return False
    since = changes_since(query)
    if since is not None and s.updated_at < since:
        return False
    if not _all_tenants(query) and s.project_id != ADMIN_PROJECT:
        return False
    return all(getattr(s, f) == query[f] for f in ("host", "uuid") if f in query)


def migration_matches(m: SimMigration, query: dict[str, str]) -> bool:
    """Whether ``GET /os-migrations?query`` lists ``m`` (before paging)."""
    # NOTE: db migration_get_all_by_filters: 'host' matches source_compute OR dest_compute.
    if "host" in query and query["host"] not in (m.source_compute, m.dest_compute):
        return False
    fields = ("instance_uuid", "status", "migration_type", "source_compute")
    return all(getattr(m, f) == query[f] for f in fields if f in query)


def server_sort_key(s: SimServer) -> tuple[datetime.datetime, int]:
    return s.created_at, s.db_id


def migration_sort_key(m: SimMigration) -> tuple[datetime.datetime, int]:
    return m.created_at, m.id


def after(
    rows: list[Any], sort_key: Callable[[Any], tuple[datetime.datetime, int]], marker: Any
) -> list[Any]:
    """The rows (sorted descending) strictly after ``marker``'s sort key."""
    if marker is None:
        return rows
    stop = sort_key(marker)
    return [r for r in rows if sort_key(r) < stop]


def page_key(route: str, query: dict[str, str]) -> str:
    """The listing a page belongs to: its path and query without the marker."""
    rest = sorted((k, v) for k, v in query.items() if k != "marker")
    return f"{route}?{urllib.parse.urlencode(rest)}"


def add_next_link(
    body: dict[str, Any],
    key: str,
    route: str,
    query: dict[str, str],
    page: Iterable[Any],
    ident: Callable[[Any], str],
    max_limit: int,
) -> None:
    """Add ``<key>_links`` with rel next when ``page`` is full."""
    # NOTE: common.ViewBuilder._get_collection_links: a 'next' link only when the
    # page holds min(limit, max_limit) items; the key is absent otherwise.
    items = list(page)
    if items and len(items) == page_limit(query, max_limit):
        params = dict(sorted(query.items()), marker=ident(items[-1]))
        href = f"{ENDPOINT}{route}?{urllib.parse.urlencode(params)}"
        body[f"{key}_links"] = [{"rel": "next", "href": href}]


def server_view(s: SimServer) -> dict[str, Any]:
    """One server as in ``GET /servers/detail`` and ``GET /servers/{id}``."""
    # NOTE: views/servers.py show(): created/updated via utils.isotime (…Z);
    # OS-SRV-USG times are naive datetimes serialised with microseconds.
    host_id = hashlib.sha224((s.project_id + s.host).encode()).hexdigest() if s.host else ""
    status = _STATUS.get(s.vm_state, "UNKNOWN")
    if s.vm_state in ("active", "paused", "stopped") and s.task_state in _TASK_STATUS:
        status = _TASK_STATUS[s.task_state]
    return {
        "id": s.uuid,
        "name": s.name,
        "status": status,
        "tenant_id": s.project_id,
        "user_id": s.user_id,
        "created": _isotime(s.created_at),
        "updated": _isotime(s.updated_at),
        "hostId": host_id,
        "addresses": {},
        "metadata": {},
        "image": "",
        "flavor": {"id": "1", "links": []},
        "links": [{"rel": "self", "href": f"{ENDPOINT}/servers/{s.uuid}"}],
        "OS-EXT-SRV-ATTR:host": s.host,
        "OS-EXT-SRV-ATTR:hypervisor_hostname": s.node,
        "OS-EXT-SRV-ATTR:instance_name": f"instance-{s.db_id:08x}",
        "OS-EXT-STS:vm_state": s.vm_state,
        "OS-EXT-STS:task_state": s.task_state,
        "OS-EXT-STS:power_state": s.power_state,
        "OS-EXT-AZ:availability_zone": "nova",
        "OS-SRV-USG:launched_at": primitive_time(s.launched_at),
        "OS-SRV-USG:terminated_at": primitive_time(s.terminated_at),
        "locked": False,
        "tags": [],
    }


def plain_server_view(s: SimServer) -> dict[str, Any]:
    """One server as in the plain ``GET /servers`` listing (views/servers.py basic)."""
    return {
        "id": s.uuid,
        "name": s.name,
        "links": [{"rel": "self", "href": f"{ENDPOINT}/servers/{s.uuid}"}],
    }


def plain_partial_server_view(s: SimServer, shown: bool = False) -> dict[str, Any]:
    """A server of a cell Nova cannot reach, as the plain listing has it (basic, 2.69)."""
    return {
        "id": s.uuid,
        "status": "UNKNOWN",
        "links": [{"rel": "self", "href": f"{ENDPOINT}/servers/{s.uuid}"}],
    }


def partial_server_view(s: SimServer, shown: bool) -> dict[str, Any]:
    """A server of a cell Nova cannot reach, as ``GET /servers/detail`` (or ``/{id}``) has it."""
    # NOTE: views/servers.py _show_from_down_cell: the instance mapping's uuid,
    # project and created_at; GET /servers/{id} adds request spec fields.
    view: dict[str, Any] = {
        "id": s.uuid,
        "status": "UNKNOWN",
        "tenant_id": s.project_id,
        "created": _isotime(s.created_at),
        "links": [{"rel": "self", "href": f"{ENDPOINT}/servers/{s.uuid}"}],
    }
    if shown:
        view.update({
            "image": "", "flavor": {"id": "1", "links": []},
            "OS-EXT-AZ:availability_zone": "UNKNOWN", "OS-EXT-STS:power_state": 0,
            "user_id": s.user_id,
        })  # fmt: skip
    return view


def hypervisor_view(c: SimCompute, running_vms: int) -> dict[str, Any]:
    """One compute node as in ``GET /os-hypervisors/detail`` (2.53 shape)."""
    return {
        "id": c.node_uuid,
        "hypervisor_hostname": c.node,
        "hypervisor_type": c.hypervisor_type,
        "state": "up" if c.up and not c.forced_down else "down",
        "status": "enabled" if c.enabled else "disabled",
        "host_ip": f"192.0.2.{c.id}",
        "running_vms": running_vms,
        "service": {"host": c.host, "id": c.service_uuid, "disabled_reason": None},
    }


def service_view(c: SimCompute, now: datetime.datetime, cell_down: bool) -> dict[str, Any]:
    """One nova-compute service as in ``GET /os-services`` (2.69 shape)."""
    if cell_down:
        # NOTE: services.py _get_service_detail: from 2.69 a service of a down
        # cell is built from its host mapping: binary, host and status only.
        return {"binary": "nova-compute", "host": c.host, "status": "UNKNOWN"}
    return {
        "id": c.service_uuid,
        "binary": "nova-compute",
        "host": c.host,
        "zone": "nova",
        "status": "enabled" if c.enabled else "disabled",
        "state": "up" if c.up and not c.forced_down else "down",
        "forced_down": c.forced_down,
        "disabled_reason": None,
        "updated_at": primitive_time(now),
    }


def live_in_progress(m: SimMigration) -> bool:
    """A live migration Nova still counts as in progress."""
    return m.migration_type == "live-migration" and m.status in _LIVE_IN_PROGRESS


def server_migration_view(m: SimMigration) -> dict[str, Any]:
    """One entry of ``GET /servers/{id}/migrations``."""
    return {
        "id": m.id,
        "uuid": m.uuid,
        "server_uuid": m.instance_uuid,
        "source_compute": m.source_compute,
        "dest_compute": m.dest_compute,
        "source_node": m.source_node,
        "dest_node": m.dest_node,
        "dest_host": None,
        "status": m.status,
        "created_at": primitive_time(m.created_at),
        "updated_at": primitive_time(m.updated_at),
    }


def migration_view(m: SimMigration) -> dict[str, Any]:
    view: dict[str, Any] = {
        "id": m.id,
        "uuid": m.uuid,
        "instance_uuid": m.instance_uuid,
        "source_compute": m.source_compute,
        "dest_compute": m.dest_compute,
        "source_node": m.source_node,
        "dest_node": m.dest_node,
        "dest_host": None,
        "old_instance_type_id": 1,
        "new_instance_type_id": 1,
        "migration_type": m.migration_type,
        "status": m.status,
        "created_at": primitive_time(m.created_at),
        "updated_at": primitive_time(m.updated_at),
    }
    if live_in_progress(m):
        href = f"{ENDPOINT}/servers/{m.instance_uuid}/migrations/{m.id}"
        view["links"] = [{"rel": "self", "href": href}]
    return view


def _isotime(when: datetime.datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def primitive_time(when: datetime.datetime | None) -> str | None:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f") if when else None
