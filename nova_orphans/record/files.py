"""The files and directories the tool makes: each with its own mode whatever the umask, each
file replaced whole (never partly written, never through a link or onto a device), and each
failure named by its real cause (permission, read-only, is a directory, no space).

NOTE: the one copy of these rules: the journal and the metrics (here), the quarantine
(``act/quarantine/paths.py``) and the command line's output files use it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat

#: What each errno a write may end in means to the operator.
CAUSES = {
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EROFS: "read-only file system",
    errno.EISDIR: "is a directory",
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EIO: "input/output error",
    errno.ELOOP: "a symbolic link (never followed)",
}
#: The errnos of a failing device or a full disk, not of the deployment: an I/O failure (exit
#: 1), not a configuration error.
IO_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO})


def cause(exc: OSError) -> str:
    """Why ``exc`` happened, in the operator's words."""
    if exc.errno in CAUSES:
        return CAUSES[exc.errno]
    return exc.strerror or str(exc)


def diagnose(path: str) -> str | None:
    """Why the file ``path`` (there or not yet) cannot be read and written here, or None when
    nothing on the file system says so (for the errors that name no errno: sqlite's).
    A symbolic link is followed: sqlite opens the file it names (a journal given so)."""
    path = os.path.realpath(path)
    try:
        if os.path.isdir(path):
            return "is a directory"
        if os.path.lexists(path) and not stat.S_ISREG(os.lstat(path).st_mode):
            return "not a regular file"
    except OSError as exc:
        return cause(exc)
    return unwritable(os.path.dirname(os.path.abspath(path)), path)


def unwritable(directory: str, file: str | None = None) -> str | None:
    """Why files cannot be made and written in ``directory`` (or ``file`` in it read and
    written), or None: read-only, permission, no space."""
    try:
        searchable = os.access(directory, os.X_OK)
        vfs = os.statvfs(directory) if searchable else None
    except OSError as exc:
        return cause(exc)
    if vfs is None:
        return f"permission denied (directory {directory})"
    if vfs.f_flag & os.ST_RDONLY:
        return "read-only file system"
    if file is not None and os.path.exists(file) and not os.access(file, os.R_OK | os.W_OK):
        return "permission denied"
    if not os.access(directory, os.W_OK):
        return f"permission denied (directory {directory})"
    if (vfs.f_bfree if os.geteuid() == 0 else vfs.f_bavail) == 0:
        return "no space left on device"
    return None


def is_io_failure(exc: OSError) -> bool:
    """Whether ``exc`` is the device's or the disk's (an I/O failure), not the deployment's."""
    return exc.errno in IO_ERRNOS


def refuse_unless_regular(path: str) -> None:
    """Raise ``OSError`` (EINVAL) when ``path`` exists as anything but a regular file (a
    symbolic link included: it would be replaced by a file, or, followed, written where it
    points)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISREG(mode):
        return
    kind = ("a symbolic link" if stat.S_ISLNK(mode) else "a directory" if stat.S_ISDIR(mode)
            else "a device, FIFO or socket")  # fmt: skip
    raise OSError(errno.EINVAL, f"{kind}, not a regular file (never written through)", path)


def write_whole(path: str, text: str, mode: int) -> None:
    """``text`` in ``path`` with ``mode`` (whatever the umask), replaced whole: a temporary
    file in the same directory, synced, renamed over it, the directory synced.

    Raises ``OSError`` (EINVAL for a name that is no regular file) and then leaves
    nothing behind: ``path`` as it was, no temporary file.
    """
    refuse_unless_regular(path)
    directory = os.path.dirname(os.path.abspath(path))
    partial = os.path.join(
        directory, f".{os.path.basename(path)}.{os.getpid()}.{os.urandom(4).hex()}.partial"
    )
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(partial, flags, mode & 0o600)
    try:
        os.fchmod(fd, mode)  # NOTE: the umask may have taken bits away at create
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            fd = -1
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        # NOTE: checked again just before the rename: the name may have become a link since.
        refuse_unless_regular(path)
        os.replace(partial, path)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial)
        raise
    fsync_path(directory)


def fsync_path(path: str) -> None:
    """fsync a file or directory, so a rename or write survives a crash."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def private_dir(path: str, mode: int = 0o700) -> None:
    """Make directory ``path`` and any missing parent, each created with ``mode`` whatever
    the umask; existing ones are left as they are."""
    path = os.path.abspath(path)
    if os.path.isdir(path):
        return
    parent = os.path.dirname(path)
    if parent != path:
        private_dir(parent, mode)
    try:
        os.mkdir(path, mode)
    except FileExistsError:
        if not os.path.isdir(path):
            raise
        return
    os.chmod(path, mode)  # NOTE: the umask may have taken bits away at create


def private_file(path: str, mode: int = 0o600) -> None:
    """Create the empty file ``path`` with ``mode`` unless it exists (never through a link)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0)
    except FileExistsError:
        return
    try:
        os.fchmod(fd, mode)
    finally:
        os.close(fd)
