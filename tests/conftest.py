"""Suite-wide rules: under CI every test must run; a skip is a failure there."""

from __future__ import annotations

import logging
import os
import pathlib

import pytest

from nova_orphans.fakes import libvirt_node as worlds

REQUIRE_SERVICES = os.environ.get("NOVA_ORPHANS_REQUIRE_SERVICES") == "1"

#: The loopback sshd and the built collection, one per session for tests/ansible and tests/e2e.
pytest_plugins = ["tests.ansible.fixtures"]

#: The variables a table's width follows (``render/table.width``).
TERMINAL_SIZE = ("COLUMNS", "LINES")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """pytest-xdist, in the controller: hand each worker this session's terminal size variables.

    NOTE: a worker's GNU readline (imported by pytest's debugger support, its standard input a
    pipe) sets COLUMNS=80 and LINES=24 in the worker's environment: every table would fit 80
    columns there and 100 (no terminal, no COLUMNS) in a serial run.
    """
    node.workerinput["terminal_size"] = {name: os.environ.get(name) for name in TERMINAL_SIZE}


def pytest_configure(config: pytest.Config) -> None:
    """In a pytest-xdist worker: the controller's terminal size variables, set or unset."""
    given = getattr(config, "workerinput", {}).get("terminal_size", {})
    for name, value in given.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


#: What a test shares with every other test on this machine: the real libvirtd
#: (qemu:///system), the Nova stack, root's own host through the loopback sshd.
SHARED_FIXTURES = frozenset({"qemu_system_uri", "nova_stack", "loopback_sshd", "fleet_collection"})
SHARED_MARKS = ("libvirtd", "nova")
SHARED_DIRECTORIES = ("e2e", "ansible")
TESTS = pathlib.Path(__file__).resolve().parent


#: The fixtures that mean a test needs the Nova stack, or the real libvirtd (their marks).
STACK_FIXTURES = frozenset({"nova_stack"})
LIBVIRTD_FIXTURES = frozenset({"qemu_system_uri"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``serial`` every test that shares this machine's services (scripts/test.sh runs
    them after their services are up, the others under pytest-xdist: ``-m serial`` and
    ``-m "not serial"`` together are every test, each once).

    A serial test is also marked by what it shares: ``nova`` (tests/e2e, the stack) and
    ``libvirtd`` (the real libvirtd); one with neither shares only the loopback sshd. So
    ``serial and nova``, ``serial and not nova and libvirtd`` and ``serial and not nova and
    not libvirtd`` split the serial tests in three, each test in exactly one: scripts/test.sh
    runs each part as soon as its services are up.
    """
    for item in items:
        try:
            top = item.path.resolve().relative_to(TESTS).parts[0]
        except ValueError:
            top = ""
        fixtures = set(getattr(item, "fixturenames", ()))
        if (
            top in SHARED_DIRECTORIES
            or any(item.get_closest_marker(mark) for mark in SHARED_MARKS)
            or SHARED_FIXTURES.intersection(fixtures)
        ):
            item.add_marker(pytest.mark.serial)
            if top == "e2e" or STACK_FIXTURES.intersection(fixtures):
                item.add_marker(pytest.mark.nova)
            if LIBVIRTD_FIXTURES.intersection(fixtures):
                item.add_marker(pytest.mark.libvirtd)


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
    return worlds.write_node_file(tmp_path, [domain])


@pytest.fixture(autouse=True)
def _own_live_lock(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test is a host of its own: its live agents share one live lock, not the machine's.

    NOTE: through oslo.config's environment source (``OS_<GROUP>__<OPTION>``), so the
    agents a test starts in other processes take the same file (the environment wins
    over a config file: a test that sets ``[agent] live_lock_file`` removes it). No test
    takes (or leaves) ``/run/nova-orphans/live.lock`` of the machine it runs on.
    """
    monkeypatch.setenv("OS_AGENT__LIVE_LOCK_FILE", str(tmp_path / "host-run" / "live.lock"))


@pytest.fixture(autouse=True)
def _restore_logging():
    """Every command sets up oslo.log on the root logger; each test starts and ends as it found it.

    NOTE: a handler left on a test's captured (then closed) stderr would print
    "--- Logging error ---" into a later test's output.
    """
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    # NOTE: the simulation's tests silence logging process-wide (logging.disable).
    disabled = logging.root.manager.disable
    levels = {
        name: log.level
        for name, log in logging.root.manager.loggerDict.items()
        if isinstance(log, logging.Logger)
    }
    yield
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
            handler.close()
    for handler in handlers:
        if handler not in root.handlers:
            root.addHandler(handler)
    root.setLevel(level)
    logging.disable(disabled)
    for name, log in list(logging.root.manager.loggerDict.items()):
        if isinstance(log, logging.Logger):
            log.setLevel(levels.get(name, logging.NOTSET))


@pytest.fixture(autouse=True)
def nova_state_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Where the tool looks for nova-compute's compute_id by default: a scratch directory,
    never this machine's /var/lib/nova or kolla volumes (docs/design.md rule 10).

    Returns that directory: a test writes a ``compute_id`` there as nova-compute would.
    """
    from nova_orphans.config import nova_compute

    directory = tmp_path_factory.mktemp("nova-state")
    monkeypatch.setattr(nova_compute, "NOVA_STATE_DIRS", (str(directory),))
    return directory
