"""The simulated cloud of a history: Nova, the audited host's libvirt, and what links them.

Every operation changes Nova *and* the host the way Nova would on the audited
host: a boot here defines a domain; a migration away whose source clean-up
succeeds removes it, one whose clean-up failed leaves it; a resize keeps the
stopped source until confirm or revert; a local delete (compute down) leaves the
guest running. An operation whose precondition does not hold does nothing and
returns False, so any sub-list of a history's steps can be replayed.
"""

from __future__ import annotations

import copy
import datetime
import uuid as uuidlib
from collections import Counter
from collections.abc import Callable

from nova_orphans.fakes.host import INSTANCES, SimulatedHost
from nova_orphans.fakes.host import Disk as HostDisk
from nova_orphans.fakes.nova import START, SimulatedNova
from nova_orphans.fakes.nova_views import SimServer
from nova_orphans.fakes.services import SimCinder
from nova_orphans.model import Disk, DomainState

HOST, OTHER = "cmp-1", "cmp-2"
#: The disks a tenant (or an image) can make hostile, by ``hostile_disk``'s arg: the
#: format the domain XML declares, the backing file the header names, and a symlink
#: the host has (path, target). Every one but "forged-raw" must refuse the reap; a
#: forged raw disk is read as raw, so its header names nothing (docs/design.md rule 20).
HOSTILE_DISKS: dict[str, tuple[str, str, tuple[str, str] | None]] = {
    "forged-raw": ("raw", "/etc/shadow", None),
    "dev-zero": ("qcow2", "/dev/zero", None),
    "nbd": ("qcow2", "nbd://203.0.113.7:10809/export", None),
    "outside": ("qcow2", "/etc/shadow", None),
    "relative": ("qcow2", "../../etc/passwd", None),
    "symlink-base": ("qcow2", f"{INSTANCES}/_base/linked", (f"{INSTANCES}/_base/linked",
                                                           "/etc/shadow")),
}  # fmt: skip
#: The server another cloud's Nova runs on its same-named compute (``other_cloud``).
OTHER_CLOUD_SERVERS = ("w1", "w2", "w3")
#: The cell of each compute host (a down cell hides its rows from Nova's listings).
CELLS = {HOST: "cell1", OTHER: "cell2"}
_NS = uuidlib.UUID("0b5c3e0e-8a57-4c1e-9d0e-5f7a8b9c1d2e")
EPOCH = START + datetime.timedelta(days=1)
RUNNING, SHUTOFF, PAUSED = DomainState.RUNNING, DomainState.SHUTOFF, DomainState.PAUSED


def uuid_of(label: str) -> str:
    """The fixed UUID of a guest label."""
    return str(uuidlib.uuid5(_NS, label))


def name_of(label: str) -> str:
    """The libvirt domain name of a guest label (Nova's or the operator's)."""
    return f"operator-{label}" if label.startswith("f") else f"instance-{label}"


