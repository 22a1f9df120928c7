"""docs/design.md rule 22 with the real agent's cycle: a leftover's command is printed only
when every proof a step needs holds — each case below printed a command that destroys
something in use, or that no proof backed, before the rule.

The worlds are ``tests/agent/test_leftovers.py``'s: the simulated Nova, Placement, Cinder and
Neutron, and a real ``instances_path`` in a temporary directory.
"""

from __future__ import annotations

import dataclasses
import datetime
import json

import pytest

from nova_orphans import audit
from nova_orphans.classify.leftover import Held, LeftoverKind
from nova_orphans.decide import told
from nova_orphans.model import Kind, Selector
from nova_orphans.observe import mounts
from nova_orphans.record.entries import QuarantineEntry
from nova_orphans.render import host as render_host
from tests import report_schema
from tests.agent.simworld import HOST, OTHER
from tests.agent.test_leftovers import FLAVOR, INVENTORY, World

CONTAINER = "c0c0c0c0-0000-4000-8000-0000000000c0"


def ports(world: World) -> dict[str, object]:
    found = world.leftovers()
    return {
        i.subject: i for i in (*found.of(LeftoverKind.PORT), *found.of(LeftoverKind.FOREIGN_PORT))
    }


def test_a_container_s_port_is_a_foreign_port_and_never_gets_a_command(tmp_path):
    """Zun/kuryr binds ports of containers Nova never knew to the compute hosts."""
    world = World(tmp_path)
    world.neutron.add_port(
        "c1c1c1c1-0000-4000-8000-0000000000c1", "fa:16:3e:00:00:c1", CONTAINER, ("10.0.0.9",),
        HOST, zone="kuryr",
    )  # fmt: skip
    (item,) = ports(world).values()
    assert (item.kind, item.command, item.held_by) == (LeftoverKind.FOREIGN_PORT, None, Held.OWNER)
    assert "'compute:kuryr' names no zone of Nova's" in item.reason


def test_a_nova_owned_port_of_a_device_nova_never_knew_here_is_foreign(tmp_path):
    world = World(tmp_path)
    world.neutron.add_port(
        "c2c2c2c2-0000-4000-8000-0000000000c2", "fa:16:3e:00:00:c2", CONTAINER, (), HOST
    )
    (item,) = ports(world).values()
    assert (item.kind, item.command) == (LeftoverKind.FOREIGN_PORT, None)
    assert f"Nova never knew {CONTAINER} here" in item.reason


def test_an_archived_server_whose_directory_is_here_keeps_its_port_told_with_an_unbind(tmp_path):
    world = World(tmp_path)
    gone = world.lost("gone")
    world.nova.archive()
    (item,) = ports(world).values()
    assert (item.kind, item.server) == (LeftoverKind.PORT, gone)
    assert item.command == f"openstack port unset --host {item.subject}"


def test_a_shelved_offloaded_server_s_port_is_unbound_never_deleted(tmp_path):
    world = World(tmp_path)
    uuid = world.server("shelved", domain=False)
    world.nova.shelve_offload(uuid, at=world.now)
    (item,) = ports(world).values()
    assert (item.kind, item.server) == (LeftoverKind.PORT, uuid)
    assert item.command == f"openstack port unset --host {item.subject}"
    assert "delete" not in item.command


def test_a_port_of_a_server_running_elsewhere_is_rebound_never_deleted(tmp_path):
    world = World(tmp_path)
    uuid = world.server("moved", domain=False)
    world.nova.live_migrate(uuid, OTHER, at=world.now)
    (item,) = ports(world).values()
    assert item.command == f"openstack port set --host {OTHER} {item.subject}"


def test_a_port_bound_here_only_by_a_live_migration_s_inactive_binding_is_in_flight(tmp_path):
    world = World(tmp_path)
    uuid = world.server("arriving", host=OTHER)
    port = next(p["id"] for p in world.neutron.ports if p["device_id"] == uuid)
    world.neutron.bind_inactive(port, HOST)
    found = world.leftovers()
    assert found.not_checked == {}
    assert [i for i in found.items if i.server == uuid] == []


def test_an_allocation_on_a_provider_found_by_name_with_another_uuid_gets_no_command(tmp_path):
    """Placement's provider named after the host is not the node identity proved."""
    world = World(tmp_path)
    world.lost("gone")
    impostor = "1f1f1f1f-0000-4000-8000-00000000001f"
    world.placement.providers.clear()
    world.placement.add_provider(HOST, impostor, INVENTORY, {})
    world.placement.allocate(impostor, world.lost("gone-too"), dict(FLAVOR))
    (item,) = world.leftovers().of(LeftoverKind.ALLOCATION)
    assert (item.command, item.held_by) == (None, Held.PROVIDER)
    assert f"provider {impostor} is not the proven compute node" in (item.why or "")


