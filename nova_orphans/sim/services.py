"""What the simulated cloud keeps beside the guests: Placement, Cinder, Neutron and the host's
instance directories, as Nova keeps them, and what a failed clean-up leaves behind.

After every operation on a server (``cloud.Cloud.apply``) its port, allocations and
attachment are put where Nova would have them: the port bound to the server's host (its
owner ``compute:<that host's zone>``), an inactive binding on the other end of a live
migration, an allocation of the server on its host's provider and one of the migration on
the source while a move is in progress (on both providers while an evacuation waits for
the source's clean-up), the attachment through its host's connector (none while shelved
offloaded); a deleted server's are removed (a port the user made is only unbound). The
clean-ups that fail in real clouds may instead leave them as they were (``Setup.leaks``;
which ones is fixed by ``Setup.leak_seed`` and the operation): a local delete, a shelve
offload, a migration whose source clean-up failed, an evacuation whose source never cleaned
up, a rolled-back migration's attachment through the destination's connector. The
simulation's own events (``sim/leftovers.py``) add what no Nova operation makes: a container's port
(``compute:kuryr``), a ``compute:nova`` port of a UUID Nova never knew, instance
directories left by deleted, moved and lost servers, a second attachment (through another
host's connector, or attaching), and Placement of another region whose provider has the
host's name and another UUID.

The instance directories are real: ``sync_dirs`` makes ``<workdir>/instances`` hold one
directory per UUID the simulated host has files for, and the product's own reader
(``observe/instance_dirs.py``) reads it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import uuid as uuidlib
from collections.abc import Callable, Iterable
from typing import Any

from nova_orphans import audit
from nova_orphans.fakes.nova_views import SimMigration, SimServer
from nova_orphans.fakes.services import SimCinder, SimNeutron, SimPlacement
from nova_orphans.observe.services.dangers import DangerObserver
from nova_orphans.observe.services.leftovers import LeftoverObserver
from nova_orphans.observe.services.placement import PlacementObserver
from nova_orphans.sim.cloud import HOST, OTHER, Cloud, uuid_of
from nova_orphans.sim.steps import Setup
from nova_orphans.sim.truth import BUSY_MIGRATION

_NS = uuidlib.UUID("6d1f2b7c-3e4a-4c5d-8e9f-0a1b2c3d4e5f")
FLAVOR = {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}
INVENTORY = {
    "VCPU": {"total": 64, "reserved": 0, "allocation_ratio": 4.0},
    "MEMORY_MB": {"total": 262144, "reserved": 512, "allocation_ratio": 1.0},
    "DISK_GB": {"total": 4000, "reserved": 0, "allocation_ratio": 1.0},
}
#: The other compute's availability zone (the host is in Nova's default zone, ``nova``).
ZONES = {OTHER: "az2"}
#: What can go wrong with a cycle's leftover listings (``Cycle.services``).
SERVICE_FAULTS = (
    "neutron:broken-link", "cinder:broken-link", "neutron:no-marker", "neutron:error",
    "cinder:error", "placement:error",
)  # fmt: skip
#: Nova operations after which the server's services are put in order.
_SETTLES = frozenset({
    "boot_here", "boot_other", "delete", "local_delete", "soft_delete", "restore", "reclaim",
    "live_migrate", "migrate_in", "migration_ends", "evacuate", "evacuation_cleanup",
    "evacuate_in", "resize", "resize_in", "confirm", "revert", "shelve", "migrate_back",
})  # fmt: skip


#: The moves whose source clean-up may fail (arg "cleanup_failed").
_MOVES = frozenset({"live_migrate", "migration_ends", "confirm"})


def uuid_for(what: str) -> str:
    """A fixed UUID of something the services hold (a port, a volume, a container)."""
    return str(uuidlib.uuid5(_NS, what))


class FaultyClient:
    """A service's ``Client`` whose answers this cycle's faults may spoil."""

    def __init__(self, service: SimPlacement | SimCinder | SimNeutron, key: str) -> None:
        self.service, self.name, self.key = service, service.name, key
        self.faults: frozenset[str] = frozenset()
        self.calls = 0

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, Any]:
        """The service's answer, or this cycle's fault."""
        self.calls += 1
        prefix = self.name.lower()
        if f"{prefix}:error" in self.faults:
            return 503, {"error": {"code": 503, "message": "injected failure"}}
        status, body = self.service.get(path, headers)
        links = f"{self.key}_links"
        if isinstance(body, dict) and self.key in body:
            if f"{prefix}:broken-link" in self.faults:
                bogus = f"http://{prefix}.sim/?marker={uuid_for('no-such-item')}"
                body = {**body, links: [{"rel": "next", "href": bogus}]}
            elif f"{prefix}:no-marker" in self.faults:
                body = {**body, links: [{"rel": "next", "href": f"http://{prefix}.sim/?limit=1"}]}
        return status, body


@dataclasses.dataclass
class Holdings:
    """What a server holds of the services, as Nova last put it in order."""

    port: str | None = None
    attachment: str | None = None
    allocations: set[tuple[str, str]] = dataclasses.field(default_factory=set)


class World:
    """The services and instance directories of one history's cloud (module docstring)."""

    def __init__(self, cloud: Cloud, setup: Setup, instances: str) -> None:
        self.cloud, self.setup, self.instances = cloud, setup, instances
        cloud.nova.zones = dict(ZONES)
        self.placement, self.cinder = SimPlacement(), cloud.cinder
        self.neutron = SimNeutron(pagination_max_limit=setup.neutron_page or None)
        if setup.cinder_page:
            self.cinder.max_limit = setup.cinder_page
        for host in (HOST, OTHER):
            compute = cloud.nova.computes[host]
            self.placement.add_provider(compute.node, compute.node_uuid, INVENTORY, {})
        self.clients = {
            "ports": FaultyClient(self.neutron, "ports"),
            "volumes": FaultyClient(self.cinder, "attachments"),
            "placement": FaultyClient(self.placement, "allocations"),
        }
        self.services = audit.Services(
            PlacementObserver(self.clients["placement"]),
            DangerObserver(self.cinder, self.neutron),
            _Watched(*self.clients.values(), looked=self._looked),
        )
        self.held: dict[str, Holdings] = {}
        #: What was made once for a server ("port:<uuid>", "volume:<uuid>"): a port or an
        #: attachment left behind, or removed, is never made again.
        self.made: set[str] = set()
        #: Left behind by a failed clean-up: ports, attachments, (provider, consumer).
        self.frozen: set[object] = set()
        #: Ports no server of Nova's owns (a container's, a device Nova never knew).
        self.foreign: set[str] = set()
        #: Every server Nova ever had, and the server of each migration consumer left.
        self.known: set[str] = set()
        self.consumer_server: dict[str, str] = {}
        #: Inactive bindings a failed clean-up left, by port.
        self.stale_inactive: dict[str, set[str]] = {}
        self.region_split = False
        self.leaked = self.faults = 0
        self.looked = False
        #: Called when the agent starts looking at the services (``Run`` marks its faults).
        self.on_look: Callable[[], None] | None = None
        os.makedirs(os.path.join(instances, "_base"), exist_ok=True)
        os.makedirs(os.path.join(instances, "locks"), exist_ok=True)

    # --- the truth ---------------------------------------------------------------------------

    def node_uuid(self, host: str = HOST) -> str:
        """The UUID of Nova's compute node of ``host`` (its provider in this region)."""
        return self.cloud.nova.computes[host].node_uuid

    def port(self, port_id: str) -> dict[str, Any] | None:
        """Neutron's port ``port_id``, or None."""
        return next((p for p in self.neutron.ports if p["id"] == port_id), None)

    def attachment(self, attachment_id: str) -> dict[str, Any] | None:
        """Cinder's attachment ``attachment_id``, or None."""
        return next((a for a in self.cinder.attachments if a["id"] == attachment_id), None)

    def migration(self, consumer: str) -> SimMigration | None:
        """Nova's migration whose UUID is ``consumer`` (a visible row), or None."""
        rows = self.cloud.nova.migrations.values()
        return next((m for m in rows if m.uuid == consumer and not m.deleted), None)

    # --- Nova's operations -------------------------------------------------------------------

    def settle(self, op: str, label: str, arg: str) -> None:
        """After ``op`` on ``label`` applied: the server's services as Nova leaves them."""
        if op not in _SETTLES or not label:
            return
        uuid = uuid_of(label)
        row = self.cloud.nova.servers.get(uuid)
        if row is None:
            return
        self.known.add(uuid)
        if self.setup.leaks:
            self._leak(op, arg, row)
        if row.deleted:
            self._remove(uuid)
        else:
            self._place(row)

    def _chance(self, key: str, p: float) -> bool:
        digest = hashlib.blake2b(f"{self.setup.leak_seed}:{key}".encode(), digest_size=4)
        return int(digest.hexdigest(), 16) < p * 2**32

    def _leak(self, op: str, arg: str, row: SimServer) -> None:
        """What a failed clean-up of ``op`` leaves as it was (decided per server and step)."""
        uuid = row.uuid
        key = f"{uuid}:{op}:{arg}:{self.cloud.version[uuid]}"
        held = self.held.get(uuid, Holdings())
        leaves: list[object] = []
        if op == "local_delete" or (op == "shelve" and arg == "cleanup_failed"):
            leaves += [r for r, what in ((held.port, "port"), (held.attachment, "volume"))
                       if r and self._chance(f"{key}:{what}", 0.7)]  # fmt: skip
            leaves += [a for a in held.allocations if self._chance(f"{key}:{a}", 0.7)]
        elif op == "shelve" and held.port and self._chance(f"{key}:port", 0.25):
            leaves.append(held.port)  # NOTE: offloaded, its binding here never cleared
        elif op == "evacuation_cleanup" and arg != "ok":
            leaves += [a for a in held.allocations if a[0] != self._provider(row.host)]
        elif arg.startswith("cleanup_failed") and op in _MOVES:
            self._failed_move(row, held, key)
        elif op == "migration_ends" and arg == "rollback" and self._chance(f"{key}:att", 0.4):
            self.attach(row, OTHER if row.host == HOST else HOST, "attached", key)
        for item in leaves:
            self.frozen.add(item)
            self.leaked += 1
            if item == held.port:
                held.port = None
            elif item == held.attachment:
                held.attachment = None
            else:
                held.allocations.discard(item)  # type: ignore[arg-type]

    def _failed_move(self, row: SimServer, held: Holdings, key: str) -> None:
        """A move whose source clean-up failed: the migration's allocation on the source,
        the port's binding there (active, or inactive)."""
        moves = [m for m in self.cloud.nova.migrations.values() if m.instance_uuid == row.uuid]
        if not moves:
            return
        move = max(moves, key=lambda m: m.id)
        source = move.source_compute or HOST
        if self._chance(f"{key}:allocation", 0.6):
            item = (self._provider(source), move.uuid)
            self.placement.allocate(item[0], move.uuid, dict(FLAVOR))
            self.consumer_server[move.uuid] = row.uuid
            self.frozen.add(item)
            self.leaked += 1
        port = held.port
        if port is not None and self._chance(f"{key}:active", 0.3):
            self._bind(port, source)
            self.frozen.add(port)
            held.port = None
            self.leaked += 1
        elif port is not None and self._chance(f"{key}:inactive", 0.4):
            self.stale_inactive.setdefault(port, set()).add(source)
            self.leaked += 1

    def _provider(self, host: str | None) -> str:
        return self.node_uuid(host) if host in (HOST, OTHER) else ""

    def _busy(self, uuid: str) -> SimMigration | None:
        for table in (self.cloud.live_migrations, self.cloud.resizes, self.cloud.evacuations):
            mid = table.get(uuid)
            move = self.cloud.nova.migrations.get(mid) if mid is not None else None
            if move is not None and move.instance_uuid == uuid and not move.deleted:
                return move
        return None

    def _place(self, row: SimServer) -> None:
        """A live server's services where Nova keeps them."""
        uuid, host = row.uuid, row.host
        held = self.held.setdefault(uuid, Holdings())
        move = self._busy(uuid)
        want: set[tuple[str, str]] = set()
        inactive: set[str] = set()
        if host:
            want.add((self._provider(host), uuid))
        if move is not None and move.migration_type == "evacuation":
            want.add((self._provider(move.source_compute), uuid))
        elif move is not None and move.status in BUSY_MIGRATION:
            want = {(self._provider(move.dest_compute), uuid),
                    (self._provider(move.source_compute), move.uuid)}  # fmt: skip
            if move.migration_type == "live-migration":
                inactive = {move.source_compute or "", move.dest_compute or ""} - {host or ""}
        self._allocate(held, want)
        if f"port:{uuid}" not in self.made:
            self.made.add(f"port:{uuid}")
            held.port = self._new_port(uuid, host)
        if held.port is not None:
            self._bind(held.port, host)
            bindings = (inactive | self.stale_inactive.get(held.port, set())) - {host or ""}
            self.neutron.inactive[held.port] = bindings
        if f"volume:{uuid}" not in self.made:
            self.made.add(f"volume:{uuid}")
            if self._chance(f"{uuid}:volume", 0.4):
                held.attachment = self.attach(row, host, "attached", uuid, own=True)
        if held.attachment is not None:
            found = self.attachment(held.attachment)
            if found is not None:
                found["status"] = "attached" if host else "reserved"
            self.cinder.connectors[held.attachment] = host

    def _allocate(self, held: Holdings, want: set[tuple[str, str]]) -> None:
        for provider, consumer in held.allocations - want:
            if (provider, consumer) not in self.frozen:
                self.placement.allocations.get(provider, {}).pop(consumer, None)
        for provider, consumer in want - held.allocations:
            if provider:
                self.placement.allocate(provider, consumer, dict(FLAVOR))
        held.allocations = {a for a in want if a[0]}

    def _new_port(self, uuid: str, host: str | None) -> str:
        port = uuid_for(f"port-of-{uuid}")
        n = len(self.neutron.ports) + 1
        self.neutron.add_port(
            port, f"fa:16:3e:{n // 65536 % 256:02x}:{n // 256 % 256:02x}:{n % 256:02x}", uuid,
            (f"10.{n // 65536 % 256}.{n // 256 % 256}.{n % 256}",), host or "",
            zone=ZONES.get(host or HOST, "nova"),
        )  # fmt: skip
        return port

    def _bind(self, port_id: str, host: str | None) -> None:
        port = self.port(port_id)
        if port is None:
            return
        port["binding:host_id"] = host or ""
        port["binding:vif_type"] = "ovs" if host else "unbound"
        if host:
            port["device_owner"] = f"compute:{ZONES.get(host, 'nova')}"

    def attach(
        self, row: SimServer, host: str | None, status: str, key: str, own: bool = False
    ) -> str:
        attachment = uuid_for(f"attachment-{key}")
        volume = uuid_for(f"volume-of-{row.uuid}" if own else f"volume-{key}")
        if self.attachment(attachment) is None:
            self.cinder.add_attachment(attachment, volume, row.uuid, status, host)
        if not own:
            self.frozen.add(attachment)
            self.leaked += 1
        return attachment

    def _remove(self, uuid: str) -> None:
        """A server deleted with its compute up: Nova removes what it held."""
        held = self.held.pop(uuid, Holdings())
        self._allocate(held, set())
        if held.port is not None:
            if self._chance(f"{uuid}:preserve", 0.3):
                port = self.port(held.port)
                if port is not None:  # NOTE: a port the user made: unbound, kept
                    port.update({"binding:host_id": "", "binding:vif_type": "unbound",
                                 "device_id": "", "device_owner": ""})  # fmt: skip
            else:
                self.neutron.ports[:] = [p for p in self.neutron.ports if p["id"] != held.port]
            self.neutron.inactive.pop(held.port, None)
        if held.attachment is not None:
            self.cinder.attachments[:] = [
                a for a in self.cinder.attachments if a["id"] != held.attachment
            ]
            self.cinder.connectors.pop(held.attachment, None)

    # --- the cycles --------------------------------------------------------------------------

    def before_cycle(self, faults: Iterable[str]) -> None:
        """This cycle's faults."""
        faults = frozenset(faults)
        self.faults += len(faults)
        for client in self.clients.values():
            client.faults = faults
        self.looked = False

    def after_cycle(self) -> None:
        """No fault outlasts its cycle."""
        for client in self.clients.values():
            client.faults = frozenset()

    def _looked(self) -> None:
        # NOTE: the agent reads instances_path right after: it finds the host's files as now.
        self.sync_dirs()
        self.looked = True
        if self.on_look is not None:
            self.on_look()

    def sync_dirs(self) -> None:
        """``<instances>/<uuid>`` for each UUID the simulated host has files for, no other."""
        want = set(self.cloud.hv.files)
        have = {n for n in os.listdir(self.instances) if n not in ("_base", "locks")}
        for name in have - want:
            shutil.rmtree(os.path.join(self.instances, name), ignore_errors=True)
        for name in want - have:
            os.mkdir(os.path.join(self.instances, name))
            with open(os.path.join(self.instances, name, "disk"), "w", encoding="utf-8") as out:
                out.write(self.cloud.hv.files[name])


class _Watched(LeftoverObserver):
    """The agent's ``LeftoverObserver``: says when a cycle starts looking at the services."""

    def __init__(self, *clients: FaultyClient, looked: Callable[[], None]) -> None:
        super().__init__(*clients)
        self._on_look = looked

    def look(self, host: str, provider: str | None) -> Any:
        """``LeftoverObserver.look``, once the simulation knows a look started."""
        self._on_look()
        return super().look(host, provider)
