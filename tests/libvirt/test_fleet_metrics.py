"""``fleet audit --metrics-textfile``: split-brain and unreachable hosts as metrics for alerts."""

from __future__ import annotations

import pathlib

import pytest
from prometheus_client.parser import text_string_to_metric_families

from nova_orphans import cli
from nova_orphans.cli import fleet as fleet_cli
from tests.libvirt.test_fleet_test_driver import NOW, Fleet, fleet  # noqa: F401


def samples(path: pathlib.Path) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(path.read_text())
        for s in family.samples
    }


def run_fleet(monkeypatch, fleet_: Fleet, tmp_path: pathlib.Path, *extra: str) -> int:
    fleet_.write()
    conf = tmp_path / "fleet.conf"
    conf.write_text("[nova]\nauth_type = admin_token\nendpoint = http://x\ntoken = t\n")
    monkeypatch.setattr(fleet_cli, "transport_from_conf", lambda conf: fleet_.nova)
    monkeypatch.setattr(fleet_cli.common, "now", lambda: NOW)
    argv = ["fleet", "audit", "--config-file", str(conf), "--uri-template", fleet_.template]
    return cli.main([*argv, *extra])


def test_the_textfile_counts_split_brain_and_unreachable_hosts(
    monkeypatch,
    fleet: Fleet,  # noqa: F811
    tmp_path,
    capsys,
):
    fleet.nova.add_compute("cmp-3")  # no node file: unreachable
    textfile = tmp_path / "fleet.prom"
    assert run_fleet(monkeypatch, fleet, tmp_path, "--metrics-textfile", str(textfile)) == 1
    got = samples(textfile)
    # one split-brain per UUID (the merge's counts), its copy on cmp-2 misplaced
    assert got[("nova_orphans_fleet_findings", (("kind", "split-brain"),))] == 1
    assert got[("nova_orphans_fleet_findings", (("kind", "deleted"),))] == 1
    assert got[("nova_orphans_fleet_findings", (("kind", "misplaced"),))] == 1
    assert got[("nova_orphans_fleet_hosts", (("status", "audited"),))] == 2
    assert got[("nova_orphans_fleet_hosts", (("status", "unreachable"),))] == 1
    assert got[("nova_orphans_fleet_last_audit_timestamp_seconds", ())] == NOW.timestamp()
    assert "cmp-3" in capsys.readouterr().out


def test_a_textfile_in_a_missing_directory_is_refused_before_anything_runs(
    monkeypatch,
    fleet: Fleet,  # noqa: F811
    tmp_path,
    capsys,
):
    textfile = tmp_path / "missing" / "fleet.prom"
    assert run_fleet(monkeypatch, fleet, tmp_path, "--metrics-textfile", str(textfile)) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and "no such directory" in err
    assert not textfile.parent.exists()


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_without_the_option_no_textfile_is_written(monkeypatch, fleet: Fleet, tmp_path, fmt):  # noqa: F811
    assert run_fleet(monkeypatch, fleet, tmp_path, "--format", fmt) == 3
    assert not list(tmp_path.glob("*.prom"))
