"""One live agent per journal: an exclusive lock on a file beside it (docs/design.md rule 14).

Two agents sharing a journal would each count their cycles as further
consecutive sightings and each have their own per-cycle cap. ``fcntl.flock``
is released by the kernel when the holder exits, however it exits, so a
crashed agent never leaves a stale lock behind; the file itself stays and
says who held it last.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import os
import socket
import time
from collections.abc import Iterator

from nova_orphans import exits
from nova_orphans.exceptions import NovaOrphansError


class Held(NovaOrphansError):
    """Another process holds the lock; the message names it (pid, host, since)."""

    exit_code = exits.ERROR


def acquire(path: str) -> int:
    """Take the exclusive lock at ``path`` without waiting; returns the descriptor to keep.

    Raises ``Held`` when another process holds it; that process's record in the
    file is left as it is.
    """
    # NOTE: no O_TRUNC: the file names the current holder until we hold the lock.
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _record(fd)
        os.close(fd)
        raise Held(holder) from None
    except OSError:
        os.close(fd)
        raise
    since = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    record = f"pid {os.getpid()} on {socket.gethostname()}, since {since.isoformat()}\n"
    os.ftruncate(fd, 0)
    os.pwrite(fd, record.encode(), 0)
    return fd


def holder(path: str) -> str | None:
    """Who holds the lock at ``path`` now, or None when nobody does; creates nothing."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return _record(fd)
    finally:
        os.close(fd)  # gives the shared lock up too
    return None


def _record(fd: int) -> str:
    """What the holder wrote about itself."""
    text = os.pread(fd, 512, 0).decode("utf-8", "replace").strip()
    return text or "a process that has not yet written its pid"


def release(fd: int) -> None:
    """Give the lock up (closing the descriptor releases it)."""
    os.close(fd)


@contextlib.contextmanager
def held(path: str, wait: float, poll: float = 0.1) -> Iterator[None]:
    """Hold the exclusive lock at ``path`` for a ``with`` block, waiting up to ``wait`` seconds.

    Raises ``Held`` (naming the holder) when it is still taken after ``wait``.
    """
    deadline = time.monotonic() + wait
    while True:
        try:
            fd = acquire(path)
            break
        except Held:
            if time.monotonic() >= deadline:
                raise
            time.sleep(poll)
    try:
        yield
    finally:
        release(fd)
