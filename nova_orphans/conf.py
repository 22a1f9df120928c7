"""Configuration: oslo.config options, the sample-config entry point, and loading.

The options are few on purpose. Where a compute host already has them in its
``nova.conf`` (host name, instances path, libvirt URI) we read them from there
when told where it is, so the tool sees the host exactly as nova-compute does.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import functools
import importlib.metadata
import os
import socket
import uuid
from collections.abc import Sequence
from typing import Any

from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading
from oslo_config import cfg, types
from oslo_log import log as oslo_log

from nova_orphans import config_check
from nova_orphans.config_check import ConfigError as ConfigError
from nova_orphans.core.leftovers import DEFAULT_INSTANCES_PATH, NOVA_STATE_PATH
from nova_orphans.core.model import Kind, Selector
from nova_orphans.core.nova_delta import FULL_LOOK_EVERY
from nova_orphans.core.policy import MAX_RETENTION_DAYS, STOP_TIMEOUT, Action, Policy
from nova_orphans.exceptions import one_line

NOVA_GROUP = "nova"
#: This host's live-agent lock: a fixed path on the host, so that every agent on it finds
#: the same file, whatever its configuration or container (docs/design.md rule 14).
LIVE_LOCK_FILE = "/run/nova-orphans/live.lock"
#: The cautious defaults of the agent's rules: the policy's own (one source of truth).
_POLICY = Policy()


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
    cfg.StrOpt(
        "instances_path",
        help="Where Nova keeps instance directories. Default: nova-compute's "
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

libvirt_opts = [
    cfg.StrOpt(
        "connection_uri",
        help="Libvirt URI of this host's hypervisor. Default: nova-compute's (its [libvirt] "
        "connection_uri, else the one its virt_type implies: qemu:///system for kvm and qemu).",
    ),
]

ACTION_CHOICES = [
    ("log", "only report it (the default)"),
    ("stop", "shut the guest down (then power it off); it stays defined, its disk untouched"),
    (
        "reap",
        "stop first; after reap_delay quarantine its XML (and files, where allowed) and "
        "undefine it; reversible with 'nova-orphans restore'",
    ),
]

agent_opts = [
    cfg.StrOpt(
        "action_deleted",
        default="log",
        choices=ACTION_CHOICES,
        help="What to do with guests whose server Nova deleted (row not archived).",
    ),
    cfg.StrOpt(
        "action_unknown",
        default="log",
        choices=ACTION_CHOICES,
        help="What to do with guests carrying Nova metadata that Nova has no record of.",
    ),
    cfg.StrOpt(
        "action_misplaced",
        default="log",
        choices=ACTION_CHOICES,
        help="What to do with duplicates of servers Nova runs on another host. Reap "
        "only undefines them; their files are never touched.",
    ),
    cfg.IntOpt(
        "interval",
        default=int(_POLICY.interval),
        min=10,
        help="Seconds between two cycles of 'nova-orphans run'. grace_period and reap_delay "
        "also need the cycles they imply (delay / interval, rounded up), so a wall-clock "
        "step (NTP) cannot shorten them; a cycle less than half an interval after the "
        "previous one (an agent restarted in a loop, a clock stepped back) does not count "
        "as a sighting.",
    ),
    cfg.FloatOpt(
        "jitter",
        default=0.1,
        min=0,
        max=1,
        help="Random fraction of interval added to each wait, so hosts do not all "
        "ask Nova at the same moment.",
    ),
    cfg.IntOpt(
        "full_look_every",
        default=FULL_LOOK_EVERY,
        min=1,
        help="One cycle in this many lists every server Nova places on the host; the cycles "
        "between ask Nova only what changed since the last look (changes-since), so they "
        "cost Nova in proportion to the changes, not to the host's size. Any doubt (a failed "
        "cycle, a step skipped on re-verification, a domain gone that Nova does not explain, "
        "Nova's clock going back) makes the next cycle a full look. 1: every cycle.",
    ),
    cfg.BoolOpt(
        "dry_run",
        default=False,
        help="Decide and journal as usual, but change nothing (what would be done is "
        "logged and journaled with dry_run=true). A dry run keeps its own journal "
        "(<journal_path>.dry-run, shown by 'nova-orphans history'), so it may run beside the "
        "live agent and never advances its sightings, grace or caps.",
    ),
    cfg.IntOpt(
        "grace_period",
        default=int(_POLICY.grace_period),
        min=0,
        help="Seconds a finding must exist before any step: for 'deleted' counted from "
        "Nova's deletion time, for the other kinds from the first sighting. What is left of "
        "it at the first sighting must also pass in agent cycles (see interval).",
    ),
    cfg.IntOpt(
        "sightings_required",
        default=_POLICY.sightings_required,
        min=1,
        help="Consecutive cycles a finding must be seen, unchanged, before any step.",
    ),
    cfg.IntOpt(
        "reap_delay",
        default=int(_POLICY.reap_delay),
        min=0,
        help="Seconds a guest stays stopped (recoverable in place) before it is reaped; it "
        "must also be seen stopped in as many cycles as this implies (see interval).",
    ),
    cfg.IntOpt(
        "stop_timeout",
        default=int(STOP_TIMEOUT),
        min=0,
        help="Seconds to wait for a graceful shutdown before powering the guest off.",
    ),
    cfg.IntOpt(
        "max_actions_per_cycle",
        default=_POLICY.max_actions_per_cycle,
        min=0,
        help="Destructive steps per cycle, at most.",
    ),
    cfg.FloatOpt(
        "max_orphan_fraction",
        default=_POLICY.max_orphan_fraction,
        min=0,
        max=1,
        help="When more than this fraction of the host's Nova guests look orphaned, "
        "the cycle only reports (something is probably wrong with Nova's answer).",
    ),
    cfg.IntOpt(
        "brake_min_orphans",
        default=_POLICY.brake_min_orphans,
        min=1,
        help="The orphan-fraction brake applies from this many actionable orphans on.",
    ),
    cfg.ListOpt(
        "allow_uuids",
        item_type=UUIDItem(),
        default=[],
        help="When set (with allow_name_patterns), only these guests may be acted on.",
    ),
    cfg.ListOpt(
        "allow_name_patterns",
        default=[],
        help="Shell-style domain-name patterns of guests that may be acted on.",
    ),
    cfg.StrOpt(
        "state_dir",
        default="/var/lib/nova-orphans",
        help="Where the journal and the quarantine live by default.",
    ),
    cfg.StrOpt(
        "journal_path",
        help="SQLite journal. Default: <state_dir>/journal.sqlite. One 'nova-orphans run' "
        "at a time holds it (lock file <journal_path>.lock, beside the journal's real path, "
        "symlinks resolved); a second one exits with 2.",
    ),
    cfg.StrOpt(
        "live_lock_file",
        default=LIVE_LOCK_FILE,
        help="This host's live-agent lock: every live 'nova-orphans run' on the host, whatever "
        "its state_dir, takes it, so one live agent drives this host's libvirt (a second "
        "exits with 2 naming the holder); dry runs do not take it. It must be the same file "
        "for every agent on the host: a container bind-mounts the host's /run/nova-orphans. "
        "Change it only for tests.",
    ),
    cfg.StrOpt("quarantine_dir", help="Quarantine (mode 0700). Default: <state_dir>/quarantine."),
    cfg.BoolOpt(
        "allow_shared_storage_reap",
        default=False,
        help="Also move instance directories that are not on a local file system type "
        "(ext2/3/4, xfs, btrfs, zfs, tmpfs, f2fs, jfs, reiserfs, bcachefs, overlay). Every "
        "other type (NFS, CephFS, GlusterFS, Lustre, WekaFS, VxFS, FUSE…) counts as shared. "
        "Off: their files are left in place and reported.",
    ),
    cfg.IntOpt(
        "quarantine_retention_days",
        default=0,
        min=0,
        # NOTE: a span no date can hold would crash every cycle after its steps ran.
        max=MAX_RETENTION_DAYS,
        help="Purge quarantine entries older than this many days at each cycle; "
        "0 keeps them until 'nova-orphans purge'.",
    ),
    cfg.BoolOpt(
        "stop_shared_volume_at_once",
        default=_POLICY.stop_shared_volume_at_once,
        help="Stop at once, without waiting for grace_period or sightings_required, a "
        "'deleted' guest that holds a Cinder volume another server is attached to, or that "
        "Cinder offers as available (a shared-volume danger: two writers on one disk). "
        "Whatever action_deleted says; the stop goes through the same re-verification "
        "(Cinder is asked again) and journal as any step. Off: such a guest waits like any other.",
    ),
    cfg.StrOpt(
        "report_file",
        help="After each cycle that observed the host, write its audit report here (the "
        "JSON of 'audit --format json', replaced atomically) for 'fleet audit --reports'. "
        "A cycle that fails writes nothing, so the report ages and the fleet calls it stale.",
    ),
]

metrics_opts = [
    cfg.HostAddressOpt(
        "bind_address", default="127.0.0.1", help="Address of the Prometheus metrics endpoint."
    ),
    cfg.PortOpt("port", default=0, help="Port of the Prometheus metrics endpoint; 0 turns it off."),
    cfg.StrOpt(
        "textfile",
        help="Write metrics to this file after each cycle (node-exporter textfile "
        "collector), e.g. /var/lib/node_exporter/nova_orphans.prom.",
    ),
]

SERVICES_GROUP = "services"
#: The services asked beside Nova, through [nova]'s session: (option, what, catalog type).
SERVICE_ENDPOINTS = (
    ("placement_endpoint", "Placement", "placement"),
    ("volume_endpoint", "Cinder", "block-storage"),
    ("network_endpoint", "Neutron", "network"),
)

services_opts = [
    cfg.URIOpt(
        option,
        schemes=["http", "https"],
        help=f"Endpoint of {name}, asked through [nova]'s session and token. Default: the "
        f"service catalog's ({catalog}) endpoint, with [nova]'s interface and region. "
        + {
            "Placement": "Placement's inventory and usages of this host are set beside what "
            "the guests Nova does not manage here consume.",
            "Cinder": "An orphan's disk that is a Cinder volume is looked up: attached to "
            "another server, or available, it is a shared-volume danger.",
            "Neutron": "An orphan's MAC addresses are looked up: a port of another server "
            "with one of them is an address-conflict danger.",
        }[name],
    )
    for option, name, catalog in SERVICE_ENDPOINTS
]

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
    cfg.IntOpt(
        "report_max_age",
        default=1800,
        min=1,
        help="'fleet audit --reports': seconds after which a host's report is stale (reported, "
        "never merged: a stale report never creates split-brain). Keep it above the agents' "
        "interval plus jitter, or above the period of the job that writes the reports.",
    ),
]

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


def list_opts() -> list[tuple[str | None, list[cfg.Opt]]]:
    """All options, for oslo-config-generator (namespace ``nova_orphans``)."""
    nova_section: list[cfg.Opt] = [*nova_opts, *_dedup(_nova_ksa_opts())]
    return [
        (None, list(default_opts)),
        ("libvirt", list(libvirt_opts)),
        ("agent", list(agent_opts)),
        ("metrics", list(metrics_opts)),
        ("fleet", list(fleet_opts)),
        (NOVA_GROUP, nova_section),
        (SERVICES_GROUP, list(services_opts)),
    ]


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


def _groups(nova_plugin_opts: Sequence[cfg.Opt]) -> dict[str, list[cfg.Opt]]:
    """Every group of ours and its options, as a config file names them.

    ``nova_plugin_opts`` are the options of the keystoneauth plugin ``[nova]``
    uses; they exist only once ``auth_type`` is known.
    """
    return {
        config_check.DEFAULT_GROUP: [*default_opts, *logging_opts()],
        "libvirt": list(libvirt_opts),
        "agent": list(agent_opts),
        "metrics": list(metrics_opts),
        "fleet": list(fleet_opts),
        NOVA_GROUP: [*nova_opts, *_nova_ksa_opts(plugins=()), *nova_plugin_opts],
        SERVICES_GROUP: list(services_opts),
    }


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


def register(conf: cfg.ConfigOpts) -> None:
    """Register every option of this tool on ``conf`` (the auth plugin's come with ``load``)."""
    oslo_log.register_options(conf)
    # NOTE: oslo.log registers fatal_deprecations only on first use; the strict check reads it.
    conf.register_opts(logging_opts())
    for group, opts in _groups(()).items():
        if group == config_check.DEFAULT_GROUP:
            conf.register_opts(default_opts)
        else:
            conf.register_opts(opts, group=group)
    for name, value in NOVA_DEFAULTS.items():
        conf.set_default(name, value, group=NOVA_GROUP)


def load(config_files: Sequence[str]) -> cfg.ConfigOpts:
    """Parse our config files strictly (docs/design.md rule 11); raises ``ConfigError``.

    Before anything else runs: every group and key must be ours, every value is
    read and checked, and so are the settings built from them (the agent's
    policy, the host settings, the metrics textfile). ``audit``, ``run`` and
    every other command load their configuration here, so they all accept and
    refuse the same files.
    """
    conf = cfg.ConfigOpts()
    register(conf)
    for path in config_files:
        _require_readable(path)
    conf(args=[], project="nova-orphans", default_config_files=list(config_files))
    files = config_check.ConfigFiles(conf)
    plugin_opts = _auth_plugin_opts(files)
    conf.register_opts(plugin_opts, group=NOVA_GROUP)
    groups = _groups(plugin_opts)
    files.check_keys(groups)
    files.check_values(conf, groups)
    policy(conf)
    host_settings(conf)
    if conf.metrics.textfile:
        where = files.where("metrics", next(o for o in metrics_opts if o.dest == "textfile"))
        config_check.writable_file(conf.metrics.textfile, where)
    return conf


def _auth_plugin_opts(files: config_check.ConfigFiles) -> list[cfg.Opt]:
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
            name, ks_loading.get_available_plugin_names(), n=1, cutoff=config_check.NEAR
        )
        hint = f"; did you mean {known[0]}?" if known else ""
        raise ConfigError(
            f"{path}: [{section}] auth_type = {name} is not a keystoneauth plugin{hint}"
        ) from None


