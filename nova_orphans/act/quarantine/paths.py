"""Path and file-system checks for moving guest files, and durable writes.

Nothing here follows a symlink or trusts a path it did not check. The shape of a
quarantine directory, ``<quarantine_root>/<uuid>/<stamp>``, is checked here and
nowhere else (``entry_refusal``).
"""

from __future__ import annotations

import os
import re
import stat
import uuid as uuidlib
from collections.abc import Callable

# NOTE: the mount checks live with the observers (the audit reads them too).
from nova_orphans.observe.mounts import (  # noqa: F401
    DEFAULT_MOUNTS_FILE,
    LOCAL_FSTYPES,
    mount_of,
    os_reason,
    shared_storage_refusal,
)
from nova_orphans.record import files
from nova_orphans.record.files import fsync_path  # noqa: F401

#: The ``<stamp>`` level of a quarantine directory: a reap's time stamp.
STAMP = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:+-]{0,63}")


def is_canonical_uuid(value: str) -> bool:
    """True for a lower-case, hyphenated UUID: the only text we build paths from."""
    try:
        return str(uuidlib.UUID(value)) == value
    except (ValueError, TypeError, AttributeError):
        return False


def entry_refusal(uuid: str, path: str, root: str | None = None) -> str | None:
    """Why ``path`` is not the quarantine directory ``<root>/<uuid>/<stamp>`` of ``uuid``.

    None when it is: a canonical UUID, and a directory exactly two levels below
    ``root``, in the UUID's own directory, with no symlink on the way. Without
    ``root`` the directory's own grandparent is taken as the root.
    """
    if not is_canonical_uuid(uuid):
        return f"{uuid!r} is not a canonical UUID"
    path = os.path.abspath(path)
    root = os.path.abspath(root) if root else os.path.dirname(os.path.dirname(path))
    refusal = path_refusal(root, path)
    if refusal is None and os.path.relpath(path, root).split(os.sep)[:-1] != [uuid]:
        refusal = f"{path} is not a quarantine directory of {uuid} under {root}"
    return refusal


def path_refusal(base: str, path: str) -> str | None:
    """Why ``path`` is not a safe directory strictly inside ``base``; None when it is.

    Refused: a missing path, a symlink in any component (of ``base`` too: the
    lexical path must equal the real one), a path that is not a directory, and
    a path that is not below ``base`` (e.g. by ``..``).
    """
    lexical = os.path.abspath(path)
    try:
        mode = os.lstat(lexical).st_mode
    except FileNotFoundError:
        return f"{lexical} does not exist"
    except OSError as err:
        return f"cannot inspect {lexical}: {os_reason(err)}"
    link = first_symlink(lexical)
    if link is not None:
        return f"{link} is a symlink (never followed)"
    if not stat.S_ISDIR(mode):
        return f"{lexical} is not a directory"
    real, real_base = os.path.realpath(lexical), os.path.realpath(base)
    if real != lexical:
        return f"{lexical} resolves to {real}"
    if os.path.dirname(real) == real or os.path.commonpath([real, real_base]) != real_base:
        return f"{real} is outside {real_base}"
    if real == real_base:
        return f"{real} is {base} itself"
    return None


def first_symlink(path: str, lstat: Callable[[str], os.stat_result] = os.lstat) -> str | None:
    """The first existing component of absolute ``path`` that is a symlink, if any.

    ``lstat``: how a path is looked at (a simulated host passes its own).
    """
    current = os.sep
    for part in os.path.abspath(path).split(os.sep)[1:]:
        current = os.path.join(current, part)
        try:
            if stat.S_ISLNK(lstat(current).st_mode):
                return current
        except FileNotFoundError:
            return None
    return None


def write_durably(path: str, text: str) -> None:
    """Write ``text`` to ``path`` (0600 whatever the umask), replaced whole and synced, never
    through a link (``record.files.write_whole``)."""
    files.write_whole(path, text, 0o600)
