"""The audited host's settings: the command line wins, then ours, then nova-compute's."""

from __future__ import annotations

import dataclasses

from oslo_config import cfg

from nova_orphans.config.libvirt import check_libvirt_uri
from nova_orphans.config.nova_compute import NovaComputeConf, compute_id_dirs
from nova_orphans.config.strict import ConfigError
from nova_orphans.model import Selector


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
    #: ``[leftovers] host_instances_path``: ``instances_path`` as the host names it.
    host_instances_path: str | None = None


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
        host_instances_path=conf.leftovers.host_instances_path,
    )
