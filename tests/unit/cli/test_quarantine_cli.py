"""``quarantine list``, ``restore`` and ``purge`` on quarantine directories and their manifests.

A purge is journaled like every step, ``--dry-run`` deletes nothing, and a
corrupt manifest, a directory without one or a backing file that is gone with no
copy kept is refused in one line with nothing changed.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import pathlib
import pty
import re
import subprocess
import sys

import jsonschema
import pytest

from nova_orphans import cli, exits
from nova_orphans.act.quarantine import entries, manifest
from nova_orphans.act.quarantine.manifest import BackingFile, Kept, Manifest
from nova_orphans.record.entries import STAMP_FORMAT, QuarantineEntry
from nova_orphans.record.journal import Journal
from tests import report_schema

OLD, YOUNG = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"


class State:
    """A state directory with a journal and a quarantine, and a config file naming them."""

    def __init__(self, tmp_path: pathlib.Path) -> None:
        self.root = tmp_path
        self.state = tmp_path / "state"
        self.quarantine = self.state / "quarantine"
        self.instances = tmp_path / "instances"
        self.instances.mkdir()
        self.config = tmp_path / "nova-orphans.conf"
        self.config.write_text(
            f"[DEFAULT]\nhost = cmp-1\ninstances_path = {self.instances}\n"
            f"[libvirt]\nconnection_uri = test:///default\n[agent]\nstate_dir = {self.state}\n"
        )

    def run(self, *argv: str) -> int:
        return cli.main([*argv, "--config-file", str(self.config)])

    def entry(
        self,
        uuid: str,
        age_days: float,
        *,
        journal: bool = False,
        kept: Kept | None = None,
        with_manifest: bool = True,
    ) -> pathlib.Path:
        """A reaped guest's quarantine directory (XML, files, manifest), ``age_days`` old."""
        now = datetime.datetime.now(datetime.timezone.utc)
        stamp = (now - datetime.timedelta(days=age_days)).strftime(STAMP_FORMAT)
        directory = self.quarantine / uuid / stamp
        (directory / "files").mkdir(parents=True)
        (directory / "files" / "disk").write_bytes(b"disk")
        (directory / "domain.xml").write_text(f"<domain><uuid>{uuid}</uuid></domain>")
        if with_manifest:
            saved = Manifest(uuid, "deleted", stamp, "guest", True, (), kept or Kept(), True)
            manifest.write(str(directory), saved)
        if journal:
            with self.journal() as opened:
                opened.add_quarantine(
                    QuarantineEntry(uuid, stamp, "deleted", str(directory), True, [])
                )
        return directory

    def journal(self) -> Journal:
        return _Opened(str(self.state / "journal.sqlite"))

    def tree(self) -> list[tuple[str, bytes]]:
        """Every file and directory (with its content) but the journal's own files."""
        return sorted(
            (str(p.relative_to(self.root)), p.read_bytes() if p.is_file() else b"")
            for p in self.root.rglob("*")
            if not p.name.startswith("journal.sqlite")
        )


class _Opened(Journal):
    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@pytest.fixture