def _require_readable(path: str) -> None:
    try:
        with open(path, encoding="utf-8"):
            pass
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc


@dataclasses.dataclass(frozen=True)
class HostSettings:
    """Where and what to audit, resolved from our config, nova.conf and the command line."""

    host: str
    libvirt_uri: str
    instances_path: str
    deny: Selector
    #: Where nova-compute's ``compute_id`` may be (its config files' directories, its
    #: state_path, then ``NOVA_STATE_DIRS``).
    compute_id_dirs: tuple[str, ...] = ()
    #: ``[DEFAULT] compute_node_uuid``: Nova's node of this host, as the operator pinned it.
    pinned_node: str | None = None


#: Where nova-compute keeps its state on a compute host when its config is not named
#: (and where kolla keeps it whatever its nova.conf says): the packages' state_path, and
#: kolla-ansible's ``nova_compute`` named volume (mounted on /var/lib/nova in the
#: nova_compute container) under Docker and under Podman.
NOVA_STATE_DIRS_DEFAULT: tuple[str, ...] = (
    NOVA_STATE_PATH,
    "/var/lib/docker/volumes/nova_compute/_data",
    "/var/lib/containers/storage/volumes/nova_compute/_data",
)
#: NOTE: what is searched; tests point it at scratch directories.
NOVA_STATE_DIRS = NOVA_STATE_DIRS_DEFAULT


