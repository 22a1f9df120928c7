"""``[metrics]``: the Prometheus endpoint and the node-exporter textfile."""

from __future__ import annotations

from oslo_config import cfg

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
