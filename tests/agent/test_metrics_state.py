"""Metrics tell state, not only events: every series from the start, the brake as a gauge,
a failed cycle distinguishable from a cycle that found nothing, and the build's version."""

from __future__ import annotations

import subprocess
import sys

import pytest
from prometheus_client.parser import text_string_to_metric_families

from nova_orphans.decide.policy import Step
from nova_orphans.fakes.nova import Fault
from nova_orphans.metered import MeteredTransport
from nova_orphans.model import Kind
from nova_orphans.observe.nova.observer import NovaObserver
from nova_orphans.record.metrics import (
    ABORT_REASONS,
    NOVA_ENDPOINTS,
    NOVA_STATUSES,
    OUTCOMES,
    Metrics,
    nova_endpoint,
)
from nova_orphans.version import tool_version
from tests.agent.simworld import SimWorld


def sample(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_every_labelled_series_exists_at_zero_before_any_event():
    metrics = Metrics()
    for kind in Kind:
        assert sample(metrics, "nova_orphans_findings", kind=kind.value) == 0
    for step in Step:
        for outcome in OUTCOMES:
            for dry_run in ("true", "false"):
                labels = {"action": step.value, "outcome": outcome, "dry_run": dry_run}
                assert sample(metrics, "nova_orphans_actions_total", **labels) == 0, labels
    for reason in ABORT_REASONS:
        assert sample(metrics, "nova_orphans_cycles_aborted_total", reason=reason) == 0
    for endpoint in NOVA_ENDPOINTS:
        for status in NOVA_STATUSES:
            labels = {"endpoint": endpoint, "status": status}
            assert sample(metrics, "nova_orphans_nova_requests_total", **labels) == 0, labels
        count = "nova_orphans_nova_request_duration_seconds_count"
        assert sample(metrics, count, endpoint=endpoint) == 0
    assert {"nova", "libvirt", "identity", "brake"} <= set(ABORT_REASONS)


def test_build_info_carries_the_installed_version():
    metrics = Metrics()
    assert tool_version() not in ("", "unknown")
    assert sample(metrics, "nova_orphans_build_info", version=tool_version()) == 1


def test_a_failed_cycle_is_not_a_cycle_that_found_nothing(tmp_path):
    world = SimWorld(tmp_path)
    world.boot("managed")
    world.cycle()
    metrics = world.agent.metrics
    assert sample(metrics, "nova_orphans_last_cycle_success") == 1
    succeeded_at = sample(metrics, "nova_orphans_last_success_timestamp_seconds")
    assert succeeded_at == world.now.timestamp()

    world.nova.inject(Fault.SERVER_ERROR, times=1)
    result = world.cycle()
    assert result.error
    assert sample(metrics, "nova_orphans_last_cycle_success") == 0
    # The last success stays where it was: a failure never reads as a fresh "nothing found".
    assert sample(metrics, "nova_orphans_last_success_timestamp_seconds") == succeeded_at

    world.cycle()
    assert sample(metrics, "nova_orphans_last_cycle_success") == 1
    assert sample(metrics, "nova_orphans_last_success_timestamp_seconds") == world.now.timestamp()


def test_the_brake_is_a_state_that_engages_and_releases(tmp_path):
    world = SimWorld(tmp_path, brake_min_orphans=2, max_orphan_fraction=0.5)
    world.boot("managed")
    gone = [world.orphan(f"gone-{i}", Kind.DELETED) for i in range(3)]
    metrics = world.agent.metrics
    assert sample(metrics, "nova_orphans_brake_engaged") == 0
    result = world.cycle()
    assert result.plan and result.plan.brake
    assert sample(metrics, "nova_orphans_brake_engaged") == 1
    world.cycle()
    assert sample(metrics, "nova_orphans_brake_engaged") == 1
    assert sample(metrics, "nova_orphans_cycles_aborted_total", reason="brake") == 2
    for uuid in gone[1:]:
        world.hv.remove(uuid)
    result = world.cycle()
    assert result.plan and not result.plan.brake
    assert sample(metrics, "nova_orphans_brake_engaged") == 0


def test_a_failed_run_once_writes_metrics_that_say_it_failed(tmp_path, world):
    textfile = tmp_path / "metrics.prom"
    config = tmp_path / "agent.conf"
    config.write_text(
        "[DEFAULT]\nhost = cmp-1\n"
        f"[agent]\nstate_dir = {tmp_path / 'state'}\n"
        f"[metrics]\ntextfile = {textfile}\n"
        "[nova]\nauth_type = admin_token\nendpoint = http://127.0.0.1:1/v2.1\ntoken = t\n"
        "timeout = 1\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "nova_orphans.cli", "run", "--once"]
        + ["--config-file", str(config), "--libvirt-uri", world],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(textfile.read_text())
        for s in family.samples
    }
    assert samples[("nova_orphans_last_cycle_success", ())] == 0
    assert samples[("nova_orphans_last_success_timestamp_seconds", ())] == 0
    assert samples[("nova_orphans_cycles_aborted_total", (("reason", "nova"),))] == 1
    assert samples[("nova_orphans_build_info", (("version", tool_version()),))] == 1
    # The failed request is counted as one that got no answer.
    errors = sum(
        value
        for (name, labels), value in samples.items()
        if name == "nova_orphans_nova_requests_total" and ("status", "error") in labels
    )
    assert errors >= 1
    assert samples[("nova_orphans_config_interval_seconds", ())] == 600
    assert samples[("nova_orphans_config_grace_period_seconds", ())] == 3600
    # Only the tool's own series: node_exporter has its own process_* (they would collide).
    assert {name for name, _ in samples if not name.startswith("nova_orphans_")} == set()
    assert [name for name, _ in samples if name.endswith("_created")] == []


def test_a_log_only_agent_computes_the_brake_but_raises_no_state_nor_error(tmp_path, caplog):
    """Every action `log` (the default deployment): a world that would brake an acting
    agent is reported, with no brake state, no aborted cycle and no ERROR line.

    docs/design.md rule 3: the brake is computed whatever the policy (a feature that
    makes a step of a `log` must meet it); the log-only agent says so once, at INFO.
    """
    world = SimWorld(tmp_path, actions={}, brake_min_orphans=2, max_orphan_fraction=0.5)
    world.boot("managed")
    for i in range(3):
        world.orphan(f"gone-{i}", Kind.DELETED)
    metrics = world.agent.metrics
    with caplog.at_level("INFO"):
        for _ in range(3):
            result = world.cycle()
            assert result.plan is not None and "max_orphan_fraction" in (result.plan.brake or "")
            assert result.plan.steps == []
            assert result.exit_code == 3
    assert sample(metrics, "nova_orphans_brake_engaged") == 0
    assert sample(metrics, "nova_orphans_cycles_aborted_total", reason="brake") == 0
    assert sample(metrics, "nova_orphans_findings", kind="deleted") == 3
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == []
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("brake")]
    assert len(said) == 1, said  # once, not every cycle
    assert world.effects.calls == []


