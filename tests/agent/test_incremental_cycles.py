"""The agent's incremental cycles (docs/design.md §8): a full look every ``full_look_every``
cycles and after any doubt; the same decisions as full looks; re-verification stays a fresh,
full look (rule 5)."""

from __future__ import annotations

import argparse
import datetime
import pathlib

import pytest

from nova_orphans.agent import CycleResult
from nova_orphans.cli import agent as cli_agent
from nova_orphans.cli import configure
from nova_orphans.decide.policy import Action
from nova_orphans.fakes.host import unreachable
from nova_orphans.fakes.nova import Fault, SimulatedNova
from nova_orphans.model import Kind
from nova_orphans.record.metrics import Metrics
from tests import http_nova
from tests.agent.simworld import OTHER, SimWorld


def looks(world: SimWorld, cycles: int) -> list[bool]:
    """Whether each of the next ``cycles`` cycles was a full look."""
    seen = []
    for _ in range(cycles):
        assert world.cycle().error is None
        seen.append(world.agent.nova_views.last_was_full)
    return seen


def test_a_full_look_every_full_look_every_cycles(tmp_path: pathlib.Path) -> None:
    world = SimWorld(tmp_path)
    world.agent.nova_views._full_every = 3
    world.boot("vm-1")
    assert looks(world, 7) == [True, False, False, True, False, False, True]


def counted_looks(world: SimWorld) -> dict[tuple[str, str], float | None]:
    registry = world.agent.metrics.registry
    return {
        (source, read): registry.get_sample_value(
            "nova_orphans_looks_total", {"source": source, "read": read}
        )
        for source in ("nova", "libvirt")
        for read in ("full", "changes")
    }


def test_the_looks_are_counted_full_or_from_changes_and_a_failed_cycle_not_at_all(
    tmp_path: pathlib.Path,
) -> None:
    world = SimWorld(tmp_path)
    assert set(counted_looks(world).values()) == {0}  # every series there from the start
    world.agent.nova_views._full_every = 3
    world.boot("vm-1")
    looks(world, 4)
    world.nova.inject(Fault.SERVER_ERROR, path="/servers")
    assert world.cycle().error is not None
    looks(world, 2)
    # Nova: full, changes, changes, full; (failed); full, changes. This world's libvirt is
    # read whole every cycle (no event-driven view).
    assert counted_looks(world) == {
        ("nova", "full"): 3,
        ("nova", "changes"): 3,
        ("libvirt", "full"): 6,
        ("libvirt", "changes"): 0,
    }


def test_the_configured_cadence_reaches_the_agent(tmp_path: pathlib.Path) -> None:
    conf = tmp_path / "agent.conf"
    conf.write_text(
        "[DEFAULT]\nhost = cmp-1\n[nova]\nauth_type = admin_token\n"
        "endpoint = http://127.0.0.1:1/v2.1\ntoken = t\n"
        f"[agent]\nfull_look_every = 4\nstate_dir = {tmp_path}/state\n"
    )
    args = argparse.Namespace(
        config_files=[str(conf)], host=None, libvirt_uri="test:///default", dry_run=False
    )
    agent = cli_agent.build_agent(configure.load_conf(args), args, Metrics())
    try:
        assert agent.full_look_every == 4 and agent.nova_views._full_every == 4
    finally:
        agent.close()


def test_a_failed_cycle_makes_the_next_one_a_full_look(tmp_path: pathlib.Path) -> None:
    world = SimWorld(tmp_path)
    world.boot("vm-1")
    assert looks(world, 2) == [True, False]
    world.nova.inject(Fault.SERVER_ERROR, path="/servers")
    assert world.cycle().error is not None
    assert looks(world, 2) == [True, False]


def test_a_cycle_that_could_not_read_libvirt_makes_the_next_one_a_full_look(
    tmp_path: pathlib.Path,
) -> None:
    world = SimWorld(tmp_path)
    world.boot("vm-1")
    assert looks(world, 2) == [True, False]
    world.hv.before_read = unreachable("test:///sim")
    assert world.cycle().error is not None
    world.hv.before_read = None
    assert looks(world, 2) == [True, False]


