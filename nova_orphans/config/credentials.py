"""``[nova]``'s credentials checked at load, as strictly as our own options (rule 11).

keystoneauth and openstacksdk read their options only when the first request is made:
a missing password, ``timeout = 0``, ``auth_url = htp://…``, a ``cafile`` that does not
exist, a clouds.yaml whose ``clouds`` is a list would each fail then, deep in the
library, as an unexpected error (exit 1: a restart loop under systemd) and only for the
commands that ask Nova. Here each is one ``ConfigError`` naming the option, at load, for
every command (``check-config`` among them):

- ``cloud`` and ``auth_type`` are two choices of credentials: both is refused;
- the plugin is loaded and its options read eagerly through keystoneauth's own loaders
  (``keystoneauth1.loading``), its required credentials present;
- numbers in range, URLs http(s) with a host, the TLS files regular files that parse;
- a clouds.yaml cloud: the file's shape, the cloud present, its own URLs and files.

NOTE: keystoneauth1.loading and openstack.config are imported here because they are the
only definition of what a plugin and a cloud need (pyproject.toml's contract allows this
module beside ``config.nova``); no request is made.
"""

from __future__ import annotations

import json
import math
import os
import ssl
import urllib.parse
from collections.abc import Callable, Iterable
from typing import Any

from keystoneauth1 import discover as ks_discover
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

from nova_orphans.config import nova, services, strict
from nova_orphans.config.strict import ConfigError
from nova_orphans.exceptions import one_line

#: The longest ``[nova] timeout`` (seconds): keystoneauth's option has no maximum, and a
#: larger one overflows the clock of the first request (an OverflowError).
MAX_NOVA_TIMEOUT = 86400

#: What a plugin needs beyond the options keystoneauth marks required: each tuple is
#: one need, met by any of its options (keystoneauth's generic ``password`` plugin, e.g.,
#: finds a missing password only when it first authenticates).
NEEDS: dict[str, tuple[tuple[str, ...], ...]] = {
    **dict.fromkeys(
        ("password", "v2password", "v3password"), (("username", "user_id"), ("password",))
    ),
    **dict.fromkeys(("token", "v2token", "v3token"), (("token",),)),
    "admin_token": (("token",), ("endpoint", "endpoint_override")),
    "v3applicationcredential": (
        ("application_credential_id", "application_credential_name"),
        ("application_credential_secret",),
    ),
    "http_basic": (("username",), ("password",), ("endpoint", "endpoint_override")),
    "none": (("endpoint", "endpoint_override"),),
}

#: The interfaces keystoneauth looks an endpoint up by.
INTERFACES = ("public", "internal", "admin", "publicURL", "internalURL", "adminURL")


def check(conf: cfg.ConfigOpts, files: strict.ConfigFiles) -> None:
    """Raise ``ConfigError`` for the first ``[nova]`` credential option that cannot work."""
    section = conf[nova.NOVA_GROUP]
    plugin = (section.auth_type or "").strip()
    cloud_set = files.setting(nova.NOVA_GROUP, "cloud")
    auth_set = files.setting(nova.NOVA_GROUP, "auth_type")
    if cloud_set and auth_set and cloud_set[2].strip() and plugin:
        raise ConfigError(
            f"{cloud_set[0]}: [{cloud_set[1]}] cloud = {cloud_set[2].strip()} and "
            f"auth_type = {plugin} are two choices of credentials (a clouds.yaml cloud, or "
            "this section's keystoneauth plugin): keep one"
        )
    section_set = files.setting(nova.NOVA_GROUP, "auth_section")
    if section_set is not None:
        # NOTE: keystoneauth would read the plugin's options from that other section, which
        # the strict check of keys (ours) never sees; the tool reads them in [nova] only.
        raise ConfigError(
            f"{section_set[0]}: [{section_set[1]}] auth_section = {section_set[2].strip()} is "
            "not used: write the plugin's options in [nova]"
        )
    for option, _, _ in services.SERVICE_ENDPOINTS:
        endpoint = conf[services.SERVICES_GROUP][option]
        if endpoint:
            opt = next(o for o in services.services_opts if o.dest == option)
            http_url(endpoint, files.where(services.SERVICES_GROUP, opt))
    where = _Where(files)
    _check_session(section, where)
    _check_adapter(section, where)
    cloud = (section.cloud or "").strip()
    if cloud:
        _check_cloud(cloud, section.region_name, f"[nova] cloud = {cloud}")
    elif not plugin and os.environ.get("OS_CLOUD", "").strip():
        # NOTE: as the transport does: OS_CLOUD names the cloud the file does not choose.
        _check_cloud(os.environ["OS_CLOUD"].strip(), section.region_name, "OS_CLOUD")
    elif plugin:
        _check_plugin(conf, section, plugin, where)


