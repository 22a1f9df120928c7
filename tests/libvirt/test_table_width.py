"""Every table fits a 100-column terminal by default, with a header; ``--wide`` shows
everything, the whole reasons included.

The worlds are realistic: the demo cloud (one guest of each kind), a scanned fleet with
split-brain, leftovers and an unreachable host, a report-based fleet, and a journal with
reaps, restores, purges, holds and a dry run.
"""

from __future__ import annotations

import datetime
import json
import pathlib

import pytest

from nova_orphans import cli, exits
from nova_orphans.model import Kind
from nova_orphans.record.entries import STAMP_FORMAT, QuarantineEntry
from nova_orphans.record.journal import Journal
from nova_orphans.render import fleet as render
from nova_orphans.render import table
from tests.libvirt.test_fleet_reports_test_driver import SPLIT, Cloud, cloud, domain, healthy
from tests.libvirt.test_fleet_test_driver import Fleet, fleet

__all__ = ["cloud", "fleet"]  # the fixtures this module uses

FINDING_HEADER = ["KIND", "UUID", "NAME", "REASON"]


def fits(text: str, commands: frozenset[str] = frozenset()) -> list[str]:
    """The lines of ``text``, each asserted to fit ``table.WIDTH`` columns but a told
    leftover's command (one of ``commands``): it is printed whole to be pasted, never wrapped."""
    lines = text.splitlines()
    too_long = [line for line in lines if len(line) > table.WIDTH and line.strip() not in commands]
    assert too_long == [], f"{len(too_long)} lines longer than {table.WIDTH}: {too_long}"
    return lines


def starts(lines: list[str]) -> list[str]:
    """The lines that start a row (a wrapped cell goes on indented lines, a shared long one
    into a ``[N]`` note under the table)."""
    return [line for line in lines if not line.startswith((" ", "["))]


def unwrapped(text: str) -> str:
    return " ".join(text.split())


def run(capsys: pytest.CaptureFixture[str], *argv: str, code: int = 0) -> str:
    capsys.readouterr()
    assert cli.main(list(argv)) == code
    return capsys.readouterr().out


def rows(lines: list[str]) -> list[str]:
    """The table's rows: not the danger lines under it, which name findings too."""
    return [line for line in lines if not line.startswith("DANGER ")]


def test_the_audit_table_fits_with_a_header_and_wide_shows_every_reason(capsys) -> None:
    shared_volume = exits.SHARED_VOLUME  # the demo has one
    document = json.loads(run(capsys, "demo", "--format", "json", code=shared_volume))
    findings = document["findings"]
    commands = frozenset(i["command"] for i in document["leftovers"]["items"] if i["command"])
    lines = fits(run(capsys, "demo", code=shared_volume), commands)
    assert any(len(line) > table.WIDTH for line in lines)  # a command, whole
    assert lines[0].split() == FINDING_HEADER
    for finding in findings:
        (row,) = [line for line in rows(lines) if finding["uuid"] in line]
        assert row.startswith(finding["kind"]) and row.endswith(finding["brief"])
    wide = run(capsys, "demo", "--wide", code=shared_volume).splitlines()
    assert wide[0].split() == [
        "KIND", "UUID", "NAME", "DOMAIN", "NOVA", "HOST", "VM", "STATE", "TASK", "REASON",
    ]  # fmt: skip
    for finding in findings:
        (row,) = [line for line in rows(wide) if finding["uuid"] in line]
        assert row.endswith(finding["reason"])
    assert max(len(line) for line in wide) > table.WIDTH  # the whole reasons do not fit


def test_the_fleet_table_fits_with_a_header_per_host_and_wide_shows_everything(
    fleet: Fleet,
) -> None:
    fleet.nova.add_compute("cmp-3-with-a-rather-long-name.region-one.example.com")
    result = fleet.audit()
    narrow = render.render_table(result)
    lines = fits(narrow)
    for host in result.hosts:
        if host.findings:
            # NOTE: the host line wraps where its URI's directory makes it (a pytest-xdist
            # worker's tmp_path is longer): "== cmp-1" may end its first line.
            at = next(i for i, line in enumerate(lines) if line.split()[:2] == ["==", host.host])
            # the host line (wrapped: its continuation is indented by four), then the header
            after = [line for line in lines[at + 1 :] if not line.startswith("    ")]
            assert after[0].split() == FINDING_HEADER
    wide = render.render_table(result, wide=True)
    for finding in (f for h in result.hosts for f in h.findings):
        assert finding.uuid in narrow and finding.brief in narrow
        assert finding.reason in wide
    assert "note: libvirt unreachable" in narrow and "remnants of " in narrow
    assert unwrapped(render.summary(result)) in unwrapped(narrow)
    assert render.summary(result) in wide


