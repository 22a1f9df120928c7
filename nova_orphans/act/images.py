"""A guest's disk images, read as hostile input: formats declared, backing files checked.

NOTE: docs/design.md rule 20. The bytes of a disk are the tenant's: a raw disk can
carry a forged qcow2 header that names a host file, a device or a network address as
its backing file (the class of OSSA-2024-001, CVE-2024-32498). So a format is never
probed: it is the domain XML's ``<driver type>``, and down a chain the format the
overlay records for its backing file. Every image is inspected with oslo.utils'
format inspector (as Nova, Glance and Cinder do) before ``qemu-img`` reads it, with
that format given and without its backing file opened, and the chain is walked here
one image at a time. A backing file is accepted only when it is a regular file under
``instances_path`` reached through no symlink; anything else refuses the reap.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import logging
import os
import re
import stat
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator

from oslo_utils.imageutils import format_inspector

from nova_orphans.act.effects import EffectError
from nova_orphans.act.quarantine.paths import first_symlink, fsync_path
from nova_orphans.exceptions import one_line

LOG = logging.getLogger(__name__)

QEMU_IMG = "qemu-img"
#: The formats whose backing chain this tool reads; a disk of another format in the
#: instance directory refuses the reap (Nova's libvirt driver writes raw and qcow2).
READABLE_FORMATS = ("raw", "qcow2")
#: Longer chains than this are refused (Nova's are one or two images deep).
MAX_CHAIN = 16
#: What a copy must leave free on the quarantine's file system.
FREE_RESERVE = 256 << 20
_CHUNK = 1 << 20
#: qemu's own test for a protocol prefix: a colon before any slash (``nbd:``,
#: ``http:``, ``json:``, ``file:`` …).
_PROTOCOL = re.compile(r"^[^/]*:")


@dataclasses.dataclass(frozen=True)
class Image:
    """A disk image and the format it is read as (never probed)."""

    path: str
    format: str


def file_disks(xml: str) -> list[Image]:
    """Every file-backed disk of a domain XML, with its ``<driver type>`` (raw when absent).

    NOTE: libvirt reads a file disk without a declared format as raw; so do we.
    """
    try:
        root = ET.fromstring(xml)
    except ET.ParseError:
        return []
    found = []
    for disk in root.iterfind("devices/disk"):
        source = disk.find("source")
        path = source.get("file") if source is not None else None
        if disk.get("type", "file") != "file" or not path:
            continue
        driver = disk.find("driver")
        declared = driver.get("type") if driver is not None else None
        found.append(Image(os.path.abspath(path), declared or "raw"))
    return found


def backing_chain(disk: Image, instances_path: str) -> list[Image]:
    """The backing files of ``disk`` (not the disk itself), nearest first, each checked.

    A disk that does not exist has none; a raw image has none, whatever its bytes
    look like. Raises ``EffectError`` (one line) when the chain cannot be read safely
    or leads anywhere but a regular file under ``instances_path``.
    """
    if not os.path.lexists(disk.path):
        return []
    check_regular(disk.path, f"disk {disk.path}")
    chain: list[Image] = []
    image: Image | None = disk
    while image is not None:
        image = _backing_of(image, instances_path)
        if image is None:
            break
        if image.path == disk.path or image in chain:
            raise _unreadable(disk.path, f"its chain loops back to {image.path}")
        if len(chain) == MAX_CHAIN:
            raise _unreadable(disk.path, f"its chain is longer than {MAX_CHAIN} images")
        chain.append(image)
    return chain


def _backing_of(image: Image, instances_path: str) -> Image | None:
    """The one backing file ``image`` names, checked; None when it has none."""
    if image.format == "raw":
        if _looks_like_qcow2(image.path):
            LOG.warning(
                "%s is declared raw but its bytes look like qcow2: read as raw "
                "(a header the guest may have written is not followed)",
                image.path,
            )
        return None
    if image.format not in READABLE_FORMATS:
        raise _unreadable(
            image.path,
            f"its format {image.format!r} is not one whose chain is read "
            f"({', '.join(READABLE_FORMATS)})",
        )
    has_backing = _inspect_qcow2(image.path)
    info = _qemu_img_info(image)
    named = info.get("backing-filename")
    if _data_file(info):
        raise _unreadable(image.path, f"qemu-img reports a data file ({_data_file(info)})")
    if not named:
        if has_backing:
            raise _unreadable(image.path, "its header has a backing file qemu-img does not show")
        return None
    path = backing_path(image, str(named), instances_path)
    assert path is not None
    check_regular(path, f"its backing file {path}", image.path)
    declared = info.get("backing-filename-format")
    return Image(path, str(declared) if declared else _undeclared_format(image.path, path))


def _inspect_qcow2(path: str) -> bool:
    """Whether the qcow2 image at ``path`` has a backing file; refuse it when unsafe.

    NOTE: oslo.utils' safety checks refuse a backing file too; ours is accepted and
    then judged by ``backing_path``. A data file, unknown features or a header
    that is not qcow2 at all refuse it.
    """
    inspector = _inspected(path, "qcow2")
    if not inspector.format_match:
        raise _unreadable(path, "it is declared qcow2 but is not a qcow2 image")
    try:
        with _backing_file_warning_muted():
            inspector.safety_check()
    except format_inspector.SafetyCheckFailed as err:
        unsafe = {name: why for name, why in err.failures.items() if name != "backing_file"}
        if unsafe:
            reasons = "; ".join(f"{name}: {why}" for name, why in sorted(unsafe.items()))
            raise _unreadable(path, f"unsafe image ({reasons})") from err
        return True
    except format_inspector.ImageFormatError as err:
        raise _unreadable(path, f"unsafe image ({err})") from err
    return False


class _MuteBackingFileCheck(logging.Filter):
    """Drop oslo.utils' warning that a qcow2 image has a backing file (every overlay has)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (isinstance(record.args, tuple) and record.args[:1] == ("backing_file",))


