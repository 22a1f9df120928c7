"""An in-memory compute host: domains, instance directories and a quarantine.

It plays libvirt for the agent's fast tests and the randomized simulation:
``SimulatedHost`` answers like the libvirt observer, ``SimulatedEffects``
changes it like the live effects would. Nothing here touches the machine.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import shutil
import stat
from collections.abc import Callable

from nova_orphans.act import images
from nova_orphans.act.effects import EffectError, FilesResult, SavedQuarantine
from nova_orphans.act.quarantine.manifest import BackingFile, Kept, Manifest
from nova_orphans.classify.identity import LibvirtIdentity
from nova_orphans.model import Domain, DomainState, NovaMetadata
from nova_orphans.observe.errors import HypervisorError

NOVA_NS = "http://openstack.org/xmlns/libvirt/nova/1.1"
#: The simulated host's instances_path (Nova's ``[DEFAULT] instances_path``).
INSTANCES = "/instances"
#: Files of the host outside instances_path that a hostile disk may name, and their type.
HOST_FILES = {"/etc/shadow": stat.S_IFREG, "/etc/passwd": stat.S_IFREG, "/dev/zero": stat.S_IFCHR}


@dataclasses.dataclass(frozen=True)
class Disk:
    """A guest's disk in ``<instances_path>/<uuid>/disk``: the format its domain XML
    declares (``<driver type>``), and the backing file its header names, if any (the
    tenant's bytes: a raw disk may carry a forged qcow2 header)."""

    format: str = "raw"
    header_backing: str | None = None


@dataclasses.dataclass
class Quarantined:
    """What a reap put aside for one guest."""

    xml: str
    domain: Domain
    files: str | None
    directory: str = ""
    #: What ``keep_state`` put aside: managed save, snapshots, copies of backing files.
    kept: Kept = dataclasses.field(default_factory=Kept)

    @property
    def stamp(self) -> str:
        """The reap's time stamp: the last part of ``directory``."""
        return self.directory.rsplit("/", 1)[-1]


class SimulatedHost:
    """The host's libvirt and instances_path, in memory."""

    def __init__(self, host: str, hypervisor_type: str = "QEMU") -> None:
        self.host = host
        #: What this host's libvirt reports (``getHostname()``, ``getType()``); Nova's
        #: simulated node of ``host`` carries the same hostname and type.
        self.hostname = host
        self.hypervisor_type = hypervisor_type
        self.domains: dict[str, Domain] = {}
        self.xml: dict[str, str] = {}
        #: instances_path/<uuid> contents, by UUID (a token standing for the files).
        self.files: dict[str, str] = {}
        self.quarantine: dict[str, Quarantined] = {}
        #: What libvirt holds for a domain besides its XML (managed save, snapshots,
        #: the backing files its disk needs), by UUID.
        self.state: dict[str, Kept] = {}
        #: The backing files present in instances_path/_base.
        self.bases: set[str] = set()
        self.instances_path = INSTANCES
        #: Each guest's disk (its declared format and what its header names), by UUID.
        self.disks: dict[str, Disk] = {}
        #: Symlinks on the host (path -> target), e.g. a base someone linked elsewhere.
        self.links: dict[str, str] = {}
        #: The guests whose disk ``hostile_disk`` changed.
        self.hostile: set[str] = set()
        self.manifests: dict[str, Manifest] = {}
        #: Called before every read; may raise HypervisorError or change the world.
        self.before_read: Callable[[str], None] | None = None
        self.reads: collections.Counter[str] = collections.Counter()

    # --- what the world does -------------------------------------------------------------

    def define(
        self,
        uuid: str,
        name: str,
        *,
        nova: bool = True,
        running: bool = True,
        display_name: str | None = None,
    ) -> Domain:
        """Define a domain (with Nova metadata unless ``nova`` is False) and its files."""
        meta = NovaMetadata(NOVA_NS, display_name=display_name or name) if nova else None
        state = DomainState.RUNNING if running else DomainState.SHUTOFF
        domain = Domain(uuid, name, state, persistent=True, job_active=False, metadata=meta)
        self.domains[uuid] = domain
        self.xml[uuid] = f"<domain><name>{name}</name><uuid>{uuid}</uuid></domain>"
        self.files[uuid] = f"disk-of-{uuid}"
        # NOTE: a Nova guest's disk is a qcow2 overlay on its image in _base.
        base = f"{INSTANCES}/_base/image-of-{uuid}" if nova else None
        backing = (BackingFile(base, f"0-image-of-{uuid}", "hard link", 1),) if base else ()
        self.state[uuid] = Kept(backing=backing)
        self.disks[uuid] = Disk("qcow2", base) if base else Disk()
        self.bases.update(b.path for b in backing)
        return domain

    def hostile_disk(self, uuid: str, disk: Disk, link: tuple[str, str] | None = None) -> None:
        """The guest's disk becomes ``disk`` (a forged header, an odd backing file);
        ``link``: a symlink (path, target) the host gets beside it.

        NOTE: libvirt reads the disk as declared: a raw one needs no backing file, a
        qcow2 one the file its header names (which a reap must never keep).
        """
        self.disks[uuid] = disk
        self.hostile.add(uuid)
        if link is not None:
            self.links[link[0]] = link[1]
        named = disk.header_backing
        backing = () if disk.format == "raw" or not named else (_backing_file(named),)
        self.state[uuid] = dataclasses.replace(self.state[uuid], backing=backing)

    def lstat(self, path: str) -> os.stat_result:
        """``os.lstat`` of the host's file system as simulated (its paths only)."""
        mode = self._mode(os.path.normpath(path))
        if mode is None:
            raise FileNotFoundError(2, "No such file or directory", path)
        return os.stat_result((mode | 0o600, 0, 0, 1, 0, 0, 1, 0, 0, 0))

    def _mode(self, path: str) -> int | None:
        if path in self.links:
            return stat.S_IFLNK
        if path in HOST_FILES:
            return HOST_FILES[path]
        own = {f"{self.instances_path}/{u}/disk" for u in self.domains}
        if path in self.bases or path in own:
            return stat.S_IFREG
        parents = {os.path.dirname(p) for p in (*self.bases, *own, *self.links, *HOST_FILES)}
        if any(p == path or p.startswith(path.rstrip("/") + "/") for p in parents):
            return stat.S_IFDIR
        return None

    def real_path(self, path: str) -> str:
        """Where ``path`` leads once every simulated symlink on the way is followed."""
        parts, seen = os.path.normpath(path).split("/")[1:], 0
        current = ""
        while parts and seen < 40:
            current = os.path.normpath(f"{current}/{parts.pop(0)}")
            if current in self.links:
                seen += 1
                target = os.path.join(os.path.dirname(current), self.links[current])
                parts = os.path.normpath(target).split("/")[1:] + parts
                current = ""
        return current or "/"

    def backing_kept(self, uuid: str) -> tuple[BackingFile, ...]:
        """The backing files a reap keeps for ``uuid``'s disk, judged by the product's own
        rules (``act.images``): the declared format, the path rules, a regular file
        reached through no symlink. Raises ``EffectError`` as the live effects do."""
        if uuid not in self.hostile:
            return self.state[uuid].backing  # NOTE: Nova's own overlay on its _base image
        disk = self.disks[uuid]
        image = images.Image(f"{self.instances_path}/{uuid}/disk", disk.format)
        path = images.backing_path(image, disk.header_backing, self.instances_path)
        if path is None:
            return ()
        images.check_regular(path, f"its backing file {path}", image.path, self.lstat)
        return (_backing_file(path),)

    def suspend(self, uuid: str) -> None:
        """libvirt managed-saves the guest: its RAM goes to an image, the domain shuts off."""
        self.change(uuid, state=DomainState.SHUTOFF)
        self.state[uuid] = dataclasses.replace(self.state[uuid], managed_save=True)

    def snapshot(self, uuid: str, name: str) -> None:
        """Someone takes a snapshot of the guest; it becomes the current one."""
        kept = self.state[uuid]
        self.state[uuid] = dataclasses.replace(
            kept, snapshots=(*kept.snapshots, name), current_snapshot=name
        )

    def clean_image_cache(self) -> set[str]:
        """Nova's image cache manager: remove every base no defined domain uses."""
        used = {b.path for uuid in self.domains for b in self.state[uuid].backing}
        gone = self.bases - used
        self.bases &= used
        return gone

    def change(self, uuid: str, **fields: object) -> None:
        """Change a domain's observed fields (state, job_active…).

        Starting a guest resumes it from its managed save, which libvirt then removes.
        """
        self.domains[uuid] = dataclasses.replace(self.domains[uuid], **fields)  # type: ignore[arg-type]
        if self.domains[uuid].is_active and self.state[uuid].managed_save:
            self.state[uuid] = dataclasses.replace(self.state[uuid], managed_save=False)

    def remove(self, uuid: str) -> None:
        """The domain disappears (undefined by someone else)."""
        self.domains.pop(uuid, None)
        self.xml.pop(uuid, None)
        self.state.pop(uuid, None)

    # --- the observer's interface --------------------------------------------------------

    def identity(self) -> LibvirtIdentity:
        """What this libvirt says it is, like ``LibvirtObserver.identity``.

        NOTE: not a domain read: ``before_read`` faults and world changes keep
        counting the domain reads of a cycle only.
        """
        return LibvirtIdentity(f"sim://{self.hostname}", self.hostname, self.hypervisor_type)

    def look(self) -> tuple[Domain, ...]:
        """Every domain, like ``LibvirtObserver.look``."""
        self._read("list")
        return tuple(self.domains.values())

    def look_up(self, uuid: str) -> Domain | None:
        """One domain, like ``LibvirtObserver.look_up``."""
        self._read(f"lookup {uuid}")
        return self.domains.get(uuid)

    def _read(self, what: str) -> None:
        self.reads[what.split()[0]] += 1
        if self.before_read:
            self.before_read(what)

    def restore(self, uuid: str) -> None:
        """Bring a reaped guest back from quarantine, like ``nova-orphans restore``."""
        if uuid in self.domains:
            raise EffectError(f"{uuid} exists in libvirt; not restoring over it")
        saved = self.quarantine.pop(uuid)
        # NOTE: a backing file Nova's image cache removed comes back from the kept copy.
        self.bases.update(b.path for b in saved.kept.backing)
        self.domains[uuid] = dataclasses.replace(saved.domain, state=DomainState.SHUTOFF)
        self.xml[uuid] = saved.xml
        self.state[uuid] = saved.kept
        if saved.files is not None:
            self.files[uuid] = saved.files


def _backing_file(path: str) -> BackingFile:
    """The record of a kept backing file, as ``SimulatedHost.define`` writes it."""
    return BackingFile(path, f"0-{os.path.basename(path)}", "hard link", 1)


class SimulatedEffects:
    """``Effects`` on a ``SimulatedHost``; ``fail`` makes chosen methods raise."""

    def __init__(self, host: SimulatedHost) -> None:
        self.host = host
        self.calls: list[tuple[str, str]] = []
        self.fail: set[str] = set()
        #: Called after each effect; the simulation uses it to crash mid-step.
        self.after: Callable[[str, str], None] | None = None

    def _call(self, method: str, uuid: str) -> Domain:
        self.calls.append((method, uuid))
        if method in self.fail:
            raise EffectError(f"{method} of {uuid} failed (simulated)")
        domain = self.host.domains.get(uuid)
        if domain is None:
            raise EffectError(f"domain {uuid} not found")
        return domain

    def _done(self, method: str, uuid: str) -> None:
        if self.after:
            self.after(method, uuid)

    def stop(self, uuid: str, timeout: float) -> str:
        """Power the guest off; it stays defined."""
        self._call("stop", uuid)
        self.host.change(uuid, state=DomainState.SHUTOFF)
        self._done("stop", uuid)
        return "shut down gracefully (simulated)"

    def domain_xml(self, uuid: str) -> str:
        """The stored XML."""
        self._call("domain_xml", uuid)
        return self.host.xml[uuid]

    def quarantine_dir(self, uuid: str, stamp: str) -> str:
        """A quarantine path (nothing to create in memory)."""
        self.calls.append(("quarantine_dir", uuid))
        return f"/quarantine/{uuid}/{stamp}"

    def save_xml(self, directory: str, xml: str) -> None:
        """Keep the XML for restore."""
        uuid = directory.split("/")[2]
        domain = self._call("save_xml", uuid)
        self.host.quarantine[uuid] = Quarantined(xml, domain, None, directory)
        self._done("save_xml", uuid)

    def keep_state(self, uuid: str, directory: str) -> Kept:
        """Keep managed save, snapshots and backing files with the quarantined XML."""
        domain = self._call("keep_state", uuid)
        if domain.is_active:
            raise EffectError(f"{uuid} is running; stop it first")
        try:
            backing = self.host.backing_kept(uuid)
        except EffectError as err:
            raise EffectError(f"keep the state of {uuid}: {err}; not reaped") from err
        kept = dataclasses.replace(self.host.state[uuid], backing=backing)
        self.host.quarantine[uuid].kept = kept
        self._done("keep_state", uuid)
        return kept

    def _state_not_kept(self, uuid: str) -> bool:
        """True when libvirt holds state for ``uuid`` that its quarantine does not."""
        saved = self.host.quarantine.get(uuid)
        return saved is None or saved.kept != self.host.state[uuid]

    def write_manifest(self, directory: str, manifest: Manifest) -> None:
        """Remember the manifest of a quarantine directory."""
        self.calls.append(("write_manifest", manifest.uuid))
        self.host.manifests[directory] = manifest

    def undefine(self, uuid: str, directory: str) -> str:
        """Remove the domain; refuse while it runs or with state not kept, like the live effects."""
        domain = self._call("undefine", uuid)
        if domain.is_active:
            raise EffectError(f"{uuid} is running; stop it first")
        if self._state_not_kept(uuid):
            raise EffectError(f"undefine {uuid}: its state is not kept in quarantine")
        self.host.remove(uuid)
        self._done("undefine", uuid)
        return "undefined (simulated)"

    def move_instance_files(self, uuid: str, directory: str) -> FilesResult:
        """Move the instance directory into the quarantine."""
        self.calls.append(("move_instance_files", uuid))
        if "move_instance_files" in self.fail:
            raise EffectError("move failed (simulated)")
        files = self.host.files.pop(uuid, None)
        if files is None:
            return FilesResult(False, "no instance directory")
        self.host.quarantine[uuid].files = files
        self._done("move_instance_files", uuid)
        return FilesResult(True, "instance directory moved to quarantine (simulated)")

    def saved_quarantines(self, uuid: str) -> list[SavedQuarantine]:
        """The in-memory quarantine of ``uuid``, if any."""
        saved = self.host.quarantine.get(uuid)
        if saved is None:
            return []
        return [SavedQuarantine(saved.stamp, saved.directory, saved.files is not None)]

    def purge(self, uuid: str, directory: str) -> str:
        """Forget the quarantine at ``directory`` (and delete it, where it is a real one)."""
        self.calls.append(("purge", uuid))
        if "purge" in self.fail:
            raise EffectError(f"purge of {uuid} failed (simulated)")
        saved = self.host.quarantine.get(uuid)
        if saved is not None and saved.directory == directory:
            del self.host.quarantine[uuid]
        self.host.manifests.pop(directory, None)
        if os.path.isdir(directory):
            shutil.rmtree(directory)
        self._done("purge", uuid)
        return f"deleted {directory}"

    def close(self) -> None:
        """Nothing to release."""


def unreachable(uri: str) -> Callable[[str], None]:
    """A ``before_read`` hook that makes every read fail as if libvirt were down."""

    def fail(what: str) -> None:
        raise HypervisorError(uri=uri, reason="connection dropped (simulated)")

    return fail
