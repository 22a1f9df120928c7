"""docs/design.md rule 14: one live agent per host and per journal, and dry runs never count.

The agent here is the real one, wired by ``build_agent`` from a config file, over the
demo's simulated Nova and its libvirt ``test:///`` world (or, for the lock, the real
console script in a second process).
"""

from __future__ import annotations

import argparse
import datetime
import os
import pathlib
import signal
import socket
import sqlite3
import subprocess
import sys
import time

import pytest

from nova_orphans import cli, exits
from nova_orphans import demo as demo_world
from nova_orphans.cli import agent as cli_agent
from nova_orphans.cli import configure
from nova_orphans.decide.policy import Step
from nova_orphans.record.journal import Journal, JournalLocked, lock_path
from nova_orphans.record.lock import LiveLock
from nova_orphans.record.metrics import Metrics

DB_OLD = "22222222-2222-4222-8222-222222222222"  # the demo's deleted guest, running
NOVA_DOWN = "[nova]\nauth_type = admin_token\nendpoint = http://127.0.0.1:1/v2.1\ntoken = t\n"


def config(tmp_path: pathlib.Path, metrics: str = "", **agent: object) -> pathlib.Path:
    settings = {
        "state_dir": tmp_path / "state",
        "action_deleted": "stop",
        "sightings_required": 3,
        "grace_period": 0,
        "max_orphan_fraction": 1,
        "interval": 600,
        **agent,
    }
    # NOTE: the demo world's compute_id (under the state_path of this nova.conf) is what
    # proves to the identity check that its libvirt is compute-1's.
    nova_conf = tmp_path / "nova.conf"
    nova_conf.write_text(f"[DEFAULT]\nhost = compute-1\nstate_path = {tmp_path / 'world'}\n")
    path = tmp_path / "nova-orphans.conf"
    path.write_text(
        f"[DEFAULT]\nhost = compute-1\nnova_config_file = {nova_conf}\n[agent]\n"
        + "".join(f"{k} = {v}\n" for k, v in settings.items())
        + NOVA_DOWN
        + "timeout = 1\n"
        + metrics
    )
    return path


@pytest.fixture
def demo(tmp_path, monkeypatch):
    """The demo cloud; the agent's Nova is its simulated Nova."""
    cloud = demo_world.build(tmp_path / "world")
    monkeypatch.setattr(cli_agent, "transport_from_conf", lambda conf: cloud.nova)
    return cloud


def one_cycle(conf_path, demo, when, dry_run=False):
    """Start an agent as ``run --once [--dry-run]`` would, run one cycle at ``when``, stop it."""
    args = argparse.Namespace(
        config_files=[str(conf_path)], host=None, libvirt_uri=demo.libvirt_uri, dry_run=dry_run
    )
    agent = cli_agent.build_agent(configure.load_conf(args), args, Metrics())
    agent.clock = lambda: when
    try:
        return agent.cycle()
    finally:
        agent.close()


def decision(result, uuid):
    (d,) = [d for d in result.plan.decisions if d.finding.uuid == uuid]
    return d


def test_dry_runs_beside_the_live_agent_never_advance_its_sightings(tmp_path, demo, capsys):
    conf = config(tmp_path)
    cycle = datetime.timedelta(seconds=600)
    for n in range(3):
        dry = one_cycle(conf, demo, demo.now + n * cycle, dry_run=True)
    # The dry runs, on their own, decide as a live agent would: the third sighting stops it.
    assert decision(dry, DB_OLD).step is Step.STOP
    assert [(o.uuid, o.outcome, o.dry_run) for o in dry.outcomes] == [(DB_OLD, "done", True)]
    # The live agent's first cycle is its first sighting, whatever the dry runs saw.
    live = one_cycle(conf, demo, demo.now + 3 * cycle)
    assert decision(live, DB_OLD).step is None
    assert decision(live, DB_OLD).why == "seen 1 of 3 cycles"
    assert live.outcomes == ()
    state = tmp_path / "state"
    assert Journal(str(state / "journal.sqlite")).history() == []
    # ``history`` shows the dry run's intent, marked as such.
    assert cli.main(["history", "--config-file", str(conf)]) == exits.OK
    # NOTE: one event; its detail may wrap onto lines of its own (the table fits 100 columns).
    header, *lines = capsys.readouterr().out.splitlines()
    assert header.split()[:3] == ["WHEN", "(UTC)", "UUID"]
    assert DB_OLD in lines[0] and "stop (dry run)" in lines[0] and "done" in lines[0]
    assert all(line.startswith(" ") for line in lines[1:])


def test_dry_run_from_the_config_also_keeps_its_own_journal(tmp_path, demo):
    conf = config(tmp_path, dry_run="true", sightings_required=1)
    result = one_cycle(conf, demo, demo.now)
    assert [o.dry_run for o in result.outcomes] == [True]
    state = tmp_path / "state"
    assert Journal(str(state / "journal.sqlite.dry-run")).sightings()
    assert Journal(str(state / "journal.sqlite")).sightings() == {}


