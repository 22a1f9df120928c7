"""Clean-up shared by the tests that define domains in a libvirt they share."""

from __future__ import annotations

import libvirt


def remove_domains(conn: libvirt.virConnect, prefix: str) -> None:
    """Stop and undefine every domain whose name starts with ``prefix`` (a test's own)."""
    for dom in conn.listAllDomains(0):
        if dom.name().startswith(prefix):
            persistent = dom.isPersistent()
            if dom.isActive():
                dom.destroy()
            if persistent:
                dom.undefine()
