"""``[agent]``: what ``nova-orphans run`` may do, how cautiously, and where it keeps its state."""

from __future__ import annotations

from oslo_config import cfg

from nova_orphans.classify.nova_delta import FULL_LOOK_EVERY
from nova_orphans.config.default import UUIDItem
from nova_orphans.decide.policy import MAX_RETENTION_DAYS, STOP_TIMEOUT, Action, Policy
from nova_orphans.model import Kind, Selector

#: This host's live-agent lock: a fixed path on the host, so that every agent on it finds
#: the same file, whatever its configuration or container (docs/design.md rule 14).
LIVE_LOCK_FILE = "/run/nova-orphans/live.lock"
#: The agent's default cadence of full libvirt reads: one cycle in this many reads every
#: domain's XML afresh (an hour at the default interval); the cycles between read only
#: what changed (``observe/libvirt_view.py``).
LIBVIRT_FULL_LOOK_EVERY = 6
#: The cautious defaults of the agent's rules: the policy's own (one source of truth).
_POLICY = Policy()
#: The longest span in seconds an option takes (ten years), and the largest count: beyond
#: them a value is a typo, and one no clock or timer can hold (an OverflowError mid-cycle).
MAX_SECONDS_SPAN = 10 * 366 * 86400
MAX_COUNT = 1_000_000


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
        max=MAX_SECONDS_SPAN,
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
        max=MAX_COUNT,
        help="One cycle in this many lists every server Nova places on the host; the cycles "
        "between ask Nova only what changed since the last look (changes-since), so they "
        "cost Nova in proportion to the changes, not to the host's size. Any doubt (a failed "
        "cycle, a step skipped on re-verification, a domain gone that Nova does not explain, "
        "Nova's clock going back) makes the next cycle a full look. 1: every cycle.",
    ),
    cfg.IntOpt(
        "libvirt_full_look_every",
        default=LIBVIRT_FULL_LOOK_EVERY,
        min=1,
        # NOTE: one word for one concept: a look at libvirt, as at Nova (full_look_every).
        deprecated_opts=[cfg.DeprecatedOpt("full_read_every")],
        help="One cycle in this many looks at libvirt in full: it reads every domain's XML and "
        "Nova metadata; "
        "the cycles between keep the connection open and read afresh the bulk listing "
        "(state, usage), the jobs of running guests, and the XML of only the domains libvirt "
        "sent an event about or whose name, power state or disks the listing shows changed. "
        "Any doubt (a new or closed connection, an event loop that stopped answering, a "
        "failed read, a fresh look before a step that disagreed) makes the next cycle a full "
        "look; the look before a step is always fresh. 1: every cycle. (Formerly "
        "full_read_every.)",
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
        max=MAX_SECONDS_SPAN,
        help="Seconds a finding must exist before any step: for 'deleted' counted from "
        "Nova's deletion time, for the other kinds from the first sighting. What is left of "
        "it at the first sighting must also pass in agent cycles (see interval).",
    ),
    cfg.IntOpt(
        "sightings_required",
        default=_POLICY.sightings_required,
        min=1,
        max=MAX_COUNT,
        help="Consecutive cycles a finding must be seen, unchanged, before any step.",
    ),
    cfg.IntOpt(
        "reap_delay",
        default=int(_POLICY.reap_delay),
        min=0,
        max=MAX_SECONDS_SPAN,
        help="Seconds a guest stays stopped (recoverable in place) before it is reaped; it "
        "must also be seen stopped in as many cycles as this implies (see interval).",
    ),
    cfg.IntOpt(
        "stop_timeout",
        default=int(STOP_TIMEOUT),
        min=0,
        max=MAX_SECONDS_SPAN,
        help="Seconds to wait for a graceful shutdown before powering the guest off.",
    ),
    cfg.IntOpt(
        "max_actions_per_cycle",
        default=_POLICY.max_actions_per_cycle,
        min=0,
        max=MAX_COUNT,
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
        max=MAX_COUNT,
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
        leftover_sightings_required=conf.leftovers.sightings_required,
        leftover_grace_period=None
        if conf.leftovers.grace_period is None
        else float(conf.leftovers.grace_period),
    )
