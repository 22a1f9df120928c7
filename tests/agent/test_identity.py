"""docs/design.md rule 10: the agent acts only on the libvirt Nova calls its host.

A copied config names another compute that exists, or its libvirt URI points at
another compute's libvirt: every guest read there looks ``misplaced``. With one
or two guests the orphan-fraction brake does not fire and re-verification asks
the same wrong question, so without the identity check a healthy guest is stopped.

A ``[nova]`` section pointing at another cloud or region built from the same
inventory is worse: its compute has this host's name, hostname and type, so every
name agrees; only a node UUID (nova-compute's compute_id, or the one the operator
pinned) tells the two clouds apart.
"""

from __future__ import annotations

import logging
import pathlib
import uuid as uuidlib

import pytest

from nova_orphans.decide.policy import Action
from nova_orphans.model import Kind
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
    (world.state_path / "compute_id").unlink()
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
    assert "passed: compute-id; skipped: hostname, type, node-uuid" in (
        result.report.identity.reason
    )
    assert world.touched() == {duplicate}


def wrong_cloud(world: SimWorld) -> str:
    """The agent's ``[nova]`` is another cloud's (staging credentials, a wrong region) whose
    compute has this host's name, hypervisor hostname and type, and servers of its own
    there (not in this libvirt: they look lost). This machine's guest, a server of the
    right cloud, has no record in it: it looks unknown. Returns that guest's UUID."""
    world.nova.computes[HOST].node_uuid = str(uuidlib.uuid4())  # the other cloud's node
    for n in range(2):
        world.nova.boot(HOST, f"staging-{n}", uuid=str(uuidlib.uuid4()), at=world.now)
    guest = str(uuidlib.uuid4())
    world.hv.define(guest, "production-guest")
    return guest


UNKNOWN_EAGER = {**EAGER, "actions": {Kind.UNKNOWN: Action.REAP, Kind.DELETED: Action.REAP}}


def test_a_wrong_cloud_with_a_same_named_compute_and_no_compute_id_acts_on_nothing(
    tmp_path, caplog
):
    """The reproduction: no compute_id on this machine (nova_config_file unset, nothing in
    the state paths) and no pinned node UUID. Hostname and type agree, which proves
    nothing: the view is unproven, nothing is stopped or reaped, no sighting is counted,
    the log and the metric say why."""
    world = SimWorld(tmp_path, **UNKNOWN_EAGER)
    (world.state_path / "compute_id").unlink()
    guest = wrong_cloud(world)
    caplog.set_level(logging.INFO, logger="nova_orphans")
    for _ in range(3):
        result = world.cycle()
        assert result.error is None
        assert result.report is not None
        verdict = result.report.identity
        assert verdict.state.value == "unproven", verdict.reason
        assert "passed: hostname, type (names are no proof)" in verdict.reason
        assert result.report.count(Kind.UNKNOWN) == 1
        assert result.plan is not None and (result.plan.brake or "").startswith(
            "identity not proven"
        )
        assert result.outcomes == ()
    assert world.touched() == set()
    assert world.hv.domains[guest].is_active
    assert world.journal.sightings() == {}
    assert sample(world, "nova_orphans_identity_verified") == 0
    assert "IDENTITY: nothing will be done this cycle: identity not proven" in caplog.text


def test_a_wrong_cloud_is_a_mismatch_by_this_machines_compute_id(tmp_path):
    """This machine's compute_id names the right cloud's node: the other cloud's node of
    the same names is refuted, the cycle aborted, nothing done."""
    world = SimWorld(tmp_path, **UNKNOWN_EAGER)
    guest = wrong_cloud(world)
    result = world.cycle()
    assert result.error is not None and result.error.startswith("identity mismatch: ")
    assert "compute-id: " in result.error and "holds node UUID" in result.error
    assert world.touched() == set()
    assert world.hv.domains[guest].is_active
    assert sample(world, "nova_orphans_cycles_aborted_total", reason="identity") == 1


def test_a_pinned_node_uuid_proves_or_refutes_without_a_compute_id(tmp_path):
    """compute_node_uuid, pinned by the operator: Nova's node of the host verifies the
    view (and the agent acts); the other cloud's node does not match it: mismatch."""
    world = SimWorld(tmp_path, **EAGER)
    (world.state_path / "compute_id").unlink()
    world.boot("managed")
    duplicate = world.orphan("left-behind", Kind.MISPLACED)
    world.agent.pinned_node = world.nova.computes[HOST].node_uuid
    result = world.cycle()
    assert result.report is not None and result.report.identity.verified
    assert "passed: hostname, type, node-uuid; skipped: compute-id" in (
        result.report.identity.reason
    )
    assert world.touched() == {duplicate}

    world = SimWorld(tmp_path / "wrong", **UNKNOWN_EAGER)
    (world.state_path / "compute_id").unlink()
    world.agent.pinned_node = world.nova.computes[HOST].node_uuid  # the right cloud's node
    guest = wrong_cloud(world)
    result = world.cycle()
    assert result.error is not None and "node-uuid: compute_node_uuid is node UUID" in (
        result.error
    )
    assert world.touched() == set() and world.hv.domains[guest].is_active


@pytest.mark.parametrize(
    "content",
    [b"not-a-uuid\n", b"\xff\xfe\x00", b"0" * 4096],
    ids=["text", "binary", "too large"],
)
def test_a_compute_id_that_cannot_be_trusted_leaves_the_view_unproven(tmp_path, content):
    """Even with the right node pinned: a compute_id nova-compute itself would refuse
    is no ground to act on."""
    world = SimWorld(tmp_path, **EAGER)
    (world.state_path / "compute_id").write_bytes(content)
    world.agent.pinned_node = world.nova.computes[HOST].node_uuid
    world.boot("managed")
    world.orphan("left-behind", Kind.MISPLACED)
    result = world.cycle()
    assert result.report is not None
    assert result.report.identity.state.value == "unproven"
    assert "a compute_id cannot be trusted" in result.report.identity.reason
    assert world.touched() == set()
