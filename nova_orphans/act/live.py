"""The live side effects: libvirt writes and file moves, each refused when unsafe.

Everything here is reversible by a restore (``quarantine.restore.bring_back``): a
stop leaves the domain defined; an undefine is preceded by a durable copy of the
XML (and of the NVRAM/TPM state); the instance directory is renamed, never copied or
deleted. The quarantine's file side is ``quarantine.files``; libvirt is spoken
through ``virt.Host`` and ``virt.Guest``.
"""

from __future__ import annotations

import contextlib
import os
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator

from nova_orphans import virt
from nova_orphans.act import images
from nova_orphans.act.effects import EffectError
from nova_orphans.act.quarantine import files, paths
from nova_orphans.act.quarantine.manifest import (
    BACKING_DIR,
    CHECKPOINTS_DIR,
    MANAGED_SAVE_FILE,
    SNAPSHOTS_DIR,
    BackingFile,
    Kept,
)

#: Where libvirt's QEMU driver (qemu:///system) keeps ``<name>.save``, the managed-save image.
DEFAULT_MANAGED_SAVE_DIR = "/var/lib/libvirt/qemu/save"

_POLL_INTERVAL = 0.25


class LiveEffects(files.QuarantineFiles):
    """``Effects`` on a real libvirt connection (opened read-write on first use)."""

    def __init__(
        self,
        uri: str,
        instances_path: str,
        quarantine_root: str,
        allow_shared_storage: bool = False,
        *,
        mounts_file: str = paths.DEFAULT_MOUNTS_FILE,
        swtpm_root: str = files.DEFAULT_SWTPM_ROOT,
        managed_save_dir: str = DEFAULT_MANAGED_SAVE_DIR,
    ) -> None:
        super().__init__(
            instances_path,
            quarantine_root,
            allow_shared_storage,
            mounts_file=mounts_file,
            swtpm_root=swtpm_root,
        )
        self._uri = uri
        self._managed_save_dir = managed_save_dir
        self._host: virt.Host | None = None

    def close(self) -> None:
        """Close the connection, if one was opened."""
        if self._host is not None:
            self._host.close()
            self._host = None

    def stop(self, uuid: str, timeout: float) -> str:
        """Shut the guest down; power it off after ``timeout`` s. It stays defined."""
        guest = self._guest(uuid)
        with self._errors(f"stop {uuid}"):
            if not guest.is_running():
                return "already shut off"
            if not guest.has_persistent_configuration():
                # NOTE: a transient domain is gone once stopped: nothing could restore it.
                raise EffectError(f"stop {uuid}: the domain is transient, stopping would delete it")
            started = time.monotonic()
            try:
                guest.request_shutdown()
            except virt.Error as err:
                if err.gone:
                    raise
                refused = f"graceful shutdown refused ({err.reason})"
            else:
                if _wait_shut_off(guest, started + timeout):
                    return f"shut down gracefully in {time.monotonic() - started:.0f} s"
                refused = f"no graceful shutdown within {timeout:g} s"
            try:
                guest.poweroff()
            except virt.Error:
                if guest.is_running():
                    raise
                return f"shut down gracefully in {time.monotonic() - started:.0f} s"
            return f"{refused}; powered off"

    def domain_xml(self, uuid: str) -> str:
        """The persistent definition (inactive XML, with secure fields)."""
        guest = self._guest(uuid)
        with self._errors(f"read the XML of {uuid}"):
            return guest.get_definition()

    def keep_state(self, uuid: str, directory: str) -> Kept:
        """Keep NVRAM/TPM, managed save, snapshots, checkpoints and backing files; refuse if not.

        A refusal removes whatever it had kept already (docs/design.md rule 20): the
        quarantine directory of a reap that did not happen holds no copies.
        """
        target = self._checked_quarantine(directory)
        guest = self._guest(uuid)
        with self._errors(f"keep the state of {uuid}"):
            if guest.is_running():
                raise EffectError(f"keep the state of {uuid}: the domain is running; stop it first")
            xml = guest.get_definition()
            try:
                kept = self._kept(guest, uuid, xml, target)
            except BaseException:
                files.discard_kept(target)
                raise
            paths.fsync_path(target)
        return kept

    def _kept(self, guest: virt.Guest, uuid: str, xml: str, target: str) -> Kept:
        # NOTE: what may refuse the reap comes first, so a refusal copies little.
        managed_save = self._keep_managed_save(guest, target)
        backing = self._keep_backing_chain(uuid, xml, target)
        nvram, tpm = self._keep_state_files(uuid, xml, target)
        snapshots, current = _keep_snapshots(guest, target)
        return Kept(
            nvram=nvram,
            tpm=tpm,
            managed_save=managed_save,
            snapshots=snapshots,
            current_snapshot=current,
            checkpoints=_keep_checkpoints(guest, target),
            backing=backing,
        )

    def undefine(self, uuid: str, directory: str) -> str:
        """Undefine once ``keep_state`` kept everything; refuse an active domain."""
        target = self._checked_quarantine(directory)
        guest = self._guest(uuid)
        with self._errors(f"undefine {uuid}"):
            if guest.is_running():
                # NOTE: undefining a running persistent domain makes it transient:
                # it would vanish, unrestorable, when it stops.
                raise EffectError(f"undefine {uuid}: the domain is running; stop it first")
            gained = _state_not_kept(guest, target, self._managed_save_image(guest))
            if gained:
                # NOTE: the undefine flags would delete it; docs/design.md rule 16.
                raise EffectError(
                    f"undefine {uuid}: {gained} since its state was kept; not undefined"
                )
            xml = guest.get_definition()
            detail = guest.delete_configuration()
            self._check_still_undefined(uuid, xml)
        return detail

    def _managed_save_image(self, guest: virt.Guest) -> str:
        return os.path.join(self._managed_save_dir, f"{guest.name}.save")

    def _keep_managed_save(self, guest: virt.Guest, directory: str) -> bool:
        """Hard-link (or copy) libvirt's managed-save image into the quarantine."""
        if not guest.has_managed_save():
            return False
        image = self._managed_save_image(guest)
        if not os.path.isfile(image) or os.path.islink(image):
            raise EffectError(
                f"keep the state of {guest.uuid}: it has a managed-save image (its saved "
                f"RAM state) but not at {image}; not reaped, the image would be lost"
            )
        images.keep_file(image, os.path.join(directory, MANAGED_SAVE_FILE))
        return True

    def _keep_backing_chain(self, uuid: str, xml: str, directory: str) -> tuple[BackingFile, ...]:
        """Keep every backing file of the guest's own disks that lies outside its directory.

        NOTE: only disks in ``<instances_path>/<uuid>/`` are Nova's image-backed
        disks (on ``_base``); volumes are Cinder's and are listed as leftovers. Each
        is read as its XML declares it and its chain is checked (docs/design.md rule
        20): a backing file that is not a regular file under ``instances_path``
        refuses the reap.
        """
        own = os.path.join(self._instances_path, uuid) + os.sep
        kept: list[BackingFile] = []
        try:
            for disk in images.file_disks(xml):
                if not disk.path.startswith(own):
                    continue
                for backing in images.backing_chain(disk, self._instances_path):
                    path = backing.path
                    if path.startswith(own) or any(b.path == path for b in kept):
                        continue
                    name = f"{len(kept)}-{os.path.basename(path)}"
                    os.makedirs(os.path.join(directory, BACKING_DIR), mode=0o700, exist_ok=True)
                    how = images.keep_file(path, os.path.join(directory, BACKING_DIR, name))
                    kept.append(BackingFile(path, name, how, os.lstat(path).st_size))
        except EffectError as err:
            raise EffectError(f"keep the state of {uuid}: {err}; not reaped") from err
        return tuple(kept)

    def _check_still_undefined(self, uuid: str, xml: str) -> None:
        """Catch a guest started between our check and the undefine: define it again."""
        if self._connection().lookup(uuid) is None:
            return
        self._connection().define(xml)
        raise EffectError(f"undefine {uuid}: the domain was started meanwhile; defined it again")

    def _guest(self, uuid: str) -> virt.Guest:
        try:
            guest = self._connection().lookup(uuid)
        except virt.Error as err:
            raise EffectError(f"libvirt {self._uri}: {err.reason}") from err
        if guest is None:
            raise EffectError(f"no domain {uuid} in {self._uri}")
        return guest

    def _connection(self) -> virt.Host:
        if self._host is None:
            self._host = open_connection(self._uri)
        return self._host

    @contextlib.contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        """Turn libvirt and OS errors into one-line ``EffectError``s."""
        try:
            yield
        except virt.Error as err:
            raise EffectError(f"{what}: {err.reason}") from err
        except OSError as err:
            raise EffectError(f"{what}: {paths.os_reason(err)}") from err


