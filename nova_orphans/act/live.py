"""The live side effects: libvirt writes and file moves, each refused when unsafe.

Everything here is reversible by ``quarantine.restore``: a stop leaves the
domain defined; an undefine is preceded by a durable copy of the XML (and of the
NVRAM/TPM state); the instance directory is renamed, never copied or deleted.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import operator
import os
import re
import shutil
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator

import libvirt

from nova_orphans.act import images
from nova_orphans.act import manifest as manifests
from nova_orphans.act.effects import EffectError, FilesResult, SavedQuarantine
from nova_orphans.act.manifest import (
    BACKING_DIR,
    CHECKPOINTS_DIR,
    FILES_DIR,
    MANAGED_SAVE_FILE,
    NVRAM_FILE,
    SNAPSHOTS_DIR,
    TPM_DIR,
    XML_FILE,
    BackingFile,
    Kept,
    Manifest,
)
from nova_orphans.act.paths import (
    DEFAULT_MOUNTS_FILE,
    first_symlink,
    fsync_path,
    is_canonical_uuid,
    os_reason,
    path_refusal,
    shared_storage_refusal,
    write_durably,
)
from nova_orphans.observe import hypervisor

DEFAULT_SWTPM_ROOT = "/var/lib/libvirt/swtpm"
#: Where libvirt's QEMU driver (qemu:///system) keeps ``<name>.save``, the managed-save image.
DEFAULT_MANAGED_SAVE_DIR = "/var/lib/libvirt/qemu/save"

_XML_FLAGS = libvirt.VIR_DOMAIN_XML_INACTIVE | libvirt.VIR_DOMAIN_XML_SECURE
# Undefine flags in the order they are given up when the driver rejects them.
_UNDEFINE_FLAGS = (
    ("managed-save", "VIR_DOMAIN_UNDEFINE_MANAGED_SAVE"),
    ("snapshots-metadata", "VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA"),
    ("checkpoints-metadata", "VIR_DOMAIN_UNDEFINE_CHECKPOINTS_METADATA"),
    ("keep-nvram", "VIR_DOMAIN_UNDEFINE_KEEP_NVRAM"),
    ("keep-tpm", "VIR_DOMAIN_UNDEFINE_KEEP_TPM"),
)
# Error codes with which a driver rejects a flag it does not know or support.
_FLAG_REJECTED = frozenset(
    getattr(libvirt, name)
    for name in ("VIR_ERR_INVALID_ARG", "VIR_ERR_NO_SUPPORT", "VIR_ERR_ARGUMENT_UNSUPPORTED")
    if hasattr(libvirt, name)
)
_STAMP = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:+-]{0,63}")
_POLL_INTERVAL = 0.25


class LiveEffects:
    """``Effects`` on a real libvirt connection (opened read-write on first use)."""

    def __init__(
        self,
        uri: str,
        instances_path: str,
        quarantine_root: str,
        allow_shared_storage: bool = False,
        *,
        mounts_file: str = DEFAULT_MOUNTS_FILE,
        swtpm_root: str = DEFAULT_SWTPM_ROOT,
        managed_save_dir: str = DEFAULT_MANAGED_SAVE_DIR,
    ) -> None:
        self._uri = uri
        self._instances_path = os.path.abspath(instances_path)
        self._quarantine_root = os.path.abspath(quarantine_root)
        self._allow_shared_storage = allow_shared_storage
        self._mounts_file = mounts_file
        self._swtpm_root = swtpm_root
        self._managed_save_dir = managed_save_dir
        self._conn: libvirt.virConnect | None = None

    def close(self) -> None:
        """Close the connection, if one was opened."""
        if self._conn is not None:
            with contextlib.suppress(libvirt.libvirtError):
                self._conn.close()
            self._conn = None

    # --- libvirt -----------------------------------------------------------------------

    def stop(self, uuid: str, timeout: float) -> str:
        """Shut the guest down; power it off after ``timeout`` s. It stays defined."""
        dom = self._domain(uuid)
        with self._errors(f"stop {uuid}"):
            if not _is_active(dom):
                return "already shut off"
            if not dom.isPersistent():
                # NOTE: a transient domain is gone once stopped: nothing could restore it.
                raise EffectError(f"stop {uuid}: the domain is transient, stopping would delete it")
            started = time.monotonic()
            try:
                dom.shutdown()
            except libvirt.libvirtError as err:
                if hypervisor.is_gone(err):
                    raise
                refused = f"graceful shutdown refused ({hypervisor.libvirt_reason(err)})"
            else:
                if _wait_shut_off(dom, started + timeout):
                    return f"shut down gracefully in {time.monotonic() - started:.0f} s"
                refused = f"no graceful shutdown within {timeout:g} s"
            try:
                dom.destroy()
            except libvirt.libvirtError:
                if _is_active(dom):
                    raise
                return f"shut down gracefully in {time.monotonic() - started:.0f} s"
            return f"{refused}; powered off"

    def domain_xml(self, uuid: str) -> str:
        """The persistent definition (inactive XML, with secure fields)."""
        dom = self._domain(uuid)
        with self._errors(f"read the XML of {uuid}"):
            return str(dom.XMLDesc(_XML_FLAGS))

    def keep_state(self, uuid: str, directory: str) -> Kept:
        """Keep NVRAM/TPM, managed save, snapshots, checkpoints and backing files; refuse if not.

        A refusal removes whatever it had kept already (docs/design.md rule 20): the
        quarantine directory of a reap that did not happen holds no copies.
        """
        target = self._checked_quarantine(directory)
        dom = self._domain(uuid)
        with self._errors(f"keep the state of {uuid}"):
            if _is_active(dom):
                raise EffectError(f"keep the state of {uuid}: the domain is running; stop it first")
            xml = dom.XMLDesc(_XML_FLAGS)
            try:
                kept = self._kept(dom, uuid, xml, target)
            except BaseException:
                _discard_kept(target)
                raise
            fsync_path(target)
        return kept

    def _kept(self, dom: libvirt.virDomain, uuid: str, xml: str, target: str) -> Kept:
        # NOTE: what may refuse the reap comes first, so a refusal copies little.
        managed_save = self._keep_managed_save(dom, target)
        backing = self._keep_backing_chain(uuid, xml, target)
        nvram, tpm = self._save_state_files(uuid, xml, target)
        snapshots, current = _keep_snapshots(dom, target)
        return Kept(
            nvram=nvram,
            tpm=tpm,
            managed_save=managed_save,
            snapshots=snapshots,
            current_snapshot=current,
            checkpoints=_keep_checkpoints(dom, target),
            backing=backing,
        )

    def write_manifest(self, directory: str, manifest: Manifest) -> None:
        """Write ``manifest.json`` (0600) into the quarantine directory, fsynced."""
        target = self._checked_quarantine(directory)
        with self._errors("write the quarantine manifest"):
            manifests.write(target, manifest)

    def undefine(self, uuid: str, directory: str) -> str:
        """Undefine once ``keep_state`` kept everything; refuse an active domain."""
        target = self._checked_quarantine(directory)
        dom = self._domain(uuid)
        with self._errors(f"undefine {uuid}"):
            if _is_active(dom):
                # NOTE: undefining a running persistent domain makes it transient:
                # it would vanish, unrestorable, when it stops.
                raise EffectError(f"undefine {uuid}: the domain is running; stop it first")
            gained = _state_not_kept(dom, target, self._managed_save_image(dom))
            if gained:
                # NOTE: the undefine flags would delete it; docs/design.md rule 16.
                raise EffectError(
                    f"undefine {uuid}: {gained} since its state was kept; not undefined"
                )
            xml = dom.XMLDesc(_XML_FLAGS)
            detail = undefine_with_fallback(dom)
            self._check_still_undefined(uuid, xml)
        return detail

    def _save_state_files(self, uuid: str, xml: str, directory: str) -> tuple[bool, bool]:
        nvram = nvram_path(xml)
        nvram_kept = nvram is not None and os.path.isfile(nvram)
        if nvram_kept:
            assert nvram is not None
            copied = os.path.join(directory, NVRAM_FILE)
            shutil.copy2(nvram, copied)
            os.chmod(copied, 0o600)
            fsync_path(copied)
        tpm = os.path.join(self._swtpm_root, uuid)
        tpm_kept = os.path.isdir(tpm) and not os.path.islink(tpm)
        if tpm_kept:
            shutil.copytree(tpm, os.path.join(directory, TPM_DIR), symlinks=True)
        return nvram_kept, tpm_kept

    def _managed_save_image(self, dom: libvirt.virDomain) -> str:
        return os.path.join(self._managed_save_dir, f"{dom.name()}.save")

    def _keep_managed_save(self, dom: libvirt.virDomain, directory: str) -> bool:
        """Hard-link (or copy) libvirt's managed-save image into the quarantine."""
        if not dom.hasManagedSaveImage(0):
            return False
        image = self._managed_save_image(dom)
        if not os.path.isfile(image) or os.path.islink(image):
            raise EffectError(
                f"keep the state of {dom.UUIDString()}: it has a managed-save image (its saved "
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
        try:
            self._connection().lookupByUUIDString(uuid)
        except libvirt.libvirtError as err:
            if hypervisor.is_gone(err):
                return
            raise
        self._connection().defineXML(xml)
        raise EffectError(f"undefine {uuid}: the domain was started meanwhile; defined it again")

    def purge(self, uuid: str, directory: str) -> str:
        """Delete ``<quarantine_root>/<uuid>/<stamp>`` for good, and its UUID directory if empty."""
        path, root = os.path.abspath(directory), self._quarantine_root
        if not is_canonical_uuid(uuid):
            raise EffectError(f"purge: {uuid!r} is not a canonical UUID")
        if not os.path.lexists(path):
            return f"{path} was already gone"
        refusal = path_refusal(root, path)
        if refusal is None and os.path.relpath(path, root).split(os.sep)[:-1] != [uuid]:
            refusal = f"{path} is not a quarantine directory of {uuid} under {root}"
        if refusal:
            raise EffectError(f"purge {uuid}: {refusal}")
        # NOTE: on Linux rmtree works on directory descriptors and never follows a
        # symlink it meets inside the tree (shutil.rmtree.avoids_symlink_attacks).
        try:
            shutil.rmtree(path)
        except OSError as err:
            raise EffectError(f"purge {uuid}: {os_reason(err)}") from err
        with contextlib.suppress(OSError):
            os.rmdir(os.path.dirname(path))  # the UUID's directory, once empty
        return f"deleted {path}"

    def _domain(self, uuid: str) -> libvirt.virDomain:
        try:
            return self._connection().lookupByUUIDString(uuid)
        except libvirt.libvirtError as err:
            if hypervisor.is_gone(err):
                raise EffectError(f"no domain {uuid} in {self._uri}") from err
            raise EffectError(f"libvirt {self._uri}: {hypervisor.libvirt_reason(err)}") from err

    def _connection(self) -> libvirt.virConnect:
        if self._conn is None:
            self._conn = open_connection(self._uri)
        return self._conn

    @contextlib.contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        """Turn libvirt and OS errors into one-line ``EffectError``s."""
        try:
            yield
        except libvirt.libvirtError as err:
            raise EffectError(f"{what}: {hypervisor.libvirt_reason(err)}") from err
        except OSError as err:
            raise EffectError(f"{what}: {os_reason(err)}") from err

    # --- quarantine and files ----------------------------------------------------------

    def saved_quarantines(self, uuid: str) -> list[SavedQuarantine]:
        """Quarantine directories of ``uuid`` holding its saved XML (no symlink followed)."""
        if not is_canonical_uuid(uuid):
            return []
        base = os.path.join(self._quarantine_root, uuid)
        if path_refusal(self._quarantine_root, base):
            return []
        found = []
        for stamp in sorted(os.listdir(base)):
            directory = os.path.join(base, stamp)
            if path_refusal(base, directory) is None and os.path.isfile(
                os.path.join(directory, XML_FILE)
            ):
                files = os.path.join(directory, FILES_DIR)
                found.append(
                    SavedQuarantine(stamp, directory, path_refusal(directory, files) is None)
                )
        return found

    def quarantine_dir(self, uuid: str, stamp: str) -> str:
        """Create ``<quarantine_root>/<uuid>/<stamp>`` (each level 0700) and return it."""
        if not is_canonical_uuid(uuid):
            raise EffectError(f"quarantine: {uuid!r} is not a canonical UUID")
        if not _STAMP.fullmatch(stamp):
            raise EffectError(f"quarantine: {stamp!r} is not a usable time stamp")
        root = self._quarantine_root
        with self._errors("quarantine"):
            with contextlib.suppress(FileExistsError):
                os.makedirs(root, mode=0o700)
            link = first_symlink(root)
            if link is not None:
                raise EffectError(f"quarantine root {root}: {link} is a symlink")
            if not os.path.isdir(root) or not os.access(root, os.W_OK | os.X_OK):
                raise EffectError(f"quarantine root {root} is not a writable directory")
            os.chmod(root, 0o700)
            path = root
            for part in (uuid, stamp):
                path = os.path.join(path, part)
                with contextlib.suppress(FileExistsError):
                    os.mkdir(path, 0o700)
                refusal = path_refusal(root, path)
                if refusal:
                    raise EffectError(f"quarantine: {refusal}")
                os.chmod(path, 0o700)
            if os.listdir(path):
                raise EffectError(f"quarantine: {path} is already in use")
            fsync_path(os.path.dirname(path))
        return path

    def save_xml(self, directory: str, xml: str) -> None:
        """Write ``domain.xml`` (0600) into the quarantine directory, fsynced."""
        target = self._checked_quarantine(directory)
        with self._errors("save the domain XML"):
            write_durably(os.path.join(target, XML_FILE), xml)

    def move_instance_files(self, uuid: str, directory: str) -> FilesResult:
        """Rename ``<instances_path>/<uuid>`` to ``<directory>/files`` when that is safe."""
        if not is_canonical_uuid(uuid):
            return FilesResult(False, f"{uuid!r} is not a canonical UUID: no path is built from it")
        target = self._checked_quarantine(directory)
        source = os.path.join(self._instances_path, uuid)
        refusal = path_refusal(self._instances_path, source)
        if refusal is None and not self._allow_shared_storage:
            refusal = shared_storage_refusal(source, self._mounts_file)
        if refusal is not None:
            return FilesResult(False, f"files not moved: {refusal}")
        destination = os.path.join(target, FILES_DIR)
        try:
            os.rename(source, destination)
        except OSError as err:
            if err.errno == errno.EXDEV:
                return FilesResult(
                    False,
                    f"files not moved: {source} and the quarantine {target} are on different "
                    "file systems (not copied; move it by hand or put the quarantine beside it)",
                )
            raise EffectError(f"move {source}: {os_reason(err)}") from err
        for changed in (self._instances_path, target):
            with contextlib.suppress(OSError):
                fsync_path(changed)
        return FilesResult(True, f"moved {source} to {destination}")

    def _checked_quarantine(self, directory: str) -> str:
        refusal = path_refusal(self._quarantine_root, directory)
        if refusal:
            raise EffectError(f"quarantine: {refusal}")
        return os.path.abspath(directory)


def open_connection(uri: str, read_only: bool = False) -> libvirt.virConnect:
    """A connection to ``uri`` (read-write unless asked); ``EffectError`` (one line) on failure."""
    libvirt.registerErrorHandler(hypervisor.ignore_errors, None)
    try:
        conn = libvirt.openReadOnly(uri) if read_only else libvirt.open(uri)
    except libvirt.libvirtError as err:
        raise EffectError(
            f"libvirt unreachable at {uri}: {hypervisor.libvirt_reason(err)}"
        ) from err
    if conn is None:  # very old bindings return None instead of raising
        raise EffectError(f"libvirt unreachable at {uri}: connection failed")
    return conn


def nvram_path(xml: str) -> str | None:
    """The ``<os><nvram>`` file of a domain XML, if it names one."""
    try:
        node = ET.fromstring(xml).find("os/nvram")
    except ET.ParseError:
        return None
    text = (node.text or "").strip() if node is not None else ""
    return text or None


def undefine_with_fallback(dom: libvirt.virDomain) -> str:
    """Undefine with every flag the driver accepts, giving them up one by one."""
    flags = [
        (label, getattr(libvirt, name)) for label, name in _UNDEFINE_FLAGS if hasattr(libvirt, name)
    ]
    rejected: list[str] = []
    while flags:
        try:
            dom.undefineFlags(functools.reduce(operator.or_, (value for _, value in flags)))
        except libvirt.libvirtError as err:
            if err.get_error_code() not in _FLAG_REJECTED:
                raise
            rejected.append(flags.pop()[0])
            continue
        break
    else:
        dom.undefine()
    return "undefined" + (f" (driver rejected {', '.join(rejected)})" if rejected else "")


def _is_active(dom: libvirt.virDomain) -> bool:
    return bool(dom.state()[0] not in hypervisor.INACTIVE_STATES)


def _wait_shut_off(dom: libvirt.virDomain, deadline: float) -> bool:
    while True:
        if not _is_active(dom):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(min(_POLL_INTERVAL, max(0.0, deadline - time.monotonic())))


def _keep_snapshots(dom: libvirt.virDomain, directory: str) -> tuple[tuple[str, ...], str | None]:
    """Write every snapshot's XML to ``snapshots/<i>.xml``, parents first; the current one."""
    snapshots = _listed(dom.listAllSnapshots, "VIR_DOMAIN_SNAPSHOT_LIST_TOPOLOGICAL")
    names = _write_listed(snapshots, os.path.join(directory, SNAPSHOTS_DIR), "SNAPSHOT")
    current = None
    if snapshots and dom.hasCurrentSnapshot(0):
        current = dom.snapshotCurrent(0).getName()
    return names, current


def _keep_checkpoints(dom: libvirt.virDomain, directory: str) -> tuple[str, ...]:
    """Write every checkpoint's XML to ``checkpoints/<i>.xml``, parents first."""
    if not hasattr(dom, "listAllCheckpoints"):
        return ()
    checkpoints = _listed(dom.listAllCheckpoints, "VIR_DOMAIN_CHECKPOINT_LIST_TOPOLOGICAL")
    return _write_listed(checkpoints, os.path.join(directory, CHECKPOINTS_DIR), "CHECKPOINT")


def _listed(list_all: object, topological: str) -> list[object]:
    """``list_all(flags)``; [] when the driver does not support it at all."""
    assert callable(list_all)
    try:
        return list(list_all(getattr(libvirt, topological, 0)))
    except libvirt.libvirtError as err:
        if err.get_error_code() in _FLAG_REJECTED:
            return []
        raise


def _write_listed(items: list[object], directory: str, what: str) -> tuple[str, ...]:
    secure = getattr(libvirt, f"VIR_DOMAIN_{what}_XML_SECURE", 0)
    names = []
    for index, item in enumerate(items):
        if index == 0:
            os.makedirs(directory, mode=0o700, exist_ok=True)
        write_durably(os.path.join(directory, f"{index}.xml"), item.getXMLDesc(secure))  # type: ignore[attr-defined]
        names.append(str(item.getName()))  # type: ignore[attr-defined]
    return tuple(names)


def _state_not_kept(dom: libvirt.virDomain, directory: str, live_image: str) -> str | None:
    """What the domain has now that its quarantine lacks (a managed save, snapshots)."""
    image = os.path.join(directory, MANAGED_SAVE_FILE)
    if dom.hasManagedSaveImage(0):
        if not os.path.isfile(image):
            return "it gained a managed-save image"
        if _file_identity(live_image) != _file_identity(image):
            # NOTE: resumed and saved again: the kept image is older RAM state.
            return "its managed-save image changed"
    # NOTE: by name, not by count: one snapshot deleted and another taken is a change.
    snapshots = _listed(dom.listAllSnapshots, "VIR_DOMAIN_SNAPSHOT_LIST_TOPOLOGICAL")
    if _names(snapshots) != _kept_names(os.path.join(directory, SNAPSHOTS_DIR)):
        return "its snapshots changed"
    if hasattr(dom, "listAllCheckpoints"):
        checkpoints = _listed(dom.listAllCheckpoints, "VIR_DOMAIN_CHECKPOINT_LIST_TOPOLOGICAL")
        if _names(checkpoints) != _kept_names(os.path.join(directory, CHECKPOINTS_DIR)):
            return "its checkpoints changed"
    return None


def _file_identity(path: str) -> tuple[int, int] | None:
    """Size and modification time: equal for a hard link and for a ``copy2`` of the file."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return None
    return found.st_size, found.st_mtime_ns


def _names(items: list[object]) -> set[str]:
    return {str(item.getName()) for item in items}  # type: ignore[attr-defined]


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


#: What ``keep_state`` may have put into a quarantine directory.
_KEPT_NAMES = (MANAGED_SAVE_FILE, BACKING_DIR, NVRAM_FILE, TPM_DIR, SNAPSHOTS_DIR, CHECKPOINTS_DIR)


def _discard_kept(directory: str) -> None:
    """Remove what a refused ``keep_state`` had kept (never following a symlink)."""
    for name in _KEPT_NAMES:
        path = os.path.join(directory, name)
        # NOTE: a removal that fails must not hide why the reap was refused.
        with contextlib.suppress(OSError):
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
    with contextlib.suppress(OSError):
        fsync_path(directory)