class _Where:
    """How a message names a ``[nova]`` option: its file, section, key and (if no secret)
    value."""

    def __init__(self, files: strict.ConfigFiles) -> None:
        self._files = files
        self._opts = {o.dest: o for o in nova.file_opts(())}

    def __call__(self, key: str, opt: cfg.Opt | None = None) -> str:
        opt = opt or self._opts.get(key) or cfg.StrOpt(key)
        return self._files.where(nova.NOVA_GROUP, opt)

    def auth_type(self) -> str:
        found = self._files.setting(nova.NOVA_GROUP, "auth_type")
        if found is None:  # NOTE: set by the environment (OS_NOVA__AUTH_TYPE), not a file
            return "[nova] auth_type"
        return f"{found[0]}: [{found[1]}] auth_type = {found[2].strip()}"


def _check_session(section: Any, where: _Where) -> None:
    """The session's options: the timeout a number of seconds, the TLS files usable."""
    timeout = section.timeout
    if timeout is not None and not (math.isfinite(timeout) and 0 < timeout <= MAX_NOVA_TIMEOUT):
        raise ConfigError(
            f"{where('timeout')} is not valid: should be more than 0 and at most "
            f"{MAX_NOVA_TIMEOUT} seconds"
        )
    if section.keyfile and not section.certfile:
        raise ConfigError(f"{where('keyfile')} is used only with certfile, which is not set")
    if section.insecure and section.cafile:
        raise ConfigError(
            f"{where('cafile')} is not used: insecure = true turns TLS verification off; "
            "remove one of them"
        )
    if section.cafile:
        tls_file(section.cafile, where("cafile"), _load_ca)
    if section.keyfile:
        tls_file(section.keyfile, where("keyfile"), lambda _: None)
    if section.certfile:
        tls_file(section.certfile, where("certfile"), _load_cert(section.keyfile or None))
    if section.tls_ciphers:
        try:
            ssl.create_default_context().set_ciphers(section.tls_ciphers)
        except ssl.SSLError:
            raise ConfigError(
                f"{where('tls_ciphers')} is not valid: OpenSSL selects no cipher from it"
            ) from None


def _check_adapter(section: Any, where: _Where) -> None:
    """The adapter's options: the interfaces keystoneauth knows, an http(s) endpoint."""
    for interface in section.valid_interfaces or ():
        if interface not in INTERFACES:
            raise ConfigError(
                f"{where('valid_interfaces')} is not valid: {interface!r} is none of "
                f"{', '.join(INTERFACES[:3])}"
            )
    if section.endpoint_override:
        http_url(section.endpoint_override, where("endpoint_override"))
    versions = {}
    for key in ("version", "min_version", "max_version"):
        value = (section[key] or "").strip()
        if value:
            try:
                versions[key] = ks_discover.normalize_version_number(value)
            except TypeError:
                raise ConfigError(
                    f"{where(key)} is not valid: should be an API version such as 2.1, or latest"
                ) from None
    if versions.get("min_version", ()) > versions.get("max_version", (math.inf,)):
        raise ConfigError(f"{where('min_version')} is not valid: it is above max_version")


def _check_plugin(conf: cfg.ConfigOpts, section: Any, plugin: str, where: _Where) -> None:
    """``auth_type``'s plugin, its options read and loaded eagerly by keystoneauth's loaders."""
    opts = ks_loading.get_plugin_loader(plugin).get_options()
    values = {o.dest: getattr(section, o.dest, None) for o in opts}
    values["endpoint_override"] = section.endpoint_override
    needs = [
        *((o.dest,) for o in opts if o.required),
        *NEEDS.get(plugin, ()),
    ]
    for need in needs:
        if not any(_set(values.get(key)) for key in need):
            missing = " or ".join(need)
            raise ConfigError(f"{where.auth_type()} needs {missing}, which is not set")
    for opt in opts:
        if opt.dest.endswith(("_url", "endpoint")) and _set(values.get(opt.dest)):
            http_url(str(values[opt.dest]), where(opt.dest))
    try:
        auth = ks_loading.load_auth_from_conf_options(conf, nova.NOVA_GROUP)
        session = ks_loading.load_session_from_conf_options(conf, nova.NOVA_GROUP, auth=auth)
        ks_loading.load_adapter_from_conf_options(conf, nova.NOVA_GROUP, session=session, auth=auth)
    except (ks_exc.ClientException, TypeError, ValueError) as exc:
        # NOTE: keystoneauth's own refusals (mutually exclusive versions, a plugin's own
        # checks): the section is named, with keystoneauth's reason.
        raise ConfigError(
            f"{where.auth_type()}: keystoneauth refused [nova]: {one_line(exc)}"
        ) from None


def _set(value: object) -> bool:
    return value is not None and str(value).strip() != ""


