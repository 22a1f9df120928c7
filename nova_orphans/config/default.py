"""``[DEFAULT]``: the audited host, where nova-compute's config is, and what is never an orphan.

The options are few on purpose. Where a compute host already has them in its
``nova.conf`` (host name, instances path, libvirt URI) we read them from there
when told where it is, so the tool sees the host exactly as nova-compute does.
oslo.log's options (``debug``, ``log_file``…) share this group.
"""

from __future__ import annotations

import functools
import importlib.metadata
import logging
import os
import syslog
import uuid
from typing import Any

from oslo_config import cfg, types

from nova_orphans.config import strict
from nova_orphans.config.nova_compute import DEFAULT_INSTANCES_PATH, NOVA_STATE_PATH


class UUIDItem(types.String):
    """One item of a UUID list option (``deny_uuids``, ``allow_uuids``), made canonical."""

    def __init__(self) -> None:
        super().__init__(type_name="UUID")

    def __call__(self, value: Any) -> str:
        try:
            return str(uuid.UUID(str(value)))
        except ValueError:
            # NOTE: oslo.config's List retries a bad item joined with the next one
            # ("bad,next") and reports the last try; the first part is the culprit.
            raise ValueError(f"{str(value).split(',')[0].strip()!r} is not a UUID") from None


class AbsolutePath(types.String):
    """A path that must be absolute (``instances_path``).

    NOTE: a relative one would be taken from the working directory of whichever command
    reads it: another directory than nova-compute's, and a guest's files judged there.
    """

    def __call__(self, value: Any) -> str:
        path = str(super().__call__(value))
        if path and not os.path.isabs(path):
            raise ValueError("must be an absolute path")
        return path


default_opts = [
    cfg.StrOpt(
        "host",
        help="Name of this compute host as Nova knows it (nova-compute's [DEFAULT] host). "
        "Default: nova-compute's, read from its config (nova_config_file, nova_config_dir), "
        "else this machine's host name (as nova-compute's default).",
    ),
    cfg.ListOpt(
        "nova_config_file",
        default=[],
        help="The config files nova-compute is started with, in the same order (later files "
        "win), e.g. /etc/nova/nova.conf,/etc/nova/nova-compute.conf. host, instances_path and "
        "the libvirt connection URI then default to nova-compute's own values (its "
        "interpolation and defaults: instances_path = $state_path/instances, connection_uri "
        "from [libvirt] virt_type), and nova-compute's compute_id is looked for next to these "
        "files and under its state_path too.",
    ),
    cfg.Opt(
        "compute_node_uuid",
        type=UUIDItem(),
        help="The UUID of Nova's compute node of this host (openstack hypervisor show), "
        "pinned. Names (host, hypervisor hostname and type) are no proof that Nova's node "
        "is this machine: another cloud or region can have a compute of the same names. "
        "Nothing is acted on until a node UUID found on this machine proves it: "
        "nova-compute's compute_id file (looked for next to nova_config_file, under its "
        f"state_path, in {NOVA_STATE_PATH} and in kolla-ansible's nova_compute volume) or "
        "this option; when both are there, both must name the node.",
    ),
    cfg.ListOpt(
        "nova_config_dir",
        default=[],
        help="The config directories nova-compute is started with (its --config-dir, as kolla "
        "and OpenStack-Ansible lay them out): their ``*.conf`` files are read in name order, after "
        "nova_config_file.",
    ),
    cfg.Opt(
        "instances_path",
        type=AbsolutePath(),
        help="Where Nova keeps instance directories, an absolute path. Default: nova-compute's "
        f"(from its config, else {DEFAULT_INSTANCES_PATH}). Give the real path: files are "
        "never moved through a symlink, so a symlinked instances path means files are left in "
        "place and reported.",
    ),
    cfg.ListOpt(
        "deny_uuids",
        item_type=UUIDItem(),
        default=[],
        help="Instance/domain UUIDs that are never treated as orphans (reported as protected).",
    ),
    cfg.ListOpt(
        "deny_name_patterns",
        default=[],
        help="Shell-style patterns of domain names that are never treated as orphans, "
        "e.g. ``test-*``.",
    ),
]


@functools.lru_cache(maxsize=1)
def logging_opts() -> tuple[cfg.Opt, ...]:
    """oslo.log's options (``debug``, ``log_file``, ``use_journal``…), as every service has.

    NOTE: taken from oslo.log's ``oslo.config.opts`` entry point, the list its own
    sample-config namespace (``oslo.log``) documents. Looked up once per process:
    each lookup reads every installed distribution's entry points (start-up time of
    a cold CLI run).
    """
    (entry,) = importlib.metadata.entry_points(group="oslo.config.opts", name="oslo.log")
    return tuple(opt for _, opts in entry.load()() for opt in opts)


#: oslo.log's options that are %-style format strings, read only when a line is logged.
LOG_FORMATS = (
    "logging_context_format_string",
    "logging_default_format_string",
    "logging_debug_format_suffix",
    "logging_exception_prefix",
    "logging_user_identity_format",
    "instance_format",
    "instance_uuid_format",
)


#: oslo.log's numbers and their least values (oslo.log sets no bounds: a rotation every 0
#: units or at 0 MB would rotate at each line).
LOG_NUMBERS = {
    "log_rotate_interval": 1,
    "max_logfile_count": 1,
    "max_logfile_size_mb": 1,
    "rate_limit_interval": 0,
    "rate_limit_burst": 0,
}


def check_logging(conf: cfg.ConfigOpts, files: strict.ConfigFiles) -> None:
    """oslo.log's options that oslo.config cannot check, checked at load: each
    ``default_log_levels`` entry ``logger=LEVEL``, the syslog facility, the format strings.

    NOTE: oslo.log reads them when it is set up or when a line is logged: a bad entry
    was an unexpected error (exit 1, a restart loop under systemd), a bad format a
    "--- Logging error ---" on stderr at the first line logged.
    """
    opts = {opt.dest: opt for opt in logging_opts()}

    def refuse(name: str, reason: str) -> strict.ConfigError:
        return strict.ConfigError(
            f"{files.where(strict.DEFAULT_GROUP, opts[name])} is not valid: {reason}"
        )

    for entry in conf.default_log_levels or ():
        logger, equals, level = entry.partition("=")
        if not equals or not logger.strip() or not isinstance(logging.getLevelName(level), int):
            raise refuse(
                "default_log_levels",
                f"{entry!r} should be logger=LEVEL (LEVEL one of DEBUG, INFO, WARNING, ERROR, "
                "CRITICAL)",
            )
    facility = conf.syslog_log_facility.upper()
    facility = facility if facility.startswith("LOG_") else f"LOG_{facility}"
    if not isinstance(getattr(syslog, facility, None), int):
        raise refuse("syslog_log_facility", "should be a syslog facility such as LOG_USER")
    for name, least in LOG_NUMBERS.items():
        if conf[name] < least:
            raise refuse(name, f"should be at least {least}")
    for name in LOG_FORMATS:
        value = conf[name]
        try:
            _ = value % _AnyField() if value else None
        except (TypeError, ValueError, KeyError) as exc:
            raise refuse(name, f"not a %-format string: {exc}") from None


class _AnyField(dict[str, int]):
    """A record whose every field is 0: a format string formats it, or is malformed."""

    def __missing__(self, key: str) -> int:
        return 0
