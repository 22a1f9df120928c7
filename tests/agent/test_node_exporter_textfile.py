"""Debian's node_exporter reads the agent's and the fleet audit's textfiles with no collision
and no error: the textfile carries only the tool's own series (no ``process_*``, no
``*_created``), as docs/admin/metrics.md says."""

from __future__ import annotations

import pathlib
import subprocess
import time
import urllib.request

import prometheus_client as prom
from prometheus_client.parser import text_string_to_metric_families

from nova_orphans.model import Kind
from nova_orphans.record.metrics import FleetMetrics, Metrics
from tests import tools
from tests.agent.simworld import SimWorld


def scrape_node_exporter(directory: pathlib.Path, log: pathlib.Path) -> str:
    """node_exporter's /metrics with only its textfile collector reading ``directory``."""
    exporter = tools.tool("prometheus-node-exporter", "prometheus-node-exporter")
    port = tools.free_port()
    with log.open("w") as out:
        process = subprocess.Popen(
            [exporter, "--collector.disable-defaults", "--collector.textfile"]
            + [f"--collector.textfile.directory={directory}"]
            + [f"--web.listen-address=127.0.0.1:{port}"],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                    assert r.status == 200
                    return r.read().decode()
            except OSError:
                assert process.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
    finally:
        process.terminate()
        process.wait(timeout=30)


def samples(text: str) -> dict[str, float]:
    return {
        s.name + str(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def agent_textfile(tmp_path: pathlib.Path, directory: pathlib.Path) -> None:
    """The textfile of an agent that found, stopped and timed things (every family filled)."""
    world = SimWorld(tmp_path)
    world.boot("managed")
    world.orphan("gone", Kind.DELETED)
    world.cycle()
    world.agent.metrics.set_config(600, 3600)
    world.agent.metrics.write_textfile(str(directory / "nova_orphans.prom"))
    fleet = FleetMetrics()
    fleet.record({Kind.SPLIT_BRAIN: 1}, audited=3, unreachable=1, at=1.8e9)
    (directory / "nova_orphans_fleet.prom").write_text(fleet.text())


def test_node_exporter_reads_the_agent_textfile_with_no_collision_and_no_error(tmp_path):
    directory = tmp_path / "textfile"
    directory.mkdir()
    agent_textfile(tmp_path, directory)
    for name in ("nova_orphans.prom", "nova_orphans_fleet.prom"):
        written = (directory / name).read_text()
        names = {s.name for f in text_string_to_metric_families(written) for s in f.samples}
        assert names and all(n.startswith("nova_orphans_") for n in names), names
        assert not [n for n in names if n.endswith("_created")], names
    log = tmp_path / "node_exporter.log"
    scraped = samples(scrape_node_exporter(directory, log))
    assert scraped["node_textfile_scrape_error[]"] == 0
    assert "level=error" not in log.read_text(), log.read_text()
    assert "collected before" not in log.read_text()
    assert scraped["nova_orphans_findings[('kind', 'deleted')]"] == 1
    assert scraped["nova_orphans_config_interval_seconds[]"] == 600
    assert scraped["nova_orphans_fleet_findings[('kind', 'split-brain')]"] == 1
    assert not [n for n in scraped if n.startswith("nova_orphans_") and "_created" in n]


def test_the_check_sees_a_textfile_with_process_series_collide(tmp_path):
    """What the textfile carried before: the process's series, which node_exporter has."""
    directory = tmp_path / "textfile"
    directory.mkdir()
    registry = prom.CollectorRegistry()
    prom.ProcessCollector(registry=registry)
    prom.Gauge("nova_orphans_brake_engaged", "h", registry=registry).set(0)
    prom.write_to_textfile(str(directory / "nova_orphans.prom"), registry)
    log = tmp_path / "node_exporter.log"
    scrape_node_exporter(directory, log)
    assert "was collected before with the same name and label values" in log.read_text()


def test_the_http_endpoint_adds_the_process_series_and_no_created_series():
    """An exporter's own endpoint describes its process (what Prometheus's job scrapes)."""
    metrics = Metrics()
    metrics.set_config(300, 7200)
    port = tools.free_port()
    metrics.serve("127.0.0.1", port)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        served = samples(answer.read().decode())
    assert served["process_resident_memory_bytes[]"] > 0
    assert served["nova_orphans_config_interval_seconds[]"] == 300
    assert served["nova_orphans_config_grace_period_seconds[]"] == 7200
    assert not [n for n in served if "_created" in n]
