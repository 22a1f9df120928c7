"""Nova credentials the OpenStack way, and the keystoneauth transport built on them."""

from __future__ import annotations

import datetime
import email.utils
import logging
import os
import warnings
from collections.abc import Sequence
from typing import Any

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import identity
from keystoneauth1 import loading as ks_loading
from keystoneauth1 import session as ks_session
from keystoneauth1.identity import generic
from urllib3 import exceptions as urllib3_exc

from nova_orphans import exits
from nova_orphans.exceptions import NovaOrphansError, one_line
from nova_orphans.observe.errors import (
    KeystoneAuthFailed,
    KeystoneError,
    KeystoneUnreachable,
    NovaAuthFailed,
    NovaError,
    NovaUnreachable,
)
from nova_orphans.observe.nova.api import MICROVERSION
from nova_orphans.observe.reasons import short_reason
from nova_orphans.observe.retry import NO_KEYSTONEAUTH_RETRIES

LOG = logging.getLogger(__name__)


class CredentialsMissing(NovaOrphansError):
    """Neither a clouds.yaml cloud nor a keystoneauth plugin is configured."""

    exit_code = exits.USAGE
    label = "config error"


class RegionNotNamed(NovaOrphansError):
    """The catalog holds several regions and none is named: which is this host's is no guess."""

    exit_code = exits.USAGE
    label = "config error"


#: What names the region, in the operator's words.
REGION_OPTIONS = "[nova] region_name (or OS_REGION_NAME, or the clouds.yaml cloud's region_name)"


class KeystoneTransport:
    """``Transport`` over a keystoneauth adapter for the compute service.

    ``services``: the other service types asked through this session's catalog
    (``placement``, ``block-storage``, ``network``); their endpoints must come from
    Nova's region too (``region``).
    """

    def __init__(self, adapter: ks_adapter.Adapter, services: Sequence[str] = ()) -> None:
        self._adapter = adapter
        self._services = tuple(services)
        #: Nova's clock: the HTTP Date of the last answer (None when it had none).
        self.date: datetime.datetime | None = None
        self._region_pinned = False
        self._discovered = False

    @property
    def adapter(self) -> ks_adapter.Adapter:
        """The compute adapter: its session, interface and region serve the other services."""
        return self._adapter

    def region(self) -> str | None:
        """The region every endpoint comes from: Nova's, as named, else the catalog's only
        one (pinned from then on); None without a catalog (an endpoint-only setup).

        Raises ``RegionNotNamed`` (exit 2) when the catalog holds several regions, for
        compute or for one of ``services``, and none is named; an ``ObserveError`` when
        Keystone could not be asked.
        """
        self._authenticate()
        return self._adapter.region_name or None

    def get(self, path: str) -> tuple[int, Any]:
        """GET ``path`` on the compute endpoint at our pinned microversion."""
        self._authenticate()
        try:
            response = self._adapter.get(
                path,
                raise_exc=False,
                microversion=MICROVERSION,
                headers={"Accept": "application/json"},
            )
        except (ks_exc.Unauthorized, ks_exc.Forbidden) as exc:
            raise NovaAuthFailed(status=getattr(exc, "http_status", 401), reason=exc) from exc
        except (ks_exc.ConnectionError, ks_exc.RequestTimeout) as exc:
            raise NovaUnreachable(endpoint=self._endpoint(), reason=short_reason(exc)) from exc
        except ks_exc.ClientException as exc:
            raise NovaError(reason=one_line(exc)) from exc
        self.date = _http_date(response.headers.get("Date"))
        try:
            body = response.json() if response.content else None
        except ValueError:
            body = None
        return response.status_code, body

    def _authenticate(self) -> None:
        """Get a token, then Nova's endpoint, so a Keystone failure is named as Keystone's."""
        auth = self._adapter.auth or self._adapter.session.auth
        if isinstance(auth, identity.BaseIdentityPlugin):
            self._token(auth)
        try:
            self._adapter.get_endpoint()
        except (ks_exc.Unauthorized, ks_exc.Forbidden) as exc:
            raise NovaAuthFailed(status=getattr(exc, "http_status", 401), reason=exc) from exc
        except (ks_exc.ConnectionError, ks_exc.RequestTimeout) as exc:
            raise NovaUnreachable(endpoint=self._endpoint(), reason=short_reason(exc)) from exc
        except ks_exc.EndpointNotFound as exc:
            raise NovaError(reason=f"{where(self._adapter)}: {one_line(exc)}") from exc
        except ks_exc.ClientException as exc:
            raise NovaError(reason=one_line(exc)) from exc
        if not self._region_pinned:
            self._pin_region()

    def _token(self, auth: identity.BaseIdentityPlugin) -> None:
        """A token from Keystone (only Keystone is asked); its failures name Keystone."""
        auth_url = str(getattr(auth, "auth_url", None) or "its auth_url")
        session = self._adapter.session
        try:
            if isinstance(auth, generic.BaseGenericPlugin) and not self._discovered:
                _discover(session, auth_url)
                self._discovered = True
            auth.get_access(session)
        except (ks_exc.Unauthorized, ks_exc.Forbidden) as exc:
            status = getattr(exc, "http_status", None) or 401
            raise KeystoneAuthFailed(auth_url=auth_url, status=status, reason=exc) from exc
        except (ks_exc.ConnectionError, ks_exc.RequestTimeout) as exc:
            raise KeystoneUnreachable(auth_url=auth_url, reason=short_reason(exc)) from exc
        except ks_exc.HttpError as exc:
            raise KeystoneError(auth_url=auth_url, reason=one_line(exc)) from exc
        except ks_exc.ClientException as exc:
            raise KeystoneError(auth_url=auth_url, reason=one_line(exc)) from exc

    def _pin_region(self) -> None:
        """Pin the catalog's one region on the compute adapter, or refuse to choose.

        NOTE: with no region named keystoneauth takes each service's first endpoint in
        the catalog, which may be another region's for one service and not for the
        next: another region's Nova would answer for another cloud's hosts, another
        region's Cinder or Neutron tell their resources as this host's. Nothing is
        guessed: one region is pinned for every service, several are a config error.
        A Nova ``endpoint_override`` is no catalog's; the services asked through the
        catalog still are.
        """
        adapter = self._adapter
        if not adapter.region_name:
            own = () if adapter.endpoint_override else (adapter.service_type,)
            found = {
                t: list(dict.fromkeys(r for r, _ in catalog_regions(adapter, t)))
                for t in (*own, *self._services)
            }
            names = list(dict.fromkeys(r for regions in found.values() for r in regions))
            if len(names) > 1:
                offered = "; ".join(
                    f"{t} in {', '.join(_region(r) for r in regions)}"
                    for t, regions in found.items()
                    if regions
                )
                raise RegionNotNamed(
                    f"the service catalog holds regions {', '.join(map(_region, names))} "
                    f"({offered}) and none is named: set {REGION_OPTIONS} to this host's "
                    "region"
                )
            if names and names[0] is not None:
                adapter.region_name = names[0]
        self._region_pinned = True

    def _endpoint(self) -> str:
        try:
            url = str(self._adapter.get_endpoint())
        except ks_exc.ClientException:
            url = "the configured endpoint"
        region = self._adapter.region_name or next(
            (r for r, u in catalog_regions(self._adapter) if u.rstrip("/") == url.rstrip("/")),
            None,
        )
        return f"{url} (region {region})" if region else url


