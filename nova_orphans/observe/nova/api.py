"""Nova's HTTP answers: the transport, status checks and retries, and the records read from them.

Every answer is checked before anything is read from it: a status other than 200 raises (a
server error after a few retries), and a record that is partial (a cell Nova cannot reach) or
lacks what the credentials' policy hides raises ``NovaError`` (docs/design.md rules 3 and 17).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any, Protocol

from nova_orphans import shapes
from nova_orphans.model import Migration, Server
from nova_orphans.observe import retry
from nova_orphans.observe.errors import (
    NovaAuthFailed,
    NovaBadAnswer,
    NovaCellDown,
    NovaError,
    NovaForbidden,
    NovaUnreachable,
)
from nova_orphans.shapes import UUID

#: 2.69: a cell Nova cannot reach answers ``GET /servers/{id}`` with a partial
#: record and ``GET /os-services`` with status UNKNOWN, instead of an error the
#: filtered listings would silently skip. 2.59 gave paged, typed migrations.
#: NOTE: nothing else we read changed from 2.59 to 2.69 (2.60-2.68 touch
#: multiattach, flavors, instance actions, trusted certs, server groups, aborts
#: and forced live migration; 2.66 only adds the changes-before filter).
#: Filtered or paged listings skip a down cell at every microversion
#: (``[api] list_records_by_skipping_down_cells``): see ``require_cells_answer``.
MICROVERSION = "2.69"
#: NOTE: Nova does not refuse some requests it cannot fully answer to the credentials: it
#: drops admin-only filters (host, deleted, uuid) unless the credentials have this rule, and
#: blanks the host attributes (servers, migrations) unless they have the rule of the field.
#: The answers are checked, and a failure names the rule (nova_orphans/data/nova-policy.yaml).
FILTERS_RULE = "os_compute_api:servers:allow_all_filters"
SERVER_HOST_RULE = "os_compute_api:os-extended-server-attributes"
MIGRATION_HOST_RULE = "os_compute_api:os-migrations:index:host"
SERVER_MIGRATION_HOST_RULE = "os_compute_api:servers:migrations:index:host"


class Transport(Protocol):
    """The one call the observer makes: an HTTP GET on the compute endpoint.

    A transport also carries ``date``: the HTTP ``Date`` of its last answer (Nova's
    clock), which incremental observations need (``tracker``). NOTE: declared
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


def checked(transport: Transport, request: str, missing_ok: bool = False) -> Any:
    """The body of the answer to ``request``; a status but 200 (or 404 if ``missing_ok``) raises."""
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
    attempts: int = retry.ATTEMPTS, wait_seconds: float | None = None
) -> Callable[[Callable[[], Any]], Any]:
    """Retry server errors and unreachable Nova a few times, then give up loudly
    (``observe/retry.py``: the one retry layer)."""
    return retry.retrying((_Transient, NovaUnreachable), attempts, wait_seconds)


def _fault_message(body: Any) -> str:
    if isinstance(body, dict):
        for fault in body.values():
            if isinstance(fault, dict) and "message" in fault:
                return str(fault["message"])
    return "no details"


def list_in(body: Any, key: str, request: str) -> list[dict[str, Any]]:
    """The list of records under ``key`` in the answer to ``request``; anything else raises."""
    items = body.get(key) if isinstance(body, dict) else None
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise NovaBadAnswer(request=request, reason=f"no '{key}' list in the answer")
    return items


def uuid_of(item: dict[str, Any]) -> str:
    """The server's id, checked; a partial record (a cell Nova cannot reach) raises."""
    uuid = str(item.get("id", ""))
    if not UUID.fullmatch(uuid):
        raise NovaBadAnswer(request="a server listing", reason=f"server id {uuid!r} is no UUID")
    if item.get("status") == "UNKNOWN" and "OS-EXT-STS:vm_state" not in item:
        # NOTE: views/servers.py _show_from_down_cell (basic: id, status UNKNOWN,
        # links; show adds tenant_id, created and a few request spec fields), but
        # no host and no states: nothing can be concluded.
        raise NovaCellDown(what=f"server {uuid} came back partial (status UNKNOWN)")
    return uuid


def parse_server(item: dict[str, Any]) -> Server:
    """Build a ``Server`` from one entry of Nova's server detail view."""
    uuid = uuid_of(item)
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
        deleted_at=parse_time(item.get("OS-SRV-USG:terminated_at") or item.get("updated"))
        if deleted
        else None,
        updated_at=parse_time(item.get("updated")),
    )


def parse_migration(item: dict[str, Any], host_rule: str = MIGRATION_HOST_RULE) -> Migration:
    """Build a ``Migration`` from one entry of ``/os-migrations``.

    ``host_rule``: the policy rule without which Nova blanks the migration's hosts.
    """
    uuid = str(item.get("instance_uuid", ""))
    if not UUID.fullmatch(uuid):
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
        uuid=migration if UUID.fullmatch(migration := str(item.get("uuid") or "")) else None,
    )


def isotime(when: datetime.datetime) -> str:
    """``when`` as Nova's filters take it, in whole seconds (rounded down: never later)."""
    return when.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: Any) -> datetime.datetime | None:
    """A time of Nova's (UTC when it names no zone), None when empty; a bad one raises."""
    if not value:
        return None
    try:
        return shapes.parse_time(value)
    except ValueError as exc:
        raise NovaBadAnswer(request="a server listing", reason=f"bad time {value!r}") from exc
