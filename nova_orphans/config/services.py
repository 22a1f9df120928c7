"""``[services]``: Placement, Cinder and Neutron, asked through ``[nova]``'s session."""

from __future__ import annotations

from oslo_config import cfg

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
