"""Signals as oslo services take them: SIGHUP reloads (and never stops the agent), SIGTERM and
SIGINT stop it between two steps with a stop line, Ctrl-C stops any command with one line and
exit 130; the agent says what it starts as."""

from __future__ import annotations

import os
import pathlib
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import NamedTuple

import pytest

from nova_orphans import exits

ROOT = pathlib.Path(__file__).parents[3]


def conf_text(
    state: pathlib.Path, endpoint: str = "http://127.0.0.1:1/v2.1", extra: str = ""
) -> str:
    return (
        f"[DEFAULT]\nhost = cmp-1\n{extra}[agent]\nstate_dir = {state}\ninterval = 10\n"
        f"[nova]\nauth_type = admin_token\nendpoint = {endpoint}\ntoken = t\ntimeout = 2\n"
    )


class Process:
    """A ``nova-orphans`` child whose stderr is read line by line as it comes."""

    def __init__(self, *argv: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "nova_orphans.cli", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, text: str, timeout: float = 60.0, after: int = 0) -> int:
        """The index of the first stderr line from ``after`` on that contains ``text``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for index, line in enumerate(self.lines[after:], after):
                if text in line:
                    return index
            assert self.proc.poll() is None, "\n".join(self.lines)
            time.sleep(0.1)
        raise AssertionError(f"no line with {text!r} in:\n" + "\n".join(self.lines))

    def finish(self, timeout: float = 60.0) -> tuple[int, str]:
        # NOTE: not communicate(): the reader thread alone reads stderr.
        self.proc.wait(timeout=timeout)
        self._reader.join(timeout=5)
        assert self.proc.stdout is not None
        return self.proc.returncode, self.proc.stdout.read()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def agent(tmp_path: pathlib.Path, world: str) -> Iterator[tuple[Process, pathlib.Path]]:
    """A running agent (Nova unreachable: each cycle aborts, the agent goes on)."""
    conf = tmp_path / "nova-orphans.conf"
    conf.write_text(conf_text(tmp_path / "state"))
    process = Process("run", "--config-file", str(conf), "--libvirt-uri", world)
    try:
        process.wait_for("starting")
        process.wait_for("cycle aborted")
        yield process, conf
    finally:
        process.kill()


def test_the_agent_logs_a_start_line_with_version_files_host_and_actions(agent):
    process, conf = agent
    (start,) = [line for line in process.lines if " starting " in line]
    assert "nova-orphans 0.1.0 starting (every 10 s)" in start
    assert f"config files {conf}" in start
    assert "host cmp-1" in start
    assert "actions deleted=log, misplaced=log, unknown=log" in start


def test_sighup_reloads_the_logging_options_and_refuses_the_others(agent):
    process, conf = agent
    conf.write_text(conf_text(conf.parent / "state", extra="debug = true\n").replace(
        "interval = 10\n", "interval = 10\naction_deleted = stop\n"))  # fmt: skip
    process.proc.send_signal(signal.SIGHUP)
    done = process.wait_for("SIGHUP: config files reloaded")
    assert "changed [DEFAULT] debug" in process.lines[done]
    assert any("Ignoring change to immutable option agent.action_deleted" in line
               for line in process.lines)  # fmt: skip
    assert process.proc.poll() is None
    process.proc.send_signal(signal.SIGTERM)
    code, out = process.finish()
    assert (code, out) == (exits.OK, "")


def test_sighup_with_a_broken_config_keeps_the_agent_running_in_one_line(agent):
    process, conf = agent
    conf.write_text(conf.read_text() + "[agent]\ninterval = soon\n")
    process.proc.send_signal(signal.SIGHUP)
    failed = process.wait_for("SIGHUP: config not reloaded")
    assert "interval = soon" in process.lines[failed]
    time.sleep(0.5)
    assert process.proc.poll() is None
    process.proc.send_signal(signal.SIGTERM)
    code, _ = process.finish()
    assert code == exits.OK
    assert "nova-orphans stopped on SIGTERM, exit 0" in process.lines[-1]


def test_sigint_stops_the_agent_with_a_stop_line_and_exit_130(agent):
    process, _ = agent
    process.proc.send_signal(signal.SIGINT)
    code, out = process.finish()
    assert out == ""
    assert code == exits.INTERRUPTED
    assert "nova-orphans stopped on SIGINT, exit 130" in process.lines[-1]
    assert not any("Traceback" in line for line in process.lines)


class SilentNova(NamedTuple):
    """An endpoint that accepts connections and never answers; ``asked`` is set once it is asked."""

    url: str
    asked: threading.Event


@pytest.fixture
def silent_nova() -> Iterator[SilentNova]:
    """An endpoint that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    accepted: list[socket.socket] = []
    stop = threading.Event()
    asked = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                continue
            asked.set()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield SilentNova(f"http://127.0.0.1:{server.getsockname()[1]}/v2.1", asked)
    finally:
        stop.set()
        thread.join()
        for conn in accepted:
            conn.close()
        server.close()


