"""Cross-host classification of a scan: each host classified alone, then the merge's one
split-brain rule (docs/design.md §9) across them: one UUID running on two or more hosts,
unless Nova shows it moving between them."""

from __future__ import annotations

import dataclasses
import datetime

import pytest

from nova_orphans.fakes.nova_reference import nova_view_for
from nova_orphans.fleet.audit import merge_scans
from nova_orphans.fleet.records import MergedFleet
from nova_orphans.fleet.scan import HostScan
from nova_orphans.model import (
    Domain,
    DomainState,
    Kind,
    Migration,
    NovaMetadata,
    Selector,
    Server,
)

UUID = "0b9c1a52-8f4e-4a4e-9d7c-1f2e3d4c5b6a"
OTHER = "5d8e7f6a-1b2c-4d3e-8f9a-0b1c2d3e4f5a"
META = NovaMetadata(namespace="http://openstack.org/xmlns/libvirt/nova/1.1")
RUNNING, PAUSED, SHUTOFF = DomainState.RUNNING, DomainState.PAUSED, DomainState.SHUTOFF
DELETED_AT = datetime.datetime(2024, 4, 28, tzinfo=datetime.timezone.utc)
NOW = datetime.datetime(2024, 5, 1, tzinfo=datetime.timezone.utc)


def dom(state: DomainState = RUNNING, uuid: str = UUID, job: bool = False) -> Domain:
    return Domain(uuid, "instance-0000002a", state, True, job, META)


def live(host: str | None, uuid: str = UUID, **kw: str | None) -> Server:
    fields: dict[str, str | None] = {"vm_state": "active", "task_state": None, **kw}
    return Server(uuid, "web-1", host, "ACTIVE", fields["vm_state"], fields["task_state"])


def deleted(host: str, uuid: str = UUID) -> Server:
    return Server(uuid, "web-1", host, "DELETED", "deleted", None, True, DELETED_AT)


@dataclasses.dataclass(frozen=True)
class Case:
    """One fleet, what Nova says, whether UUID is split-brain, and the kind each host's own
    audit gives its copy."""

    description: str
    domains: dict[str, list[Domain]]
    live: list[Server]
    split: bool
    expected: dict[str, Kind | None]
    looked_up: dict[str, Server | None] = dataclasses.field(default_factory=dict)
    migrations: tuple[Migration, ...] = ()
    deny: Selector = dataclasses.field(default_factory=Selector)


CASES = [
    Case(
        "A UUID running on two hosts is split-brain, whichever copy Nova points to.",
        {"a": [dom()], "b": [dom()]},
        [live("a")],
        True,
        {"a": None, "b": Kind.MISPLACED},
    ),
    Case(
        "A UUID running on three hosts is split-brain across all three.",
        {"a": [dom()], "b": [dom()], "c": [dom()]},
        [live("b")],
        True,
        {"a": Kind.MISPLACED, "b": None, "c": Kind.MISPLACED},
    ),
    Case(
        "Running twice while Nova has the server only as deleted is still split-brain.",
        {"a": [dom()], "b": [dom()]},
        [],
        True,
        {"a": Kind.DELETED, "b": Kind.DELETED},
        looked_up={UUID: deleted("a")},
    ),
    Case(
        "Running twice while Nova never heard of the server is still split-brain.",
        {"a": [dom()], "b": [dom()]},
        [],
        True,
        {"a": Kind.UNKNOWN, "b": Kind.UNKNOWN},
        looked_up={UUID: None},
    ),
    Case(
        "Running on the host Nova points to and shut off elsewhere: the copy elsewhere is "
        "misplaced, the one Nova manages is no finding.",
        {"a": [dom()], "b": [dom(SHUTOFF)]},
        [live("a")],
        False,
        {"a": None, "b": Kind.MISPLACED},
    ),
    Case(
        "Shut off on two hosts, running nowhere: each copy is classified on its own.",
        {"a": [dom(SHUTOFF)], "b": [dom(SHUTOFF)]},
        [live("a")],
        False,
        {"a": None, "b": Kind.MISPLACED},
    ),
    Case(
        "A live migration's paused destination next to the running source is not split-brain.",
        {"a": [dom(job=True)], "b": [dom(PAUSED, job=True)]},
        [live("a", task_state="migrating")],
        False,
        {"a": None, "b": Kind.PROTECTED},
    ),
    Case(
        "Running on two hosts and shut off on a third: the third copy keeps its own kind.",
        {"a": [dom()], "b": [dom()], "c": [dom(SHUTOFF)]},
        [live("a")],
        True,
        {"a": None, "b": Kind.MISPLACED, "c": Kind.MISPLACED},
    ),
    Case(
        "The deny list does not hide a split-brain: it is an alarm, never acted on.",
        {"a": [dom()], "b": [dom()]},
        [live("a")],
        True,
        {"a": Kind.PROTECTED, "b": Kind.PROTECTED},
        deny=Selector(frozenset({UUID})),
    ),
    Case(
        "A domain on one host only is classified exactly as the single-host agent would.",
        {"a": [dom()], "b": []},
        [],
        False,
        {"a": Kind.DELETED, "b": None},
        looked_up={UUID: deleted("a")},
    ),
]