def http_url(value: str, where: str) -> None:
    """``value`` is an http:// or https:// URL with a host (and a port that is a number)."""
    try:
        parts = urllib.parse.urlsplit(value.strip())
        _ = parts.port  # NOTE: raises for a port that is no number, or out of range
    except ValueError as exc:
        raise ConfigError(f"{where} is not valid: {one_line(exc)}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{where} is not valid: should be an http:// or https:// URL with a host")


def tls_file(path: str, where: str, load: Callable[[str], None]) -> None:
    """``path`` is a regular, readable file that ``load`` (OpenSSL) reads without error."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise ConfigError(f"{where}: {exc.strerror}") from None
    # NOTE: a FIFO or a device would hang or never end the read (as in strict.require_readable).
    kind = strict.file_kind(st.st_mode)
    if kind:
        raise ConfigError(f"{where} is {kind}, not a file")
    if not os.access(path, os.R_OK):
        raise ConfigError(f"{where}: cannot be read")
    try:
        load(path)
    except (ssl.SSLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or one_line(exc)
        raise ConfigError(f"{where}: OpenSSL cannot read it ({reason})") from None


def _load_ca(path: str) -> None:
    ssl.create_default_context(cafile=path)


def _load_cert(keyfile: str | None) -> Callable[[str], None]:
    def load(certfile: str) -> None:
        # NOTE: a key under a passphrase fails here, as it would in the request: nothing
        # can type a passphrase into the agent; the empty one never prompts.
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_cert_chain(
            certfile, keyfile, password=lambda: b""
        )

    return load


def clouds_files() -> list[str]:
    """The clouds.yaml files openstacksdk reads, in its order (``OS_CLIENT_CONFIG_FILE``
    first); it takes the first that exists."""
    from openstack.config import loader  # NOTE: slow to import; only a cloud needs it

    override = os.environ.get("OS_CLIENT_CONFIG_FILE")
    return [*([override] if override else []), *loader.CONFIG_FILES]


def _check_cloud(cloud: str, region: str | None, what: str) -> None:
    """The clouds.yaml openstacksdk would read: its shape, ``cloud`` in it, its URLs and
    files; then openstacksdk's own resolution of the cloud."""
    from openstack import config as os_config
    from openstack import exceptions as os_exc

    path = next((p for p in clouds_files() if os.path.isfile(p)), None)
    if path is None:
        raise ConfigError(f"{what}: no clouds.yaml found (looked in {', '.join(_dirs())})")
    document = _read_clouds(path)
    clouds = document.get("clouds")
    if not isinstance(clouds, dict):
        raise ConfigError(f"{path}: 'clouds' should be a mapping of cloud names to clouds")
    entry = clouds.get(cloud)
    if entry is None:
        known = ", ".join(sorted(map(str, clouds))) or "none"
        raise ConfigError(f"{what}: {path} has no cloud {cloud!r} (it has: {known})")
    if not isinstance(entry, dict):
        raise ConfigError(f"{path}: clouds.{cloud} should be a mapping of settings")
    auth = entry.get("auth", {})
    if not isinstance(auth, dict):
        raise ConfigError(f"{path}: clouds.{cloud}.auth should be a mapping of settings")
    for key, value in _urls(entry, auth):
        http_url(str(value), f"{path}: clouds.{cloud}.{key} = {one_line(value)}")
    for key, load in (("cacert", _load_ca), ("cert", _load_cert(None))):
        if isinstance(entry.get(key), str):
            tls_file(entry[key], f"{path}: clouds.{cloud}.{key}", load)
    try:
        os_config.OpenStackConfig().get_one(cloud=cloud, region_name=region or None)
    except os_exc.ConfigException as exc:
        raise ConfigError(f"{path}: {one_line(exc)}") from None
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        # NOTE: openstacksdk reads the file's settings without checking their types.
        raise ConfigError(f"{path}: clouds.{cloud} cannot be used: {one_line(exc)}") from None


def _urls(entry: dict[str, Any], auth: dict[str, Any]) -> Iterable[tuple[str, Any]]:
    for key, value in auth.items():
        if str(key).endswith(("_url", "endpoint")) and value:
            yield f"auth.{key}", value
    for key, value in entry.items():
        if str(key).endswith("endpoint_override") and value:
            yield str(key), value


def _read_clouds(path: str) -> dict[str, Any]:
    import yaml  # NOTE: openstacksdk's own dependency, as it reads the file

    try:
        with open(path, encoding="utf-8") as stream:
            document = json.load(stream) if path.endswith(".json") else yaml.safe_load(stream)
    except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot be read: {one_line(exc)}") from None
    if not isinstance(document, dict):
        raise ConfigError(f"{path}: should be a mapping with 'clouds'")
    return document


def _dirs() -> list[str]:
    return list(dict.fromkeys(os.path.dirname(p) or "." for p in clouds_files()))
