"""The fleet audit's output files (``--json-file``, ``--metrics-textfile``), scanning or from
reports alike: never through a link or into a device, written whole with their own mode
whatever the umask, and a failed write is an I/O error (exit 1) naming its cause, with the
fleet still printed and no temporary file left behind (nova_orphans/cli/fleet_output.py)."""

from __future__ import annotations

import json
import os
import stat

import pytest

from nova_orphans import exits
from nova_orphans.cli import fleet_output
from tests.libvirt.test_fleet_metrics import run_fleet
from tests.libvirt.test_fleet_reports_test_driver import HOSTS, Cloud, cloud  # noqa: F401
from tests.libvirt.test_fleet_test_driver import Fleet, fleet  # noqa: F401


@pytest.mark.parametrize("option", ["--json-file", "--metrics-textfile"])
def test_a_symbolic_link_is_refused_before_anything_runs(
    monkeypatch,
    fleet: Fleet,  # noqa: F811
    tmp_path,
    capsys,
    option,
):
    target = tmp_path / "elsewhere"
    target.write_text("kept\n")
    link = tmp_path / "out"
    link.symlink_to(target)
    assert run_fleet(monkeypatch, fleet, tmp_path, option, str(link)) == exits.USAGE
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and "symbolic link" in err
    assert link.is_symlink() and target.read_text() == "kept\n"
    assert fleet.nova.request_count == 0  # refused before any work


def test_dev_stdout_is_refused_not_replaced(monkeypatch, fleet: Fleet, tmp_path, capsys):  # noqa: F811
    assert run_fleet(monkeypatch, fleet, tmp_path, "--json-file", "/dev/stdout") == exits.USAGE
    out, err = capsys.readouterr()
    assert out == "" and "/dev/stdout" in err and len(err.splitlines()) == 1
    assert os.path.islink("/dev/stdout")


def test_a_device_is_refused(monkeypatch, fleet: Fleet, tmp_path, capsys):  # noqa: F811
    assert run_fleet(monkeypatch, fleet, tmp_path, "--metrics-textfile", "/dev/null") == exits.USAGE
    assert "not a file" in capsys.readouterr().err


def test_both_files_get_their_mode_whatever_the_umask(monkeypatch, fleet: Fleet, tmp_path, capsys):  # noqa: F811
    json_file, textfile = tmp_path / "fleet.json", tmp_path / "fleet.prom"
    old = os.umask(0o077)
    try:
        code = run_fleet(monkeypatch, fleet, tmp_path, "--json-file", str(json_file),
                         "--metrics-textfile", str(textfile))  # fmt: skip
    finally:
        os.umask(old)
    assert code == exits.FOUND
    assert stat.S_IMODE(json_file.stat().st_mode) == fleet_output.JSON_MODE
    assert stat.S_IMODE(textfile.stat().st_mode) == fleet_output.TEXTFILE_MODE
    assert json.loads(json_file.read_text())["source"] == "scan"
    assert "nova_orphans_fleet_findings" in textfile.read_text()
    assert sorted(p.name for p in tmp_path.iterdir() if "partial" in p.name) == []


def test_a_failed_write_is_an_io_error_with_its_cause_and_leaves_nothing(
    monkeypatch,
    fleet: Fleet,  # noqa: F811
    tmp_path,
    capsys,
):
    json_file = tmp_path / "fleet.json"

    def no_space(fd: int) -> None:
        # NOTE: where a full file system shows on a buffered write: at the flush to disk.
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", no_space)
    code = run_fleet(
        monkeypatch, fleet, tmp_path, "--format", "json", "--json-file", str(json_file)
    )
    out, err = capsys.readouterr()
    assert code == exits.ERROR
    assert json.loads(out)["source"] == "scan"  # the fleet was printed all the same
    (line,) = err.splitlines()
    assert "--json-file" in line and "no space left on device" in line.lower()
    assert "config" not in line
    assert not json_file.exists()
    assert [p.name for p in tmp_path.iterdir() if "partial" in p.name] == []


def test_with_reports_the_metrics_textfile_is_written_too(cloud: Cloud, capsys, tmp_path):  # noqa: F811
    """One fleet path: the merged reports fill the same textfile a scan does."""
    for host in HOSTS:
        cloud.audit(host, [])
    textfile = tmp_path / "fleet.prom"
    code, document, _ = cloud.fleet(capsys, "--metrics-textfile", str(textfile))
    assert code == exits.OK and document["source"] == "reports"
    text = textfile.read_text()
    assert f'nova_orphans_fleet_hosts{{status="audited"}} {float(len(HOSTS))}' in text
    assert 'nova_orphans_fleet_hosts{status="unreachable"} 0.0' in text