def test_a_step_skipped_on_re_verification_makes_the_next_one_a_full_look(
    tmp_path: pathlib.Path,
) -> None:
    world = SimWorld(tmp_path)
    world.boot("vm-1")
    assert looks(world, 2) == [True, False]
    orphan = world.orphan("gone", Kind.DELETED)
    # The fresh look before the step reads GET /servers/{id}: it fails, the step is skipped.
    world.nova.inject(Fault.SERVER_ERROR, path=f"/servers/{orphan}")
    result = world.cycle()
    assert not world.agent.nova_views.last_was_full
    assert [(o.uuid, o.outcome) for o in result.outcomes] == [(orphan, "skipped")]
    assert looks(world, 1) == [True]
    assert orphan in world.touched()  # the full look's cycle stopped it, re-verified


def test_incremental_cycles_decide_what_full_looks_decide(tmp_path: pathlib.Path) -> None:
    """The same world, one agent looking in full every cycle, one incrementally: every cycle's
    findings and steps are the same, through deletes, migrations and soft deletes."""
    worlds = {n: SimWorld(tmp_path / str(n)) for n in (1, 100)}
    for n, world in worlds.items():
        world.agent.nova_views._full_every = n
    history = []
    for world in worlds.values():
        steady = [world.boot(f"vm-{i}") for i in range(6)]
        seen = []
        for step in range(6):
            if step == 1:
                world.nova.local_delete(steady[0], at=world.now)
            if step == 2:
                world.nova.live_migrate(steady[1], OTHER, cleanup_failed=True, at=world.now)
            if step == 3:
                world.nova.soft_delete(steady[2], at=world.now)
            if step == 4:
                world.nova.live_migrate(steady[3], OTHER, at=world.now)
                world.hv.remove(steady[3])
            seen.append(findings_and_steps(world.cycle()))
        history.append(seen)
    assert history[0] == history[1]
    assert not worlds[100].agent.nova_views.last_was_full


def test_incremental_cycles_decide_what_full_looks_decide_while_orphans_stay(
    tmp_path: pathlib.Path,
) -> None:
    """Orphans kept from cycle to cycle (three sightings before a step): a server appears
    with an unknown domain's UUID, a misplaced server is deleted, a soft-deleted one is
    restored, a domain leaves and comes back; every cycle's findings and steps are those
    of full looks."""
    worlds = {n: SimWorld(tmp_path / str(n), sightings_required=3) for n in (1, 100)}
    history = []
    for n, world in worlds.items():
        world.agent.nova_views._full_every = n
        world.boot("vm-0")
        unknown = world.nova._uuid("unknown")
        world.hv.define(unknown, "unknown")
        misplaced = world.boot("misplaced")
        world.nova.live_migrate(misplaced, OTHER, cleanup_failed=True, at=world.now)
        soft = world.boot("soft")
        world.nova.soft_delete(soft, at=world.now)
        away = world.orphan("away", Kind.DELETED)
        seen = []
        for step in range(9):
            if step == 2:
                world.nova.boot(OTHER, "unknown", uuid=unknown, at=world.now)
                world.nova.local_delete(misplaced, at=world.now)
                world.nova.restore(soft, at=world.now)
                world.hv.remove(away)
            if step == 4:
                world.hv.define(away, "away", running=True)
            seen.append(findings_and_steps(world.cycle()))
        history.append(seen)
    assert history[0] == history[1]
    assert any(history[0][i][1] for i in range(9))  # steps were taken
    assert not worlds[100].agent.nova_views.last_was_full