@contextlib.contextmanager
def _backing_file_warning_muted() -> Iterator[None]:
    inspector_log = logging.getLogger(format_inspector.__name__)
    muted = _MuteBackingFileCheck()
    inspector_log.addFilter(muted)
    try:
        yield
    finally:
        inspector_log.removeFilter(muted)


def _looks_like_qcow2(path: str) -> bool:
    try:
        return bool(_inspected(path, "qcow2").format_match)
    except EffectError:
        return False


def _inspected(path: str, fmt: str) -> format_inspector.FileInspector:
    """Run oslo.utils' inspector for ``fmt`` over the regular file at ``path`` (no symlink)."""
    inspector_class = format_inspector.get_inspector(fmt)
    assert inspector_class is not None
    inspector = inspector_class()
    try:
        with _opened_regular(path) as (image, _):
            while not inspector.complete:
                chunk = os.read(image, _CHUNK)
                if not chunk:
                    break
                inspector.eat_chunk(chunk)
    except OSError as err:
        raise _unreadable(path, err.strerror or str(err)) from err
    except format_inspector.ImageFormatError as err:
        raise _unreadable(path, f"unsafe image ({err})") from err
    inspector.finish()
    return inspector


def _qemu_img_info(image: Image) -> dict[str, object]:
    """``qemu-img info`` of one image, its format given; its backing file is not opened."""
    # NOTE: an absolute path has no protocol prefix for qemu; without --backing-chain
    # qemu-img opens the image alone (BDRV_O_NO_BACKING).
    assert os.path.isabs(image.path)
    command = [QEMU_IMG, "info", "-f", image.format, "--output=json", "-U", image.path]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise _unreadable(image.path, str(err)) from err
    if done.returncode != 0:
        why = one_line(done.stderr) or f"{QEMU_IMG} exit {done.returncode}"
        raise _unreadable(image.path, why)
    try:
        info = json.loads(done.stdout)
    except ValueError as err:
        raise _unreadable(image.path, f"qemu-img answered no JSON ({err})") from err
    if not isinstance(info, dict):
        raise _unreadable(image.path, "qemu-img answered no JSON object")
    return info


def _data_file(info: dict[str, object]) -> str | None:
    specific = info.get("format-specific")
    data = specific.get("data") if isinstance(specific, dict) else None
    found = data.get("data-file") if isinstance(data, dict) else None
    return str(found) if found else None


def backing_path(image: Image, named: str | None, instances_path: str) -> str | None:
    """The backing file ``named`` in the header of ``image`` (read as its declared format),
    when the path rules allow it; None when there is none. Pure: no file is touched.

    A raw image names no backing file, whatever its bytes say. A protocol or URL, or a
    path outside ``instances_path``, raises ``EffectError``; ``check_regular`` must then
    find a regular file there, reached through no symlink.
    """
    if image.format == "raw" or not named:
        return None
    if _PROTOCOL.match(named):
        why = f"its backing file {named!r} is a protocol or URL, not a file"
        raise _unreadable(image.path, why)
    # NOTE: qemu resolves a relative name against the overlay's directory.
    path = os.path.normpath(os.path.join(os.path.dirname(image.path), named))
    base = os.path.abspath(instances_path)
    if os.path.commonpath([path, base]) != base or path == base:
        raise _unreadable(image.path, f"its backing file {path} is outside {base}")
    return path