def _discover(session: ks_session.Session, auth_url: str) -> None:
    """Ask ``auth_url`` for its API versions without a token, as a generic plugin will.

    NOTE: keystoneauth's generic plugins (``password``, ``token``) discover the identity
    API first, and a discovery answered 401 (an ``auth_url`` that is Nova's, or behind a
    proxy asking for credentials) is asked again with a token, which needs the discovery:
    keystoneauth waits on its own lock for ever. Asked here on a session of the same TLS
    settings without a plugin, a 401 is one clear refusal, a 5xx Keystone's answer.
    """
    probe = ks_session.Session(verify=session.verify, cert=session.cert, timeout=session.timeout)
    try:
        response = probe.get(
            auth_url, authenticated=False, raise_exc=False, headers={"Accept": "application/json"}
        )
    except ks_exc.MissingAuthPlugin as exc:  # NOTE: keystoneauth's own retry, with a token
        raise ks_exc.Unauthorized(
            "its version discovery asks for credentials: is [nova] auth_url Keystone's?"
        ) from exc
    if response.status_code in (401, 403):
        raise ks_exc.Unauthorized(
            "its version discovery asks for credentials: is [nova] auth_url Keystone's?",
            http_status=response.status_code,
        )
    if response.status_code >= 500:
        raise ks_exc.HttpError("its version discovery failed", http_status=response.status_code)


def where(adapter: ks_adapter.Adapter) -> str:
    """The service type, interface and region an adapter looks its endpoint up by."""
    region = adapter.region_name or "any region"
    return f"{adapter.service_type} ({adapter.interface or 'public'} interface, {region})"