def compute_id_dirs(nova: NovaComputeConf) -> tuple[str, ...]:
    """Every directory nova-compute's ``compute_id`` may be in on this machine.

    NOTE: found even without ``nova_config_file`` (it is optional): the proof of
    identity must not depend on it (docs/design.md rule 10). nova's packaged
    default state_path is the first of ``NOVA_STATE_DIRS``.
    """
    own = [d for d in nova.compute_id_dirs if d != NOVA_STATE_PATH]
    return tuple(dict.fromkeys([*own, *NOVA_STATE_DIRS]))


def host_settings(
    conf: cfg.ConfigOpts,
    host: str | None = None,
    libvirt_uri: str | None = None,
    check_uri: bool = False,
) -> HostSettings:
    """Resolve the audited host's settings: the command line wins, then ours, then nova-compute's.

    nova-compute's values come from the files and directories it reads, with its
    interpolation and defaults (``NovaComputeConf``); without any, its defaults alone.
    """
    if host is not None and not host.strip():
        raise ConfigError("--host must not be empty")
    if libvirt_uri is not None and not libvirt_uri.strip():
        raise ConfigError("--libvirt-uri must not be empty")
    nova = NovaComputeConf.read(conf.nova_config_file, conf.nova_config_dir)
    uri = libvirt_uri or conf.libvirt.connection_uri or nova.connection_uri
    if check_uri:
        # NOTE: the commands that open libvirt check its URI; the simulation's own
        # scheme (sim://) never reaches libvirt.
        check_libvirt_uri(uri)
    return HostSettings(
        host=host or conf.host or nova.host,
        libvirt_uri=uri,
        instances_path=conf.instances_path or nova.instances_path,
        deny=Selector(frozenset(conf.deny_uuids), tuple(conf.deny_name_patterns)),
        compute_id_dirs=compute_id_dirs(nova),
        pinned_node=conf.compute_node_uuid,
    )


