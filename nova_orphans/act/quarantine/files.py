"""The quarantine's files: its directory made, the guest's files moved in and back, purged.

Nothing here speaks libvirt. A reap makes ``<quarantine_root>/<uuid>/<stamp>``
(each level 0700), writes the XML and the manifest into it, copies the NVRAM/TPM
state and renames the instance directory into it; a restore moves them back; the
retention purge deletes it. Every move is refused when a path is not what it must be
(``paths``): no symlink followed, nothing outside its root, no shared storage unless
allowed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import xml.etree.ElementTree as ET
from collections.abc import Iterator

from nova_orphans.act.effects import EffectError, FilesResult, SavedQuarantine
from nova_orphans.act.quarantine import manifest as manifests
from nova_orphans.act.quarantine import paths
from nova_orphans.act.quarantine.manifest import (
    BACKING_DIR,
    CHECKPOINTS_DIR,
    FILES_DIR,
    MANAGED_SAVE_FILE,
    NVRAM_FILE,
    SNAPSHOTS_DIR,
    TPM_DIR,
    XML_FILE,
    Manifest,
)
from nova_orphans.record.entries import QuarantineEntry

DEFAULT_SWTPM_ROOT = "/var/lib/libvirt/swtpm"
#: What ``keep_state`` may have put into a quarantine directory.
_KEPT_NAMES = (MANAGED_SAVE_FILE, BACKING_DIR, NVRAM_FILE, TPM_DIR, SNAPSHOTS_DIR, CHECKPOINTS_DIR)


class QuarantineFiles:
    """The file side of the live effects: the quarantine directory and what moves into it."""

    def __init__(
        self,
        instances_path: str,
        quarantine_root: str,
        allow_shared_storage: bool = False,
        *,
        mounts_file: str = paths.DEFAULT_MOUNTS_FILE,
        swtpm_root: str = DEFAULT_SWTPM_ROOT,
    ) -> None:
        self._instances_path = os.path.abspath(instances_path)
        self._quarantine_root = os.path.abspath(quarantine_root)
        self._allow_shared_storage = allow_shared_storage
        self._mounts_file = mounts_file
        self._swtpm_root = swtpm_root

    def saved_quarantines(self, uuid: str) -> list[SavedQuarantine]:
        """Quarantine directories of ``uuid`` holding its saved XML (no symlink followed)."""
        if not paths.is_canonical_uuid(uuid):
            return []
        base = os.path.join(self._quarantine_root, uuid)
        if paths.path_refusal(self._quarantine_root, base):
            return []
        found = []
        for stamp in sorted(os.listdir(base)):
            directory = os.path.join(base, stamp)
            if paths.path_refusal(base, directory) is None and os.path.isfile(
                os.path.join(directory, XML_FILE)
            ):
                files = files_dir(directory)
                found.append(
                    SavedQuarantine(stamp, directory, paths.path_refusal(directory, files) is None)
                )
        return found

    def quarantine_dir(self, uuid: str, stamp: str) -> str:
        """Create ``<quarantine_root>/<uuid>/<stamp>`` (each level 0700) and return it."""
        if not paths.is_canonical_uuid(uuid):
            raise EffectError(f"quarantine: {uuid!r} is not a canonical UUID")
        if not paths.STAMP.fullmatch(stamp):
            raise EffectError(f"quarantine: {stamp!r} is not a usable time stamp")
        root = self._quarantine_root
        with _os_errors("quarantine"):
            with contextlib.suppress(FileExistsError):
                os.makedirs(root, mode=0o700)
            link = paths.first_symlink(root)
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
                refusal = paths.path_refusal(root, path)
                if refusal:
                    raise EffectError(f"quarantine: {refusal}")
                os.chmod(path, 0o700)
            if os.listdir(path):
                raise EffectError(f"quarantine: {path} is already in use")
            paths.fsync_path(os.path.dirname(path))
        return path

    def save_xml(self, directory: str, xml: str) -> None:
        """Write ``domain.xml`` (0600) into the quarantine directory, fsynced."""
        target = self._checked_quarantine(directory)
        with _os_errors("save the domain XML"):
            paths.write_durably(os.path.join(target, XML_FILE), xml)

    def write_manifest(self, directory: str, manifest: Manifest) -> None:
        """Write ``manifest.json`` (0600) into the quarantine directory, fsynced."""
        target = self._checked_quarantine(directory)
        with _os_errors("write the quarantine manifest"):
            manifests.write(target, manifest)

    def move_instance_files(self, uuid: str, directory: str) -> FilesResult:
        """Rename ``<instances_path>/<uuid>`` to ``<directory>/files`` when that is safe."""
        if not paths.is_canonical_uuid(uuid):
            return FilesResult(False, f"{uuid!r} is not a canonical UUID: no path is built from it")
        target = self._checked_quarantine(directory)
        source = os.path.join(self._instances_path, uuid)
        refusal = paths.path_refusal(self._instances_path, source)
        if refusal is None and not self._allow_shared_storage:
            refusal = paths.shared_storage_refusal(source, self._mounts_file)
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
            raise EffectError(f"move {source}: {paths.os_reason(err)}") from err
        for changed in (self._instances_path, target):
            with contextlib.suppress(OSError):
                paths.fsync_path(changed)
        return FilesResult(True, f"moved {source} to {destination}")

    def purge(self, uuid: str, directory: str) -> str:
        """Delete ``<quarantine_root>/<uuid>/<stamp>`` for good, and its UUID directory if empty."""
        path = os.path.abspath(directory)
        if not paths.is_canonical_uuid(uuid):
            raise EffectError(f"purge: {uuid!r} is not a canonical UUID")
        if not os.path.lexists(path):
            return f"{path} was already gone"
        refusal = paths.entry_refusal(uuid, path, self._quarantine_root)
        if refusal:
            raise EffectError(f"purge {uuid}: {refusal}")
        # NOTE: on Linux rmtree works on directory descriptors and never follows a
        # symlink it meets inside the tree (shutil.rmtree.avoids_symlink_attacks).
        try:
            shutil.rmtree(path)
        except OSError as err:
            raise EffectError(f"purge {uuid}: {paths.os_reason(err)}") from err
        with contextlib.suppress(OSError):
            os.rmdir(os.path.dirname(path))  # the UUID's directory, once empty
        return f"deleted {path}"

    def _keep_state_files(self, uuid: str, xml: str, directory: str) -> tuple[bool, bool]:
        """Copy the guest's NVRAM file and TPM state into the quarantine; whether each was."""
        nvram = nvram_path(xml)
        nvram_kept = nvram is not None and os.path.isfile(nvram)
        if nvram_kept:
            assert nvram is not None
            copied = os.path.join(directory, NVRAM_FILE)
            shutil.copy2(nvram, copied)
            os.chmod(copied, 0o600)
            paths.fsync_path(copied)
        tpm = os.path.join(self._swtpm_root, uuid)
        tpm_kept = os.path.isdir(tpm) and not os.path.islink(tpm)
        if tpm_kept:
            shutil.copytree(tpm, os.path.join(directory, TPM_DIR), symlinks=True)
        return nvram_kept, tpm_kept

    def _checked_quarantine(self, directory: str) -> str:
        refusal = paths.path_refusal(self._quarantine_root, directory)
        if refusal:
            raise EffectError(f"quarantine: {refusal}")
        return os.path.abspath(directory)


