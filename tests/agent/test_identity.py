"""docs/design.md rule 10: the agent acts only on the libvirt Nova calls its host.

A copied config names another compute that exists, or its libvirt URI points at
another compute's libvirt: every guest read there looks ``misplaced``. With one
or two guests the orphan-fraction brake does not fire and re-verification asks
the same wrong question, so without the identity check a healthy guest is stopped.
"""

from __future__ import annotations

import pathlib

import pytest

from nova_orphans.core.model import Kind
from nova_orphans.core.policy import Action
from tests.agent.simworld import HOST, OTHER, SimWorld

#: The operator's policy: reap misplaced guests at the first sighting, no grace.
EAGER = dict(
    actions={Kind.MISPLACED: Action.REAP},
    grace_period=0.0,
    sightings_required=1,
    reap_delay=0.0,
    max_actions_per_cycle=1,
    brake_min_orphans=2,
)


def sample(world: SimWorld, name: str, **labels: str) -> float | None:
    return world.agent.metrics.registry.get_sample_value(name, labels)


def with_compute_id(world: SimWorld, tmp_path: pathlib.Path, host: str) -> None:
    """This machine's nova-compute state_path holds ``host``'s node UUID."""
    state_path = tmp_path / "nova-state"
    state_path.mkdir(exist_ok=True)
    (state_path / "compute_id").write_text(world.nova.computes[host].node_uuid)
    world.agent.compute_id_dirs = (str(state_path),)


def others_libvirt(world: SimWorld, guests: int) -> list[str]:
    """The libvirt read is OTHER's, holding OTHER's healthy guests; HOST has a server too."""
    world.hv.hostname = OTHER
    world.nova.boot(HOST, "mine", at=world.now)  # not in this libvirt: looks lost
    uuids = []
    for n in range(guests):
        uuid = world.nova.boot(OTHER, f"healthy-{n}", at=world.now)
        world.hv.define(uuid, f"healthy-{n}")
        uuids.append(uuid)
    return uuids


@pytest.mark.parametrize("guests", [1, 2], ids=["one guest", "two guests"])
@pytest.mark.parametrize(
    "machine",
    [OTHER, HOST],
    ids=[
        "[DEFAULT] host names another compute that exists (this machine is that other one)",
        "[libvirt] connection_uri points at another compute's libvirt",
    ],
)
def test_a_wrong_view_stops_nothing_says_why_and_shows_in_the_metrics(tmp_path, guests, machine):
    world = SimWorld(tmp_path, **EAGER)
    with_compute_id(world, tmp_path, machine)
    healthy = others_libvirt(world, guests)
    for _ in range(3):
        result = world.cycle()
        assert result.error is not None
        assert result.error.startswith(f"identity mismatch: Nova's host {HOST!r} is node")
        assert f"is {OTHER!r} (QEMU), which Nova knows as the node of host {OTHER!r}" in (
            result.error
        )
        assert result.outcomes == ()
    assert world.touched() == set()
    assert all(world.hv.domains[u].is_active for u in healthy)
    assert world.journal.sightings() == {}
    assert sample(world, "nova_orphans_identity_verified") == 0
    assert sample(world, "nova_orphans_cycles_aborted_total", reason="identity") == 3


def test_the_right_view_is_verified_and_acted_on(tmp_path):
    world = SimWorld(tmp_path, **EAGER)
    with_compute_id(world, tmp_path, HOST)
    world.boot("managed")
    duplicate = world.orphan("left-behind", Kind.MISPLACED)
    result = world.cycle()
    assert result.report is not None and result.report.identity.verified
    assert "passed: hostname, type, compute-id" in result.report.identity.reason
    assert world.touched() == {duplicate}
    assert sample(world, "nova_orphans_identity_verified") == 1


def test_a_view_whose_hostname_agrees_but_whose_guests_are_elsewhere_brakes(tmp_path):
    """Two machines with one hostname pass the identity checks; the structural brake holds."""
    world = SimWorld(tmp_path, **EAGER)
    healthy = others_libvirt(world, 1)
    world.hv.hostname = HOST  # the other machine reports this host's hostname
    result = world.cycle()
    assert result.report is not None and result.report.identity.verified
    assert result.plan is not None and "another host's libvirt" in (result.plan.brake or "")
    assert world.touched() == set()
    assert world.hv.domains[healthy[0]].is_active


def test_a_non_libvirt_node_is_never_a_silent_pass(tmp_path):
    """Nova's fake driver read through libvirt's test driver: hostname and type are
    skipped; without a compute_id nothing ties them, so nothing is done and nothing is
    counted; with this host's compute_id the same view is verified and acted on."""
    world = SimWorld(tmp_path, **EAGER)
    world.nova.computes[HOST].hypervisor_type = "fake"
    world.hv.hypervisor_type = "TEST"
    world.boot("managed")
    duplicate = world.orphan("left-behind", Kind.MISPLACED)
    result = world.cycle()
    assert result.report is not None
    assert result.report.identity.state.value == "unproven"
    assert result.plan is not None and (result.plan.brake or "").startswith("identity not proven")
    assert "its 'fake' driver: no hypervisor to compare" in result.report.identity.reason
    assert world.touched() == set()
    assert world.journal.sightings() == {}
    assert sample(world, "nova_orphans_identity_verified") == 0

    with_compute_id(world, tmp_path, HOST)
    result = world.cycle()
    assert result.report is not None and result.report.identity.verified
    assert "passed: compute-id; skipped: hostname, type" in result.report.identity.reason
    assert world.touched() == {duplicate}
