"""``audit`` and ``demo``: observe and classify one host; change nothing."""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
from typing import Any

from nova_orphans import audit, config
from nova_orphans.cli import common, configure
from nova_orphans.model import DangerKind
from nova_orphans.observe.hypervisor import LibvirtObserver
from nova_orphans.observe.nova.observer import LOOKUPS_AT_ONCE, NovaObserver
from nova_orphans.observe.nova.session import CredentialsMissing, KeystoneTransport
from nova_orphans.observe.nova.session import transport_from_conf as _transport
from nova_orphans.observe.services.client import KeystoneClient, sibling
from nova_orphans.observe.services.dangers import DangerObserver
from nova_orphans.observe.services.leftovers import LeftoverObserver
from nova_orphans.observe.services.placement import PlacementObserver
from nova_orphans.render import host as render_host


def transport_from_conf(conf: Any) -> KeystoneTransport:
    """Nova's transport from the config; missing credentials are a config error (exit 2).

    NOTE: Placement, Cinder and Neutron, unless ``[services]`` names their endpoints, are
    found in its catalog, in Nova's region: the transport refuses a catalog of several
    regions for any of them when none is named (exit 2).
    """
    services = config.SERVICES_GROUP
    asked = [
        catalog for option, _, catalog in config.SERVICE_ENDPOINTS if not conf[services][option]
    ]
    try:
        return _transport(conf, services=asked)
    except CredentialsMissing as exc:
        raise config.ConfigError(str(exc)) from exc


def services_from_conf(conf: Any, transport: Any) -> audit.Services | None:
    """Placement, Cinder and Neutron on Nova's session: ``[services]`` endpoints or the catalog.

    NOTE: a transport without a keystoneauth session (a simulated Nova) has no
    session to share: then no other service is asked.
    """
    if not isinstance(transport, KeystoneTransport):
        return None
    clients = {
        name: KeystoneClient(
            sibling(transport.adapter, catalog, conf[config.SERVICES_GROUP][option]),
            name,
            option,
            region=transport.region,
        )
        for option, name, catalog in config.SERVICE_ENDPOINTS
    }
    return audit.Services(
        PlacementObserver(clients["Placement"]),
        DangerObserver(clients["Cinder"], clients["Neutron"]),
        LeftoverObserver(clients["Neutron"], clients["Cinder"], clients["Placement"]),
    )


def run_audit(args: argparse.Namespace) -> int:
    """One read-only audit of this host."""
    conf = configure.load_conf(args)
    settings = config.host_settings(
        conf, host=args.host, libvirt_uri=args.libvirt_uri, check_uri=True
    )
    transport = transport_from_conf(conf)
    nova = NovaObserver(transport, lookups_at_once=LOOKUPS_AT_ONCE)
    with LibvirtObserver.open(settings.libvirt_uri) as hypervisor:
        result = audit.audit(
            hypervisor,
            nova,
            settings.host,
            common.now(),
            settings.deny,
            settings.compute_id_dirs,
            services=services_from_conf(conf, transport),
            pinned_node=settings.pinned_node,
            instances_path=settings.instances_path,
        )
    state = audit.read_journal(config.state_paths(conf).journal)
    policy = config.policy(conf)
    result, _ = audit.tell(
        result,
        state,
        policy,
        brake=audit.brake(result, policy),
        deny=settings.deny,
        host_instances_path=settings.host_instances_path,
        instances_path=settings.instances_path,
    )
    return show(dataclasses.replace(result, holds=state.holds), args)


def run_demo(args: argparse.Namespace) -> int:
    """Audit the embedded simulated cloud through the same pipeline."""
    from nova_orphans import demo

    configure.setup_logging(configure.logging_conf(), args)
    with tempfile.TemporaryDirectory(prefix="nova-orphans-demo-") as directory:
        cloud = demo.build(directory)
        with LibvirtObserver.open(cloud.libvirt_uri) as hypervisor:
            # NOTE: the simulated cloud lives at a fixed moment, so "now" is its clock.
            nova = NovaObserver(cloud.nova, retry=lambda call: call())
            result = cloud.looks(
                lambda now: audit.audit(
                    hypervisor,
                    nova,
                    cloud.host,
                    now,
                    compute_id_dirs=(str(cloud.state_path),),
                    services=cloud.services,
                    instances_path=cloud.instances_path,
                )
            )
    # NOTE: the demo lists each leftover with its command (or why none): the feature a
    # newcomer should see.
    return show(result, args, leftovers=True)


def show(result: audit.HostAudit, args: argparse.Namespace, leftovers: bool = False) -> int:
    """Print the report; exit 5 when a guest endangers a shared volume, 3 when it holds
    orphans, else 0.

    NOTE: a view whose identity no check could prove is still reported (the
    classification helps the operator), under one warning line on stderr: never
    a silent pass. A mismatch never gets here: it is an error (exit 1). Likewise a
    danger check Cinder or Neutron could not answer is one warning line, and its
    findings' danger is ``unknown``, never "none". A kind of leftover not checked is
    said in the report itself (its line, ``null`` in JSON), not on stderr: it endangers
    no guest (docs/design.md rule 21).
    """
    if not result.identity.verified:
        common.warn(result.identity.reason)
    unknown = {
        d.detail for f in result.findings for d in f.dangers or () if d.kind is DangerKind.UNKNOWN
    }
    if unknown:
        common.warn(
            f"danger unknown for {result.dangers(DangerKind.UNKNOWN)} "
            f"findings: {'; '.join(sorted(unknown))}"
        )
    if args.format == "json":
        print(render_host.render_json(result))
    else:
        listed = leftovers or getattr(args, "leftovers", False)
        print(render_host.render_table(result, args.wide, listed))
    return audit.exit_code(result)
