"""The journal's errors, each naming its real cause, and the checks made before it is opened.

NOTE: a journal that cannot be used is the deployment's (exit 2: its path, its permissions, a
read-only mount); a full or failing disk is an I/O failure (exit 1). Never "no journal" for one
that may be there but cannot be read.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat

from nova_orphans import exits
from nova_orphans.exceptions import NovaOrphansError
from nova_orphans.record import files

LOG = logging.getLogger(__name__)


class JournalError(NovaOrphansError):
    """The journal cannot be opened or written."""

    # NOTE: the journal's path is configuration; an agent that cannot record stops.
    exit_code = exits.USAGE
    label = "journal error"


class JournalIOError(JournalError):
    """The journal's disk failed or is full: an I/O failure (exit 1), not the deployment's."""

    exit_code = exits.ERROR
    label = "journal error"


def failure(path: str, exc: Exception, doing: str = "cannot open journal") -> JournalError:
    """The ``JournalError`` that names why ``exc`` happened to the journal at ``path``: its
    real cause (permission, read-only, is a directory, no space), as ``files`` finds it when
    sqlite's message names none; a full or failing disk is a ``JournalIOError``."""
    if isinstance(exc, OSError):
        where = f" ({exc.filename})" if exc.filename and exc.filename != path else ""
        why, io = f"{files.cause(exc)}{where}", files.is_io_failure(exc)
    else:
        name = getattr(exc, "sqlite_errorname", "")
        io = name.startswith(("SQLITE_FULL", "SQLITE_IOERR"))
        found = files.diagnose(path)
        why = f"{found} ({exc})" if found and found not in str(exc) else str(exc)
    return (JournalIOError if io else JournalError)(f"{doing} {path}: {why}")


def present(path: str) -> bool:
    """Whether the journal ``path`` exists (False: there is none); ``JournalError`` naming the
    cause when it cannot be told or read (a directory this user cannot enter, a file it cannot
    read, no regular file): never "no journal" for one that may be there."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise failure(path, exc, "cannot read journal") from exc
    if not stat.S_ISREG(mode):
        raise JournalError(f"journal {path} is not a regular file")
    if not os.access(path, os.R_OK):
        raise JournalError(f"cannot read journal {path}: permission denied")
    return True


def refuse_unwritable(path: str) -> None:
    """``JournalError`` naming why the journal ``path`` cannot be written here (read-only
    media, permission, a full disk: ``JournalIOError``) before sqlite opens it, which would
    open it read-only and fail only at its first write."""
    if not os.path.isdir(os.path.dirname(os.path.abspath(path))):
        return  # NOTE: made with the journal; a failure to make it names its own cause
    problem = files.diagnose(path)
    if problem is not None:
        error = JournalIOError if problem.startswith("no space") else JournalError
        raise error(f"cannot open journal {path}: {problem}")


class JournalLocked(JournalError):
    """Another ``nova-orphans run`` holds the journal (docs/design.md rule 14)."""


class QuarantineBusy(JournalError):
    """A purge or a restore holds the quarantine longer than we may wait."""

    exit_code = exits.ERROR
    label = "error"


def unread_wal(path: str, exc: Exception) -> None:
    """Warn that the journal's write-ahead log, left by an agent that stopped without its last
    checkpoint, cannot be read here (read-only media): what it holds is not shown."""
    with contextlib.suppress(OSError):
        if os.path.getsize(f"{path}-wal") == 0:
            return
    LOG.warning(
        "journal %s: its write-ahead log %s-wal cannot be read here (%s: %s): the events the "
        "agent wrote since its last checkpoint are not shown",
        path,
        path,
        files.diagnose(f"{path}-shm") or "read-only",
        exc,
    )
