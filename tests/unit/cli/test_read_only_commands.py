"""``audit``, ``history`` and ``quarantine list`` open the journal read-only: they never write,
work from read-only media, and refuse a journal of an unknown schema version in one line."""

from __future__ import annotations

import hashlib
import os
import pathlib
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator

import pytest

from nova_orphans import audit, cli, exits
from nova_orphans.record.entries import SCHEMA_VERSION

UNVERSIONED = pathlib.Path(__file__).parents[1] / "record" / "data" / "journal-unversioned.sqlite"
HELD = "22222222-2222-4333-8444-555555555555"


def write_conf(root: pathlib.Path, state: pathlib.Path) -> str:
    path = root / "nova-orphans.conf"
    path.write_text(
        f"[DEFAULT]\nhost = cmp-1\n[agent]\nstate_dir = {state}\n"
        "[nova]\nauth_type = admin_token\nendpoint = http://127.0.0.1:1/v2.1\ntoken = t\n"
    )
    return str(path)


def tree(root: pathlib.Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else ""
        for p in sorted(root.rglob("*"))
    }


@pytest.fixture
def state(tmp_path: pathlib.Path) -> pathlib.Path:
    """A state directory holding a journal of today (one stop, one quarantine entry, a hold)."""
    directory = tmp_path / "state"
    (directory / "quarantine").mkdir(parents=True)
    shutil.copyfile(UNVERSIONED, directory / "journal.sqlite")
    return directory


@pytest.fixture
def read_only_state(tmp_path: pathlib.Path, state: pathlib.Path) -> Iterator[pathlib.Path]:
    """``state`` seen through a read-only bind mount (read-only media: even root cannot write)."""
    if os.geteuid() != 0:
        pytest.skip("a read-only bind mount needs root")
    mount = tmp_path / "ro"
    mount.mkdir()
    subprocess.run(["mount", "--bind", str(state), str(mount)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(mount)], check=True)
        with pytest.raises(OSError):
            (mount / "probe").touch()
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


@pytest.mark.parametrize("argv", [["history"], ["quarantine", "list"]])
def test_the_journal_commands_read_a_journal_on_read_only_media(
    tmp_path, read_only_state, capsys, argv
):
    conf = write_conf(tmp_path, read_only_state)
    assert cli.main([*argv, "--config-file", conf, "--format", "json"]) == exits.OK
    out, err = capsys.readouterr()
    assert err == ""
    assert "11111111-2222-4333-8444-555555555555" in out


def test_audit_reads_the_holds_from_read_only_media(read_only_state):
    assert set(audit.read_holds(str(read_only_state / "journal.sqlite"))) == {HELD}


@pytest.mark.parametrize("argv", [["history"], ["quarantine", "list"], ["history", "--uuid", HELD]])
def test_the_journal_commands_change_no_file_of_the_state_directory(tmp_path, state, capsys, argv):
    conf = write_conf(tmp_path, state)
    before = tree(state)
    assert cli.main([*argv, "--config-file", conf]) == exits.OK
    assert tree(state) == before


def test_history_of_an_empty_journal_file_writes_no_schema_into_it(tmp_path, capsys):
    state = tmp_path / "state"
    state.mkdir()
    (state / "journal.sqlite").touch()
    conf = write_conf(tmp_path, state)
    assert cli.main(["history", "--config-file", conf, "--format", "json"]) == exits.OK
    assert '"events": []' in capsys.readouterr().out
    assert (state / "journal.sqlite").read_bytes() == b""
    assert sorted(p.name for p in state.iterdir()) == ["journal.sqlite"]


def test_quarantine_list_without_a_journal_creates_none(tmp_path, state, capsys):
    (state / "journal.sqlite").unlink()
    conf = write_conf(tmp_path, state)
    assert cli.main(["quarantine", "list", "--config-file", conf]) == exits.OK
    assert not (state / "journal.sqlite").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["history"],
        ["quarantine", "list"],
        ["release", HELD],
        ["purge", "--older-than", "1"],
        ["restore", "11111111-2222-4333-8444-555555555555"],
    ],
)
def test_a_journal_of_a_newer_schema_is_refused_in_one_line(tmp_path, state, capsys, argv):
    db = sqlite3.connect(state / "journal.sqlite")
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    conf = write_conf(tmp_path, state)
    before = tree(state)
    assert cli.main([*argv, "--config-file", conf]) == exits.USAGE
    out, err = capsys.readouterr()
    assert out == ""
    (line,) = err.splitlines()
    assert line.startswith("nova-orphans: journal error: ")
    assert f"schema version {SCHEMA_VERSION + 1};" in line
    assert tree(state) == before