#: libvirt's hypervisor drivers (the scheme of a URI, before any "+transport").
LIBVIRT_DRIVERS = frozenset(
    [
        *("bhyve", "ch", "esx", "gsx", "hyperv", "libxl", "lxc", "openvz", "parallels", "qemu"),
        *("test", "uml", "vbox", "vmwarefusion", "vmwareplayer", "vmwarews", "vpx", "vz", "xen"),
    ]
)
#: libvirt's remote transports ("qemu+ssh://").
LIBVIRT_TRANSPORTS = frozenset(["ext", "libssh", "libssh2", "ssh", "tcp", "tls", "unix"])


def check_libvirt_uri(uri: str) -> None:
    """Refuse a libvirt URI libvirt would misread; raises ``ConfigError`` naming the problem.

    NOTE: libvirt takes an unknown scheme, or ``test://file.xml``, for a remote
    host and fails with an unrelated TLS message ("Cannot read CA certificate").
    """
    scheme, sep, rest = uri.partition("://")
    driver, _, transport = scheme.partition("+")
    if not sep or driver not in LIBVIRT_DRIVERS:
        known = ", ".join(sorted(LIBVIRT_DRIVERS))
        raise ConfigError(
            f"libvirt URI {uri!r}: {driver or uri!r} is not a libvirt driver "
            f"(driver[+transport]://[host]/path with a driver of {known})"
        )
    if transport and transport not in LIBVIRT_TRANSPORTS:
        raise ConfigError(
            f"libvirt URI {uri!r}: {transport!r} is not a libvirt transport "
            f"({', '.join(sorted(LIBVIRT_TRANSPORTS))})"
        )
    if driver == "test" and not transport and not rest.startswith("/"):
        raise ConfigError(
            f"libvirt URI {uri!r}: the test driver takes an absolute file "
            "(test:///ABSOLUTE/PATH.xml) or test:///default"
        )