def merged(case: Case) -> MergedFleet:
    servers = {s.uuid: s for s in case.live}
    views = {
        host: nova_view_for(host, domains, servers, case.looked_up, case.migrations)
        for host, domains in case.domains.items()
    }
    scans = [HostScan(h, f"test:///{h}.xml", tuple(ds)) for h, ds in case.domains.items()]

    def ask_nova(uuid: str) -> tuple[Server | None, tuple[Migration, ...]]:
        return case.looked_up.get(uuid, servers.get(uuid)), case.migrations

    return merge_scans(scans, views, sorted(case.domains), NOW, ask_nova, case.deny)


@pytest.mark.parametrize("case", CASES, ids=[c.description for c in CASES])
def test_each_copy_gets_the_expected_kind(case: Case) -> None:
    fleet = merged(case)
    found = {h.host: {f.uuid: f.kind for f in h.findings} for h in fleet.hosts}
    assert {host: kinds.get(UUID) for host, kinds in found.items()} == case.expected
    assert [c.uuid for c in fleet.split_brain] == ([UUID] if case.split else [])
    assert fleet.has_orphans or not case.split


def test_split_brain_names_the_hosts_and_novas_choice() -> None:
    fleet = merged(Case("", {"a": [dom(), dom(SHUTOFF, uuid=OTHER)], "b": [dom()]},
                        [live("b")], True, {}, looked_up={OTHER: None}))  # fmt: skip
    (split,) = fleet.split_brain
    assert split.running_on == ("a", "b")
    assert split.reason == "running on a, b (a: running, b: running); Nova places it on b"
    assert [(f.kind, f.uuid) for f in fleet.hosts[0].findings] == [
        (Kind.UNKNOWN, OTHER), (Kind.MISPLACED, UUID),
    ]  # fmt: skip


def test_a_migration_nova_shows_between_the_two_hosts_excuses_the_pair() -> None:
    """The reports' migration excuse is the scan's too (one rule): the hosts are read one
    after the other, so a migration under way between them is no split-brain."""
    moving = (Migration(UUID, "a", "b", "live-migration", "running"),)
    fleet = merged(Case("", {"a": [dom()], "b": [dom()]}, [live("a")], False, {},
                        migrations=moving))  # fmt: skip
    assert fleet.split_brain == ()
    assert [c.uuid for c in fleet.moved] == [UUID] and "not split-brain" in fleet.moved[0].reason


def test_a_server_nova_places_on_a_split_brain_host_is_not_reported_lost() -> None:
    fleet = merged(Case("", {"a": [dom()], "b": [dom()]}, [live("a")], True, {}))
    assert fleet.hosts[0].findings == () and len(fleet.split_brain) == 1


def test_only_running_copies_count() -> None:
    fleet = merged(Case("", {"a": [dom()], "b": [dom(PAUSED)], "c": [dom(DomainState.BLOCKED)]},
                        [live("a")], True, {}))  # fmt: skip
    assert [c.running_on for c in fleet.split_brain] == [("a", "c")]


def test_the_view_of_a_host_holds_only_its_servers_and_its_migrations() -> None:
    here, there = live("a", uuid=OTHER), live("b")
    moves = (
        Migration(UUID, "b", "c", "live-migration", "completed"),
        Migration(OTHER, "a", "b", "live-migration", "running"),
    )
    view = nova_view_for("a", [dom()], {OTHER: here, UUID: there}, {}, moves)
    assert view.servers_here == {OTHER: here}
    assert view.lookups == {UUID: there}
    assert view.migrations == (moves[1],)