def test_a_dry_run_honours_the_live_agents_holds(tmp_path, demo):
    """docs/design.md rules 12 and 14: the dry run keeps its own journal, yet a guest the
    operator put on hold in the live journal gets no step in the dry run either, so dry-run
    decisions stay the live agent's."""
    conf = config(tmp_path, sightings_required=1)
    live = Journal(str(tmp_path / "state" / "journal.sqlite"))
    live.hold(DB_OLD, "restored by the operator", demo.now)
    live.close()
    dry = one_cycle(conf, demo, demo.now, dry_run=True)
    assert decision(dry, DB_OLD).step is None
    assert decision(dry, DB_OLD).why.startswith("on hold")
    assert dry.outcomes == ()


def test_a_second_agent_on_the_same_journal_is_refused_before_it_reads_anything(tmp_path):
    path = str(tmp_path / "journal.sqlite")
    first = Journal(path, exclusive=True)
    with pytest.raises(JournalLocked) as refused:
        Journal(path, exclusive=True)
    assert "pid " in str(refused.value) and "since " in str(refused.value)
    # Readers (history, quarantine list) are not agents: they still open it.
    Journal(path).close()
    first.close()
    Journal(path, exclusive=True).close()  # the lock went with the first agent


def _rows(journal: pathlib.Path) -> list[tuple[object, ...]]:
    db = sqlite3.connect(f"file:{journal}?mode=ro", uri=True)
    try:
        return (
            db.execute("SELECT * FROM sightings").fetchall()
            + db.execute("SELECT * FROM intents").fetchall()
        )
    finally:
        db.close()


