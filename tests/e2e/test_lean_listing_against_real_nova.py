"""The cheap listing and the agent's incremental cycles against a real Nova: the same findings
as the full detail listing and as full looks, including a server deleted, live-migrated and
soft-deleted between two cycles.

The observer runs in-process over the product's own keystoneauth transport (so Nova's own
``Date`` header, plain listing, filters and ``changes-since`` are what is tested); the host's
domains are plain records, since classification needs nothing else from libvirt.
"""

from __future__ import annotations

import argparse
import pathlib
from collections.abc import Iterator
from typing import Any

import harness
import pytest
from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint

from nova_orphans import config
from nova_orphans.classify.guests import classify
from nova_orphans.cli import agent as cli_agent
from nova_orphans.fakes import libvirt_node as worlds
from nova_orphans.fakes.nova_reference import reference_observe
from nova_orphans.model import Domain, DomainState, Finding, NovaMetadata
from nova_orphans.observe.nova.observer import NovaObserver
from nova_orphans.observe.nova.session import KeystoneTransport
from nova_orphans.observe.nova.tracker import NovaTracker
from nova_orphans.record.metrics import Metrics

pytestmark = pytest.mark.nova

HOST, OTHER = "host1", "host2"
META = NovaMetadata("http://openstack.org/xmlns/libvirt/nova/1.1")


class CountingTransport(KeystoneTransport):
    """The product's transport, counting requests."""

    def __init__(self, token: str = harness.ADMIN_TOKEN) -> None:
        session = ks_session.Session(auth=token_endpoint.Token(harness.NOVA_ENDPOINT, token))
        super().__init__(ks_adapter.Adapter(session=session, service_type="compute"))
        self.asked: list[str] = []

    def get(self, path: str) -> tuple[int, Any]:
        self.asked.append(path)
        return super().get(path)


def observer(transport: KeystoneTransport | None = None) -> NovaObserver:
    return NovaObserver(transport or CountingTransport(), retry=lambda call: call())


def domain(uuid: str) -> Domain:
    return Domain(uuid, f"instance-{uuid[:8]}", DomainState.RUNNING, True, False, META)


def ours(findings: list[Finding], uuids: set[str]) -> list[Finding]:
    """The findings about this test's servers (other tests may share host1)."""
    return [f for f in findings if f.uuid in uuids]


@pytest.fixture
def servers(nova_stack: harness.Nova) -> Iterator[list[str]]:
    """Five servers booted on host1 (their domains are "here"); removed afterwards."""
    created = [nova_stack.boot(HOST, wait=False)["id"] for _ in range(5)]
    try:
        for uuid in created:
            nova_stack.wait_status(uuid, "ACTIVE")
        yield created
    finally:
        for uuid in created:
            nova_stack.destroy(uuid)


def test_the_cheap_listing_gives_the_findings_of_the_detail_listing(
    nova_stack: harness.Nova, servers: list[str]
) -> None:
    """Managed, busy (task_state), SOFT_DELETED, migrated away with its domain left behind,
    deleted with its domain left behind, never known to Nova, and lost: the same findings,
    Nova's records included, for fewer and cheaper requests."""
    nova = nova_stack
    managed, busy, soft, migrated, lost = servers
    nova.live_migrate(migrated, OTHER)
    nova.soft_delete(soft)
    harness.set_task_state(busy, "rebooting")
    deleted = nova.boot(HOST)["id"]
    try:
        nova.soft_delete(deleted)
        nova.force_delete(deleted)
        unknown = worlds.random_uuid()
        domains = [domain(u) for u in (managed, busy, soft, migrated, deleted, unknown)]
        uuids = {d.uuid for d in domains} | {lost}

        detail = CountingTransport()
        before = classify(domains, reference_observe(observer(detail), HOST, list(uuids)))
        cheap_transport = CountingTransport()
        view = observer(cheap_transport).look(HOST, [d.uuid for d in domains])
        cheap = classify(domains, view)

        assert ours(cheap, uuids) == ours(before, uuids)
        kinds = {f.uuid: f.kind.value for f in ours(cheap, uuids)}
        # a task_state on a server Nova manages here changes nothing: no finding
        assert kinds == {
            soft: "protected",
            migrated: "misplaced",
            deleted: "deleted",
            unknown: "unknown",
            lost: "lost",
        }
        # The host's servers came from the plain listing; details only for the domains
        # Nova does not manage here and for the servers without a domain.
        plain = [p for p in cheap_transport.asked if p.startswith("/servers?")]
        assert plain and all("host=host1" in p for p in plain)
        listed = observer().summaries_on_host(HOST)
        if len(listed.keys() - uuids) + 1 < 5:  # (other tests' servers on host1 count too)
            assert not any(
                p.startswith("/servers/detail") and "uuid=" not in p and "deleted=1" not in p
                for p in cheap_transport.asked
            )
    finally:
        harness.set_task_state(busy, None)
        nova.destroy(deleted)