def state(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> State:
    # NOTE: restore asks Nova first (docs/design.md rule 13); this Nova has no record of
    # any guest here, so every restore is allowed to start.
    from nova_orphans.cli import journal as cli_journal
    from nova_orphans.fakes import libvirt_node as worlds
    from nova_orphans.fakes.nova import SimulatedNova

    nova = SimulatedNova()
    # NOTE: and proves this libvirt is its node of cmp-1 (docs/design.md rule 10).
    nova.add_compute("cmp-1", **worlds.test_driver_node())
    worlds.write_compute_id(nova.computes["cmp-1"].node_uuid)
    monkeypatch.setattr(cli_journal, "transport_from_conf", lambda conf: nova)
    return State(tmp_path)


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


# --- purge -----------------------------------------------------------------------------


def test_purge_deletes_expired_entries_of_the_journal_and_of_manifests_alone(
    state: State, capsys: pytest.CaptureFixture[str]
) -> None:
    known = state.entry(OLD, 10, journal=True)
    manifest_only = state.entry("33333333-3333-4333-8333-333333333333", 9)
    young = state.entry(YOUNG, 1, journal=True)
    assert state.run("purge", "--older-than", "7") == 0
    assert not known.exists() and not manifest_only.exists() and young.exists()
    out = capsys.readouterr().out
    assert out.count("purged ") == 2 and f"purged {OLD} (reaped " in out
    with state.journal() as journal:
        assert [e.uuid for e in journal.quarantine()] == [YOUNG]
        purges = [i for i in journal.history() if i.step == "purge"]
    # Every purge journaled: an intent, then its outcome.
    assert sorted(i.uuid for i in purges) == sorted([OLD, "33333333-3333-4333-8333-333333333333"])
    assert all(i.outcome == "done" and not i.dry_run and i.finished_at for i in purges)


def test_purge_dry_run_deletes_nothing_and_journals_what_it_would_do(
    state: State, capsys: pytest.CaptureFixture[str]
) -> None:
    old = state.entry(OLD, 10, journal=True)
    before = state.tree()
    assert state.run("purge", "--older-than", "7", "--dry-run") == 0
    assert f"would purge {OLD} (reaped {old.name}): would delete {old}" in capsys.readouterr().out
    assert old.exists()
    with state.journal() as journal:
        assert [e.uuid for e in journal.quarantine()] == [OLD]
        (intent,) = journal.history()
    assert (intent.step, intent.dry_run, intent.outcome) == ("purge", True, "done")
    assert state.tree() == before


@pytest.mark.parametrize("broken", ["no manifest", "corrupt manifest"])
def test_purge_refuses_a_directory_nothing_describes_and_purges_nothing(
    state: State, capsys: pytest.CaptureFixture[str], broken: str
) -> None:
    old = state.entry(OLD, 10, journal=True)
    bad = state.entry(YOUNG, 30, with_manifest=broken == "corrupt manifest")
    if broken == "corrupt manifest":
        (bad / "manifest.json").write_text("{not json")
    before = state.tree()
    assert state.run("purge", "--older-than", "7") == exits.ERROR
    line = _one_line(capsys)
    assert str(bad) in line and "nothing purged" in line
    assert broken.split()[-1] in line
    assert state.tree() == before and old.exists()


# --- restore and list ------------------------------------------------------------------


def test_restore_of_a_corrupt_manifest_is_one_line_and_changes_nothing(
    state: State, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = state.entry(OLD, 1)
    (directory / "manifest.json").write_text('{"version": 1}')
    before = state.tree()
    assert state.run("restore", OLD) == exits.ERROR
    line = _one_line(capsys)
    assert "corrupt manifest" in line and "nothing changed" in line
    assert state.tree() == before


def test_restore_without_journal_or_manifest_is_one_line_and_changes_nothing(
    state: State, capsys: pytest.CaptureFixture[str]
) -> None:
    state.entry(OLD, 1, with_manifest=False)
    before = state.tree()
    assert state.run("restore", OLD) == exits.ERROR
    assert "has no manifest.json" in _one_line(capsys)
    assert state.tree() == before


def test_restore_with_a_backing_file_gone_and_no_copy_is_one_line_and_changes_nothing(
    state: State, capsys: pytest.CaptureFixture[str]
) -> None:
    base = str(state.instances / "_base" / "abc")
    kept = Kept(backing=(BackingFile(base, "0-abc", "hard link", 4),))
    state.entry(OLD, 1, journal=True, kept=kept)  # backing/0-abc was never made
    before = state.tree()
    assert state.run("restore", OLD) == exits.ERROR
    line = _one_line(capsys)
    assert f"backing file {base} is missing and so is its copy" in line
    assert state.tree() == before


def test_quarantine_list_says_whether_each_entry_is_restorable_and_what_it_holds(
    state: State, capsys: pytest.CaptureFixture[str]
) -> None:
    base = str(state.instances / "_base" / "abc")
    broken = Kept(backing=(BackingFile(base, "0-abc", "hard link", 4),))
    state.entry(OLD, 2, journal=True, kept=Kept(managed_save=True, snapshots=("s1",)))
    (state.quarantine / OLD).glob("*").__next__().joinpath("managed.save").write_bytes(b"ram")
    snapshots = next((state.quarantine / OLD).glob("*")) / "snapshots"
    snapshots.mkdir()
    (snapshots / "0.xml").write_text("<domainsnapshot/>")
    state.entry(YOUNG, 1, kept=broken)
    assert state.run("quarantine", "list", "--wide") == 0
    header, old, young = capsys.readouterr().out.splitlines()
    assert header.split()[:3] == ["REAPED", "UUID", "KIND"]
    assert re.search(f"{OLD}  deleted  yes  +xml, files, managed-save, 1 snapshot  ", old)
    assert re.search(f"{YOUNG}  deleted  NO  +backing file {base} is missing and so is", young)
    assert old.endswith(str(next((state.quarantine / OLD).glob("*"))))
    assert state.run("quarantine", "list") == 0
    # NOTE: at 100 columns every detail is there in full, wrapped, no word cut in two.
    header, *lines = capsys.readouterr().out.splitlines()
    assert header.split()[:3] == ["REAPED", "(UTC)", "UUID"]
    assert max(len(line) for line in (header, *lines)) <= 100
    text = " ".join(" ".join(lines).split())
    assert re.search(f"2026-.* {OLD} yes xml, files, managed-save, 1 snapshot", text)
    assert f"{YOUNG} NO backing file {base} is missing and so is" in text
    assert "…" not in text


def test_restore_is_journaled_and_closes_the_entry(
    state: State, capsys: pytest.CaptureFixture[str]
) -> None:
    import libvirt

    from nova_orphans.act import live
    from nova_orphans.fakes import libvirt_node as worlds

    uuid = worlds.random_uuid()
    conn = libvirt.open("test:///default")
    conn.defineXML(
        f"<domain type='test'><name>{worlds.instance_name()}</name><uuid>{uuid}</uuid>"
        "<memory unit='KiB'>32768</memory><os><type>hvm</type></os></domain>"
    )
    effects = live.LiveEffects("test:///default", str(state.instances), str(state.quarantine))
    stamp = "20240501T120000Z"
    directory = effects.quarantine_dir(uuid, stamp)
    effects.save_xml(directory, effects.domain_xml(uuid))
    saved = Manifest(uuid, "unknown", stamp, "x", kept=effects.keep_state(uuid, directory))
    effects.undefine(uuid, directory)
    effects.write_manifest(directory, dataclasses.replace(saved, undefined=True))
    effects.close()
    try:
        assert state.run("restore", uuid) == 0
        assert capsys.readouterr().out.startswith(f"restored {uuid}: defined instance-")
        assert conn.lookupByUUIDString(uuid).isPersistent()
    finally:
        conn.lookupByUUIDString(uuid).undefine()
        conn.close()
    with state.journal() as journal:
        (intent,) = journal.history(uuid)
        assert (intent.step, intent.outcome) == ("restore", "done")
        assert intent.detail and intent.detail.startswith("defined instance-")  # said once
        (entry,) = journal.quarantine(include_done=True)
        assert entry.restored_at is not None
    capsys.readouterr()
    assert state.run("quarantine", "list") == 0
    assert uuid not in capsys.readouterr().out
    # The restored entry's directory (its XML, its manifest) goes after the retention too.
    assert os.path.isdir(directory)
    assert state.run("purge", "--older-than", "1") == 0
    assert capsys.readouterr().out == f"purged {uuid} (reaped {stamp}): deleted {directory}\n"
    assert not os.path.exists(directory)
    with state.journal() as journal:
        (entry,) = journal.quarantine(include_done=True)
        assert entry.restored_at is not None and entry.purged_at is not None
        assert [i.step for i in journal.history(uuid)] == ["purge", "restore"]
    # ``history`` tells the whole lifecycle: the restore, the hold it put, the purge.
    assert state.run("history", "--format", "json") == 0
    events = report_schema.valid(json.loads(capsys.readouterr().out))["events"]
    told = sorted((e["event"], e.get("step"), e.get("outcome")) for e in events)
    assert told == [("hold", None, None), ("step", "purge", "done"), ("step", "restore", "done")]


def test_a_restored_entry_only_its_manifest_knows_is_purged_after_the_retention(
    state: State, capsys: pytest.CaptureFixture[str]
) -> None:
    """The journal was lost after a restore: the manifest says restored; purged all the same,
    and only once the retention has passed."""
    old, young = state.entry(OLD, 10), state.entry(YOUNG, 2)
    for directory in (old, young):
        saved = manifest.read(str(directory))
        manifest.write(str(directory), dataclasses.replace(saved, restored_at="2026-01-01"))
    assert state.run("purge", "--older-than", "7") == 0
    assert not old.exists() and young.exists()
    assert capsys.readouterr().out.startswith(f"purged {OLD} ")


def test_a_refused_restore_is_journaled_as_failed(
    state: State, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = state.entry(OLD, 1, journal=True)
    (directory / "files").rename(directory / "elsewhere")
    assert state.run("restore", OLD) == exits.ERROR
    assert "its instance files are not in" in _one_line(capsys)
    with state.journal() as journal:
        (intent,) = journal.history(OLD)
        assert (intent.step, intent.outcome) == ("restore", "failed")
        assert [e.uuid for e in journal.quarantine()] == [OLD]


@pytest.mark.parametrize("days", ["nan", "inf", "1e10", "3000000"])
def test_purge_older_than_no_time_can_hold_is_a_usage_error_and_purges_nothing(
    state: State, capsys: pytest.CaptureFixture[str], days: str
) -> None:
    """``--older-than nan`` (or a span no date can hold) is bad input, not a traceback.

    docs/design.md rule 9: one line, exit 2, nothing changed.
    """
    old = state.entry(OLD, 10, journal=True)
    before = state.tree()
    assert state.run("purge", "--older-than", days) == exits.USAGE
    line = _one_line(capsys)
    assert line.startswith("nova-orphans: ") and "--older-than" in line
    assert state.tree() == before and old.exists()


def test_the_restore_guard_learns_of_a_managed_save_from_the_manifest(state: State) -> None:
    """``restore`` tells Nova's check that bringing the entry back runs the guest (rule 13)."""
    suspended = state.entry(OLD, 1, kept=Kept(managed_save=True))
    plain = state.entry(YOUNG, 1)
    for directory, uuid, expected in ((suspended, OLD, True), (plain, YOUNG, False)):
        entry = QuarantineEntry(uuid, directory.name, "misplaced", str(directory), True, [])
        assert entries.has_managed_save(entry) is expected


def _purge_at_a_terminal(state: State, answer: str, *extra: str) -> subprocess.CompletedProcess:
    """``purge --older-than 7`` with standard input a terminal on which ``answer`` is typed."""
    controller, terminal = pty.openpty()
    try:
        os.write(controller, answer.encode())
        argv = [sys.executable, "-m", "nova_orphans.cli", "purge", "--older-than", "7", *extra]
        return subprocess.run(
            [*argv, "--config-file", str(state.config)],
            stdin=terminal, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    finally:
        os.close(terminal)
        os.close(controller)


@pytest.mark.parametrize("answer", ["\n", "n\n", "no\n", "purge\n"])
def test_purge_at_a_terminal_lists_and_asks_and_anything_but_yes_purges_nothing(
    state: State, answer: str
) -> None:
    old = state.entry(OLD, 10, journal=True)
    young = state.entry(YOUNG, 1, journal=True)
    before = state.tree()
    done = _purge_at_a_terminal(state, answer)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"would purge {OLD} (reaped {old.name}): {old}\nnothing purged\n"
    assert done.stderr == "purge this entry for good? [y/N] "
    assert state.tree() == before and young.exists()


def test_purge_at_a_terminal_purges_once_confirmed_or_with_yes(state: State) -> None:
    old = state.entry(OLD, 10, journal=True)
    done = _purge_at_a_terminal(state, "y\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == f"purged {OLD} (reaped {old.name}): deleted {old}"
    assert not old.exists()
    other = state.entry(YOUNG, 10, journal=True)
    done = _purge_at_a_terminal(state, "", "--yes")
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout == f"purged {YOUNG} (reaped {other.name}): deleted {other}\n"
    assert not other.exists()


def test_a_purge_with_nothing_old_enough_says_so_and_asks_nothing(state: State) -> None:
    young = state.entry(YOUNG, 1, journal=True)
    done = _purge_at_a_terminal(state, "")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == "nothing reaped 7 days ago or more: nothing to purge\n"
    assert young.exists()


# --- entries not to be trusted (docs/design.md rule 7) ---------------------------------


def _symlinked_file(state: State, directory: pathlib.Path) -> str:
    """A file of the entry replaced by a symlink to a file outside the quarantine."""
    (directory / "files" / "disk").unlink()
    (directory / "files" / "disk").symlink_to(state.root / "victim")
    return str(directory / "files" / "disk")


def _symlinked_entry(state: State, directory: pathlib.Path) -> str:
    """The entry's directory replaced by a symlink to a copy of it outside."""
    outside = state.root / "outside" / directory.name
    outside.parent.mkdir()
    directory.rename(outside)
    directory.symlink_to(outside)
    return str(directory)


def _entry_outside(state: State, directory: pathlib.Path) -> str:
    """The journal names a directory outside the quarantine that looks like an entry."""
    outside = state.root / "outside" / OLD / directory.name
    outside.parent.mkdir(parents=True)
    directory.rename(outside)
    directory.parent.rmdir()
    with state.journal() as journal:
        journal._db.execute("UPDATE quarantine SET path = ? WHERE uuid = ?", (str(outside), OLD))
    return f"is outside {state.quarantine}"


def _backing_outside(state: State, directory: pathlib.Path) -> str:
    """The manifest has a backing file put back outside ``instances_path``."""
    (directory / "backing").mkdir()
    (directory / "backing" / "0-abc").write_bytes(b"base")
    target = str(state.root / "etc" / "cron.d" / "abc")
    saved = manifest.read(str(directory))
    kept = Kept(backing=(BackingFile(target, "0-abc", "hard link", 4),))
    manifest.write(str(directory), dataclasses.replace(saved, kept=kept))
    return f"backing file {target} put back, but it is outside {state.instances}"


def _backing_with_dots(state: State, directory: pathlib.Path) -> str:
    """The manifest names a backing file with ``..`` (climbing out of ``instances_path``)."""
    (directory / "backing").mkdir()
    (directory / "backing" / "0-abc").write_bytes(b"base")
    target = f"{state.instances}/../etc/abc"
    text = (directory / "manifest.json").read_text()
    data = json.loads(text)
    data["kept"]["backing"] = [{"path": target, "kept": "0-abc", "how": "copy", "size": 4}]
    (directory / "manifest.json").write_text(json.dumps(data))
    return f"backing file path {target!r}"


TAMPERED = {
    "a file of the entry is a symlink to a file outside": _symlinked_file,
    "the entry's directory is a symlink": _symlinked_entry,
    "the journal's entry lies outside the quarantine": _entry_outside,
    "the manifest puts a backing file back outside instances_path": _backing_outside,
    "the manifest names a backing file with ..": _backing_with_dots,
}


@pytest.mark.parametrize("tamper", TAMPERED.values(), ids=list(TAMPERED))
def test_restore_refuses_an_entry_not_to_be_trusted_and_changes_nothing(
    state: State, capsys: pytest.CaptureFixture[str], tamper
) -> None:
    (state.root / "victim").write_bytes(b"precious")
    directory = state.entry(OLD, 1, journal=True)
    named = tamper(state, directory)
    before = state.tree()
    with state.journal() as journal:
        steps = journal.history()
    assert state.run("restore", OLD) == exits.ERROR
    line = _one_line(capsys)
    assert line.startswith(f"nova-orphans: error: restore {OLD}: ") and named in line, line
    assert "nothing changed" in line
    assert state.tree() == before and (state.root / "victim").read_bytes() == b"precious"
    assert not (state.instances / OLD).exists() and not (state.root / "etc").exists()
    with state.journal() as journal:
        assert journal.history() == steps  # refused before anything was journaled


PURGE_TAMPERED = ("a file of the entry is a symlink to a file outside",
                  "the entry's directory is a symlink",
                  "the journal's entry lies outside the quarantine")  # fmt: skip


@pytest.mark.parametrize("how", PURGE_TAMPERED)
def test_purge_refuses_an_entry_not_to_be_trusted_and_purges_nothing(
    state: State, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    (state.root / "victim").write_bytes(b"precious")
    clean = state.entry(YOUNG, 20, journal=True)
    named = TAMPERED[how](state, state.entry(OLD, 10, journal=True))
    before = state.tree()
    assert state.run("purge", "--older-than", "7", "--yes") == exits.ERROR
    line = _one_line(capsys)
    assert line.startswith(f"nova-orphans: error: purge: quarantine entry {OLD} (")
    assert named in line
    assert line.endswith("nothing purged (repair or remove it by hand)")
    assert state.tree() == before and clean.exists()
    assert (state.root / "victim").read_bytes() == b"precious"
    with state.journal() as journal:
        assert journal.history() == []


def test_the_agents_retention_purge_fails_an_entry_not_to_be_trusted(state: State) -> None:
    """The agent's purge goes through the same check: that entry fails, the others go."""
    from nova_orphans.act import live
    from nova_orphans.act.actuator import Actuator
    from nova_orphans.act.quarantine import retention
    from nova_orphans.decide.gate import SafetyVerdict

    (state.root / "victim").write_bytes(b"precious")
    clean = state.entry(YOUNG, 20, journal=True)
    tampered = state.entry(OLD, 10, journal=True)
    link = _symlinked_file(state, tampered)
    effects = live.LiveEffects("test:///default", str(state.instances), str(state.quarantine))
    now = datetime.datetime.now(datetime.timezone.utc)
    clear = SafetyVerdict(True, "a cycle whose verdict is clear")
    with state.journal() as journal:
        actuator = Actuator(effects, None, journal, lambda: now, dry_run=False, verdict=clear)
        purged = retention.purge_expired(
            actuator, journal, str(state.quarantine), now, datetime.timedelta(days=7)
        )
    effects.close()
    outcomes = {p.entry.uuid: (p.outcome, p.detail) for p in purged}
    assert outcomes[YOUNG][0] == "done" and not clean.exists()
    assert outcomes[OLD][0] == "failed" and f"{link} is a symlink" in outcomes[OLD][1]
    assert os.path.islink(link) and (state.root / "victim").read_bytes() == b"precious"


def test_quarantine_list_says_an_entry_not_to_be_trusted_is_not_restorable(
    state: State, capsys: pytest.CaptureFixture[str]
) -> None:
    link = _symlinked_file(state, state.entry(OLD, 1, journal=True))
    assert state.run("quarantine", "list", "--format", "json") == 0
    (row,) = report_schema.valid(json.loads(capsys.readouterr().out))["entries"]
    assert row["restorable"] is False and f"{link} is a symlink" in row["detail"]


def test_history_and_quarantine_list_json_are_versioned_documents_of_the_schema(
    state: State, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both print one document: ``schema_version``, ``tool_version`` and their rows."""
    from nova_orphans.model import Kind
    from nova_orphans.version import tool_version

    state.entry(OLD, 2, journal=True)
    _symlinked_file(state, state.entry(YOUNG, 1))
    now = datetime.datetime.now(datetime.timezone.utc)
    with state.journal() as journal:
        done = journal.begin(OLD, Kind.DELETED, "reap", False, now)
        journal.finish(done, "done", "reaped", now)
        journal.begin(YOUNG, Kind.UNKNOWN, "stop", True, now)  # open: no outcome yet
    assert state.run("history", "--format", "json") == 0
    history = report_schema.valid(json.loads(capsys.readouterr().out))
    assert list(history)[:2] == ["schema_version", "tool_version"]
    assert history["tool_version"] == tool_version()
    assert [(e["uuid"], e["outcome"]) for e in history["events"]] == [(YOUNG, None), (OLD, "done")]
    assert state.run("quarantine", "list", "--format", "json") == 0
    listed = report_schema.valid(json.loads(capsys.readouterr().out))
    assert list(listed)[:2] == ["schema_version", "tool_version"]
    rows = [(e["uuid"], e["restorable"], e["known_from"]) for e in listed["entries"]]
    assert rows == [(OLD, True, "journal"), (YOUNG, False, "manifest")]
    # The schema is no rubber stamp: a row missing a field, or a bare list, is refused.
    del listed["entries"][0]["restorable"]
    for wrong in (listed, history["events"]):
        with pytest.raises(jsonschema.ValidationError):
            report_schema.validator().validate(wrong)


@pytest.mark.parametrize("flags", [["--start"], ["--start", "--force"], []])
def test_a_restore_on_a_view_nothing_proves_is_refused_and_changes_nothing(
    state: State, capsys: pytest.CaptureFixture[str], nova_state_dirs: pathlib.Path, flags
) -> None:
    """A ``[nova]`` of another cloud whose compute has this host's names answers "no record"
    for a server the right cloud runs elsewhere: the start would make a second copy. Nothing
    proves the view, so the gate refuses (docs/design.md rules 10, 13 and 19), ``--force``
    included."""
    (nova_state_dirs / "compute_id").unlink()
    uuid = "44444444-4444-4444-8444-444444444444"
    directory = state.entry(uuid, 3, journal=True)
    capsys.readouterr()
    assert state.run("restore", uuid, *flags) == exits.ERROR
    line = _one_line(capsys)
    assert line.startswith("nova-orphans: refused: ") and "identity not proven" in line
    assert "(names are no proof)" in line
    assert directory.exists()
    with state.journal() as journal:
        assert [e.uuid for e in journal.quarantine()] == [uuid]
        assert journal.holds() == {}
        assert journal.history(uuid) == []
