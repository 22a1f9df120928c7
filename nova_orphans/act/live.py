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

from nova_orphans.act.effects import EffectError, FilesResult, SavedQuarantine
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
#: File names inside a quarantine directory.
XML_FILE, NVRAM_FILE, TPM_DIR, FILES_DIR = "domain.xml", "nvram", "swtpm", "files"

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
    ) -> None:
        self._uri = uri
        self._instances_path = os.path.abspath(instances_path)
        self._quarantine_root = os.path.abspath(quarantine_root)
        self._allow_shared_storage = allow_shared_storage
        self._mounts_file = mounts_file
        self._swtpm_root = swtpm_root
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

    def undefine(self, uuid: str, directory: str) -> str:
        """Copy NVRAM/TPM state into ``directory``, then undefine; refuse an active domain."""
        target = self._checked_quarantine(directory)
        dom = self._domain(uuid)
        with self._errors(f"undefine {uuid}"):
            if _is_active(dom):
                # NOTE: undefining a running persistent domain makes it transient:
                # it would vanish, unrestorable, when it stops.
                raise EffectError(f"undefine {uuid}: the domain is running; stop it first")
            xml = dom.XMLDesc(_XML_FLAGS)
            notes = self._save_state_files(uuid, xml, target)
            notes.insert(0, _undefine_with_fallback(dom))
            self._check_still_undefined(uuid, xml)
        return "; ".join(notes)

    def _save_state_files(self, uuid: str, xml: str, directory: str) -> list[str]:
        notes = []
        nvram = nvram_path(xml)
        if nvram is not None:
            if os.path.isfile(nvram):
                copied = os.path.join(directory, NVRAM_FILE)
                shutil.copy2(nvram, copied)
                os.chmod(copied, 0o600)
                fsync_path(copied)
                notes.append(f"saved NVRAM {nvram}")
            else:
                notes.append(f"no NVRAM file at {nvram}")
        tpm = os.path.join(self._swtpm_root, uuid)
        if os.path.isdir(tpm) and not os.path.islink(tpm):
            shutil.copytree(tpm, os.path.join(directory, TPM_DIR), symlinks=True)
            notes.append(f"saved TPM state {tpm}")
        fsync_path(directory)
        return notes

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


def _undefine_with_fallback(dom: libvirt.virDomain) -> str:
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