def test_an_attachment_made_through_another_host_s_connector_gets_no_command(tmp_path):
    world = World(tmp_path)
    gone = world.lost("gone")
    world.cinder.connectors = {k: OTHER for k in world.cinder.connectors}
    (item,) = world.leftovers().of(LeftoverKind.ATTACHMENT)
    assert (item.server, item.command, item.held_by) == (gone, None, Held.OWNER)
    assert f"host '{OTHER}''s connector" in (item.why or "")


def test_an_unproven_identity_withholds_every_command(tmp_path):
    world = World(tmp_path)
    world.lost("gone")
    (world.state_path / "compute_id").unlink()
    found = world.leftovers()
    assert found.items and all(i.command is None for i in found.items)
    assert {i.held_by for i in found.items} == {Held.GATE}


def test_a_brake_withholds_every_command(tmp_path):
    world = World(tmp_path)
    world.agent.policy = dataclasses.replace(world.agent.policy, brake_min_orphans=1)
    world.server("kept")
    for name in ("a", "b"):
        world.orphan(name, Kind.DELETED)
    world.lost("gone")
    found = world.leftovers()
    assert found.items and {i.held_by for i in found.items} == {Held.GATE}
    assert all("brake: " in (i.why or "") for i in found.items)


def test_a_live_quarantine_entry_keeps_its_files_and_withholds_the_server_s_commands(tmp_path):
    """A reap that could not move the files (another file system; always for misplaced)
    leaves them where restore needs them."""
    world = World(tmp_path)
    uuid = world.server("reaped", domain=False)
    world.nova.live_migrate(uuid, OTHER, at=world.now)
    entry = QuarantineEntry(
        uuid, "20240102T000000Z", "misplaced", str(tmp_path / "q" / uuid), False, []
    )
    world.journal.add_quarantine(entry)
    found = world.leftovers()
    mine = [i for i in found.items if i.server == uuid]
    assert {i.kind for i in mine} >= {LeftoverKind.FILES, LeftoverKind.PORT}
    assert all(i.command is None and i.held_by is Held.QUARANTINE for i in mine)
    (files,) = [i for i in mine if i.kind is LeftoverKind.FILES]
    assert files.why == f"kept for quarantine entry {entry.path} (reaped {entry.reaped_at})"


def test_a_hold_and_a_deny_rule_withhold_every_command_of_their_server(tmp_path):
    world = World(tmp_path)
    held, denied, free = (world.lost(n) for n in ("held", "denied", "free"))
    world.journal.hold(held, "started by an operator", world.now)
    world.agent.deny = Selector(frozenset({denied}))
    found = world.leftovers()
    by = {u: {i.held_by for i in found.items if i.server == u} for u in (held, denied, free)}
    assert by == {held: {Held.HOLD}, denied: {Held.DENY}, free: {None}}


def test_a_leftover_is_pending_until_seen_in_enough_looks_across_the_grace_period(tmp_path):
    world = World(tmp_path)
    world.agent.policy = dataclasses.replace(
        world.agent.policy, leftover_sightings_required=3, leftover_grace_period=900.0
    )
    world.lost("gone")
    seen = []
    for _ in range(4):
        found = world.leftovers()
        seen.append({(i.held_by, i.seen) for i in found.items})
        world.now += datetime.timedelta(seconds=300)
    # NOTE: 3 looks by the third, but only 720 s of the 900 s grace period.
    assert seen == [{(Held.PENDING, 1)}, {(Held.PENDING, 2)}, {(Held.PENDING, 3)}, {(None, 4)}]
    (files,) = world.leftovers().of(LeftoverKind.FILES)
    assert files.command and files.command.startswith("rm -r -- ")


def test_a_server_that_came_back_is_dropped_from_the_carried_leftovers(tmp_path):
    """Cold migration back reuses the directory: between full looks the agent must not
    keep telling ``rm -r`` of a managed guest's instance directory."""
    world = World(tmp_path)
    gone = world.server("back", domain=False)
    world.nova.live_migrate(gone, OTHER, at=world.now)
    first = world.leftovers()
    assert any(i.server == gone and i.command for i in first.items)
    world.nova.live_migrate(gone, HOST, at=world.now)
    world.hv.define(gone, "back", running=True)
    steady = world.cycle()
    assert steady.error is None and not world.agent.nova_views.last_was_full
    assert steady.report.leftovers.carried
    assert [i for i in steady.report.leftovers.items if i.server == gone] == []


