"""Invariant 16, told steps: no command the agent prints removes anything in use.

Each command of a cycle's told leftovers (``CycleResult.report.leftovers``) is read as
the operator pastes it and judged against the simulated world at the moment the cycle
tells it (Neutron's ports, Cinder's attachments and connectors, Placement's providers and
allocations, the host's domains, instance directories and quarantine, Nova's rows and
migrations), never against the product's own reasoning:

- no command at all from a cycle whose identity is not proven, under a brake, whose config
  names another host, libvirt or cloud, or whose leftovers were not looked for in this
  cycle (carried from an earlier look); none for a server on hold, deny-listed by UUID or
  with a live quarantine entry (the journal's, or a guest the agent undefined and no
  restore or purge took back);
- ``rm -r``: only ``<instances_path>/<uuid>``, and never of a server whose domain is
  defined here, that Nova manages here (a live row on this host, SOFT_DELETED included) or
  moves to or from this host, or that a quarantine needs;
- a port: never ``port delete``; none for a port no server of Nova's owns (a container's,
  a device Nova never knew, an owner naming no zone of Nova's), nor one whose active
  binding is not this host, nor one whose server's domain is here or that Nova moves; for a
  live server only ``port set --host <the host Nova runs it on>``, or ``port unset --host``
  when that host is not this one; for a deleted one only ``port unset --host``;
- an attachment delete: never of a live server's attachment, nor one Cinder made through
  another host's connector (or none), nor one attaching or detaching, nor one whose
  server's domain is here;
- an allocation unset: only on the provider whose UUID is this host's compute node, never
  of a migration in progress, and never of a server that is live on this host, that Nova
  moves to or from this host, or whose domain is here (a migration's allocation serves
  that migration only: it is judged by the migration, and is its server's while Nova
  shows the migration).

``heal_allocations`` adds and ``placement audit`` (without ``--delete``) only reads, so only
the rules of the first point and the proven provider apply to them.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
from collections.abc import Iterable
from typing import TYPE_CHECKING

from nova_orphans.audit import HostAudit
from nova_orphans.classify.leftover import Leftover, LeftoverKind
from nova_orphans.fakes.nova_views import SimServer
from nova_orphans.sim.cloud import HOST, Cloud
from nova_orphans.sim.services import World
from nova_orphans.sim.truth import BUSY_MIGRATION

if TYPE_CHECKING:
    from nova_orphans.sim.play import Run

TOLD = "16-told"
ATTACHING = frozenset({"attaching", "detaching"})


@dataclasses.dataclass(frozen=True)
class Moment:
    """What holds when a cycle tells its leftovers, besides the world itself."""

    world: World
    #: Servers on hold (the simulation's own tracking and the journal's), deny-listed by
    #: UUID, and with a live quarantine entry (the journal's, or a guest the agent
    #: undefined that no restore or purge has taken back since).
    held: frozenset[str]
    denied: frozenset[str]
    quarantined: frozenset[str]
    #: The agent's config names another host, another host's libvirt or another cloud.
    wrong_view: bool

    @property
    def cloud(self) -> Cloud:
        """The simulated cloud."""
        return self.world.cloud


def violations(report: HostAudit, brake: str | None, moment: Moment) -> list[str]:
    """Invariant 16 for the leftovers ``report`` tells (see the module docstring), judged
    on the world's truth whatever Nova answered: a silently wrong answer (an empty listing,
    a page dropped or repeated) excuses nothing."""
    items = [i for i in (report.leftovers.items if report.leftovers else ()) if i.command]
    why = _no_command(report, brake, moment) if items else None
    return [
        f"{item.kind.value} {item.command!r}: {found}"
        for item in items
        for found in ([why] if why else _judge(item, moment))
    ]


def _no_command(report: HostAudit, brake: str | None, moment: Moment) -> str | None:
    leftovers = report.leftovers
    if moment.wrong_view:
        return "the agent's config names another host, libvirt or cloud"
    if not report.identity.verified:
        return f"identity {report.identity.state.value}"
    if brake:
        return f"told under a brake ({brake})"
    if leftovers is None or leftovers.carried or not moment.world.looked:
        return "from an earlier look, carried into a cycle that did not look"
    return None


def _judge(item: Leftover, moment: Moment) -> list[str]:
    words = shlex.split(item.command or "")
    match words:
        case ["rm", "-r", "--", path]:
            return _files(path, moment)
        case ["openstack", "port", "unset", "--host", port]:
            return _port(port, None, moment)
        case ["openstack", "port", "set", "--host", host, port]:
            return _port(port, host, moment)
        case ["openstack", "--os-volume-api-version", _, "volume", "attachment", "delete", att]:
            return _attachment(att, moment)
        case ["openstack", "--os-placement-api-version", _, "resource", "provider",
              "allocation", "unset", "--provider", provider, consumer]:  # fmt: skip
            return _allocation(provider, consumer, moment)
        case ["nova-manage", "placement", "heal_allocations", "--instance", uuid]:
            return _server(uuid, moment)
        case ["nova-manage", "placement", "audit", "--resource_provider", provider, "--verbose"]:
            return _audit(provider, moment)
    return ["a command no leftover has (a delete?)"]


def _name(moment: Moment, uuid: str) -> str:
    """The server's label (s3), for the shrinker, or its UUID."""
    row = moment.cloud.nova.servers.get(uuid) or moment.cloud.archived.get(uuid)
    if row is not None and row.name.startswith("instance-"):
        return row.name.removeprefix("instance-")
    return moment.cloud.labels.get(uuid, uuid)


