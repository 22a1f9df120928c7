"""Every group of ours and its options: for oslo-config-generator and for the strict loader."""

from __future__ import annotations

from collections.abc import Sequence

from oslo_config import cfg

from nova_orphans.config import agent, default, fleet, leftovers, libvirt, metrics, nova, services
from nova_orphans.config.strict import DEFAULT_GROUP


def list_opts() -> list[tuple[str | None, list[cfg.Opt]]]:
    """All options, for oslo-config-generator (namespace ``nova_orphans``)."""
    return [
        (None, list(default.default_opts)),
        ("libvirt", list(libvirt.libvirt_opts)),
        ("agent", list(agent.agent_opts)),
        ("metrics", list(metrics.metrics_opts)),
        ("fleet", list(fleet.fleet_opts)),
        (leftovers.LEFTOVERS_GROUP, list(leftovers.leftovers_opts)),
        (nova.NOVA_GROUP, nova.sample_opts()),
        (services.SERVICES_GROUP, list(services.services_opts)),
    ]


def groups(nova_plugin_opts: Sequence[cfg.Opt]) -> dict[str, list[cfg.Opt]]:
    """Every group of ours and its options, as a config file names them.

    ``nova_plugin_opts`` are the options of the keystoneauth plugin ``[nova]``
    uses; they exist only once ``auth_type`` is known.
    """
    return {
        DEFAULT_GROUP: [*default.default_opts, *default.logging_opts()],
        "libvirt": list(libvirt.libvirt_opts),
        "agent": list(agent.agent_opts),
        "metrics": list(metrics.metrics_opts),
        "fleet": list(fleet.fleet_opts),
        leftovers.LEFTOVERS_GROUP: list(leftovers.leftovers_opts),
        nova.NOVA_GROUP: nova.file_opts(nova_plugin_opts),
        services.SERVICES_GROUP: list(services.services_opts),
    }