def test_the_host_filter_probe_refuses_credentials_without_the_admin_filters(
    nova_stack: harness.Nova, servers: list[str]
) -> None:
    """A real Nova answers the probe (a host no compute has) with no server for admin
    credentials: the plain listing is trusted only then."""
    transport = CountingTransport()
    obs = observer(transport)
    obs.require_admin_filters()
    assert transport.asked == ["/servers?all_tenants=1&host=no-such-host.invalid&limit=1"]
    assert nova_stack.get("/servers?all_tenants=1&host=no-such-host.invalid")["servers"] == []


def test_incremental_cycles_give_the_findings_of_full_looks_through_delete_migrate_soft_delete(
    nova_stack: harness.Nova, servers: list[str]
) -> None:
    """Between two cycles one server is deleted (its domain left behind), one live-migrated to
    host2 (its domain gone, as after a clean migration), one live-migrated with its domain left
    behind, and one soft-deleted: the incremental cycle, built on Nova's Date and
    changes-since, finds what a full look finds, with no host-size listing."""
    nova = nova_stack
    _stays, deleted, migrated, duplicate, soft = servers
    here = {u: domain(u) for u in servers}
    transport = CountingTransport()
    tracker = NovaTracker(observer(transport), full_every=100)

    def findings(view_of: Any) -> list[Finding]:
        domains = list(here.values())
        return ours(classify(domains, view_of(HOST, [d.uuid for d in domains])), set(servers))

    assert findings(tracker.look) == findings(observer().look) == []
    assert tracker.last_was_full

    nova.soft_delete(deleted)
    nova.force_delete(deleted)
    nova.live_migrate(migrated, OTHER)
    del here[migrated]
    nova.live_migrate(duplicate, OTHER)
    nova.soft_delete(soft)

    transport.asked.clear()
    incremental = findings(tracker.look)
    assert not tracker.last_was_full
    assert incremental == findings(observer().look)
    kinds = {f.uuid: f.kind.value for f in incremental}
    assert kinds == {deleted: "deleted", duplicate: "misplaced", soft: "protected"}
    # what concerns host1 only: its plain listing (what left), details only of its changes,
    # never a listing of the whole cloud
    assert any(p.startswith("/servers?all_tenants=1&host=host1&") for p in transport.asked)
    assert any("changes-since=" in p and "host=host1" in p for p in transport.asked)
    assert all("host=" in p or "uuid=" in p for p in transport.asked if p.startswith("/servers?"))

    # and the cycle after, with nothing new, still agrees
    again = findings(tracker.look)
    assert not tracker.last_was_full and again == incremental


