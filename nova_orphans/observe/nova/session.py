"""Nova credentials the OpenStack way, and the keystoneauth transport built on them."""

from __future__ import annotations

import datetime
import email.utils
import os
from typing import Any

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading

from nova_orphans import exits
from nova_orphans.exceptions import NovaOrphansError, one_line
from nova_orphans.observe.errors import (
    KeystoneUnreachable,
    NovaAuthFailed,
    NovaError,
    NovaUnreachable,
)
from nova_orphans.observe.nova.api import MICROVERSION


class CredentialsMissing(NovaOrphansError):
    """Neither a clouds.yaml cloud nor a keystoneauth plugin is configured."""

    exit_code = exits.USAGE
    label = "config error"


class KeystoneTransport:
    """``Transport`` over a keystoneauth adapter for the compute service."""

    def __init__(self, adapter: ks_adapter.Adapter) -> None:
        self._adapter = adapter
        #: Nova's clock: the HTTP Date of the last answer (None when it had none).
        self.date: datetime.datetime | None = None

    @property
    def adapter(self) -> ks_adapter.Adapter:
        """The compute adapter: its session, interface and region serve the other services."""
        return self._adapter

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
            raise NovaUnreachable(endpoint=self._endpoint(), reason=one_line(exc)) from exc
        except ks_exc.ClientException as exc:
            raise NovaError(reason=one_line(exc)) from exc
        self.date = _http_date(response.headers.get("Date"))
        try:
            body = response.json() if response.content else None
        except ValueError:
            body = None
        return response.status_code, body

    def _authenticate(self) -> None:
        """Get a token and Nova's endpoint first, so a Keystone failure is named as such."""
        try:
            self._adapter.get_endpoint()
        except (ks_exc.Unauthorized, ks_exc.Forbidden) as exc:
            raise NovaAuthFailed(status=getattr(exc, "http_status", 401), reason=exc) from exc
        except (ks_exc.ConnectionError, ks_exc.RequestTimeout) as exc:
            auth_url = getattr(self._adapter.session.auth, "auth_url", None) or "Keystone"
            raise KeystoneUnreachable(auth_url=auth_url, reason=one_line(exc)) from exc
        except ks_exc.ClientException as exc:
            raise NovaError(reason=one_line(exc)) from exc

    def _endpoint(self) -> str:
        try:
            return str(self._adapter.get_endpoint())
        except ks_exc.ClientException:
            return "the configured endpoint"


def _http_date(value: str | None) -> datetime.datetime | None:
    """An HTTP ``Date`` header as an aware datetime; None when absent or unreadable."""
    try:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
    except (TypeError, ValueError):
        return None
    if parsed is not None and parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.timezone.utc)  # "-0000": UTC, says RFC 5322
    return parsed


def transport_from_conf(conf: Any, group: str = "nova") -> KeystoneTransport:
    """Build the transport from ``[nova] cloud`` or the section's keystoneauth options.

    ``conf`` is the loaded configuration (``nova_orphans.config.load``), handed in
    by the command line and read here by keystoneauth's own loaders only.
    """
    section = conf[group]
    if section.cloud:
        return KeystoneTransport(_adapter_from_cloud(section.cloud))
    auth = ks_loading.load_auth_from_conf_options(conf, group)
    if auth is None:
        # NOTE: as the openstack client does, OS_CLOUD names the cloud; the config
        # file's own choice (cloud, or auth_type) comes first.
        cloud = os.environ.get("OS_CLOUD", "").strip()
        if cloud:
            return KeystoneTransport(_adapter_from_cloud(cloud))
        raise CredentialsMissing(
            f"[{group}] needs auth_type (keystoneauth) or cloud (clouds.yaml; or OS_CLOUD)"
        )
    session = ks_loading.load_session_from_conf_options(conf, group, auth=auth)
    adapter = ks_loading.load_adapter_from_conf_options(conf, group, session=session, auth=auth)
    return KeystoneTransport(adapter)


def _adapter_from_cloud(cloud: str) -> ks_adapter.Adapter:
    # Imported here: openstacksdk is slow to import and only this path needs it.
    from openstack import config as os_config
    from openstack import exceptions as os_exc

    try:
        region = os_config.OpenStackConfig().get_one(cloud=cloud)
    except os_exc.ConfigException as exc:
        raise CredentialsMissing(f"clouds.yaml: {one_line(exc)}") from exc
    # NOTE: a plain keystoneauth adapter on the cloud's session: the same transport
    # as the [nova] section, with the cloud's region, interface and endpoint override.
    return ks_adapter.Adapter(
        session=region.get_session(),
        service_type="compute",
        interface=region.get_interface("compute"),
        region_name=region.region_name,
        endpoint_override=region.get_endpoint("compute"),
    )