def test_the_report_based_fleet_table_fits_with_headers(cloud: Cloud, capsys) -> None:
    cloud.nova.boot("cmp-1", "split", SPLIT)
    report = cloud.audit("cmp-1", [*healthy(cloud, "cmp-1"), domain(SPLIT)])
    cloud.audit("cmp-2", [*healthy(cloud, "cmp-2"), domain(SPLIT)])
    gone = cloud.nova.boot("cmp-3", "gone")
    cloud.nova.local_delete(gone)
    cloud.audit("cmp-3", [*healthy(cloud, "cmp-3"), domain(gone)])
    conf = cloud.tmp / "central.conf"
    conf.write_text("[nova]\nauth_type = admin_token\nendpoint = http://x\ntoken = t\n")
    argv = ["fleet", "audit", "--config-file", str(conf), "--reports", str(cloud.reports)]
    lines = fits(run(capsys, *argv, code=3))
    assert lines[0].split() == ["ACROSS", "HOSTS", "UUID", "NAME", "REASON"]
    assert lines[1].startswith("SPLIT-BRAIN") and SPLIT in lines[1]
    at = next(i for i, line in enumerate(lines) if line.startswith("== cmp-3"))
    assert lines[at + 1].split() == FINDING_HEADER
    assert lines[at + 2].split()[:2] == ["deleted", gone]
    wide = run(capsys, *argv, "--wide", code=3)
    deleted = json.loads((cloud.reports / "cmp-3.json").read_text())["findings"]
    assert deleted[0]["reason"] in wide and report["host"] == "cmp-1"


@pytest.fixture
def journal_dir(tmp_path: pathlib.Path) -> pathlib.Path:
    """A state directory whose journal has reaps, a restore, a purge, holds and a dry run."""
    state = tmp_path / "state"
    (state / "quarantine").mkdir(parents=True)
    journal = Journal(str(state / "journal.sqlite"))
    now = datetime.datetime(2026, 11, 1, 12, tzinfo=datetime.timezone.utc)
    for n in range(3):
        uuid = f"{n}aaaaaaa-0000-4000-8000-000000000000"
        at = now + datetime.timedelta(hours=n)
        path = state / "quarantine" / uuid / at.strftime(STAMP_FORMAT)
        intent = journal.begin(uuid, Kind.DELETED, "reap", False, at)
        journal.finish(intent, "done", f"quarantined in {path}; instance files moved", at)
        journal.add_quarantine(QuarantineEntry(uuid, at.strftime(STAMP_FORMAT), "deleted",
                                               str(path), True, []))  # fmt: skip
    journal.hold(f"0{'a' * 7}-0000-4000-8000-000000000000", "restored by the operator", now)
    journal.release(f"0{'a' * 7}-0000-4000-8000-000000000000", now)
    journal.finish(journal.begin(SPLIT, Kind.UNKNOWN, "stop", True, now), "done", "x" * 150, now)
    journal.close()
    (tmp_path / "c.conf").write_text(f"[agent]\nstate_dir = {state}\n")
    return tmp_path


def test_history_fits_with_a_header_and_wide_shows_every_detail(journal_dir, capsys) -> None:
    conf = ["--config-file", str(journal_dir / "c.conf")]
    lines = fits(run(capsys, "history", *conf))
    assert lines[0].split() == ["WHEN", "(UTC)", "UUID", "EVENT", "OUTCOME", "DETAIL"]
    # the header, reaps, hold and release, the dry run (details wrap onto indented lines)
    assert len(starts(lines)) == 1 + 3 + 2 + 1
    assert any("stop (dry run)" in line for line in lines)
    wide = run(capsys, "history", "--wide", *conf)
    assert wide.splitlines()[0].split() == ["WHEN", "UUID", "KIND", "EVENT", "OUTCOME", "DETAIL"]
    assert "x" * 150 in wide and "x" * 150 not in "\n".join(lines)


def test_quarantine_list_fits_with_a_header(journal_dir, capsys) -> None:
    conf = ["--config-file", str(journal_dir / "c.conf")]
    lines = fits(run(capsys, "quarantine", "list", *conf))
    assert lines[0].split() == ["REAPED", "(UTC)", "UUID", "RESTORE?", "HOLDS", "OR", "LACKS"]
    assert len(starts(lines)) == 4
    # NOTE: each entry's detail in full, wrapped at word boundaries: readable at 100 columns.
    assert "does not exist" in unwrapped("\n".join(lines)) and "…" not in "\n".join(lines)
    wide = run(capsys, "quarantine", "list", "--wide", *conf).splitlines()
    assert wide[0].split()[-1] == "DIRECTORY"
    assert all(line.endswith("Z") for line in wide[1:])  # each entry's directory, in full