def catalog_regions(
    adapter: ks_adapter.Adapter, service_type: str | None = None
) -> list[tuple[str | None, str]]:
    """``[(region, url)]`` of the catalog's endpoints for ``service_type`` (default: the
    adapter's) on the adapter's interface, in the catalog's order (region None: the
    endpoint names none); empty without a catalog (an endpoint-only setup)."""
    auth = adapter.auth or adapter.session.auth
    if not isinstance(auth, identity.BaseIdentityPlugin):
        return []
    try:
        catalog = auth.get_access(adapter.session).service_catalog
        found = catalog.get_endpoints(
            service_type=service_type or adapter.service_type,
            interface=adapter.interface or "public",
        )
    except ks_exc.ClientException:
        return []
    return [
        (str(e.get("region_id") or e.get("region") or "") or None, str(e.get("url")))
        for endpoints in found.values()
        for e in endpoints
        if e
    ]


def _region(name: str | None) -> str:
    return name or "(no region)"


def _http_date(value: str | None) -> datetime.datetime | None:
    """An HTTP ``Date`` header as an aware datetime; None when absent or unreadable."""
    try:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
    except (TypeError, ValueError):
        return None
    if parsed is not None and parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.timezone.utc)  # "-0000": UTC, says RFC 5322
    return parsed


def transport_from_conf(
    conf: Any, group: str = "nova", services: Sequence[str] = ()
) -> KeystoneTransport:
    """Build the transport from ``[nova] cloud`` or the section's keystoneauth options.

    ``conf`` is the loaded configuration (``nova_orphans.config.load``), handed in
    by the command line and read here by keystoneauth's own loaders only;
    ``services``: the other service types to be asked through its catalog.
    """
    section = conf[group]
    # NOTE: as the openstack client, OS_REGION_NAME names the region the file does not
    # (over a clouds.yaml cloud's own); [nova] region_name comes first, for a cloud too.
    region = section.region_name or os.environ.get("OS_REGION_NAME", "").strip() or None
    if section.cloud:
        return KeystoneTransport(_adapter_from_cloud(section.cloud, region), services)
    auth = ks_loading.load_auth_from_conf_options(conf, group)
    if auth is None:
        # NOTE: as the openstack client does, OS_CLOUD names the cloud; the config
        # file's own choice (cloud, or auth_type) comes first.
        cloud = os.environ.get("OS_CLOUD", "").strip()
        if cloud:
            return KeystoneTransport(_adapter_from_cloud(cloud, region), services)
        raise CredentialsMissing(
            f"[{group}] needs auth_type (keystoneauth) or cloud (clouds.yaml; or OS_CLOUD)"
        )
    session = ks_loading.load_session_from_conf_options(conf, group, auth=auth)
    if session.verify is False:
        tls_verification_off(f"[{group}] insecure = true")
    # NOTE: observe/retry.py is the one retry layer: keystoneauth retries nothing.
    adapter = ks_loading.load_adapter_from_conf_options(
        conf, group, session=session, auth=auth, region_name=region, **NO_KEYSTONEAUTH_RETRIES
    )
    return KeystoneTransport(adapter, services)


def tls_verification_off(why: str) -> None:
    """Say once, as the transport is built, that TLS certificates are not verified.

    NOTE: urllib3 warns (InsecureRequestWarning) at each HTTPS request of an unverified
    session, a dozen lines for one audit: one line, ours, says it instead (a command
    builds one transport).
    """
    warnings.filterwarnings("ignore", category=urllib3_exc.InsecureRequestWarning)
    LOG.warning("TLS verification is off (%s): Nova and Keystone are not authenticated", why)


def _adapter_from_cloud(cloud: str, region_name: str | None) -> ks_adapter.Adapter:
    # Imported here: openstacksdk is slow to import and only this path needs it.
    from openstack import config as os_config
    from openstack import exceptions as os_exc

    try:
        region = os_config.OpenStackConfig().get_one(cloud=cloud, region_name=region_name)
    except os_exc.ConfigException as exc:
        raise CredentialsMissing(f"clouds.yaml: {one_line(exc)}") from exc
    session = region.get_session()
    if session.verify is False:
        tls_verification_off(f"clouds.yaml cloud {cloud}'s verify: false")
    # NOTE: a plain keystoneauth adapter on the cloud's session: the same transport
    # as the [nova] section, with the cloud's region, interface and endpoint override.
    return ks_adapter.Adapter(
        session=session,
        service_type="compute",
        interface=region.get_interface("compute"),
        region_name=region.region_name or None,
        endpoint_override=region.get_endpoint("compute"),
        connect_retries=NO_KEYSTONEAUTH_RETRIES["connect_retries"],
        status_code_retries=NO_KEYSTONEAUTH_RETRIES["status_code_retries"],
    )
