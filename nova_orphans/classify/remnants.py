"""What a reap leaves for the operator: storage outside the instance directory, tap devices.

Nova's local delete skips the host side of the clean-up; these lines tell the
operator what is left to finish by hand. Pure: paths are compared as strings.
"""

from __future__ import annotations

import posixpath

from nova_orphans.model import Domain


def remnants(domain: Domain, instances_path: str) -> list[str]:
    """One line per disk outside ``<instances_path>/<uuid>`` and per interface device."""
    own = posixpath.join(posixpath.normpath(instances_path), domain.uuid) + "/"
    items = []
    for disk in domain.disks:
        if not disk.source:
            continue
        if disk.source_type == "file":
            if not posixpath.normpath(disk.source).startswith(own):
                items.append(f"disk {disk.target}: file {disk.source} (outside {own[:-1]})")
        elif disk.source_type == "network":
            proto = f"{disk.protocol} " if disk.protocol else ""
            items.append(f"disk {disk.target}: network {proto}{disk.source}")
        elif disk.source_type == "block":
            items.append(f"disk {disk.target}: block device {disk.source} (LVM, iSCSI or FC)")
        else:
            items.append(f"disk {disk.target}: {disk.source_type} {disk.source}")
    for nic in domain.interfaces:
        if nic.target_dev:
            where = f" on {nic.source}" if nic.source else ""
            items.append(f"interface {nic.target_dev} ({nic.type}{where}, mac {nic.mac})")
    return items