def test_the_json_tells_a_held_leftover_with_command_null_held_by_and_why(tmp_path):
    world = World(tmp_path)
    world.lost("gone")
    world.neutron.add_port(
        "c3c3c3c3-0000-4000-8000-0000000000c3", "fa:16:3e:00:00:c3", CONTAINER, (), HOST,
        zone="kuryr",
    )  # fmt: skip
    document = report_schema.valid(json.loads(render_host.render_json(world.cycle().report)))
    items = document["leftovers"]["items"]
    (foreign,) = [i for i in items if i["kind"] == "foreign-port"]
    assert (foreign["command"], foreign["held_by"]) == (None, "owner") and foreign["why"]
    assert all(i["command"] and i["held_by"] is None for i in items if i is not foreign)
    assert document["leftovers"]["counts"]["foreign-port"] == 1
    assert "remedy" not in items[0]


def test_audit_tells_with_the_live_agent_s_sightings_and_without_them_is_pending(tmp_path):
    """``audit`` keeps no sightings of its own: it reads the live agent's journal."""
    world = World(tmp_path)
    world.agent.policy = dataclasses.replace(world.agent.policy, leftover_sightings_required=2)
    world.lost("gone")
    for _ in range(2):
        world.leftovers()
        world.now += datetime.timedelta(seconds=60)
    world.agent.nova_views.invalidate("a full look, as audit's")
    fresh = world.cycle().report
    assert not fresh.leftovers.carried
    state = audit.state_of(world.journal)
    policy = world.agent.policy
    told_once, _ = audit.tell(
        fresh, audit.JournalState(), policy, brake=None,
        host_instances_path=str(world.instances), instances_path=str(world.instances),
    )  # fmt: skip
    told_after, _ = audit.tell(
        fresh, state, policy, brake=None,
        host_instances_path=str(world.instances), instances_path=str(world.instances),
    )  # fmt: skip
    assert {i.held_by for i in told_once.leftovers.items} == {Held.PENDING}
    assert {i.held_by for i in told_after.leftovers.items} == {None}


@pytest.mark.parametrize("mark", mounts.CONTAINER_MARKS)
def test_in_a_container_files_get_a_command_only_with_the_host_s_path(tmp_path, monkeypatch, mark):
    marker = tmp_path / mark.strip("/").replace("/", "_")
    marker.touch()
    monkeypatch.setattr(mounts, "CONTAINER_MARKS", (str(marker),))
    root, why = mounts.files_root("/var/lib/nova/instances", None)
    assert root is None and "host_instances_path" in why
    assert mounts.files_root("/var/lib/nova/instances", "/srv/kolla/nova/instances/") == (
        "/srv/kolla/nova/instances",
        "[leftovers] host_instances_path",
    )
    world = World(tmp_path / "w")
    world.agent.host_instances_path = None
    world.lost("gone")
    (files,) = world.leftovers().of(LeftoverKind.FILES)
    assert (files.command, files.held_by) == (None, Held.PATH)
    world.agent.host_instances_path = "/srv/kolla/nova/instances"
    (files,) = world.leftovers().of(LeftoverKind.FILES)
    assert files.command == f"rm -r -- /srv/kolla/nova/instances/{files.server}"


def test_sightings_survive_the_journal_and_start_over_when_the_step_changes(tmp_path):
    world = World(tmp_path)
    uuid = world.server("moving", domain=False)
    world.nova.shelve_offload(uuid, at=world.now)
    world.leftovers()
    keys = set(world.journal.leftover_sightings())
    assert f"stray-port {next(iter(ports(world)))} unbind-port" in keys
    assert all(
        isinstance(s, told.LeftoverSighting) for s in world.journal.leftover_sightings().values()
    )


@pytest.mark.parametrize("how", ["migrated", "shelved"])
def test_the_files_of_a_server_nova_still_has_never_get_a_delete(tmp_path, how):
    """Rule 22's least destructive step: a server Nova still has (elsewhere, shelved
    offloaded) gets no ``rm -r`` of its files; nova-compute cleans a finished move's source."""
    world = World(tmp_path)
    uuid = world.server(how, domain=False)
    if how == "migrated":
        world.nova.live_migrate(uuid, OTHER, at=world.now)
    else:
        world.nova.shelve_offload(uuid, at=world.now)
    (files,) = world.leftovers().of(LeftoverKind.FILES)
    assert (files.server, files.command, files.held_by) == (uuid, None, Held.LIVE)
    assert f"Nova still has server {uuid}" in (files.why or "")