def test_a_second_live_run_exits_2_naming_the_running_agent_and_changes_nothing(
    tmp_path, world, capsys
):
    with socket.socket() as probe:  # a free port for the running agent's metrics
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    textfile = tmp_path / "metrics.prom"
    conf = config(
        tmp_path, f"[metrics]\nport = {port}\ntextfile = {textfile}\n", interval=10, jitter=0
    )
    state = tmp_path / "state"
    journal = state / "journal.sqlite"
    seeded = Journal(str(journal))  # what a running agent has seen so far
    seeded._execute(
        "INSERT INTO sightings VALUES (?, 'deleted', '2026-01-01T00:00:00+00:00', "
        "'2026-01-01T00:10:00+00:00', 2, NULL, 0)",
        (DB_OLD,),
    )
    seeded.close()
    running = subprocess.Popen(
        [sys.executable, "-m", "nova_orphans.cli", "run", "--config-file", str(conf),
         "--libvirt-uri", world],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        lock = pathlib.Path(lock_path(str(journal)))
        deadline = time.monotonic() + 60
        while f"pid {running.pid} " not in (lock.read_text() if lock.exists() else "") or (
            not textfile.exists()
        ):
            assert running.poll() is None and time.monotonic() < deadline, running.communicate()
            time.sleep(0.1)
        before = (sorted(p.name for p in state.iterdir()), _rows(journal))
        code = cli.main(["run", "--once", "--config-file", str(conf), "--libvirt-uri", world])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == exits.USAGE
        assert len(err) == 1 and f"pid {running.pid} on " in err[0] and "since " in err[0], err
        assert (sorted(p.name for p in state.iterdir()), _rows(journal)) == before
        # A second live agent with a state directory of its own (a unit beside a container)
        # is refused too, naming the running agent and its journal: this host's live lock,
        # not the journal, is what it collides on. It creates nothing, not even its state
        # directory, and is named as such, not as the metrics port both configs name.
        (tmp_path / "container").mkdir()
        other = config(tmp_path / "container", f"[metrics]\nport = {port}\n", interval=10, jitter=0)
        other_state = tmp_path / "container" / "state"
        code = cli.main(["run", "--once", "--config-file", str(other), "--libvirt-uri", world])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == exits.USAGE
        assert len(err) == 1 and f"pid {running.pid} on " in err[0], err
        assert "this host's live lock" in err[0] and f"journal {journal}" in err[0], err
        assert not other_state.exists()
        assert (sorted(p.name for p in state.iterdir()), _rows(journal)) == before
        # A dry run beside the live agent is not refused: it has its own journal and lock,
        # and leaves the running agent's metrics port (and textfile) alone. Nova is down in
        # this test, so it exits 1; the point is: not 2. Nor is one of another state dir.
        dry_run = ["run", "--once", "--dry-run", "--config-file", str(conf)]
        assert cli.main([*dry_run, "--libvirt-uri", world]) == exits.ERROR
        assert "journal.sqlite.dry-run" in {p.name for p in state.iterdir()}
        assert _rows(journal) == before[1]
        dry_run = ["run", "--once", "--dry-run", "--config-file", str(other)]
        assert cli.main([*dry_run, "--libvirt-uri", world]) == exits.ERROR
        assert {p.name for p in other_state.iterdir()} >= {"journal.sqlite.dry-run"}
        assert not (other_state / "journal.sqlite").exists()
        assert running.poll() is None
    finally:
        running.send_signal(signal.SIGTERM)
        running.communicate(timeout=30)


def test_a_journal_given_through_a_symlinked_file_has_the_one_lock_of_its_real_path(tmp_path):
    """Rule 14: the journal's lock follows its real identity, whatever path names it."""
    real = tmp_path / "var" / "journal.sqlite"
    first = Journal(str(real), exclusive=True)
    (tmp_path / "etc").mkdir()
    linked = tmp_path / "etc" / "journal.sqlite"
    linked.symlink_to(real)
    (tmp_path / "dir").symlink_to(tmp_path / "var", target_is_directory=True)
    try:
        for other in (linked, tmp_path / "dir" / "journal.sqlite"):
            with pytest.raises(JournalLocked) as refused:
                Journal(str(other), exclusive=True)
            assert f"pid {os.getpid()} on " in str(refused.value), refused.value
            assert f"journal {real}" in str(refused.value), refused.value
    finally:
        first.close()
    assert lock_path(str(linked)) == lock_path(str(real)) == f"{real}.lock"
    assert not (tmp_path / "etc" / "journal.sqlite.lock").exists()
    Journal(str(linked), exclusive=True).close()  # free again once the first is closed


def _agent(conf_path, demo, dry_run=False):
    args = argparse.Namespace(
        config_files=[str(conf_path)], host=None, libvirt_uri=demo.libvirt_uri, dry_run=dry_run
    )
    return cli_agent.build_agent(configure.load_conf(args), args, Metrics())


def test_a_second_live_agent_of_another_state_dir_exits_2_and_never_acts_on_a_hold(
    tmp_path, demo, capsys
):
    """Rule 14 (and 12): the operator started the guest the first agent stopped, so it is on
    hold in the first agent's journal; a second agent with a journal of its own would see no
    hold and stop it again. It exits 2 naming the holder before it reads or creates anything."""
    conf = config(tmp_path, sightings_required=1)
    live = Journal(str(tmp_path / "state" / "journal.sqlite"))
    live.hold(DB_OLD, "restored by the operator", demo.now)
    live.close()
    first = _agent(conf, demo)
    (tmp_path / "container").mkdir()
    other = config(tmp_path / "container", sightings_required=1)
    try:
        assert first.live_lock is not None and first.live_lock.held
        code = cli.main(
            ["run", "--once", "--config-file", str(other), "--libvirt-uri", demo.libvirt_uri]
        )
        err = capsys.readouterr().err.strip().splitlines()
        assert code == exits.USAGE
        assert len(err) == 1 and f"pid {os.getpid()} on " in err[0], err
        assert f"journal {tmp_path / 'state' / 'journal.sqlite'}" in err[0], err
        assert not (tmp_path / "container" / "state").exists()  # it read and stopped nothing
    finally:
        first.close()
    assert not first.live_lock.held
    # Once the first agent is gone, the other one is this host's live agent.
    second = _agent(other, demo)
    try:
        assert second.live_lock is not None and second.live_lock.held
    finally:
        second.close()


def test_the_live_lock_is_held_by_the_live_agent_only_while_its_file_is_the_one_locked(
    tmp_path, demo
):
    """``LiveLock.held``: what the agent passes on as "this process holds the live lock"."""
    conf = config(tmp_path)
    dry = _agent(conf, demo, dry_run=True)
    try:
        assert dry.live_lock is None  # a dry run never takes it (rule 14)
        live = _agent(conf, demo)  # ...so a live agent starts beside it
        try:
            lock_file = pathlib.Path(live.live_lock.path)
            assert live.live_lock.held
            assert lock_file.read_text().startswith(f"pid {os.getpid()} on ")
            # Someone removes the lock file: a second agent could now take a new one.
            lock_file.unlink()
            assert not live.live_lock.held
            LiveLock.take(str(lock_file), "elsewhere").release()
        finally:
            live.close()
    finally:
        dry.close()
    assert not live.live_lock.held


def test_a_live_lock_file_that_cannot_be_made_is_a_config_error_that_changes_nothing(
    tmp_path, demo, monkeypatch, capsys
):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    monkeypatch.setenv("OS_AGENT__LIVE_LOCK_FILE", str(blocker / "live.lock"))
    conf = config(tmp_path)
    code = cli.main(
        ["run", "--once", "--config-file", str(conf), "--libvirt-uri", demo.libvirt_uri]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == exits.USAGE
    assert len(err) == 1 and f"[agent] live_lock_file {blocker / 'live.lock'}: " in err[0], err
    assert not (tmp_path / "state" / "journal.sqlite").exists()
