"""The agent's output files (``[metrics] textfile``, ``[agent] report_file``): each written
whole with its own mode whatever the umask, and a write that fails is one error line, counted
in ``nova_orphans_output_write_failures_total{file}``, and the agent carries on."""

from __future__ import annotations

import logging
import os
import stat

import pytest

from nova_orphans.cli import agent as agent_cli
from nova_orphans.record import files
from nova_orphans.record.metrics import Metrics


class Result:
    """What a cycle hands the report writer: only its report matters here."""

    report = None


def failures(metrics: Metrics, file: str) -> float:
    value = metrics.registry.get_sample_value(
        "nova_orphans_output_write_failures_total", {"file": file}
    )
    assert value is not None
    return value


@pytest.mark.parametrize("umask", [0o000, 0o077, 0o777])
def test_the_textfile_is_0644_whatever_the_umask(tmp_path, umask):
    path = tmp_path / "nova-orphans.prom"
    previous = os.umask(umask)
    try:
        Metrics().write_textfile(str(path))
    finally:
        os.umask(previous)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert "nova_orphans_output_write_failures_total" in path.read_text()
    assert [p.name for p in tmp_path.iterdir()] == ["nova-orphans.prom"]


@pytest.mark.parametrize("kind", ["symlink", "directory", "missing directory", "fifo"])
def test_a_textfile_that_cannot_be_written_is_one_line_counted_and_the_agent_goes_on(
    tmp_path, caplog, kind
):
    path = tmp_path / "m.prom"
    if kind == "symlink":
        (tmp_path / "elsewhere").write_text("kept\n")
        path.symlink_to(tmp_path / "elsewhere")
    elif kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path = tmp_path / "gone" / "m.prom"
    metrics = Metrics()
    caplog.set_level(logging.ERROR)
    agent_cli._output(metrics, "textfile", "[metrics] textfile", str(path),
                      lambda: metrics.write_textfile(str(path)))  # fmt: skip
    (record,) = caplog.records
    assert f"[metrics] textfile {path} not written" in record.getMessage()
    assert failures(metrics, "textfile") == 1
    assert failures(metrics, "report") == 0
    if kind == "symlink":
        assert (tmp_path / "elsewhere").read_text() == "kept\n"
    assert not [p for p in tmp_path.rglob("*.partial")]


def test_a_report_that_cannot_be_written_is_counted(tmp_path, caplog, monkeypatch):
    metrics = Metrics()
    written = agent_cli._report_writer(str(tmp_path / "no" / "report.json"), metrics)
    monkeypatch.setattr(Result, "report", object())
    monkeypatch.setattr(agent_cli.render_host, "render_json", lambda _report: "{}")
    caplog.set_level(logging.ERROR)
    written(Result())  # type: ignore[arg-type]
    written(Result())  # type: ignore[arg-type]
    assert failures(metrics, "report") == 2
    assert len(caplog.records) == 2
    assert "no such file or directory" in caplog.records[0].getMessage().lower()


def test_a_full_disk_is_named_as_such(tmp_path):
    with pytest.raises(OSError) as raised:
        files.write_whole("/dev/full", "x", 0o644)
    assert "not a regular file" in files.cause(raised.value)
    error = OSError(28, "No space left on device")
    assert files.cause(error) == "no space left on device"
    assert files.is_io_failure(error)
