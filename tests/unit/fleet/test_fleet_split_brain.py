"""Cross-host classification: split-brain when one UUID runs on two or more hosts."""

from __future__ import annotations

import dataclasses
import datetime

import pytest

from nova_orphans.fakes.nova_reference import nova_view_for
from nova_orphans.fleet.split_brain import classify_fleet, running_copies
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


def dom(state: DomainState = RUNNING, uuid: str = UUID, job: bool = False) -> Domain:
    return Domain(uuid, "instance-0000002a", state, True, job, META)


def live(host: str | None, uuid: str = UUID, **kw: str | None) -> Server:
    fields: dict[str, str | None] = {"vm_state": "active", "task_state": None, **kw}
    return Server(uuid, "web-1", host, "ACTIVE", fields["vm_state"], fields["task_state"])


def deleted(host: str, uuid: str = UUID) -> Server:
    return Server(uuid, "web-1", host, "DELETED", "deleted", None, True, DELETED_AT)


@dataclasses.dataclass(frozen=True)
class Case:
    """One fleet, what Nova says, and the kind each host's copy of UUID must get."""

    description: str
    domains: dict[str, list[Domain]]
    live: list[Server]
    expected: dict[str, Kind | None]
    looked_up: dict[str, Server | None] = dataclasses.field(default_factory=dict)
    migrations: tuple[Migration, ...] = ()
    deny: Selector = dataclasses.field(default_factory=Selector)


CASES = [
    Case(
        "A UUID running on two hosts is split-brain on both, the copy Nova points to included.",
        {"a": [dom()], "b": [dom()]},
        [live("a")],
        {"a": Kind.SPLIT_BRAIN, "b": Kind.SPLIT_BRAIN},
    ),
    Case(
        "A UUID running on three hosts is split-brain on all three.",
        {"a": [dom()], "b": [dom()], "c": [dom()]},
        [live("b")],
        {"a": Kind.SPLIT_BRAIN, "b": Kind.SPLIT_BRAIN, "c": Kind.SPLIT_BRAIN},
    ),
    Case(
        "Running twice while Nova has the server only as deleted is still split-brain.",
        {"a": [dom()], "b": [dom()]},
        [],
        {"a": Kind.SPLIT_BRAIN, "b": Kind.SPLIT_BRAIN},
        looked_up={UUID: deleted("a")},
    ),
    Case(
        "Running twice while Nova never heard of the server is still split-brain.",
        {"a": [dom()], "b": [dom()]},
        [],
        {"a": Kind.SPLIT_BRAIN, "b": Kind.SPLIT_BRAIN},
        looked_up={UUID: None},
    ),
    Case(
        "Running on the host Nova points to and shut off elsewhere: the copy elsewhere is "
        "misplaced, the one Nova manages is no finding.",
        {"a": [dom()], "b": [dom(SHUTOFF)]},
        [live("a")],
        {"a": None, "b": Kind.MISPLACED},
    ),
    Case(
        "Shut off on two hosts, running nowhere: each copy is classified on its own.",
        {"a": [dom(SHUTOFF)], "b": [dom(SHUTOFF)]},
        [live("a")],
        {"a": None, "b": Kind.MISPLACED},
    ),
    Case(
        "A live migration's paused destination next to the running source is not split-brain.",
        {"a": [dom(job=True)], "b": [dom(PAUSED, job=True)]},
        [live("a", task_state="migrating")],
        {"a": None, "b": Kind.PROTECTED},
    ),
    Case(
        "Running on two hosts and shut off on a third: the third copy keeps its own kind.",
        {"a": [dom()], "b": [dom()], "c": [dom(SHUTOFF)]},
        [live("a")],
        {"a": Kind.SPLIT_BRAIN, "b": Kind.SPLIT_BRAIN, "c": Kind.MISPLACED},
    ),
    Case(
        "The deny list does not hide a split-brain: it is an alarm, never acted on.",
        {"a": [dom()], "b": [dom()]},
        [live("a")],
        {"a": Kind.SPLIT_BRAIN, "b": Kind.SPLIT_BRAIN},
        deny=Selector(frozenset({UUID})),
    ),
    Case(
        "A domain on one host only is classified exactly as the single-host agent would.",
        {"a": [dom()], "b": []},
        [],
        {"a": Kind.DELETED, "b": None},
        looked_up={UUID: deleted("a")},
    ),
]


def findings_of(case: Case) -> dict[str, dict[str, Kind]]:
    servers = {s.uuid: s for s in case.live}
    views = {
        host: nova_view_for(host, domains, servers, case.looked_up, case.migrations)
        for host, domains in case.domains.items()
    }
    result = classify_fleet(case.domains, views, case.deny)
    return {host: {f.uuid: f.kind for f in found} for host, found in result.items()}


@pytest.mark.parametrize("case", CASES, ids=[c.description for c in CASES])
def test_each_copy_gets_the_expected_kind(case: Case) -> None:
    found = findings_of(case)
    assert {host: kinds.get(UUID) for host, kinds in found.items()} == case.expected


def test_split_brain_is_listed_first_and_names_the_hosts_and_novas_choice() -> None:
    domains = {"a": [dom(), dom(SHUTOFF, uuid=OTHER)], "b": [dom()]}
    servers = {UUID: live("b")}
    views = {h: nova_view_for(h, ds, servers, {OTHER: None}, ()) for h, ds in domains.items()}
    found = classify_fleet(domains, views)["a"]
    assert [f.kind for f in found] == [Kind.SPLIT_BRAIN, Kind.UNKNOWN]
    assert found[0].reason == "running on 2 hosts at once (a, b); Nova places it on b"
    assert found[0].server == servers[UUID]


def test_a_server_nova_places_on_a_split_brain_host_is_not_reported_lost() -> None:
    domains = {"a": [dom()], "b": [dom()]}
    servers = {UUID: live("a")}
    views = {h: nova_view_for(h, ds, servers, {}, ()) for h, ds in domains.items()}
    assert [f.kind for f in classify_fleet(domains, views)["a"]] == [Kind.SPLIT_BRAIN]


def test_running_copies_counts_only_running_states() -> None:
    domains = {"a": [dom()], "b": [dom(PAUSED)], "c": [dom(DomainState.BLOCKED)]}
    assert running_copies(domains) == {UUID: ["a", "c"]}


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
