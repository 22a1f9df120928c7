"""The instance directories under ``instances_path``, read as hostile names (rule 20).

Only entries named by a canonical UUID that are directories themselves (``lstat``:
no symlink) are kept; ``_base``, ``locks``, ``<uuid>_resize`` and the rest are Nova's
own business. A directory's size is the ``st_blocks`` of what is inside, read with
``lstat`` and never following a link, the walk bounded in depth and in entries.
"""

from __future__ import annotations

import os
import stat

from nova_orphans.classify.leftover import InstanceDir
from nova_orphans.observe.errors import ObserveError
from nova_orphans.shapes import UUID

#: Entries of ``instances_path`` read at most (a host holds a few hundred guests).
MAX_DIRS = 100_000
#: Entries read inside one instance directory, and how deep.
MAX_ENTRIES = 10_000
MAX_DEPTH = 3
#: Entry names kept for the operator.
NAMES_KEPT = 6


class InstanceDirsUnreadable(ObserveError):
    """``instances_path`` could not be read."""

    msg_fmt = "cannot read instances_path %(path)s: %(reason)s"


def instance_dirs(instances_path: str) -> tuple[InstanceDir, ...]:
    """Every ``<instances_path>/<uuid>`` directory, sorted; raises ``InstanceDirsUnreadable``."""
    found = []
    try:
        with os.scandir(instances_path) as entries:
            for count, entry in enumerate(entries):
                if count >= MAX_DIRS:
                    raise InstanceDirsUnreadable(
                        path=instances_path, reason=f"more than {MAX_DIRS} entries"
                    )
                if not UUID.fullmatch(entry.name) or not entry.is_dir(follow_symlinks=False):
                    continue
                size, names = _measure(entry.path)
                found.append(InstanceDir(entry.name, entry.path, size, names))
    except OSError as exc:
        raise InstanceDirsUnreadable(path=instances_path, reason=exc.strerror or exc) from exc
    return tuple(sorted(found, key=lambda d: d.uuid))


def _measure(path: str) -> tuple[int | None, tuple[str, ...]]:
    """(bytes on disk of everything inside, the first names) — None when unmeasured."""
    total = 0
    names: list[str] = []
    budget = MAX_ENTRIES
    pending = [(path, 0)]
    try:
        while pending:
            directory, depth = pending.pop()
            with os.scandir(directory) as entries:
                for entry in entries:
                    budget -= 1
                    if budget < 0:
                        return None, tuple(sorted(names))
                    info = entry.stat(follow_symlinks=False)
                    total += info.st_blocks * 512
                    if depth == 0 and len(names) < NAMES_KEPT:
                        names.append(entry.name[:64])
                    if stat.S_ISDIR(info.st_mode) and depth + 1 < MAX_DEPTH:
                        pending.append((entry.path, depth + 1))
    except OSError:
        return None, tuple(sorted(names))
    return total, tuple(sorted(names))
