"""Which file system holds a path, from the kernel's mount table: local or shared.

The reap moves instance directories only from local file systems (docs/design.md rule
7), and the leftovers tell a directory of a server Nova runs elsewhere only when
``instances_path`` is local (§8b): on shared storage it is that host's.
"""

from __future__ import annotations

import os
import re

DEFAULT_MOUNTS_FILE = "/proc/self/mountinfo"

#: File systems that are local to one host: the only ones whose instance
#: directories are moved without ``allow_shared_storage_reap``. Every other type
#: counts as shared, including types we have never heard of (WekaFS, VxFS/CFS,
#: StorNext, ACFS, any FUSE file system): a wrong "local" moves the files of a
#: guest another host may run; a wrong "shared" only leaves files in place.
#: NOTE: overlay is local: its upper layer (where nova-compute creates instance
#: directories inside a container) must be a file system with xattrs and d_type,
#: which rules out NFS, and the kernel does not support two hosts writing to one
#: upper layer. Container deployments that bind-mount /var/lib/nova show the
#: backing file system's own type here, which is judged on its own.
LOCAL_FSTYPES = frozenset(
    {
        "ext2", "ext3", "ext4", "xfs", "btrfs", "zfs", "tmpfs", "f2fs", "jfs", "reiserfs",
        "bcachefs", "overlay",
    }
)  # fmt: skip


def shared_storage_refusal(path: str, mounts_file: str = DEFAULT_MOUNTS_FILE) -> str | None:
    """Why ``path`` may be on storage shared between hosts; None when it is local.

    Local means: the mount holding ``path`` has a type in ``LOCAL_FSTYPES``.
    """
    real = os.path.realpath(path)
    try:
        with open(mounts_file, encoding="utf-8", errors="replace") as mounts:
            found = mount_of(real, mounts.read())
    except OSError as err:
        return f"cannot tell which file system holds {real} ({mounts_file}: {os_reason(err)})"
    if found is None:
        return f"cannot tell which file system holds {real} (no mount in {mounts_file})"
    mount_point, fstype = found
    if fstype not in LOCAL_FSTYPES:
        return (
            f"{real} is on {fstype} ({mount_point}), not a local file system type: "
            "treated as shared storage (allow_shared_storage_reap is off)"
        )
    return None


def mount_of(path: str, mounts: str) -> tuple[str, str] | None:
    """The (mount point, fstype) of the longest mount point holding ``path``.

    ``mounts`` is /proc/self/mountinfo or /proc/mounts text; of two mounts on
    the same point, the later one (on top) wins.
    """
    best: tuple[str, str] | None = None
    for line in mounts.splitlines():
        if " - " in line:
            fields, rest = line.split(" - ", 1)
            parts, fs_parts = fields.split(), rest.split()
            if len(parts) < 5 or not fs_parts:
                continue
            mount_point, fstype = _unescape(parts[4]), fs_parts[0]
        else:
            parts = line.split()
            if len(parts) < 3:
                continue
            mount_point, fstype = _unescape(parts[1]), parts[2]
        inside = mount_point == "/" or path == mount_point or path.startswith(mount_point + "/")
        if inside and (best is None or len(mount_point) >= len(best[0])):
            best = (mount_point, fstype)
    return best


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def os_reason(err: OSError) -> str:
    """An OS error on one line: what and, when known, which file."""
    where = f" ({err.filename})" if err.filename else ""
    return f"{err.strerror or err}{where}"


#: Files a container runtime puts in a container's root (docker, podman).
CONTAINER_MARKS = ("/.dockerenv", "/run/.containerenv")


def files_root(instances_path: str, host_path: str | None) -> tuple[str | None, str]:
    """``instances_path`` as the host names it, or None and why it is not known.

    NOTE: docs/design.md rule 22: a printed ``rm -r`` is pasted on the host. Inside a
    container (kolla's nova_compute volume is ``/var/lib/docker/volumes/...`` on the
    host) the path seen here is the container's; only ``[leftovers]
    host_instances_path`` names the host's then.
    """
    if host_path:
        return os.path.normpath(host_path), "[leftovers] host_instances_path"
    marks = [m for m in CONTAINER_MARKS if os.path.exists(m)]
    if marks:
        return None, (
            f"nova-orphans runs in a container ({marks[0]}): {instances_path} is the "
            "container's path; set [leftovers] host_instances_path to the host's"
        )
    return os.path.normpath(instances_path), "instances_path"
