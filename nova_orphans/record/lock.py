"""One live agent per host and per journal: exclusive locks (docs/design.md rule 14).

Two agents sharing a journal would each count their cycles as further
consecutive sightings and each have their own per-cycle cap; two agents with
their own journals on one host would each keep their own holds, so one would
stop a guest the other had put on hold. So every live agent holds this host's
live lock (``LiveLock``) and its journal's lock. ``fcntl.flock`` is released by
the kernel when the holder exits, however it exits, so a crashed agent never
leaves a stale lock behind; the file itself stays and says who held it last.
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
from nova_orphans.record import files


class Held(NovaOrphansError):
    """Another process holds the lock; the message names it (pid, host, since…)."""

    exit_code = exits.ERROR


class LiveAgentRunning(NovaOrphansError):
    """Another live agent holds this host's live lock; the message names it (rule 14)."""

    # NOTE: docs/design.md rule 14: a second live agent on the host is a deployment error.
    exit_code = exits.USAGE


def acquire(path: str, about: str = "") -> int:
    """Take the exclusive lock at ``path`` without waiting; returns the descriptor to keep.

    The file then says who holds it: pid, host, since, and ``about`` (e.g. the
    journal). Raises ``Held`` when another process holds it; that process's
    record in the file is left as it is.
    """
    # NOTE: no O_TRUNC: the file names the current holder until we hold the lock.
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        os.fchmod(fd, 0o600)  # NOTE: made by us: 0600 whatever the umask
    except FileExistsError:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
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
    record = f"pid {os.getpid()} on {socket.gethostname()}, since {since.isoformat()}{about}\n"
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
    text = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
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


class LiveLock:
    """This host's live-agent lock, held by the one live ``run`` on the host (rule 14).

    NOTE: what makes two agents collide is that they drive one libvirt and one
    instances path: this host's. A lock file at a fixed path of the host
    (``[agent] live_lock_file``, ``/run`` being the host's and never shared with another
    host) is what every agent on it shares, whatever its state directory, and a
    container shares it through a bind mount of ``/run/nova-orphans``. A libvirt
    host UUID would not do better: reading it needs libvirt first, and cloned
    machines report the same one.
    """

    def __init__(self, path: str, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def take(cls, path: str, journal: str) -> LiveLock:
        """Take the live lock at ``path`` (its directory made 0700 if missing), naming ``journal``
        as this agent's in the file.

        Raises ``LiveAgentRunning`` naming the live agent that holds it (pid, host,
        since, journal), and ``OSError`` when the file cannot be opened.
        """
        files.private_dir(os.path.dirname(path) or ".")
        try:
            return cls(path, acquire(path, f", journal {journal}"))
        except Held as exc:
            raise _running(path, str(exc)) from None

    @staticmethod
    def refuse_if_held(path: str) -> None:
        """Raise ``LiveAgentRunning`` naming the live agent that holds ``path``; creates nothing.

        NOTE: for the check before anything is created (the metrics port, the lock's
        directory): a second agent is named as such, not as the port its twin holds.
        """
        try:
            holding = holder(path)
        except OSError:
            return  # NOTE: ``take`` reports an unusable lock file, as configuration
        if holding is not None:
            raise _running(path, holding)

    @property
    def held(self) -> bool:
        """Whether this process holds the live lock now.

        True from ``take`` until ``release``, as long as the file at ``path`` is the
        one locked: a lock file removed or replaced meanwhile would let a second agent
        take a new one, so this agent no longer holds this host's live lock.
        """
        if self._fd is None:
            return False
        try:
            locked, there = os.fstat(self._fd), os.stat(self.path)
        except OSError:
            return False
        return (locked.st_dev, locked.st_ino) == (there.st_dev, there.st_ino)

    def release(self) -> None:
        """Give the live lock up (again: nothing)."""
        if self._fd is not None:
            release(self._fd)
            self._fd = None


def _running(path: str, holder: str) -> LiveAgentRunning:
    return LiveAgentRunning(
        f"another live 'nova-orphans run' holds this host's live lock {path}: {holder}; "
        "this one exits and changes nothing"
    )
