"""``[nova]``: Nova's credentials and endpoint, keystoneauth's options as Nova itself offers them.

NOTE: keystoneauth1 is imported here because its ``loading`` module is where its
options are defined (session, auth plugin, adapter); the session built from them
lives in ``observe/nova/session.py``.
"""

from __future__ import annotations

import copy
import difflib
from collections.abc import Sequence

from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

from nova_orphans.config import strict
from nova_orphans.config.strict import ConfigError

NOVA_GROUP = "nova"

nova_opts = [
    cfg.StrOpt(
        "cloud",
        help="Name of a cloud in clouds.yaml to take Nova credentials from, instead of the "
        "keystoneauth options of this section. Default: the environment's OS_CLOUD when this "
        "section names no auth_type.",
    ),
]


#: The keystoneauth plugins whose options the sample config and oslo-config-validator know:
#: "password" (the README's), its v3 form, application credentials and admin_token cover
#: every option of the token, v3token, none and http_basic plugins as well.
DOCUMENTED_AUTH_PLUGINS = ("v3password", "v3applicationcredential", "admin_token", "password")


def _nova_ksa_opts(plugins: Sequence[str] = DOCUMENTED_AUTH_PLUGINS) -> list[cfg.Opt]:
    # NOTE: the same set Nova offers for its own [placement] section, so every
    # keystoneauth plugin (password, v3applicationcredential, admin_token…)
    # works; the configured plugin's own options are added at load time by auth_type.
    return (
        ks_loading.get_session_conf_options()
        + ks_loading.get_auth_common_conf_options()
        + _plugin_opts(plugins)
        + ks_loading.get_adapter_conf_options(include_deprecated=False)
    )


def _plugin_opts(plugins: Sequence[str]) -> list[cfg.Opt]:
    """The options of ``plugins``, each name once (the first plugin's wording wins)."""
    opts: dict[str, cfg.Opt] = {}
    for name in plugins:
        for opt in ks_loading.get_auth_plugin_conf_options(name):
            opts.setdefault(opt.dest, opt)
    return list(opts.values())


#: Our defaults for keystoneauth options (keystoneauth's own would wait forever).
NOVA_DEFAULTS = {"service_type": "compute", "timeout": 30}


def _dedup(opts: list[cfg.Opt]) -> list[cfg.Opt]:
    seen: dict[str, cfg.Opt] = {}
    for opt in opts:
        if opt.dest in NOVA_DEFAULTS:
            opt = copy.deepcopy(opt)
            opt.default = NOVA_DEFAULTS[opt.dest]
        seen.setdefault(opt.dest, opt)
    return list(seen.values())


def sample_opts() -> list[cfg.Opt]:
    """``[nova]`` as the sample config documents it: the documented plugins' options, once,
    without keystoneauth's retries (``refuse_keystoneauth_retries``)."""
    opts = _dedup(_nova_ksa_opts())
    return [*nova_opts, *(o for o in opts if o.dest not in KEYSTONEAUTH_RETRY_KEYS)]


def file_opts(plugin_opts: Sequence[cfg.Opt]) -> list[cfg.Opt]:
    """``[nova]`` as a config file may set it, with ``plugin_opts`` of its ``auth_type``."""
    return [*nova_opts, *_nova_ksa_opts(plugins=()), *plugin_opts]


def auth_plugin_opts(files: strict.ConfigFiles) -> list[cfg.Opt]:
    """The options of ``[nova] auth_type``'s plugin; without one, the documented plugins'."""
    # NOTE: read from the files themselves: asking oslo.config would accept (and
    # log about) the deprecated name auth_plugin before the key check refuses it.
    found = files.setting(NOVA_GROUP, "auth_type")
    if found is None or not found[2].strip():
        # NOTE: then [nova] cannot reach Nova and the commands that need it say so;
        # a key of a documented plugin is not a typo, only premature.
        return _plugin_opts(DOCUMENTED_AUTH_PLUGINS)
    path, section, name = found
    try:
        return ks_loading.get_auth_plugin_conf_options(name.strip())
    except ks_exc.NoMatchingPlugin:
        known = difflib.get_close_matches(
            name, ks_loading.get_available_plugin_names(), n=1, cutoff=strict.NEAR
        )
        hint = f"; did you mean {known[0]}?" if known else ""
        raise ConfigError(
            f"{path}: [{section}] auth_type = {name} is not a keystoneauth plugin{hint}"
        ) from None


#: keystoneauth's own retries of the adapter: a second layer over nova-orphans' one
#: (``observe/retry.py``) would multiply the attempts, so the keys are refused.
KEYSTONEAUTH_RETRY_KEYS = (
    "connect_retries",
    "connect_retry_delay",
    "status_code_retries",
    "status_code_retry_delay",
    "retriable_status_codes",
)


def refuse_keystoneauth_retries(files: strict.ConfigFiles) -> None:
    """``ConfigError`` for a ``[nova]`` key of keystoneauth's retries: the tool retries every
    service itself, once (docs/design.md §8)."""
    for key in KEYSTONEAUTH_RETRY_KEYS:
        found = files.setting(NOVA_GROUP, key)
        if found is not None:
            path, section, value = found
            raise ConfigError(
                f"{path}: [{section}] {key} = {value.strip()} is not used: nova-orphans "
                "retries Nova, Placement, Cinder and Neutron itself (3 attempts), and a "
                "second layer would multiply them; remove it"
            )
