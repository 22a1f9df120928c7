"""``[fleet]``: how ``fleet audit`` reaches every compute host and reads their reports."""

from __future__ import annotations

from oslo_config import cfg

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
        max=1024,
        help="How many hosts are scanned at the same time.",
    ),
    cfg.FloatOpt(
        "timeout",
        default=60.0,
        min=0.1,
        max=86400,
        help="Seconds one host's libvirt scan may take; a slower host is reported as "
        "unreachable (timed out), never as having no domains.",
    ),
    cfg.IntOpt(
        "report_max_age",
        default=1800,
        min=1,
        max=366 * 86400,
        help="'fleet audit --reports': seconds after which a host's report is stale (reported, "
        "never merged: a stale report never creates split-brain). Keep it above the agents' "
        "interval plus jitter, or above the period of the job that writes the reports.",
    ),
]