#: The libvirt URI nova-compute connects to for each [libvirt] virt_type when connection_uri
#: is unset (nova/virt/libvirt/driver.py ``_uri()``); every other type: qemu:///system.
VIRT_TYPE_URIS = {
    "lxc": "lxc:///",
    "parallels": "parallels:///system",
    "uml": "uml:///system",
    "xen": "xen:///",
}
QEMU_URI = "qemu:///system"


@dataclasses.dataclass(frozen=True)
class NovaComputeConf:
    """The few nova-compute settings we share, as nova-compute itself resolves them."""

    host: str
    state_path: str
    instances_path: str
    connection_uri: str
    compute_id_dirs: tuple[str, ...]

    @classmethod
    def read(cls, files: Sequence[str], dirs: Sequence[str]) -> NovaComputeConf:
        """Read ``files`` then ``dirs``' ``*.conf`` as ``nova-compute --config-file --config-dir``.

        Only ``host``, ``state_path``, ``instances_path`` and ``[libvirt]``
        ``connection_uri``/``virt_type`` are read, with nova's defaults and ``$name``
        interpolation; everything else in nova's files is not ours and is ignored.
        Raises ``ConfigError`` (one line) for an unreadable file or directory, or a
        ``$reference`` to an option nova-orphans does not read.
        """
        for path in files:
            _require_readable(path)
        for path in dirs:
            if not os.path.isdir(path):
                raise ConfigError(f"nova_config_dir {path} is not a readable directory")
        nova = cfg.ConfigOpts()
        nova.register_opts(
            [
                cfg.StrOpt("host", default=socket.gethostname()),
                cfg.StrOpt("state_path", default=NOVA_STATE_PATH),
                cfg.StrOpt("instances_path", default="$state_path/instances"),
            ]
        )
        nova.register_opts(
            [cfg.StrOpt("connection_uri", default=""), cfg.StrOpt("virt_type", default="kvm")],
            group="libvirt",
        )
        where = ", ".join([*files, *dirs]) or "nova's defaults"
        try:
            # NOTE: default_config_dirs=[] and files=[]: never oslo's search of ~/.nova,
            # /etc/nova and nova.conf.d; only what the operator named is read.
            nova(
                args=[],
                project="nova",
                prog="nova-compute",
                default_config_files=list(files),
                default_config_dirs=list(dirs),
            )
            libvirt = nova.libvirt
            return cls(
                host=nova.host,
                state_path=nova.state_path,
                instances_path=nova.instances_path,
                connection_uri=libvirt.connection_uri
                or VIRT_TYPE_URIS.get(libvirt.virt_type, QEMU_URI),
                compute_id_dirs=(
                    *(os.path.dirname(os.path.abspath(f)) for f in files),
                    nova.state_path,
                )
                if files or dirs
                else (),
            )
        except cfg.TemplateSubstitutionError as exc:
            raise ConfigError(f"nova-compute config ({where}): {exc.msg}") from exc
        except cfg.NoSuchOptError as exc:
            # NOTE: oslo.config names the option being read, not the unknown $reference
            # in its value; that one is the error it caught.
            inner = exc.__context__ if isinstance(exc.__context__, cfg.NoSuchOptError) else exc
            raise ConfigError(
                f"nova-compute config ({where}): {exc.opt_name} refers to "
                f"${inner.opt_name}, an option "
                "nova-orphans does not read (only host, state_path, instances_path and "
                "[libvirt] connection_uri, virt_type)"
            ) from exc
        except cfg.Error as exc:
            raise ConfigError(f"nova-compute config ({where}): {one_line(exc)}") from exc