def test_a_steady_cycle_asks_what_the_design_says_and_sees_what_left_the_host(
    nova_stack: harness.Nova, servers: list[str]
) -> None:
    """docs/design.md §8: a quiet steady cycle asks Nova two things, both about host1 (its
    plain listing, its changes since the last look). Between two cycles one server is
    live-migrated to host2 with its domain left behind, one deleted and its row archived
    (its domain left behind: nothing in any changes-since listing shows it any more): the
    steady cycle finds both from host1's listing, looks up those two alone, and finds what
    a full look finds."""
    nova = nova_stack
    _stays, _also, moved, archived, _last = servers
    here = {u: domain(u) for u in servers}
    transport = CountingTransport()
    tracker = NovaTracker(observer(transport), full_every=100)

    def findings(view_of: Any) -> list[Finding]:
        domains = list(here.values())
        return ours(classify(domains, view_of(HOST, [d.uuid for d in domains])), set(servers))

    assert findings(tracker.look) == []
    assert tracker.last_was_full
    transport.asked.clear()
    assert findings(tracker.look) == []
    assert not tracker.last_was_full
    asked = [p.split("&marker=")[0] for p in transport.asked]
    since = asked[-1].split("changes-since=")[1].split("&")[0]
    assert asked == [
        f"/servers?all_tenants=1&host={HOST}&limit=1000",
        f"/servers/detail?all_tenants=1&host={HOST}&changes-since={since}&limit=1000",
    ]

    nova.live_migrate(moved, OTHER)
    nova.soft_delete(archived)
    nova.force_delete(archived)

    def archived_for_good() -> bool:
        # NOTE: archiving fails while the compute still works on the rows: asked again
        try:
            harness.archive_deleted_rows()
        except harness.StackError:
            return False
        return nova.find_server(archived, deleted="1") is None

    harness.wait_for("the deleted server's row archived", archived_for_good)

    transport.asked.clear()
    incremental = findings(tracker.look)
    assert not tracker.last_was_full
    assert incremental == findings(observer().look)
    assert {f.uuid: f.kind.value for f in incremental} == {moved: "misplaced", archived: "unknown"}
    lookups = sorted(p.split("uuid=")[1].split("&")[0] for p in transport.asked if "uuid=" in p)
    assert lookups == sorted([moved, archived])
    assert all("host=" in p or "uuid=" in p for p in transport.asked if p.startswith("/servers"))
    # a fresh "no record" needs every cell to answer (rule 17): the one service listing
    assert [p for p in transport.asked if p.startswith("/os-services")] == [
        "/os-services?binary=nova-compute"
    ]


def test_the_agent_as_run_builds_it_asks_only_for_the_changes_between_full_looks(
    nova_stack: harness.Nova, servers: list[str], tmp_path: pathlib.Path
) -> None:
    """``run``'s own wiring (its config, keystoneauth, the metered transport) against the real
    Nova: a full look every ``full_look_every`` cycles, changes-since between them, and the
    same findings either way. NOTE: a wrapper that hid Nova's Date once made every cycle a
    full look; only the real-Nova benchmark noticed."""
    metadata = worlds.nova_metadata()
    uri = worlds.write_node_file(
        tmp_path,
        [worlds.node_domain(uuid=u, name=worlds.instance_name(n + 1), metadata=metadata)
         for n, u in enumerate(servers)],
    )  # fmt: skip
    conf_file = harness.write_cli_config(
        tmp_path / "agent.conf", host=HOST, libvirt_uri=uri,
        extra=f"[agent]\nstate_dir = {tmp_path / 'state'}\ndry_run = true\nfull_look_every = 3\n",
    )  # fmt: skip
    args = argparse.Namespace(host=HOST, libvirt_uri=uri, dry_run=True)
    agent = cli_agent.build_agent(config.load([str(conf_file)]), args, Metrics())
    full, seen = [], []
    try:
        for _ in range(4):
            result = agent.cycle()
            assert result.error is None and result.report is not None, result.error
            full.append(agent.nova_views.last_was_full)
            seen.append(ours(list(result.report.findings), set(servers)))
    finally:
        agent.effects.close()
        agent.journal.close()
    assert full == [True, False, False, True]
    assert seen == [[]] * 4  # each of the five is a server Nova manages here
