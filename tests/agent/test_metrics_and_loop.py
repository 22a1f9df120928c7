"""Metrics tell what the agent saw and did; the loop survives failing cycles and SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from prometheus_client.parser import text_string_to_metric_families

from nova_orphans.fakes.nova import Fault
from nova_orphans.model import Kind
from tests.agent.simworld import SimWorld


def sample(world: SimWorld, name: str, **labels: str) -> float | None:
    return world.agent.metrics.registry.get_sample_value(name, labels)


def test_metrics_count_findings_actions_aborted_cycles_and_success(tmp_path):
    world = SimWorld(tmp_path)
    world.boot("managed")
    world.orphan("gone", Kind.DELETED)
    world.hv.define("99999999-9999-4999-8999-999999999999", "operator-vm", nova=False)
    world.cycle()  # stops the deleted guest
    assert sample(world, "nova_orphans_findings", kind="deleted") == 1
    assert sample(world, "nova_orphans_findings", kind="foreign") == 1
    assert sample(world, "nova_orphans_findings", kind="unknown") == 0
    assert (
        sample(world, "nova_orphans_actions_total", action="stop", outcome="done", dry_run="false")
        == 1
    )
    assert sample(world, "nova_orphans_last_success_timestamp_seconds") == world.now.timestamp()
    world.nova.inject(Fault.SERVER_ERROR, times=10)
    world.cycle()
    assert sample(world, "nova_orphans_cycles_aborted_total", reason="nova") == 1
    assert sample(world, "nova_orphans_cycle_duration_seconds_count") == 2


def test_metrics_go_to_a_node_exporter_textfile(tmp_path):
    world = SimWorld(tmp_path)
    world.boot("managed")
    world.cycle()
    path = tmp_path / "nova_orphans.prom"
    world.agent.metrics.write_textfile(str(path))
    families = {f.name for f in text_string_to_metric_families(path.read_text())}
    assert {
        "nova_orphans_findings",
        "nova_orphans_actions",
        "nova_orphans_cycles_aborted",
        "nova_orphans_last_success_timestamp_seconds",
    } <= families


def test_the_loop_carries_on_after_failing_cycles_and_exits_cleanly_on_sigterm(tmp_path, world):
    config = tmp_path / "agent.conf"
    config.write_text(
        "[DEFAULT]\nhost = cmp-1\n"
        f"[agent]\nstate_dir = {tmp_path / 'state'}\ninterval = 10\njitter = 0\n"
        f"[metrics]\ntextfile = {tmp_path / 'metrics.prom'}\n"
        "[nova]\nauth_type = admin_token\nendpoint = http://127.0.0.1:1/v2.1\ntoken = t\n"
        "timeout = 1\n"
    )
    agent = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "nova_orphans.cli",
            "run",
            "--config-file",
            str(config),
            "--libvirt-uri",
            world,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    metrics = tmp_path / "metrics.prom"
    while not metrics.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert agent.poll() is None, agent.communicate()
    assert 'nova_orphans_cycles_aborted_total{reason="nova"} 1.0' in metrics.read_text()
    agent.send_signal(signal.SIGTERM)
    _, err = agent.communicate(timeout=30)
    assert agent.returncode == 0
    assert "cycle aborted, nothing was done" in err