def _live(moment: Moment, uuid: str) -> SimServer | None:
    row = moment.cloud.nova.servers.get(uuid)
    return row if row is not None and not row.deleted else None


def _moving(moment: Moment, uuid: str) -> bool:
    """Nova moves ``uuid`` to or from this host now (a migration in progress or awaiting
    confirmation)."""
    return any(
        m.instance_uuid == uuid and not m.deleted and m.status in BUSY_MIGRATION
        and HOST in (m.source_compute, m.dest_compute)
        for m in moment.cloud.nova.migrations.values()
    )  # fmt: skip


def _server(uuid: str, moment: Moment, removes: bool = False) -> list[str]:
    """What forbids any command about server ``uuid``; ``removes``: also what makes a
    removal of something of it take what its guest here still uses."""
    name, found = _name(moment, uuid), []
    if uuid in moment.held:
        found.append(f"server {name} is on hold")
    if uuid in moment.denied:
        found.append(f"server {name} is deny-listed")
    if uuid in moment.quarantined:
        found.append(f"server {name} has a live quarantine entry")
    if removes and uuid in moment.cloud.hv.domains:
        found.append(f"the domain of server {name} is defined here")
    if removes and _moving(moment, uuid):
        found.append(f"Nova moves server {name} to or from this host")
    return found


def _files(path: str, moment: Moment) -> list[str]:
    root = os.path.normpath(moment.world.instances)
    uuid = os.path.basename(path)
    found: list[str] = []
    if os.path.join(root, uuid) != path:
        found.append(f"{path} is not <{root}>/<uuid>")
    row = _live(moment, uuid)
    if row is not None and row.host == HOST:
        found.append(f"Nova manages server {_name(moment, uuid)} here ({row.vm_state})")
    return found + _server(uuid, moment, removes=True)


def _port(port_id: str, host: str | None, moment: Moment) -> list[str]:
    port = moment.world.port(port_id)
    if port is None:
        return []
    device, owner = port["device_id"], port["device_owner"]
    zones = {"nova", *moment.cloud.nova.zones.values()}
    found: list[str] = []
    if port_id in moment.world.foreign or device not in moment.world.known:
        found.append(f"port {port_id} of {device}, which Nova never knew")
    if owner.partition(":")[2] not in zones:
        found.append(f"port {port_id} is owned by {owner!r}, no zone of Nova's")
    if port["binding:host_id"] != HOST:
        found.append(f"port {port_id} is bound to {port['binding:host_id']!r}, not here")
    row = _live(moment, device)
    name = _name(moment, device)
    if row is not None and row.host == HOST:
        found.append(f"server {name} runs here ({row.vm_state}): its port is in use")
    elif row is not None and host is not None and host != row.host:
        found.append(f"binds server {name}'s port to {host}; Nova runs it on {row.host}")
    elif row is None and host is not None:
        found.append(f"binds deleted server {name}'s port to {host}")
    return found + _server(device, moment, removes=True)


