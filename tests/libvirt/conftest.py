"""Fixtures for tests that run against libvirt itself."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import libvirt
import pytest

QEMU_SYSTEM = "qemu:///system"


def _virsh_answers(uri: str) -> tuple[bool, str]:
    try:
        done = subprocess.run(
            ["virsh", "-c", uri, "version"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return False, str(err)
    return done.returncode == 0, (done.stderr or done.stdout).strip()


@pytest.fixture(scope="session")
def qemu_system_uri() -> str:
    """``qemu:///system`` once it answers; otherwise skip, or fail when services are required.

    Start it with ``bash .ci/services/libvirtd.sh start``. CI sets
    NOVA_ORPHANS_REQUIRE_SERVICES=1 so that a missing daemon fails the run.
    """
    ok, detail = _virsh_answers(QEMU_SYSTEM)
    if not ok:
        message = f"libvirtd does not answer at {QEMU_SYSTEM}: {detail}"
        if os.environ.get("NOVA_ORPHANS_REQUIRE_SERVICES") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return QEMU_SYSTEM


@pytest.fixture
def conn(qemu_system_uri: str) -> Iterator[libvirt.virConnect]:
    """A read-write connection to the real libvirtd (a test file may define its own)."""
    libvirt.registerErrorHandler(lambda *_: None, None)
    opened = libvirt.open(qemu_system_uri)
    yield opened
    opened.close()
