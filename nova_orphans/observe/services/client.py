"""Placement, Cinder and Neutron through the same keystoneauth session as Nova.

Unlike Nova's answers, theirs are not needed to classify: a failure here is a
``ServiceError`` naming the service and why, and the caller reports that check
as not made (a danger ``unknown``, Placement "not consulted"), never as "none".
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import identity

from nova_orphans import exits
from nova_orphans.exceptions import NovaOrphansError, one_line
from nova_orphans.observe import retry
from nova_orphans.observe.errors import ObserveError
from nova_orphans.observe.reasons import short_reason


class ServiceError(NovaOrphansError):
    """A service could not be asked, or gave an unusable answer; the message is one line."""

    exit_code = exits.ERROR


class _Transient(ServiceError):
    """A server error or an unreachable service: asked again (``observe/retry.py``)."""


class _ServerError(_Transient):
    """An answer with a 5xx status, kept to be read as it is once the attempts are spent."""

    def __init__(self, message: str, response: Any) -> None:
        super().__init__(message)
        self.response = response


class Client(Protocol):
    """An HTTP GET on one service's endpoint."""

    #: The service in the operator's words ("Cinder").
    name: str

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, Any]:
        """(HTTP status, decoded JSON body or None); raises ``ServiceError`` when unreachable.

        ``headers``: extra request headers (a microversion)."""


class KeystoneClient:
    """``Client`` over a keystoneauth adapter (the service catalog, or a configured endpoint);
    ``adapter`` None: the service is not configured (no catalog and no endpoint of its own).

    ``region``: Nova's region, asked before each request found in the catalog (Nova's
    transport's ``region``: the one named, or the catalog's only one); its refusal of a
    catalog of several regions none names is a config error, never this service's.
    """

    def __init__(
        self,
        adapter: ks_adapter.Adapter | None,
        name: str,
        option: str = "endpoint",
        region: Callable[[], str | None] | None = None,
    ) -> None:
        self._adapter = adapter
        self.name = name
        self._option = option
        self._region = region
        self._retry = retry.retrying((_Transient,))

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, Any]:
        """GET ``path`` relative to the service's endpoint."""
        if self._adapter is None:
            raise ServiceError(
                f"{self.name} not configured: [nova] names an endpoint, not a service "
                f"catalog; set [services] {self._option}"
            )
        adapter = self._adapter
        if self._region is not None and not adapter.endpoint_override:
            try:
                adapter.region_name = self._region()
            except ObserveError as exc:
                raise ServiceError(f"{self.name}: {exc}") from exc
        region = f"region {adapter.region_name}" if adapter.region_name else "any region"

        def once() -> Any:
            response = self._ask(adapter, path, headers, region)
            if response.status_code >= 500:
                status = response.status_code
                raise _ServerError(f"{self.name} answered GET {path} with HTTP {status}", response)
            return response

        try:
            response = self._retry(once)
        except _ServerError as exc:
            response = exc.response
        try:
            body = response.json() if response.content else None
        except ValueError:
            body = None
        return response.status_code, body

    def _ask(
        self, adapter: ks_adapter.Adapter, path: str, headers: dict[str, str] | None, region: str
    ) -> Any:
        try:
            return adapter.get(
                path, raise_exc=False, headers={"Accept": "application/json", **(headers or {})}
            )
        except ks_exc.EndpointNotFound as exc:
            raise ServiceError(
                f"{self.name}: no {adapter.service_type} endpoint in the service catalog "
                f"({adapter.interface or 'public'} interface, {region})"
            ) from exc
        except (ks_exc.ConnectionError, ks_exc.RequestTimeout) as exc:
            raise _Transient(
                f"{self.name} unreachable at {_url(adapter)} ({adapter.service_type}, "
                f"{region}): {short_reason(exc)}"
            ) from exc
        except ks_exc.ClientException as exc:
            raise ServiceError(f"{self.name}: {one_line(exc)}") from exc


def _url(adapter: ks_adapter.Adapter) -> str:
    try:
        return str(adapter.get_endpoint())
    except ks_exc.ClientException:
        return "its endpoint"