@pytest.mark.parametrize(
    ("request_path", "endpoint"),
    [
        ("/servers/detail?host=cmp-1&all_tenants=1", "servers"),
        ("http://nova:8774/v2.1/servers/detail?marker=abc", "servers"),
        ("/servers/6f1c2a8e-0000-4000-8000-000000000001", "server"),
        ("/servers/6f1c2a8e-0000-4000-8000-000000000001/migrations", "server-migrations"),
        ("/os-migrations?host=cmp-1", "migrations"),
        ("https://nova/compute/v2.1/os-migrations?marker=7", "migrations"),
        ("/os-services?binary=nova-compute", "services"),
        ("/os-hypervisors/detail?hypervisor_hostname_pattern=cmp-1", "hypervisors"),
        ("/flavors", "other"),
    ],
)
def test_nova_requests_are_counted_by_the_kind_of_endpoint(request_path, endpoint):
    assert nova_endpoint(request_path) == endpoint


def test_every_nova_request_of_a_cycle_is_counted_and_timed_by_endpoint_and_status(tmp_path):
    world = SimWorld(tmp_path)
    world.boot("managed")
    world.orphan("gone", Kind.DELETED)
    metrics = world.agent.metrics
    calls: list[str] = []

    class Counting:
        def get(self, path: str) -> tuple[int, object]:
            calls.append(path)
            return world.nova.get(path)

    world.agent.nova = NovaObserver(MeteredTransport(Counting(), metrics), retry=lambda c: c())
    world.cycle()
    counted = {
        (endpoint, status): sample(
            metrics, "nova_orphans_nova_requests_total", endpoint=endpoint, status=status
        )
        for endpoint in NOVA_ENDPOINTS
        for status in NOVA_STATUSES
    }
    assert sum(counted.values()) == len(calls) > 0
    assert counted[("servers", "2xx")] >= 1
    assert counted[("migrations", "2xx")] >= 1
    timed = sum(
        sample(metrics, "nova_orphans_nova_request_duration_seconds_count", endpoint=e)
        for e in NOVA_ENDPOINTS
    )
    assert timed == len(calls)

    world.nova.inject(Fault.SERVER_ERROR, times=1)
    calls.clear()
    assert world.cycle().error
    assert (
        sum(
            sample(metrics, "nova_orphans_nova_requests_total", endpoint=e, status="5xx")
            for e in NOVA_ENDPOINTS
        )
        == 1
    )
