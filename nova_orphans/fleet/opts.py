"""The ``[fleet]`` configuration options, for the fleet audit and oslo-config-generator."""

from __future__ import annotations

from oslo_config import cfg

GROUP = "fleet"
DEFAULT_URI_TEMPLATE = "qemu+ssh://{host}/system"

fleet_opts = [
    cfg.StrOpt(
        "uri_template",
        default=DEFAULT_URI_TEMPLATE,
        help="Libvirt URI of each compute host; '{host}' is replaced by the host name as Nova "
        "knows it, e.g. qemu+tls://{host}/system.",
    ),
    cfg.IntOpt(
        "concurrency",
        default=16,
        min=1,
        help="How many hosts are scanned at the same time.",
    ),
    cfg.FloatOpt(
        "timeout",
        default=60.0,
        min=0.1,
        help="Seconds one host's libvirt scan may take; a slower host is reported as "
        "unreachable (timed out), never as having no domains.",
    ),
]


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    """The ``[fleet]`` options, for oslo-config-generator."""
    return [(GROUP, list(fleet_opts))]


def register(conf: cfg.ConfigOpts) -> None:
    """Register the ``[fleet]`` options on ``conf`` (again is harmless)."""
    conf.register_opts(fleet_opts, group=GROUP)