def sibling(
    base: ks_adapter.Adapter, service_type: str, endpoint: str | None
) -> ks_adapter.Adapter | None:
    """An adapter for ``service_type`` on ``base``'s session, auth, interface and region
    (the one named; a ``KeystoneClient``'s ``region`` pins the catalog's only one); None
    when the service is not configured.

    NOTE: one session, one token: the service is found in the same catalog as Nova,
    unless ``endpoint`` (from the configuration) names it. Credentials without a catalog
    (``admin_token`` with Nova's ``endpoint``) hand that one endpoint out for every
    service type: such a service has no endpoint of its own, and is never asked at
    Nova's.
    """
    auth = base.auth or base.session.auth
    if not endpoint and not isinstance(auth, identity.BaseIdentityPlugin):
        return None
    return ks_adapter.Adapter(
        session=base.session,
        auth=base.auth,
        service_type=service_type,
        interface=base.interface,
        region_name=base.region_name,
        endpoint_override=endpoint or None,
        connect_retries=retry.NO_KEYSTONEAUTH_RETRIES["connect_retries"],
        status_code_retries=retry.NO_KEYSTONEAUTH_RETRIES["status_code_retries"],
    )


def get_json(
    client: Client, path: str, not_found: str | None = None, headers: dict[str, str] | None = None
) -> Any:
    """The JSON body of a 200 answer; else ``ServiceError``.

    ``not_found``: the key of the service's own "no such item" fault (Cinder's
    ``itemNotFound``); a 404 carrying it is None.

    NOTE: any other 404 is an error, not "no such item": an endpoint that is not
    the service's (an ``admin_token`` setup hands Nova's endpoint out for every
    service type) answers 404 to everything, and reading that as "no such volume"
    would hide the very danger the lookup is for (docs/design.md rule 3).
    """
    status, body = client.get(path, headers) if headers else client.get(path)
    if not_found and status == 404 and isinstance(body, dict) and not_found in body:
        return None
    if status != 200:
        hint = f" (is this {client.name}'s endpoint?)" if status == 404 else ""
        raise ServiceError(
            f"{client.name} answered GET {path} with HTTP {status}: {_fault(body)}{hint}"
        )
    return body


def _fault(body: Any) -> str:
    """The message of an OpenStack error body (Nova/Cinder, Neutron or Placement style)."""
    if isinstance(body, dict):
        errors = body.get("errors")
        if isinstance(errors, list) and errors and isinstance(errors[0], dict):
            return str(errors[0].get("detail") or errors[0].get("title") or "no details")
        for fault in body.values():
            if isinstance(fault, dict) and "message" in fault:
                return one_line(fault["message"])
    return "no details"


#: Pages of one listing followed at most (1,000 items each by default: a million items).
MAX_PAGES = 1000
#: The longest id kept from a listed item.
MAX_ID = 255


def pages(
    client: Client,
    path: str,
    key: str,
    query: Mapping[str, str] | Sequence[tuple[str, str]],
    headers: dict[str, str] | None = None,
) -> Iterator[dict[str, Any]]:
    """Every item of a listing that pages by ``marker`` (``<key>_links``, rel next): Neutron's
    ports, Cinder's attachments.

    NOTE: the next request is built here from ``query`` and the link's marker, never
    taken from the link; a link that does not go on from the page's last item, an item
    listed twice or more than ``MAX_PAGES`` pages fail the listing (docs/design.md rule 21:
    a next page left unread is "not checked", never "nothing there").
    """
    what = f"{client.name}'s {key[:-1]} listing"
    base = list(query.items()) if isinstance(query, Mapping) else list(query)
    asked = base
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        body = get_json(client, f"{path}?{urllib.parse.urlencode(asked)}", headers=headers)
        items = body.get(key) if isinstance(body, dict) else None
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise ServiceError(f"{what} has no '{key}' list")
        for item in items:
            ident = _id(item.get("id"))
            if ident in seen:
                raise ServiceError(f"{client.name} listed {key[:-1]} {ident!r} twice")
            seen.add(ident)
            yield item
        marker = _next_marker(body.get(f"{key}_links"), what)
        if marker is None:
            return
        if not items or marker != _id(items[-1].get("id")):
            raise ServiceError(f"{what} links to a page it did not end")
        asked = [*base, ("marker", marker)]
    raise ServiceError(f"{what} goes on past {MAX_PAGES} pages")


def _id(value: Any) -> str:
    return "" if value is None else str(value)[:MAX_ID]


def _next_marker(links: Any, what: str) -> str | None:
    """The ``marker`` of a ``next`` link, None when there is none."""
    if links is None:
        return None
    if not isinstance(links, list):
        raise ServiceError(f"{what}'s links are no list")
    for link in links:
        if isinstance(link, dict) and link.get("rel") == "next":
            query = urllib.parse.urlparse(str(link.get("href", ""))).query
            markers = urllib.parse.parse_qs(query).get("marker")
            if not markers:
                raise ServiceError(f"{what}'s next link names no marker")
            return markers[0]
    return None
