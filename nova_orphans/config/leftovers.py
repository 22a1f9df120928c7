"""``[leftovers]``: when a leftover's command is told (docs/design.md rule 22)."""

from __future__ import annotations

from oslo_config import cfg

from nova_orphans.config.default import AbsolutePath

LEFTOVERS_GROUP = "leftovers"

leftovers_opts = [
    cfg.IntOpt(
        "sightings_required",
        min=1,
        max=1000,
        help="Looks a leftover must be seen in, with the same step, before its command is "
        "told (before that it is 'pending'). Default: [agent] sightings_required. The agent "
        "looks for leftovers with each full look at Nova ([agent] full_look_every cycles).",
    ),
    cfg.IntOpt(
        "grace_period",
        min=0,
        max=366 * 86400,
        help="Seconds from a leftover's first sighting before its command is told. "
        "Default: [agent] grace_period.",
    ),
    cfg.Opt(
        "host_instances_path",
        type=AbsolutePath(),
        help="instances_path as the host names it, when nova-orphans runs in a container "
        "that mounts it at another path (kolla: the nova_compute volume). Printed commands "
        "use it; in a container without it, instance directories are told without a command. "
        "An absolute path.",
    ),
]