def test_incremental_cycles_decide_what_full_looks_decide_with_novas_api_clock_ahead(
    tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    """docs/design.md §8 and rule 20: Nova's API node runs 10 minutes ahead of the clock that
    stamps its rows and service reports. Dated from its Date, the changes-since would miss a
    delete and a migration stamped just after a look; the agent sees the disagreement with
    the newest service report and looks in full: the same findings and steps as full looks,
    a warning saying why, the metric saying by how much."""
    worlds = {n: SimWorld(tmp_path / str(n)) for n in (1, 100)}
    history = []
    for n, world in worlds.items():
        world.agent.nova_views._full_every = n
        world.nova.api_clock_offset = datetime.timedelta(minutes=10)
        steady = [world.boot(f"vm-{i}") for i in range(4)]
        seen = []
        for step in range(4):
            if step == 1:
                world.nova.local_delete(steady[0], at=world.now)
            if step == 2:
                world.nova.live_migrate(steady[1], OTHER, cleanup_failed=True, at=world.now)
            seen.append(findings_and_steps(world.cycle()))
        history.append(seen)
    assert history[0] == history[1]
    assert any(steps for _, steps in history[0])  # the orphans were acted on
    agent = worlds[100].agent
    assert agent.nova_views.last_was_full
    assert agent.metrics.registry.get_sample_value("nova_orphans_nova_clock_ahead_seconds") == 600
    assert "ahead of the newest report of its compute services" in caplog.text


def test_a_step_is_never_taken_on_a_kept_lookup(tmp_path: pathlib.Path) -> None:
    """docs/design.md rule 5: the kept record says deleted (archival changes no row), the
    step on it is due; re-verification asks Nova afresh, finds no record (unknown, only
    logged), and skips the step."""
    world = SimWorld(
        tmp_path,
        sightings_required=3,
        actions={Kind.DELETED: Action.STOP, Kind.UNKNOWN: Action.LOG},
    )
    world.boot("vm-1")
    orphan = world.orphan("gone", Kind.DELETED)
    assert looks(world, 2) == [True, False]
    world.nova.archive()
    result = world.cycle()
    assert not world.agent.nova_views.last_was_full
    assert [(f.uuid, f.kind) for f in result.report.findings] == [(orphan, Kind.DELETED)]
    assert [(o.uuid, o.outcome) for o in result.outcomes] == [(orphan, "skipped")]
    assert any(f"uuid={orphan}" in p for p in world.nova.log[-6:])  # asked afresh
    assert orphan not in world.touched()
    result = world.cycle()
    assert world.agent.nova_views.last_was_full
    assert [(f.uuid, f.kind) for f in result.report.findings] == [(orphan, Kind.UNKNOWN)]
    assert not result.outcomes and orphan not in world.touched()


def findings_and_steps(result: CycleResult) -> tuple[list[tuple[object, ...]], ...]:
    """What a cycle found and did, for comparing full looks with incremental ones."""
    assert result.error is None
    return (
        [(f.uuid, f.kind, f.reason) for f in result.report.findings],
        [(o.uuid, o.step, o.outcome) for o in result.outcomes],
    )


def test_the_agent_as_run_builds_it_looks_only_at_the_changes_between_full_looks(
    tmp_path: pathlib.Path,
) -> None:
    """The CLI's own wiring (keystoneauth, the metered transport) hands Nova's ``Date`` to the
    tracker. NOTE: when a wrapper hid it, every cycle of ``run`` was a full look."""
    nova = SimulatedNova()
    nova.add_compute("cmp-1", hypervisor_type="fake")  # identity unproven: a dry cycle still runs
    nova.boot("cmp-1", name="kept")
    with http_nova.serve(nova, "unused", "admin-token") as cloud:
        conf = tmp_path / "agent.conf"
        conf.write_text(
            "[DEFAULT]\nhost = cmp-1\n"
            f"[agent]\nstate_dir = {tmp_path}/state\nfull_look_every = 3\n"
            f"[nova]\ntimeout = 5\nauth_type = admin_token\nendpoint = {cloud.url}\n"
            "token = admin-token\n"
        )
        args = argparse.Namespace(
            config_files=[str(conf)], host=None, libvirt_uri="test:///default", dry_run=True
        )
        agent = cli_agent.build_agent(configure.load_conf(args), args, Metrics())
        try:
            full = []
            for _ in range(4):
                assert agent.cycle().error is None
                full.append(agent.nova_views.last_was_full)
        finally:
            agent.effects.close()
            agent.journal.close()
    assert full == [True, False, False, True]
