"""Suite-wide rules: under CI every test must run; a skip is a failure there."""

from __future__ import annotations

import os
import pathlib

import pytest

from tests import worlds

REQUIRE_SERVICES = os.environ.get("NOVA_ORPHANS_REQUIRE_SERVICES") == "1"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    skipped = terminalreporter.stats.get("skipped", [])
    if REQUIRE_SERVICES and skipped:
        terminalreporter.write_line(
            f"{len(skipped)} test(s) skipped under NOVA_ORPHANS_REQUIRE_SERVICES=1: run fails",
            red=True,
        )


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter else []
    if REQUIRE_SERVICES and skipped and exitstatus == 0:
        session.exitstatus = 1


@pytest.fixture
def world(tmp_path: pathlib.Path) -> str:
    """A libvirt test:/// world holding one guest with Nova metadata; returns its URI."""
    domain = worlds.node_domain(
        uuid=worlds.random_uuid(), name="instance-00000001", metadata=worlds.nova_metadata()
    )
    return worlds.write_world(tmp_path, [domain])
