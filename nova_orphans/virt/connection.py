"""Opening a libvirt connection, read-only or read-write, and closing it.

libvirt's own printing of every error is switched off first: we report errors ourselves.
"""

from __future__ import annotations

import contextlib
import os
import urllib.parse
from typing import TypeAlias

import libvirt

from nova_orphans.virt.errors import Error, Unreachable

#: A libvirt connection as libvirt-python hands it out (only the seam calls it).
Connection: TypeAlias = libvirt.virConnect


def open_raw(uri: str, *, read_only: bool) -> Connection:
    """A connection to ``uri``, read-only or read-write; ``Unreachable`` when that fails."""
    libvirt.registerErrorHandler(ignore_errors, None)
    _require_test_world(uri)
    try:
        conn = libvirt.openReadOnly(uri) if read_only else libvirt.open(uri)
    except libvirt.libvirtError as err:
        raise Unreachable(uri=uri, reason=Error.of(err).reason) from err
    if conn is None:  # very old bindings return None instead of raising
        raise Unreachable(uri=uri, reason="connection failed")
    return conn


def close_raw(conn: Connection) -> None:
    """Close ``conn``; errors while closing are irrelevant and ignored."""
    with contextlib.suppress(libvirt.libvirtError):
        conn.close()


def _require_test_world(uri: str) -> None:
    """Refuse a ``test:///<file>`` URI whose file is missing.

    NOTE: the test driver would parse it with libxml2, which prints its own
    warning to stderr; the operator gets our one line instead.
    """
    parsed = urllib.parse.urlsplit(uri)
    if (
        parsed.scheme == "test"
        and parsed.path not in ("", "/default")
        and not os.path.isfile(parsed.path)
    ):
        raise Unreachable(uri=uri, reason=f"no such file {parsed.path}")


def ignore_errors(_ctx: object, _err: object) -> None:
    """Keep libvirt from printing every error to stderr; we report them ourselves."""