@pytest.mark.parametrize(
    "argv",
    [
        ["audit", "--libvirt-uri", "{world}"],
        ["run", "--once", "--libvirt-uri", "{world}"],
        ["fleet", "audit", "--hosts", "cmp-1"],
    ],
    ids=["audit", "run --once", "fleet audit"],
)
def test_ctrl_c_is_one_line_and_exit_130_with_no_traceback(tmp_path, world, silent_nova, argv):
    conf = tmp_path / "nova-orphans.conf"
    conf.write_text(
        conf_text(tmp_path / "state", silent_nova.url).replace("timeout = 2", "timeout = 60")
    )
    process = Process(*[a.replace("{world}", world) for a in argv], "--config-file", str(conf))
    try:
        # NOTE: Ctrl-C while the command waits on Nova's answer, not while it still starts up
        # (a loaded machine can take seconds to import): the asked event, never a fixed sleep.
        assert silent_nova.asked.wait(timeout=60), process.lines
        assert process.proc.poll() is None, process.lines
        process.proc.send_signal(signal.SIGINT)
        if argv[0] == "run":
            # NOTE: the agent stops after the step under way; a second Ctrl-C abandons it.
            process.wait_for("SIGINT: stopping after the step under way")
            process.proc.send_signal(signal.SIGINT)
        code, out = process.finish(timeout=20)
    finally:
        process.kill()
    assert code == exits.INTERRUPTED, process.lines
    assert out == ""
    agent_lines = (" starting ", " stopped ", "SIGINT: stopping")
    lines = [line for line in process.lines if not any(w in line for w in agent_lines)]
    assert len(lines) == 1, process.lines
    assert "interrupted" in lines[0]


@pytest.mark.parametrize("signum", [signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM])
def test_a_signal_without_meaning_is_logged_and_ignored(agent, signum):
    process, _ = agent
    process.proc.send_signal(signum)
    process.wait_for(f"{signum.name} ignored")
    time.sleep(0.5)
    assert process.proc.poll() is None
    process.proc.send_signal(signal.SIGTERM)
    code, out = process.finish()
    assert (code, out) == (exits.OK, "")
    assert "nova-orphans stopped on SIGTERM, exit 0" in process.lines[-1]


def test_sigpipe_is_ignored(agent):
    process, _ = agent
    process.proc.send_signal(signal.SIGPIPE)
    time.sleep(1)
    assert process.proc.poll() is None
    process.proc.send_signal(signal.SIGTERM)
    code, _ = process.finish()
    assert code == exits.OK
    assert "nova-orphans stopped on SIGTERM, exit 0" in process.lines[-1]


def test_sigquit_stops_the_agent_as_sigterm_with_its_stop_line(agent):
    process, _ = agent
    process.proc.send_signal(signal.SIGQUIT)
    code, out = process.finish()
    assert (code, out) == (exits.OK, "")
    assert "nova-orphans stopped on SIGQUIT, exit 0" in process.lines[-1]
    assert not any("Traceback" in line for line in process.lines)
