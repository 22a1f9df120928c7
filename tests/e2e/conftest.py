"""Fixtures for the end-to-end tests against a real Nova control plane.

The session fixture ``nova_stack`` uses a running stack when ``stack.sh status`` says it is up;
otherwise it starts one (``tests/e2e/stack/install.sh`` must have been run) and stops it at the
end of the session. When the stack cannot come up the tests fail under
NOVA_ORPHANS_REQUIRE_SERVICES=1 (CI) and are skipped otherwise.
"""

from __future__ import annotations

import fcntl
import os
import sys
import time
from collections.abc import Iterator

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "stack"))

import harness

REQUIRE_SERVICES = os.environ.get("NOVA_ORPHANS_REQUIRE_SERVICES") == "1"


def _unavailable(message: str) -> None:
    if REQUIRE_SERVICES:
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


SESSION_LOCK_WAIT = float(os.environ.get("NOVA_ORPHANS_STACK_LOCK_WAIT", "1200"))
#: Set to 1 when the caller already holds the session lock for this session, e.g. a restart of
#: the stack and a test run under one ``flock -o STACK_DIR/e2e-session.lock``.
LOCK_HELD_OUTSIDE = os.environ.get("NOVA_ORPHANS_STACK_LOCK_HELD") == "1"


def _session_lock() -> int | None:
    """One pytest session at a time drives the stack (tests stop computes, archive rows):
    an exclusive lock on STACK_DIR/e2e-session.lock, held until the session ends."""
    harness.STACK_DIR.mkdir(parents=True, exist_ok=True)
    fd = os.open(harness.STACK_DIR / "e2e-session.lock", os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + SESSION_LOCK_WAIT
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                return None
            time.sleep(1)


@pytest.fixture(scope="session")
def nova_stack() -> Iterator[harness.Nova]:
    """An admin client of a running stack (started here if need be)."""
    if LOCK_HELD_OUTSIDE:
        yield from _stack_session()
        return
    lock = _session_lock()
    if lock is None:
        _unavailable(f"another test session kept the Nova stack for {SESSION_LOCK_WAIT:.0f} s")
    try:
        yield from _stack_session()
    finally:
        os.close(lock)


def _stack_session() -> Iterator[harness.Nova]:
    started = False
    if not harness.stack_is_up():
        if not (harness.NOVA_VENV / "bin" / "nova-compute").exists():
            _unavailable(
                f"Nova stack not installed in {harness.STACK_DIR}: run tests/e2e/stack/install.sh"
            )
        t0 = time.monotonic()
        done = harness.stack_cmd("start", timeout=600)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
            _unavailable("Nova stack did not come up: " + " | ".join(tail))
        started = True
        sys.stderr.write(f"\nnova stack started in {time.monotonic() - t0:.0f} s\n")
    nova = harness.Nova()
    try:
        yield nova
    finally:
        if started and os.environ.get("NOVA_ORPHANS_KEEP_STACK") != "1":
            harness.stack_cmd("stop", timeout=300)


@pytest.fixture(scope="session")
def nova_orphans_cli() -> str:
    """Path of the ``nova-orphans`` console script under test."""
    if not harness.CLI.exists():
        _unavailable(f"{harness.CLI} missing: pip install -e . into the project venv")
    return str(harness.CLI)
