"""``fleet audit`` shows its progress on stderr when stderr is a terminal — hosts scanned of
all, unreachable ones, the hosts it waits on — and nothing at all when it is not (scripts)."""

from __future__ import annotations

import os
import pathlib
import pty
import select
import subprocess
import sys
import threading

import pytest

from nova_orphans.cli import fleet as fleet_cli
from nova_orphans.fleet import scan
from nova_orphans.observe.errors import HypervisorError
from tests import http_nova
from tests.libvirt.test_fleet_test_driver import Fleet

TOKEN = "progress-admin-token"


def test_the_scan_tells_its_progress_after_each_host_and_while_one_hangs(monkeypatch):
    monkeypatch.setattr(scan, "PROGRESS_TICK", 0.05)
    release = threading.Event()
    told: list[scan.Progress] = []

    def scanner(uri: str) -> tuple:
        if uri == "hang":
            assert release.wait(10)
        if uri == "down":
            raise HypervisorError(uri=uri, reason="connection refused")
        return ()

    def progress(p: scan.Progress) -> None:
        told.append(p)
        if len(told) == 8:
            release.set()  # the hung host answers after a few reports

    results = scan.scan_hosts(["ok", "down", "hang"], "{host}", concurrency=3, timeout=30,
                              scanner=scanner, progress=progress)  # fmt: skip
    assert [r.reachable for r in results] == [True, False, True]
    assert len(told) >= 8 and all(p.total == 3 for p in told)
    assert [p.done for p in told] == sorted(p.done for p in told)
    waiting = [p for p in told if p.done == 2]
    assert waiting and all(p.scanning[0][0] == "hang" and p.unreachable == 1 for p in waiting)
    assert waiting[-1].scanning[0][1] > waiting[0].scanning[0][1]  # its time keeps counting
    assert told[-1] == scan.Progress(3, 3, 1, ())


def test_the_progress_line_names_the_hosts_it_waits_on():
    slow = tuple((f"cmp-{i}", 12.0 - i) for i in range(5)) + (("cmp-9", 0.5),)
    text = fleet_cli.progress_text(scan.Progress(40, 50, 2, slow))
    assert text == (
        "fleet audit: 40/50 hosts scanned, 2 unreachable; "
        "waiting on cmp-0 (12 s), cmp-1 (11 s), cmp-2 (10 s) and 2 more"
    )
    assert fleet_cli.progress_text(scan.Progress(1, 2, 0, (("a", 0.1),))) == (
        "fleet audit: 1/2 hosts scanned"
    )


@pytest.fixture
def served(tmp_path: pathlib.Path):
    """Three hosts: two with guests, one Nova knows and libvirt cannot open; Nova served."""
    fleet = Fleet(tmp_path)
    fleet.managed("cmp-1", 2)
    fleet.managed("cmp-2", 2)
    fleet.nova.add_compute("cmp-3")
    fleet.write()
    with http_nova.serve(fleet.nova, "unused", TOKEN) as cloud:
        conf = tmp_path / "central.conf"
        conf.write_text(
            f"[fleet]\nuri_template = {fleet.template}\n"
            f"[nova]\nauth_type = admin_token\nendpoint = {cloud.url}\ntoken = {TOKEN}\n"
        )
        yield conf


def read_all(controller: int) -> bytes:
    """Everything written to a pseudo-terminal until it closes; ``controller`` is closed."""
    seen = b""
    while select.select([controller], [], [], 1)[0]:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # the terminal is closed: everything was read
            break
        if not chunk:
            break
        seen += chunk
    os.close(controller)
    return seen


def fleet_audit(
    conf: pathlib.Path, stderr: int, term: str = "xterm"
) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "nova_orphans.cli", "fleet", "audit", "--config-file", str(conf)]
    env = {**os.environ, "TERM": term}
    return subprocess.run(
        argv, stdout=subprocess.PIPE, stderr=stderr, text=True, timeout=120, env=env
    )


def test_on_a_terminal_stderr_shows_the_progress_and_wipes_it(served):
    controller, terminal = pty.openpty()
    try:
        done = fleet_audit(served, terminal)
    finally:
        os.close(terminal)
    seen = read_all(controller)
    assert done.returncode == 1, seen  # cmp-3 is unreachable
    assert "== cmp-3" in done.stdout  # the report itself goes to stdout, whole
    text = seen.decode()
    assert "\rfleet audit: 3/3 hosts scanned, 1 unreachable\x1b[K" in text
    # the line is wiped before the report is read; then only the one error line
    wiped = text.rindex("\r\x1b[K") + len("\r\x1b[K")
    (error,) = text[wiped:].splitlines()
    assert "1 host(s) not audited: cmp-3 unreachable" in error


@pytest.mark.parametrize("term", ["dumb", ""])
def test_a_terminal_that_cannot_move_the_cursor_gets_no_progress(served, term):
    """No control sequence where it would show as text (an Emacs shell, a serial console)."""
    controller, terminal = pty.openpty()
    try:
        done = fleet_audit(served, terminal, term=term)
    finally:
        os.close(terminal)
    seen = read_all(controller)
    assert done.returncode == 1
    assert b"\x1b" not in seen and b"hosts scanned" not in seen
    assert b"1 host(s) not audited" in seen


def test_when_stderr_is_not_a_terminal_there_is_no_progress(served):
    done = fleet_audit(served, subprocess.PIPE)
    assert done.returncode == 1
    assert "hosts scanned" not in done.stderr and "\r" not in done.stderr
    assert "== cmp-3" in done.stdout
