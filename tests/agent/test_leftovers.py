"""docs/design.md rule 21 and §8b: what lost servers leave — files, ports, attachments,
allocations — reported with their server, cost and removal command; in-flight work never;
a look that failed is "not checked"; one listing per service per host.

Each world is a host with the simulated Nova, Placement, Cinder and Neutron of
``nova_orphans/fakes`` and a real ``instances_path`` in a temporary directory; the real
agent's cycle (which audits) reads them.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import pathlib
import types

import pytest

from nova_orphans import audit
from nova_orphans.classify.leftover import CLEANUP_KINDS, Held, LeftoverKind
from nova_orphans.fakes.services import SimCinder, SimNeutron, SimPlacement
from nova_orphans.fleet import merge as fleet_core
from nova_orphans.fleet import records
from nova_orphans.fleet import reports as fleet_io
from nova_orphans.observe.services.dangers import DangerObserver
from nova_orphans.observe.services.leftovers import LeftoverObserver
from nova_orphans.observe.services.placement import PlacementObserver
from nova_orphans.render import fleet as render_fleet
from nova_orphans.render import host as render_host
from tests import report_schema
from tests.agent.simworld import HOST, OTHER, SimWorld

FLAVOR = {"VCPU": 2, "MEMORY_MB": 2048, "DISK_GB": 10}
INVENTORY = {
    "VCPU": {"total": 16, "reserved": 0, "allocation_ratio": 4.0},
    "MEMORY_MB": {"total": 65536, "reserved": 512, "allocation_ratio": 1.0},
    "DISK_GB": {"total": 1000, "reserved": 0, "allocation_ratio": 1.0},
}
VOLUME = "0a0a0a0a-0000-4000-8000-00000000000a"


class World(SimWorld):
    """A SimWorld whose agent looks for leftovers in a real instances_path."""

    def __init__(self, tmp_path: pathlib.Path) -> None:
        super().__init__(tmp_path)
        self.placement, self.cinder, self.neutron = SimPlacement(), SimCinder(), SimNeutron()
        self.provider = self.nova.computes[HOST].node_uuid
        self.placement.add_provider(HOST, self.provider, INVENTORY, {})
        self.agent.services = audit.Services(
            PlacementObserver(self.placement),
            DangerObserver(self.cinder, self.neutron),
            LeftoverObserver(self.neutron, self.cinder, self.placement),
        )
        self.instances = tmp_path / "instances"
        (self.instances / "_base").mkdir(parents=True)
        (self.instances / "locks").mkdir()
        self.agent.instances_path = str(self.instances)
        # NOTE: the host's own path (this may run in a container: rule 22's path proof).
        self.agent.host_instances_path = str(self.instances)
        self._ports = 0
        #: Every path asked of Nova, in order.
        self.paths: list[str] = []
        answer = self.nova.get

        def recorded(path: str):
            self.paths.append(path)
            return answer(path)

        self.nova.get = recorded  # type: ignore[method-assign]

    def server(self, name: str, host: str = HOST, domain: bool = True) -> str:
        """A server Nova runs on ``host`` with everything it holds there: its allocation,
        port, attachment and (on our host) its files and its domain."""
        uuid = self.boot(name, host) if domain else self.nova.boot(host, name, at=self.now)
        provider = self.provider if host == HOST else self.nova.computes[host].node_uuid
        self.placement.allocate(provider, uuid, dict(FLAVOR))
        self._ports += 1
        port = f"{self._ports:08x}-0000-4000-8000-00000000beef"
        self.neutron.add_port(port, f"fa:16:3e:00:00:{self._ports:02x}", uuid, ("10.0.0.5",), host)
        self.cinder.add_attachment(f"{self._ports:08x}-0000-4000-8000-0000000a77ac", VOLUME, uuid,
                                   "attached", host)  # fmt: skip
        if host == HOST:
            self.files(uuid)
        return uuid

    def files(self, uuid: str) -> pathlib.Path:
        directory = self.instances / uuid
        directory.mkdir()
        (directory / "disk").write_bytes(b"\1" * 65536)
        (directory / "disk.info").write_text("{}")
        (directory / "console.log").write_text("boot\n")
        return directory

    def lost(self, name: str) -> str:
        """A server deleted while its compute was down, whose guest is gone since: its
        files, port, attachment and (a Nova that released it would not) allocation stay."""
        uuid = self.server(name)
        self.hv.remove(uuid)
        self.nova.local_delete(uuid, at=self.now)
        return uuid

    def leftovers(self):
        """The leftovers of a cycle that looks for them: one with a full look at Nova."""
        self.agent.nova_views.invalidate("leftovers are looked for with a full look")
        result = self.cycle()
        assert result.error is None, result.error
        assert result.report.leftovers is not None
        return result.report.leftovers


def kinds(leftovers) -> dict[LeftoverKind, list[str]]:
    found: dict[LeftoverKind, list[str]] = {k: [] for k in CLEANUP_KINDS}
    for item in leftovers.items:
        found.setdefault(item.kind, []).append(item.server)
    return found


def test_a_local_delete_leaves_files_a_port_an_attachment_and_an_allocation(tmp_path):
    world = World(tmp_path)
    kept = world.server("kept")
    gone = world.lost("gone")
    leftovers = world.leftovers()
    assert leftovers.not_checked == {}
    assert kinds(leftovers) == {k: [gone] for k in CLEANUP_KINDS}
    files, port, attachment, allocation = (leftovers.of(k)[0] for k in CLEANUP_KINDS)
    path = str(world.instances / gone)
    assert files.subject == path
    assert files.command == f"rm -r -- {path}"
    assert files.disk_bytes >= 65536
    assert files.reason.startswith(f"Nova deleted server {gone} at ")
    assert "console.log, disk, disk.info" in files.reason
    # NOTE: rule 22: a deleted server's port is unbound, never deleted.
    assert port.command == f"openstack port unset --host {port.subject}"
    assert attachment.command == (
        f"openstack --os-volume-api-version 3.27 volume attachment delete {attachment.subject}"
    )
    assert attachment.volume == VOLUME
    assert allocation.command == (
        "openstack --os-placement-api-version 1.12 resource provider allocation unset "
        f"--provider {world.provider} {gone}"
    )
    assert (allocation.vcpus, allocation.memory_mb, allocation.disk_bytes) == (2, 2048, 10 << 30)
    assert kept not in {i.server for i in leftovers.items}


def test_an_archived_server_s_leftovers_are_still_found_once_every_cell_answered(tmp_path):
    world = World(tmp_path)
    gone = world.lost("gone")
    world.nova.archive()
    leftovers = world.leftovers()
    assert kinds(leftovers) == {k: [gone] for k in CLEANUP_KINDS}
    assert all("Nova has no record of server" in i.reason for i in leftovers.items)
    # NOTE: rule 22: a consumer Nova has no record of may be a migration's that the look
    # missed: Nova's own audit, which reads its database's migrations, comes first.
    (allocation,) = leftovers.of(LeftoverKind.ALLOCATION)
    assert allocation.command == (
        f"nova-manage placement audit --resource_provider {world.provider} --verbose"
    )
    assert any(p.startswith("/os-services") and "host=" not in p for p in world.paths)


def test_an_evacuation_leaves_the_source_s_allocation_and_port_binding(tmp_path):
    world = World(tmp_path)
    moved = world.server("moved", domain=False)
    (world.instances / moved).rename(world.instances / "kept-elsewhere")  # its files went too
    migration = world.nova.evacuate(moved, OTHER, at=world.now)
    world.nova.set_migration_status(migration, "completed", at=world.now)
    leftovers = world.leftovers()
    (allocation,) = leftovers.of(LeftoverKind.ALLOCATION)
    assert allocation.server == moved and allocation.server_host == OTHER
    assert f"Nova runs server {moved} on {OTHER}" in allocation.reason
    (port,) = leftovers.of(LeftoverKind.PORT)
    assert port.command == f"openstack port set --host {OTHER} {port.subject}"
    # NOTE: the summary listing names no connector: a live server's attachment is its host's.
    assert leftovers.of(LeftoverKind.ATTACHMENT) == ()


def test_a_server_here_whose_allocation_was_removed_by_hand(tmp_path):
    world = World(tmp_path)
    uuid = world.server("unaccounted")
    del world.placement.allocations[world.provider][uuid]
    (missing,) = world.leftovers().items
    assert (missing.kind, missing.server, missing.missing) == (LeftoverKind.ALLOCATION, uuid, True)
    assert missing.command == f"nova-manage placement heal_allocations --instance {uuid}"


def test_a_failed_migration_s_allocation_is_a_leftover_of_its_migration(tmp_path):
    world = World(tmp_path)
    uuid = world.server("moved", domain=False)
    mid = world.nova.live_migrate(uuid, OTHER, at=world.now, cleanup_failed=True)
    record = world.nova.migrations[mid]
    world.placement.allocate(world.provider, record.uuid, dict(FLAVOR))
    (world.instances / uuid).rename(world.instances / "gone")
    del world.placement.allocations[world.provider][uuid]
    leftovers = world.leftovers()
    (held,) = leftovers.of(LeftoverKind.ALLOCATION)
    assert (held.subject, held.server, held.migration) == (record.uuid, uuid, record.uuid)
    assert "(cmp-1 -> cmp-2, error)" in held.reason


# ---------------------------------------------------------------- in-flight work is not left


def in_flight(world: World, how: str) -> str:
    uuid = world.server(how, domain=False)
    nova = world.nova
    if how == "building":
        nova.servers[uuid].vm_state = "building"
        nova.set_task_state(uuid, "spawning", at=world.now)
    elif how == "live-migrating":
        mid = nova.live_migrate(uuid, OTHER, finish=False, at=world.now)
        world.placement.allocate(world.provider, nova.migrations[mid].uuid, dict(FLAVOR))
        nova.servers[uuid].host = OTHER  # the post-migration step moved it, not done yet
        del world.placement.allocations[world.provider][uuid]
    elif how == "resizing":
        mid = nova.resize(uuid, OTHER, at=world.now)
        world.placement.allocate(world.provider, nova.migrations[mid].uuid, dict(FLAVOR))
        del world.placement.allocations[world.provider][uuid]
    elif how == "shelving":
        nova.set_task_state(uuid, "shelving_offloading", at=world.now)
    elif how == "evacuating":
        mid = nova.evacuate(uuid, OTHER, at=world.now)
        nova.set_migration_status(mid, "accepted", at=world.now)
    elif how == "soft-deleted":
        nova.soft_delete(uuid, at=world.now)
    return uuid


@pytest.mark.parametrize(
    "how", ["building", "live-migrating", "resizing", "shelving", "evacuating", "soft-deleted"]
)
def test_a_server_nova_is_busy_with_leaves_nothing(tmp_path, how):
    world = World(tmp_path)
    uuid = in_flight(world, how)
    leftovers = world.leftovers()
    assert leftovers.not_checked == {}
    assert [i for i in leftovers.items if i.server == uuid] == []


def test_a_port_being_bound_and_an_attachment_attaching_or_detaching_are_not_left(tmp_path):
    world = World(tmp_path)
    gone = world.lost("gone")
    for port in world.neutron.ports:
        port["binding:vif_type"] = "unbound"
    world.cinder.attachments[0]["status"] = "attaching"
    world.cinder.add_attachment("0b0b0b0b-0000-4000-8000-0000000a77ac", VOLUME, gone, "detaching")
    leftovers = world.leftovers()
    assert leftovers.of(LeftoverKind.PORT) == leftovers.of(LeftoverKind.ATTACHMENT) == ()
    assert [i.server for i in leftovers.items] == [gone, gone]  # its files and allocation


# ---------------------------------------------------------------- fail closed


@pytest.mark.parametrize("fault", [403, 500, "timeout", "no-endpoint"])
@pytest.mark.parametrize("service", ["neutron", "cinder", "placement"])
def test_a_service_that_cannot_be_asked_is_not_checked_never_nothing_left(tmp_path, service, fault):
    world = World(tmp_path)
    world.lost("gone")
    getattr(world, service).fail = fault
    leftovers = world.leftovers()
    kind = {"neutron": LeftoverKind.PORT, "cinder": LeftoverKind.ATTACHMENT,
            "placement": LeftoverKind.ALLOCATION}[service]  # fmt: skip
    assert leftovers.count(kind) is None
    assert leftovers.not_checked.get(kind)
    others = [k for k in CLEANUP_KINDS if k is not kind]
    assert [leftovers.count(k) for k in others] == [1, 1, 1]
    document = json.loads(render_host.render_json(world.cycle().report))
    assert document["leftovers"]["counts"][kind.value] is None
    report_schema.valid(document)


def test_a_nova_that_fails_the_lookups_leaves_every_kind_not_checked(tmp_path):
    world = World(tmp_path)
    world.lost("gone")
    real = world.agent.nova.look_up

    def failing(uuid):
        from nova_orphans.observe.errors import NovaError

        raise NovaError(reason="injected")

    world.agent.nova.look_up = failing  # type: ignore[method-assign]
    leftovers = world.leftovers()
    world.agent.nova.look_up = real  # type: ignore[method-assign]
    assert leftovers.items == ()
    assert set(leftovers.not_checked) == set(LeftoverKind)
    assert all("Nova not asked" in why for why in leftovers.not_checked.values())


def test_an_unreadable_instances_path_is_not_checked(tmp_path):
    world = World(tmp_path)
    world.lost("gone")
    world.agent.instances_path = str(tmp_path / "no-such-directory")
    leftovers = world.leftovers()
    assert leftovers.count(LeftoverKind.FILES) is None
    assert "cannot read instances_path" in leftovers.not_checked[LeftoverKind.FILES]


def test_neutron_ignoring_the_host_filter_is_refused(tmp_path):
    world = World(tmp_path)
    world.lost("gone")
    world.server("elsewhere", host=OTHER)
    world.neutron.answer = types.MethodType(  # type: ignore[method-assign]
        lambda self, route, query: (200, {"ports": self.ports}), world.neutron
    )
    leftovers = world.leftovers()
    assert "ignored the binding:host_id filter" in leftovers.not_checked[LeftoverKind.PORT]


# ---------------------------------------------------------------- requests


def test_one_listing_per_service_per_host_whatever_the_number_of_servers(tmp_path):
    world = World(tmp_path)
    for i in range(40):
        world.server(f"kept-{i}")
    for i in range(3):
        world.server(f"elsewhere-{i}", host=OTHER)
    world.cinder.max_limit = 20  # the cloud's attachments: 43, three pages
    gone = [world.lost(f"gone-{i}") for i in range(6)]
    world.cycle()  # the first cycle is a full look; count the second's requests
    for service in (world.neutron, world.cinder, world.placement):
        service.requests.clear()
    before = len(world.paths)
    leftovers = world.leftovers()
    assert {k: sorted(v) for k, v in kinds(leftovers).items()} == {
        k: sorted(gone) for k in CLEANUP_KINDS
    }
    assert world.neutron.requests == [f"/v2.0/ports?binding%3Ahost_id={HOST}"]
    # NOTE: and one volume read per distinct volume of the attachments that are leftovers,
    # for their connector's host (rule 22): here all six hold the same volume.
    assert [p.split("?")[0] for p in world.cinder.requests] == ["/attachments"] * 3 + [
        f"/volumes/{VOLUME}"
    ]
    allocations = [p for p in world.placement.requests if p.endswith("/allocations")]
    assert allocations == [f"/resource_providers/{world.provider}/allocations"]
    # NOTE: Nova: the host's deleted rows in bulk (6 to explain), never a lookup each.
    asked = world.paths[before:]
    assert not [p for p in asked if "uuid=" in p], asked
    assert len(asked) <= 8, asked


def test_a_steady_cycle_asks_no_leftover_listing_and_reports_the_last_full_looks(tmp_path):
    """docs/design.md §8b: the leftover listings (the cloud's attachments among them) come
    with the full looks at Nova; the cycles between carry what the last one found."""
    world = World(tmp_path)
    world.server("kept")
    gone = world.lost("gone")
    first = world.cycle()  # the first cycle is a full look
    assert first.report.leftovers is not None
    for service in (world.neutron, world.cinder, world.placement):
        service.requests.clear()
    steady = world.cycle()
    assert steady.error is None and not world.agent.nova_views.last_was_full
    assert world.cinder.requests == []
    assert [p for p in world.neutron.requests if "binding" in p] == []
    assert [p for p in world.placement.requests if p.endswith("/allocations")] == []
    carried, fresh = steady.report.leftovers, first.report.leftovers
    assert carried.carried and carried.looked_at == fresh.looked_at == first.report.checked_at
    assert [(i.kind, i.subject) for i in carried.items] == [
        (i.kind, i.subject) for i in fresh.items
    ]
    assert {i.server for i in carried.items} == {gone}
    # NOTE: rule 22: a command comes only from the cycle's own look.
    assert all(i.command for i in fresh.items)
    assert all(i.command is None and i.held_by is Held.CARRIED for i in carried.items)


# ---------------------------------------------------------------- hostile names


def test_hostile_names_under_instances_path_and_from_services_never_reach_a_command(tmp_path):
    world = World(tmp_path)
    gone = world.lost("gone")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_bytes(b"x" * (1 << 20))
    link = "0c0c0c0c-0000-4000-8000-00000000000c"
    os.symlink(outside, world.instances / link)
    (world.instances / "0D0D0D0D-0000-4000-8000-00000000000D").mkdir()  # not canonical
    (world.instances / f"{gone}_resize").mkdir()
    (world.instances / gone / "escape").symlink_to(outside)
    world.neutron.add_port("$(reboot)", "fa:16:3e:00:00:99", gone, (), HOST)
    world.cinder.add_attachment("x; rm -rf /", VOLUME, gone, "attached")
    world.placement.allocate(world.provider, "`id`", dict(FLAVOR))
    leftovers = world.leftovers()
    assert kinds(leftovers) == {k: [gone] for k in CLEANUP_KINDS}
    (files,) = leftovers.of(LeftoverKind.FILES)
    assert files.disk_bytes < 1 << 20  # the link's target is not counted
    for item in leftovers.items:
        assert not set(item.command or "") & set("$`;|&<>\\\n")


def test_the_table_tells_one_line_per_kind_and_lists_them_on_request(tmp_path):
    world = World(tmp_path)
    gone = world.lost("gone")
    world.neutron.fail = 403
    report = world.cycle().report
    table = render_host.render_table(report)
    assert "leftovers stray-files: 1 (" in table
    assert "leftovers stray-allocation: 1 (2 vCPUs, 2.0 GiB memory, 10.0 GiB disk)" in table
    assert "leftovers stray-port: not checked: Neutron answered GET" in table
    assert "rm -r --" not in table
    listed = render_host.render_table(report, leftovers=True)
    assert f"    rm -r -- {world.instances / gone}" in listed.splitlines()
    assert render_host.render_table(report, wide=True).count("\n    ") >= 3
    report_schema.valid(json.loads(render_host.render_json(report)))


def test_the_metric_counts_each_kind_and_is_nan_for_a_kind_not_checked(tmp_path):
    world = World(tmp_path)
    world.lost("gone")
    world.cinder.fail = 500
    world.leftovers()
    registry = world.agent.metrics.registry

    def value(kind: LeftoverKind) -> float | None:
        return registry.get_sample_value("nova_orphans_leftovers", {"kind": kind.value})

    assert [value(k) for k in (LeftoverKind.FILES, LeftoverKind.PORT, LeftoverKind.ALLOCATION)] == [
        1.0,
        1.0,
        1.0,
    ]
    assert math.isnan(value(LeftoverKind.ATTACHMENT))
    world.cinder.fail = None
    world.leftovers()
    assert value(LeftoverKind.ATTACHMENT) == 1.0


def test_the_fleet_merge_tells_each_trusted_host_s_leftovers_once(tmp_path):
    """Cinder's attachments and Placement's allocations are the cloud's: told by two hosts,
    counted once; files are each host's; a kind one host did not check has no total; a
    report whose leftover is no UUID (or path) this tool tells is refused (rule 20)."""
    world = World(tmp_path)
    gone = world.lost("gone")
    report = world.cycle().report
    mine = json.loads(render_host.render_json(report))
    theirs = json.loads(json.dumps(mine)) | {"host": OTHER}
    for item in theirs["leftovers"]["items"]:
        if item["kind"] == "stray-files":
            item["subject"] = f"/srv/nova/instances/{gone}"
    when = report.checked_at
    age = datetime.timedelta(hours=1)

    def merged(*documents):
        parsed = [fleet_io.parse_document(d, f"report-{i}") for i, d in enumerate(documents)]
        good = [p for p in parsed if not isinstance(p, records.BadReport)]
        bad = [p for p in parsed if isinstance(p, records.BadReport)]
        hosts, loose = fleet_core.standings(good, bad, [HOST, OTHER], when, age)
        fleet = fleet_core.merge(hosts, loose, lambda uuid: (None, ()), when, age)
        return fleet, report_schema.valid(json.loads(render_fleet.render_json(fleet)))

    fleet, document = merged(mine, theirs)
    assert document["summary"]["leftovers"] == {
        "stray-files": 2, "stray-port": 1, "stray-attachment": 1, "stray-allocation": 1,
        "foreign-port": 0,
    }  # fmt: skip
    (host,) = [h for h in document["hosts"] if h["host"] == HOST]
    assert {i["kind"] for i in host["leftovers"]["items"]} == {k.value for k in CLEANUP_KINDS}
    assert "command" not in host["leftovers"]["items"][0]
    table = render_fleet.render_table(fleet)
    assert "across trusted hosts, leftovers: stray-files 2, stray-port 1" in table
    theirs["leftovers"]["counts"]["stray-port"] = None
    assert merged(mine, theirs)[1]["summary"]["leftovers"]["stray-port"] is None
    theirs["leftovers"]["items"][0]["subject"] = "$(reboot)"
    fleet, document = merged(mine, theirs)
    (other,) = [h for h in document["hosts"] if h["host"] == OTHER]
    assert other["status"] == "unreadable" and other["leftovers"] is None
    assert "leftovers.items[0].subject: '$(reboot)' is no " in " ".join(other["notes"])


def test_on_shared_storage_only_this_host_s_servers_directories_are_told(tmp_path, monkeypatch):
    world = World(tmp_path)
    gone = world.lost("gone")
    elsewhere = world.server("elsewhere", host=OTHER)
    world.files(elsewhere)
    deleted_there = world.server("deleted-there", host=OTHER)
    world.files(deleted_there)
    world.nova.local_delete(deleted_there, at=world.now)
    found = {i.server for i in world.leftovers().of(LeftoverKind.FILES)}
    assert found == {gone, elsewhere, deleted_there}
    monkeypatch.setattr(audit, "shared_storage_refusal", lambda path: f"{path} is on nfs")
    assert [i.server for i in world.leftovers().of(LeftoverKind.FILES)] == [gone]