def open_connection(uri: str, read_only: bool = False) -> virt.Host:
    """A connection to ``uri`` (read-write unless asked); ``EffectError`` (one line) on failure."""
    try:
        return virt.open_connection(uri, read_only=read_only)
    except virt.Unreachable as err:
        raise EffectError(str(err)) from err


def _wait_shut_off(guest: virt.Guest, deadline: float) -> bool:
    while True:
        if not guest.is_running():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(min(_POLL_INTERVAL, max(0.0, deadline - time.monotonic())))


def _keep_snapshots(guest: virt.Guest, directory: str) -> tuple[tuple[str, ...], str | None]:
    """Write every snapshot's XML to ``snapshots/<i>.xml``, parents first; the current one."""
    snapshots = guest.snapshots()
    names = _write_listed(snapshots, os.path.join(directory, SNAPSHOTS_DIR))
    return names, guest.current_snapshot() if snapshots else None


def _keep_checkpoints(guest: virt.Guest, directory: str) -> tuple[str, ...]:
    """Write every checkpoint's XML to ``checkpoints/<i>.xml``, parents first."""
    return _write_listed(guest.checkpoints(), os.path.join(directory, CHECKPOINTS_DIR))


def _write_listed(items: list[tuple[str, str]], directory: str) -> tuple[str, ...]:
    """Write each (name, XML) to ``<directory>/<i>.xml``; the names."""
    for index, (_, xml) in enumerate(items):
        if index == 0:
            os.makedirs(directory, mode=0o700, exist_ok=True)
        paths.write_durably(os.path.join(directory, f"{index}.xml"), xml)
    return tuple(name for name, _ in items)