def _attachment(attachment_id: str, moment: Moment) -> list[str]:
    attachment = moment.world.attachment(attachment_id)
    if attachment is None:
        return []
    server, status = attachment["instance"], attachment["status"]
    connector = moment.world.cinder.connectors.get(attachment_id)
    found: list[str] = []
    row = _live(moment, server)
    if row is not None:
        found.append(f"server {_name(moment, server)} is live on {row.host}")
    if connector != HOST:
        found.append(f"made through {connector!r}'s connector, not this host's")
    if status in ATTACHING:
        found.append(f"attachment {attachment_id} is {status}")
    return found + _server(server, moment, removes=True)


def _allocation(provider: str, consumer: str, moment: Moment) -> list[str]:
    world = moment.world
    found: list[str] = []
    if provider != world.node_uuid():
        found.append(f"provider {provider} is not this host's compute node {world.node_uuid()}")
    migration = world.migration(consumer)
    if migration is not None and migration.status in BUSY_MIGRATION:
        found.append(f"consumer {consumer} is a migration in progress ({migration.status})")
    if migration is not None or consumer in world.consumer_server:
        # NOTE: a migration's allocation serves that migration only: once it is over it
        # holds nothing of its server's, whatever the server does now; while Nova shows
        # the migration it is its server's (a deleted migration is no one's).
        return found + (_server(migration.instance_uuid, moment) if migration else [])
    row = _live(moment, consumer)
    if row is not None and row.host == HOST:
        found.append(f"consumer {_name(moment, consumer)} is a live server here")
    return found + _server(consumer, moment, removes=True)


def _audit(provider: str, moment: Moment) -> list[str]:
    """Nova's audit only reads (its ``--delete`` checks Nova's database first): it must
    name this host's compute node, as every step on the host's allocations must."""
    node = moment.world.node_uuid()
    return [] if provider == node else [f"provider {provider} is not this host's node {node}"]


@dataclasses.dataclass
class Tally:
    """What the leftovers' part of histories did: the looks and what they told (by kind),
    the commands printed and the leftovers told without one; what failed clean-ups left,
    the world's own events, the services' faults, merges that told a split-brain."""

    looks: int = 0
    files: int = 0
    ports: int = 0
    attachments: int = 0
    allocations: int = 0
    foreign_ports: int = 0
    commands: int = 0
    held: int = 0
    leaks: int = 0
    events: int = 0
    service_faults: int = 0
    split_brains: int = 0

    def __add__(self, other: Tally) -> Tally:
        return Tally(*(getattr(self, f.name) + getattr(other, f.name)
                       for f in dataclasses.fields(self)))  # fmt: skip

    def look(self, items: Iterable[Leftover]) -> None:
        """Count one fresh look's told leftovers."""
        items = list(items)
        self.looks += 1
        for kind, field in _FIELDS.items():
            setattr(self, field, getattr(self, field) + sum(i.kind is kind for i in items))
        self.commands += sum(bool(i.command) for i in items)
        self.held += sum(i.held_by is not None for i in items)


_FIELDS = {
    LeftoverKind.FILES: "files", LeftoverKind.PORT: "ports", LeftoverKind.ATTACHMENT: "attachments",
    LeftoverKind.ALLOCATION: "allocations", LeftoverKind.FOREIGN_PORT: "foreign_ports",
}  # fmt: skip


def at_tell(run: Run, report: HostAudit, brake: str | None) -> list[str]:
    """Count what ``run``'s agent told now, and judge it (``violations``)."""
    if report.leftovers is not None and not report.leftovers.carried:
        run.counters.leftovers.look(report.leftovers.items)
    moment = Moment(
        run.world,
        frozenset(run.journal.holds()) | frozenset(run.held),
        run.setup.deny().uuids,
        frozenset(e.uuid for e in run.journal.quarantine()) | frozenset(run.checked.reaped),
        run.edits.wrong_view,
    )
    return violations(report, brake, moment)
