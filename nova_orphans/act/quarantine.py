"""Operator actions on the quarantine: restore a reaped guest, or purge it for good.

Listing the quarantine is ``Journal.quarantine``. A quarantine directory is
``<quarantine_root>/<uuid>/<stamp>`` and holds ``domain.xml``, and when they
were saved ``nvram``, ``swtpm/`` and the instance directory as ``files/``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import xml.etree.ElementTree as ET

import libvirt

from nova_orphans.act import live, paths
from nova_orphans.act.effects import EffectError
from nova_orphans.observe import hypervisor
from nova_orphans.record.journal import QuarantineEntry


def restore(
    entry: QuarantineEntry,
    uri: str,
    instances_path: str,
    start: bool = False,
    *,
    swtpm_root: str = live.DEFAULT_SWTPM_ROOT,
) -> str:
    """Bring a reaped guest back: its files, NVRAM/TPM state and definition; maybe start it.

    Refuses when libvirt has a domain with this UUID again. Returns what was done.
    """
    directory = _entry_dir(entry)
    xml = _read_xml(entry, directory)
    conn = live.open_connection(uri)
    try:
        _refuse_if_defined(conn, entry.uuid, uri)
        notes = [restore_files(entry, instances_path)] if entry.files_moved else []
        try:
            notes += _restore_state_files(entry.uuid, xml, directory, swtpm_root)
            dom = conn.defineXML(xml)
        except (libvirt.libvirtError, OSError) as err:
            if entry.files_moved:
                # NOTE: put the files back where the quarantine says they are, so
                # that the entry stays consistent and restore can be retried.
                with contextlib.suppress(OSError):
                    os.rename(os.path.join(instances_path, entry.uuid), _files_dir(directory))
            raise EffectError(f"restore {entry.uuid}: define failed: {_reason_of(err)}") from err
        notes.insert(0, f"defined {dom.name()}")
        if start:
            try:
                dom.create()
            except libvirt.libvirtError as err:
                raise EffectError(
                    f"restore {entry.uuid}: defined again but start failed: {_reason_of(err)}"
                ) from err
            notes.append("started")
    finally:
        with contextlib.suppress(libvirt.libvirtError):
            conn.close()
    return f"restored {entry.uuid}: " + "; ".join(notes)


def restore_files(entry: QuarantineEntry, instances_path: str) -> str:
    """Move ``<quarantine>/files`` back to ``<instances_path>/<uuid>``; never over anything."""
    source = _files_dir(_entry_dir(entry))
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
        where = "another file system" if err.errno == errno.EXDEV else _reason_of(err)
        raise EffectError(f"restore files of {entry.uuid}: cannot move to {where}") from err
    return f"moved the instance directory back to {target}"


def purge(entry: QuarantineEntry, quarantine_root: str) -> str:
    """Delete the quarantine directory of ``entry`` for good (its XML, state and files).

    Only ``<quarantine_root>/<uuid>/<stamp>`` of this entry's UUID is removed,
    through no symlink. A directory that is already gone is not an error.
    """
    path = os.path.abspath(entry.path)
    root = os.path.abspath(quarantine_root)
    if not paths.is_canonical_uuid(entry.uuid):
        raise EffectError(f"purge: {entry.uuid!r} is not a canonical UUID")
    if not os.path.lexists(path):
        return f"nothing to purge: {path} is gone"
    refusal = paths.path_refusal(root, path)
    if refusal is None and os.path.relpath(path, root).split(os.sep)[:-1] != [entry.uuid]:
        refusal = f"{path} is not a quarantine directory of {entry.uuid} under {root}"
    if refusal:
        raise EffectError(f"purge {entry.uuid}: {refusal}")
    # NOTE: on Linux rmtree works on directory descriptors and never follows a
    # symlink it meets inside the tree (shutil.rmtree.avoids_symlink_attacks).
    try:
        shutil.rmtree(path)
    except OSError as err:
        raise EffectError(f"purge {entry.uuid}: {_reason_of(err)}") from err
    with contextlib.suppress(OSError):
        os.rmdir(os.path.dirname(path))  # the UUID's directory, once empty
    return f"purged {path}"


def _entry_dir(entry: QuarantineEntry) -> str:
    """The entry's quarantine directory, checked: ``…/<uuid>/<stamp>``, no symlinks."""
    if not paths.is_canonical_uuid(entry.uuid):
        raise EffectError(f"quarantine entry: {entry.uuid!r} is not a canonical UUID")
    path = os.path.abspath(entry.path)
    parent = os.path.dirname(path)
    refusal = paths.path_refusal(parent, path)
    if refusal is None and os.path.basename(parent) != entry.uuid:
        refusal = f"{path} is not a quarantine directory of {entry.uuid}"
    if refusal:
        raise EffectError(f"quarantine entry {entry.uuid}: {refusal}")
    return path


def _files_dir(directory: str) -> str:
    return os.path.join(directory, live.FILES_DIR)


def _read_xml(entry: QuarantineEntry, directory: str) -> str:
    path = os.path.join(directory, live.XML_FILE)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, encoding="utf-8") as saved:
            xml = saved.read()
        found = ET.fromstring(xml).findtext("uuid")
    except (OSError, ET.ParseError) as err:
        raise EffectError(f"restore {entry.uuid}: cannot read {path}: {_reason_of(err)}") from err
    if (found or "").strip().lower() != entry.uuid:
        raise EffectError(f"restore {entry.uuid}: {path} describes another domain ({found})")
    return xml


def _restore_state_files(uuid: str, xml: str, directory: str, swtpm_root: str) -> list[str]:
    notes = []
    nvram = live.nvram_path(xml)
    saved = os.path.join(directory, live.NVRAM_FILE)
    if nvram is not None and os.path.isfile(saved):
        if os.path.lexists(nvram):
            notes.append(f"NVRAM kept at {nvram}")
        else:
            os.makedirs(os.path.dirname(nvram), exist_ok=True)
            shutil.copy2(saved, nvram)
            os.chmod(nvram, 0o600)
            notes.append(f"NVRAM copied back to {nvram}")
    saved_tpm = os.path.join(directory, live.TPM_DIR)
    tpm = os.path.join(swtpm_root, uuid)
    if os.path.isdir(saved_tpm) and not os.path.lexists(tpm):
        shutil.copytree(saved_tpm, tpm, symlinks=True)
        notes.append(f"TPM state copied back to {tpm}")
    return notes


def _refuse_if_defined(conn: libvirt.virConnect, uuid: str, uri: str) -> None:
    try:
        dom = conn.lookupByUUIDString(uuid)
    except libvirt.libvirtError as err:
        if hypervisor.is_gone(err):
            return
        raise EffectError(f"restore {uuid}: {hypervisor.libvirt_reason(err)}") from err
    raise EffectError(f"restore {uuid}: libvirt {uri} has this UUID again ({dom.name()}); refused")


def _reason_of(err: Exception) -> str:
    if isinstance(err, libvirt.libvirtError):
        return hypervisor.libvirt_reason(err)
    if isinstance(err, OSError):
        return paths.os_reason(err)
    return " ".join(str(err).split())