def _state_not_kept(guest: virt.Guest, directory: str, live_image: str) -> str | None:
    """What the domain has now that its quarantine lacks (a managed save, snapshots)."""
    image = os.path.join(directory, MANAGED_SAVE_FILE)
    if guest.has_managed_save():
        if not os.path.isfile(image):
            return "it gained a managed-save image"
        if _file_identity(live_image) != _file_identity(image):
            # NOTE: resumed and saved again: the kept image is older RAM state.
            return "its managed-save image changed"
    # NOTE: by name, not by count: one snapshot deleted and another taken is a change.
    if set(guest.snapshot_names()) != _kept_names(os.path.join(directory, SNAPSHOTS_DIR)):
        return "its snapshots changed"
    if set(guest.checkpoint_names()) != _kept_names(os.path.join(directory, CHECKPOINTS_DIR)):
        return "its checkpoints changed"
    return None


def _file_identity(path: str) -> tuple[int, int] | None:
    """Size and modification time: equal for a hard link and for a ``copy2`` of the file."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return None
    return found.st_size, found.st_mtime_ns


def _kept_names(directory: str) -> set[str]:
    """The names in the snapshot (or checkpoint) XML files ``keep_state`` wrote."""
    if not os.path.isdir(directory):
        return set()
    names = set()
    for file in os.listdir(directory):
        try:
            names.add(ET.parse(os.path.join(directory, file)).findtext("name") or "")
        except ET.ParseError:
            names.add(f"<unreadable {file}>")  # never equal to a name libvirt lists
    return names
