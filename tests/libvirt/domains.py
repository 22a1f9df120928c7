"""Connections and clean-up shared by the tests that define domains in a libvirt they share."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import libvirt

from nova_orphans import virt


@contextlib.contextmanager
def admin_connection(uri: str, prefix: str) -> Iterator[libvirt.virConnect]:
    """A read-write connection to ``uri`` (libvirt's own error printing off); the domains
    whose names start with ``prefix`` are removed before it closes."""
    libvirt.registerErrorHandler(virt.ignore_errors, None)
    conn = libvirt.open(uri)
    try:
        yield conn
    finally:
        remove_domains(conn, prefix)
        conn.close()


def remove_domains(conn: libvirt.virConnect, prefix: str) -> None:
    """Stop and undefine every domain whose name starts with ``prefix`` (a test's own)."""
    for dom in conn.listAllDomains(0):
        if dom.name().startswith(prefix):
            persistent = dom.isPersistent()
            if dom.isActive():
                dom.destroy()
            if persistent:
                dom.undefine()