class Cloud:
    """Nova plus the audited host, changed only through operations named like an operator's."""

    def __init__(self) -> None:
        self.now = EPOCH
        self.nova = SimulatedNova(start=START)
        self.nova.add_compute(HOST, cell=CELLS[HOST])
        self.nova.add_compute(OTHER, cell=CELLS[OTHER])
        self.hv = SimulatedHost(HOST)
        #: The other compute's libvirt, which a wrong ``connection_uri`` reads (see ``mirror``).
        self.other_hv = SimulatedHost(OTHER)
        #: Rows ``archive`` removed, kept so that a database restore can bring them back.
        self.archived: dict[str, SimServer] = {}
        #: Migrations still running, and evacuations/resizes not cleaned up, by UUID.
        self.live_migrations: dict[str, int] = {}
        self.evacuations: dict[str, int] = {}
        self.resizes: dict[str, int] = {}
        #: How often the world (not the agent) changed each guest: a new version restarts
        #: the clock of the liveness invariant.
        self.version: Counter[str] = Counter()
        self.labels: dict[str, str] = {}
        #: Cinder: the volumes guests here hold, some attached to another server too.
        self.cinder = SimCinder()
        self._other_cloud: SimulatedNova | None = None
        #: Called after every operation that applied (``sim/services.py`` settles Neutron,
        #: Cinder and Placement as Nova would).
        self.after_apply: Callable[[str, str, str], None] | None = None

    @property
    def other_cloud(self) -> SimulatedNova:
        """Another cloud's Nova (staging, another region), built from the same inventory:
        computes of the same host names, hostnames and type, but its own node UUIDs; its
        servers on ``HOST`` are not in this libvirt, and it has no record of this host's
        guests. A ``[nova]`` section pointing there must never let the agent act."""
        if self._other_cloud is None:
            nova = SimulatedNova(start=START)
            for host in (HOST, OTHER):
                compute = nova.add_compute(host, cell=CELLS[host])
                compute.node_uuid = str(uuidlib.uuid5(_NS, f"other-cloud-node-{host}"))
                compute.service_uuid = str(uuidlib.uuid5(_NS, f"other-cloud-service-{host}"))
            for n, label in enumerate(OTHER_CLOUD_SERVERS):
                at = START + datetime.timedelta(minutes=n)
                nova.boot(HOST if n < 2 else OTHER, name_of(label), uuid_of(label), at=at)
            self._other_cloud = nova
        return self._other_cloud

    # --- helpers ---------------------------------------------------------------------------

    def row(self, label: str) -> SimServer | None:
        """Nova's row of ``label`` (deleted ones too), or None."""
        return self.nova.servers.get(uuid_of(label))

    def live(self, label: str) -> SimServer | None:
        """Nova's live (not deleted) row of ``label``, or None."""
        row = self.row(label)
        return row if row is not None and not row.deleted else None

    def idle(self, label: str, host: str | None = None) -> SimServer | None:
        """A live row Nova is not busy with (no task, not resized/soft-deleted), on ``host``."""
        row = self.live(label)
        if row is None or row.task_state or row.vm_state in ("resized", "soft-delete"):
            return None
        if uuid_of(label) in self.live_migrations:
            return None
        if host is not None and row.host != host:
            return None
        return row

    def _tracked(self, table: dict[str, int], label: str) -> int | None:
        """The migration id ``table`` keeps for ``label``, if it is still that migration.

        NOTE: ``SimulatedNova`` reuses the ids of archived migrations.
        """
        uuid = uuid_of(label)
        mid = table.pop(uuid, None)
        migration = self.nova.migrations.get(mid) if mid is not None else None
        if mid is None or migration is None or migration.instance_uuid != uuid:
            return None
        if migration.deleted:
            return None
        table[uuid] = mid
        return mid

    def has_domain(self, label: str) -> bool:
        """True when the audited host defines a domain for ``label``."""
        return uuid_of(label) in self.hv.domains

    def _touch(self, label: str) -> None:
        self.version[uuid_of(label)] += 1

    def _define(
        self, label: str, state: DomainState, *, nova: bool = True, job: bool = False
    ) -> None:
        uuid = uuid_of(label)
        self.labels[uuid] = label
        self.hv.define(uuid, name_of(label), nova=nova, running=state is RUNNING)
        if state is not RUNNING or job:
            self.hv.change(uuid, state=state, job_active=job)

    def _destroy(self, label: str) -> None:
        """Nova's compute destroys the guest: domain and instance directory go.

        NOTE: the compute only cleans up what libvirt still defines; a guest the agent
        already reaped keeps its quarantine (and, for a duplicate, its files).
        """
        uuid = uuid_of(label)
        if uuid not in self.hv.domains:
            return
        self.hv.remove(uuid)
        self.hv.files.pop(uuid, None)

    def _set_state(self, label: str, state: DomainState, job: bool = False) -> None:
        if self.has_domain(label):
            self.hv.change(uuid_of(label), state=state, job_active=job)

    def _set(self, row: SimServer, **fields: object) -> None:
        for field, value in fields.items():
            setattr(row, field, value)
        row.updated_at = self.now

    def _move(self, row: SimServer, host: str, **fields: object) -> None:
        compute = self.nova.add_compute(host)
        self._set(row, host=host, node=compute.node, cell=compute.cell, task_state=None, **fields)

    def _fresh(self, label: str) -> bool:
        uuid = uuid_of(label)
        return (
            uuid not in self.nova.servers
            and uuid not in self.archived
            and uuid not in self.hv.domains
            and uuid not in self.hv.quarantine
        )

    def mirror(self) -> SimulatedHost:
        """The other compute's libvirt as it is now: a running guest for every server Nova
        places there (its copies of servers that once ran here included), nothing else."""
        there = {
            row.uuid: row
            for row in self.nova.servers.values()
            if not row.deleted and row.host == OTHER
        }
        for uuid in set(self.other_hv.domains) - set(there):
            self.other_hv.remove(uuid)
        for uuid, row in there.items():
            if uuid not in self.other_hv.domains:
                self.other_hv.define(uuid, row.name, nova=True, running=True)
        return self.other_hv

    # --- operations ------------------------------------------------------------------------

    def apply(self, op: str, label: str, arg: str) -> bool:
        """Perform operation ``op``; False when its precondition does not hold."""
        done = OPERATIONS[op](self, label, arg)
        if done and label:
            self._touch(label)
        if done and self.after_apply is not None:
            self.after_apply(op, label, arg)
        return done

    def boot_here(self, label: str, arg: str) -> bool:
        if not self._fresh(label):
            return False
        self.nova.boot(HOST, name_of(label), uuid_of(label), at=self.now)
        self._define(label, RUNNING)
        if arg == "stopped":
            return self.power(label, "stop")
        return True

    def boot_other(self, label: str, arg: str) -> bool:
        if not self._fresh(label):
            return False
        self.nova.boot(OTHER, name_of(label), uuid_of(label), at=self.now)
        return True

    def delete(self, label: str, arg: str) -> bool:
        """Delete with the compute up: the compute destroys the guest."""
        row = self.idle(label) or self._soft_deleted(label)
        if row is None:
            return False
        self.nova.local_delete(row.uuid, at=self.now)
        if row.host == HOST:
            self._destroy(label)
        return True

    def local_delete(self, label: str, arg: str) -> bool:
        """Delete while the server's compute is down: the guest is left behind."""
        row = self.idle(label) or self._soft_deleted(label)
        if row is None:
            return False
        self.nova.local_delete(row.uuid, at=self.now)
        return True

    def _soft_deleted(self, label: str) -> SimServer | None:
        row = self.live(label)
        return row if row is not None and row.vm_state == "soft-delete" else None

    def soft_delete(self, label: str, arg: str) -> bool:
        row = self.idle(label)
        if row is None:
            return False
        self.nova.soft_delete(row.uuid, at=self.now)
        if row.host == HOST:
            self._set_state(label, SHUTOFF)
        return True

    def restore(self, label: str, arg: str) -> bool:
        row = self._soft_deleted(label)
        if row is None:
            return False
        self.nova.restore(row.uuid, at=self.now)
        if row.host == HOST:
            self._set_state(label, RUNNING)
        return True

    def reclaim(self, label: str, arg: str) -> bool:
        """The compute reclaims a soft-deleted server after reclaim_instance_interval."""
        row = self._soft_deleted(label)
        if row is None:
            return False
        self.nova.local_delete(row.uuid, at=self.now)
        if row.host == HOST:
            self._destroy(label)
        return True

    def archive(self, label: str, arg: str) -> bool:
        gone = [s for s in self.nova.servers.values() if s.deleted]
        for row in gone:
            self.archived[row.uuid] = copy.copy(row)
            self.version[row.uuid] += 1
        return self.nova.archive() > 0

    def db_restore(self, label: str, arg: str) -> bool:
        """The operator restores Nova's database: a deleted or archived server is live again."""
        uuid = uuid_of(label)
        row = self.row(label)
        if row is None and uuid in self.archived:
            row = self.nova.servers[uuid] = self.archived.pop(uuid)
        if row is None or not row.deleted:
            return False
        self._set(row, deleted=False, deleted_at=None, terminated_at=None, vm_state="active",
                  task_state=None, power_state=1)  # fmt: skip
        return True

    def live_migrate(self, label: str, arg: str) -> bool:
        """Live-migrate away from the host: "ok", "cleanup_failed[:running]" or "start"."""
        row = self.idle(label, HOST)
        if row is None or row.vm_state != "active" or not self.has_domain(label):
            return False
        if arg == "start":
            self.live_migrations[row.uuid] = self.nova.live_migrate(
                row.uuid, OTHER, finish=False, at=self.now
            )
            self._set_state(label, RUNNING, job=True)
            return True
        failed = arg.startswith("cleanup_failed")
        self.nova.live_migrate(row.uuid, OTHER, cleanup_failed=failed, at=self.now)
        if failed:
            self._set_state(label, RUNNING if arg.endswith(":running") else SHUTOFF)
        else:
            self._destroy(label)
        return True

    def migrate_in(self, label: str, arg: str) -> bool:
        """A live migration to the host starts: the incoming domain is paused, with a job."""
        row = self.idle(label, OTHER)
        if row is None or row.vm_state != "active" or self.has_domain(label):
            return False
        self.live_migrations[row.uuid] = self.nova.live_migrate(
            row.uuid, HOST, finish=False, at=self.now
        )
        self._define(label, PAUSED, job=True)
        return True

    def migration_ends(self, label: str, arg: str) -> bool:
        """A running live migration moves on.

        "post": the guest runs on the destination, which Nova now names as the host
        (task_state cleared), while the source's clean-up is still to run: the
        migration is 'post-migrating' and the source domain is still defined. Then, or
        directly, it ends: "ok", "cleanup_failed[:running]" or "rollback".
        """
        mid = self._tracked(self.live_migrations, label)
        row = self.live(label)
        if mid is None or row is None:
            return False
        migration = self.nova.migrations[mid]
        source, dest = migration.source_compute, migration.dest_compute or ""
        if arg == "post":
            if migration.status == "post-migrating":
                return False
            self._move(row, dest)
            self.nova.set_migration_status(mid, "post-migrating", at=self.now)
            self._set_state(label, SHUTOFF if source == HOST else RUNNING)
            return True
        del self.live_migrations[row.uuid]
        if arg == "rollback" and migration.status == "post-migrating":
            arg = "cleanup_failed"
        if arg == "rollback":
            self._set(row, task_state=None)
            self.nova.set_migration_status(mid, "error", at=self.now)
            if source == HOST:
                self._set_state(label, RUNNING)
            else:
                self._destroy(label)
            return True
        failed = arg.startswith("cleanup_failed")
        self._move(row, dest, **({"vm_state": "error"} if failed else {}))
        self.nova.set_migration_status(mid, "error" if failed else "completed", at=self.now)
        if dest == HOST:
            self._set_state(label, RUNNING)
        elif failed:
            self._set_state(label, RUNNING if arg.endswith(":running") else SHUTOFF)
        else:
            self._destroy(label)
        return True

    def evacuate(self, label: str, arg: str) -> bool:
        """The host was down; Nova rebuilds the server elsewhere; the guest here stays."""
        row = self.idle(label, HOST)
        if row is None:
            return False
        self.evacuations[row.uuid] = self.nova.evacuate(row.uuid, OTHER, at=self.now)
        self._set_state(label, RUNNING if arg == "running" else SHUTOFF)
        return True

    def evacuation_cleanup(self, label: str, arg: str) -> bool:
        """The host's compute restarts and destroys evacuated guests ("ok"), or fails to."""
        mid = self._tracked(self.evacuations, label)
        if mid is None:
            return False
        del self.evacuations[uuid_of(label)]
        if arg == "ok":
            self._destroy(label)
            self.nova.set_migration_status(mid, "completed", at=self.now)
        return True

    def evacuate_in(self, label: str, arg: str) -> bool:
        row = self.idle(label, OTHER)
        if row is None or self.has_domain(label):
            return False
        self.nova.evacuate(row.uuid, HOST, at=self.now)
        self._define(label, RUNNING)
        return True

    def resize(self, label: str, arg: str) -> bool:
        """Resize (or cold-migrate, arg "migration") away: the stopped source stays."""
        row = self.idle(label, HOST)
        if row is None or not self.has_domain(label):
            return False
        kind = arg or "resize"
        self.resizes[row.uuid] = self.nova.resize(row.uuid, OTHER, migration_type=kind, at=self.now)
        self._set_state(label, SHUTOFF)
        return True

    def resize_in(self, label: str, arg: str) -> bool:
        row = self.idle(label, OTHER)
        if row is None or self.has_domain(label):
            return False
        self.resizes[row.uuid] = self.nova.resize(row.uuid, HOST, at=self.now)
        self._define(label, RUNNING)
        return True

    def confirm(self, label: str, arg: str) -> bool:
        """Confirm a resize; the source is destroyed unless its clean-up fails."""
        row, mid = self.live(label), self._tracked(self.resizes, label)
        if row is None or mid is None or row.vm_state != "resized":
            return False
        del self.resizes[row.uuid]
        source = self.nova.migrations[mid].source_compute
        self.nova.confirm(row.uuid, at=self.now)
        if arg == "cleanup_failed":
            self.nova.set_migration_status(mid, "error", at=self.now)
            self._set(row, vm_state="error")
        elif source == HOST:
            self._destroy(label)
        return True

    def revert(self, label: str, arg: str) -> bool:
        row, mid = self.live(label), self._tracked(self.resizes, label)
        if row is None or mid is None or row.vm_state != "resized":
            return False
        del self.resizes[row.uuid]
        source = self.nova.migrations[mid].source_compute
        self.nova.revert(row.uuid, at=self.now)
        if source == HOST:
            self._set_state(label, RUNNING)
        else:
            self._destroy(label)
        return True

    def shelve(self, label: str, arg: str) -> bool:
        """Shelve-offload; the guest here is destroyed unless that fails."""
        row = self.idle(label)
        if row is None:
            return False
        host = row.host
        self.nova.shelve_offload(row.uuid, at=self.now)
        if host == HOST:
            if arg == "cleanup_failed":
                self._set_state(label, SHUTOFF)
            else:
                self._destroy(label)
        return True

    def task(self, label: str, arg: str) -> bool:
        """Set (arg) or clear (no arg) a task_state Nova is working on."""
        row = self.live(label)
        if row is None or row.vm_state in ("resized", "soft-delete"):
            return False
        if row.uuid in self.live_migrations or bool(row.task_state) == bool(arg):
            return False
        self.nova.set_task_state(row.uuid, arg or None, at=self.now)
        return True

    def power(self, label: str, arg: str) -> bool:
        """The user stops or starts a server Nova manages here."""
        row = self.idle(label, HOST)
        if row is None or not self.has_domain(label):
            return False
        stop = arg == "stop"
        self._set(row, vm_state="stopped" if stop else "active", power_state=4 if stop else 1)
        self._set_state(label, SHUTOFF if stop else RUNNING)
        return True

    def suspend(self, label: str, arg: str) -> bool:
        """The user suspends a server Nova runs here: libvirt managed-saves it."""
        row = self.idle(label, HOST)
        domain = self.hv.domains.get(uuid_of(label))
        if row is None or domain is None or not domain.is_active:
            return False
        self._set(row, vm_state="suspended", power_state=4)
        self.hv.suspend(domain.uuid)
        return True

    def snapshot(self, label: str, arg: str) -> bool:
        """Someone takes a libvirt snapshot of a guest defined here."""
        uuid = uuid_of(label)
        if uuid not in self.hv.domains:
            return False
        self.hv.snapshot(uuid, f"snap-{len(self.hv.state[uuid].snapshots) + 1}")
        return True

    def image_cache(self, label: str, arg: str) -> bool:
        """Nova's image cache manager removes the bases no defined guest uses."""
        return bool(self.hv.clean_image_cache())

    def foreign(self, label: str, arg: str) -> bool:
        """The operator defines a domain by hand (no Nova metadata)."""
        if not self._fresh(label):
            return False
        self._define(label, SHUTOFF if arg == "shutoff" else RUNNING, nova=False)
        return True

    def undefine(self, label: str, arg: str) -> bool:
        """The operator undefines a domain Nova does not manage here (files stay)."""
        row = self.live(label)
        if not self.has_domain(label) or (row is not None and row.host == HOST):
            return False
        self.hv.remove(uuid_of(label))
        return True

    def lose(self, label: str, arg: str) -> bool:
        """A guest Nova manages here disappears from libvirt."""
        if self.idle(label, HOST) is None or not self.has_domain(label):
            return False
        self._destroy(label)
        return True

    def toggle(self, label: str, arg: str) -> bool:
        """The operator starts or destroys a domain Nova does not manage here."""
        row, uuid = self.live(label), uuid_of(label)
        domain = self.hv.domains.get(uuid)
        if domain is None or domain.job_active or (row is not None and row.host == HOST):
            return False
        self._set_state(label, SHUTOFF if domain.is_active else RUNNING)
        return True

    def corrupt(self, label: str, arg: str) -> bool:
        """The domain's Nova metadata becomes unreadable."""
        domain = self.hv.domains.get(uuid_of(label))
        if domain is None or domain.metadata is None:
            return False
        self.hv.change(domain.uuid, metadata=None, metadata_error="unparsable nova:instance")
        return True

    def vanish(self, label: str, arg: str) -> bool:
        """Someone else undefines the domain (a race with the agent)."""
        if not self.has_domain(label):
            return False
        self.hv.remove(uuid_of(label))
        return True

    def migrate_back(self, label: str, arg: str) -> bool:
        """A live migration of the server towards the host starts (a race with the agent)."""
        row = self.idle(label, OTHER)
        if row is None:
            return False
        self.live_migrations[row.uuid] = self.nova.live_migrate(
            row.uuid, HOST, finish=False, at=self.now
        )
        return True

    def quarantine_restore(self, label: str, arg: str) -> bool:
        """The operator's ``restore`` of a guest the agent reaped defines it ("start": starts it).

        NOTE: ``Run`` plays the operator's restore through the product's restore
        decision, which calls this to define the guest once Nova allows it.
        """
        uuid = uuid_of(label)
        if uuid in self.hv.domains or uuid not in self.hv.quarantine:
            return False
        self.hv.restore(uuid)
        if arg == "start":
            self.hv.change(uuid, state=RUNNING)
        return True

    def hostile_disk(self, label: str, arg: str) -> bool:
        """The guest's disk turns hostile (``HOSTILE_DISKS[arg]``): a raw disk with a forged
        qcow2 header, or an image whose backing file is a device, a URL, a host file
        outside instances_path or a symlinked base."""
        uuid = uuid_of(label)
        if uuid not in self.hv.domains or arg not in HOSTILE_DISKS:
            return False
        fmt, named, link = HOSTILE_DISKS[arg]
        self.hv.hostile_disk(uuid, HostDisk(fmt, named), link)
        return True

    def share_volume(self, label: str, arg: str) -> bool:
        """The guest holds a Cinder volume that Cinder has attached to another server
        (on the other compute) since: two writers on one disk (docs/design.md rule 18)."""
        uuid = uuid_of(label)
        domain = self.hv.domains.get(uuid)
        if domain is None or domain.disks:
            return False
        volume = str(uuidlib.uuid5(_NS, f"volume-of-{label}"))
        disk = Disk("vdb", "disk", "block", f"/dev/disk/by-id/virtio-{volume[:20]}", serial=volume)
        self.hv.change(uuid, disks=(disk,))
        elsewhere = str(uuidlib.uuid5(_NS, f"writer-of-{label}"))
        self.cinder.add_volume(volume, "in-use", ((elsewhere, OTHER),))
        return True

    def virsh_start(self, label: str, arg: str) -> bool:
        """The operator starts a stopped guest by hand (``virsh start``)."""
        uuid = uuid_of(label)
        domain = self.hv.domains.get(uuid)
        if domain is None or domain.is_active or not domain.persistent:
            return False
        self.hv.change(uuid, state=RUNNING)
        return True


OPERATIONS: dict[str, Callable[[Cloud, str, str], bool]] = {
    name: getattr(Cloud, name)
    for name in (
        "boot_here", "boot_other", "delete", "local_delete", "soft_delete", "restore",
        "reclaim", "archive", "db_restore", "live_migrate", "migrate_in", "migration_ends",
        "evacuate", "evacuation_cleanup", "evacuate_in", "resize", "resize_in", "confirm",
        "revert", "shelve", "task", "power", "foreign", "undefine", "lose", "toggle",
        "corrupt", "vanish", "migrate_back", "quarantine_restore", "virsh_start", "suspend",
        "snapshot", "image_cache", "hostile_disk", "share_volume",
    )
}  # fmt: skip