def check_regular(
    path: str,
    what: str,
    disk: str | None = None,
    lstat: Callable[[str], os.stat_result] = os.lstat,
) -> None:
    """Refuse ``path`` unless it is a regular file reached through no symlink.

    ``lstat``: how a path is looked at (a simulated host passes its own).
    """
    link = first_symlink(path, lstat)
    if link is not None:
        raise _unreadable(disk or path, f"{what}: {link} is a symlink (never followed)")
    try:
        mode = lstat(path).st_mode
    except OSError as err:
        raise _unreadable(disk or path, f"{what}: {err.strerror}") from err
    if not stat.S_ISREG(mode):
        raise _unreadable(disk or path, f"{what} is not a regular file")


def _undeclared_format(overlay: str, path: str) -> str:
    """The format of a backing file its overlay does not record: raw, or refused.

    NOTE: qemu would probe it. Read as raw it has no backing file and names nothing,
    so raw is accepted; a base that looks like any other format is refused, since it
    may be a tenant's upload with a forged header (Nova's base-image check).
    """
    try:
        found = format_inspector.detect_file_format(path)
    except (OSError, format_inspector.ImageFormatError) as err:
        raise _unreadable(overlay, f"its backing file {path} cannot be inspected ({err})") from err
    if found is None or str(found) != "raw":
        raise _unreadable(
            overlay,
            f"its backing file {path} has no recorded format and looks like {found}: not probed",
        )
    return "raw"


def _unreadable(path: str, why: str) -> EffectError:
    return EffectError(f"cannot read the backing chain of {path}: {why}")


@contextlib.contextmanager
def _opened_regular(path: str) -> Iterator[tuple[int, os.stat_result]]:
    """A read-only descriptor of ``path`` and its status, when it is a regular file.

    NOTE: O_NOFOLLOW refuses a symlink as the last component; O_NONBLOCK keeps a FIFO
    from blocking the open; the type is checked on what was opened.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        yield fd, found
    finally:
        os.close(fd)


def keep_file(source: str, target: str) -> str:
    """Hard-link ``source`` as ``target`` (no space used); copy it across file systems.

    Only a regular file is kept (its last component no symlink; the link or copy is of
    the file that was opened), and a copy writes no more
    than the file's size and only when that fits beside a reserve of free space
    (``FREE_RESERVE``); a copy that fails leaves nothing behind. Returns "hard link" or
    "copy"; raises ``EffectError`` (one line) when it will not.
    """
    try:
        with _opened_regular(source) as (fd, found):
            how = _link(source, target, found) or _bounded_copy(fd, found, source, target)
    except OSError as err:
        raise EffectError(f"not kept: {source}: {err.strerror or err}") from err
    fsync_path(target)
    return how


def _link(source: str, target: str, found: os.stat_result) -> str | None:
    """Hard-link ``source``, checked to be the file that was opened; None across file systems."""
    try:
        os.link(source, target, follow_symlinks=False)
    except OSError as err:
        if err.errno in (errno.EXDEV, errno.EPERM, errno.EMLINK):
            return None
        raise
    linked = os.lstat(target)
    if (linked.st_dev, linked.st_ino) != (found.st_dev, found.st_ino):
        os.unlink(target)
        raise EffectError(f"not kept: {source} was replaced while it was linked")
    return "hard link"


def _bounded_copy(fd: int, found: os.stat_result, source: str, target: str) -> str:
    """Copy what ``fd`` holds, at most ``found.st_size`` bytes, when it fits; else nothing."""
    space = os.statvfs(os.path.dirname(target))
    free = space.f_bavail * space.f_frsize
    if found.st_size + FREE_RESERVE > free:
        raise EffectError(
            f"not kept: a copy of {source} ({found.st_size} bytes) would leave less than "
            f"{FREE_RESERVE >> 20} MiB free of {free} bytes where the quarantine is"
        )
    out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        left = found.st_size
        while left:
            chunk = os.read(fd, min(_CHUNK, left))
            if not chunk:
                raise EffectError(f"not kept: {source} shrank while it was copied")
            written = memoryview(chunk)
            while written:
                written = written[os.write(out, written) :]
            left -= len(chunk)
        if os.read(fd, 1):
            raise EffectError(f"not kept: {source} grew while it was copied")
        os.fchmod(out, stat.S_IMODE(found.st_mode))
        os.fsync(out)
    except BaseException:
        os.close(out)
        os.unlink(target)
        raise
    os.close(out)
    # NOTE: size and time equal the source's, as ``shutil.copy2`` would leave them.
    os.utime(target, ns=(found.st_atime_ns, found.st_mtime_ns), follow_symlinks=False)
    return "copy"