def policy(conf: cfg.ConfigOpts) -> Policy:
    """The decider's rules from the ``[agent]`` section."""
    agent = conf.agent
    return Policy(
        actions={
            Kind.DELETED: Action(agent.action_deleted),
            Kind.UNKNOWN: Action(agent.action_unknown),
            Kind.MISPLACED: Action(agent.action_misplaced),
        },
        grace_period=float(agent.grace_period),
        sightings_required=agent.sightings_required,
        reap_delay=float(agent.reap_delay),
        max_actions_per_cycle=agent.max_actions_per_cycle,
        max_orphan_fraction=agent.max_orphan_fraction,
        brake_min_orphans=agent.brake_min_orphans,
        allow=Selector(frozenset(agent.allow_uuids), tuple(agent.allow_name_patterns)),
        interval=float(agent.interval),
        stop_shared_volume_at_once=agent.stop_shared_volume_at_once,
    )


@dataclasses.dataclass(frozen=True)
class StatePaths:
    """Where the agent keeps its journal and its quarantine."""

    journal: str
    quarantine: str
    #: A dry run's own journal, so that it never advances the live agent's sightings,
    #: grace or caps (docs/design.md rule 14); ``history`` shows both.
    dry_run_journal: str


def state_paths(conf: cfg.ConfigOpts) -> StatePaths:
    """The journal and quarantine paths, defaulting under ``state_dir``."""
    agent = conf.agent
    journal = agent.journal_path or os.path.join(agent.state_dir, "journal.sqlite")
    return StatePaths(
        journal=journal,
        quarantine=agent.quarantine_dir or os.path.join(agent.state_dir, "quarantine"),
        dry_run_journal=f"{journal}.dry-run",
    )