def discard_kept(directory: str) -> None:
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
        paths.fsync_path(directory)


def nvram_path(xml: str) -> str | None:
    """The ``<os><nvram>`` file of a domain XML, if it names one."""
    try:
        node = ET.fromstring(xml).find("os/nvram")
    except ET.ParseError:
        return None
    text = (node.text or "").strip() if node is not None else ""
    return text or None


def files_dir(directory: str) -> str:
    """Where a quarantine directory keeps the guest's instance directory."""
    return os.path.join(directory, FILES_DIR)


def entry_dir(entry: QuarantineEntry) -> str:
    """The entry's quarantine directory, checked: ``…/<uuid>/<stamp>``, no symlinks."""
    refusal = paths.entry_refusal(entry.uuid, entry.path)
    if refusal:
        raise EffectError(f"quarantine entry {entry.uuid}: {refusal}")
    return os.path.abspath(entry.path)


def move_files_back(entry: QuarantineEntry, instances_path: str) -> str:
    """Move ``<quarantine>/files`` back to ``<instances_path>/<uuid>``; never over anything."""
    source = files_dir(entry_dir(entry))
    refusal = paths.path_refusal(os.path.dirname(source), source)
    if refusal:
        raise EffectError(f"restore files of {entry.uuid}: {refusal}")
    base = os.path.abspath(instances_path)
    link = paths.first_symlink(base)
    if link is not None or not os.path.isdir(base):
        why = f"{link} is a symlink" if link else "it is not a directory"
        raise EffectError(f"restore files of {entry.uuid}: instances_path {base}: {why}")
    target = os.path.join(base, entry.uuid)
    if os.path.lexists(target):
        raise EffectError(f"restore files of {entry.uuid}: {target} exists; not overwritten")
    try:
        os.rename(source, target)
    except OSError as err:
        where = "another file system" if err.errno == errno.EXDEV else paths.os_reason(err)
        raise EffectError(f"restore files of {entry.uuid}: cannot move to {where}") from err
    return f"moved the instance directory back to {target}"


def relink_backing(directory: str, saved: Manifest | None) -> list[str]:
    """Put back every backing file the disks need that is gone (e.g. Nova's cache removed it)."""
    notes = []
    for backing in saved.kept.backing if saved else ():
        if os.path.lexists(backing.path):
            continue
        copy = os.path.join(directory, BACKING_DIR, backing.kept)
        try:
            os.makedirs(os.path.dirname(backing.path), exist_ok=True)
            os.link(copy, backing.path, follow_symlinks=False)
        except OSError as err:
            if err.errno != errno.EXDEV:
                why = paths.os_reason(err)
                raise EffectError(f"put back backing file {backing.path}: {why}") from err
            shutil.copy2(copy, backing.path)
        notes.append(f"put back backing file {backing.path}")
    return notes


def restore_state_files(uuid: str, xml: str, directory: str, swtpm_root: str) -> list[str]:
    """Copy the kept NVRAM file and TPM state back where they are missing; what was done."""
    notes = []
    nvram = nvram_path(xml)
    saved = os.path.join(directory, NVRAM_FILE)
    if nvram is not None and os.path.isfile(saved):
        if os.path.lexists(nvram):
            notes.append(f"NVRAM kept at {nvram}")
        else:
            os.makedirs(os.path.dirname(nvram), exist_ok=True)
            shutil.copy2(saved, nvram)
            os.chmod(nvram, 0o600)
            notes.append(f"NVRAM copied back to {nvram}")
    saved_tpm = os.path.join(directory, TPM_DIR)
    tpm = os.path.join(swtpm_root, uuid)
    if os.path.isdir(saved_tpm) and not os.path.lexists(tpm):
        shutil.copytree(saved_tpm, tpm, symlinks=True)
        notes.append(f"TPM state copied back to {tpm}")
    return notes


def read_kept(directory: str, *names: str) -> str:
    """The text of a file the quarantine kept (a snapshot's or checkpoint's XML)."""
    with open(os.path.join(directory, *names), encoding="utf-8") as saved:
        return saved.read()


@contextlib.contextmanager
def _os_errors(what: str) -> Iterator[None]:
    """Turn OS errors into one-line ``EffectError``s."""
    try:
        yield
    except OSError as err:
        raise EffectError(f"{what}: {paths.os_reason(err)}") from err
