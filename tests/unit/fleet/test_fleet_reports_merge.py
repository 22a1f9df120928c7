"""Merging per-host reports (pure core): each case is one sentence about the fleet.

Reports are hostile input (docs/design.md rule 20): a report dated ahead, one for a host
Nova does not know and reports of one host that disagree are unreliable, never merged.
"""

from __future__ import annotations

import dataclasses
import datetime

import pytest

from nova_orphans.fleet import merge as core
from nova_orphans.fleet import records
from nova_orphans.model import DomainState, Kind, Migration, Server

NOW = datetime.datetime(2024, 5, 1, 12, 0, tzinfo=datetime.timezone.utc)
MAX_AGE = datetime.timedelta(minutes=30)
UUID = "0b9c1a52-8f4e-4a4e-9d7c-1f2e3d4c5b6a"
OTHER = "5d8e7f6a-1b2c-4d3e-8f9a-0b1c2d3e4f5a"
RUNNING, PAUSED, SHUTOFF = DomainState.RUNNING, DomainState.PAUSED, DomainState.SHUTOFF


def ago(minutes: float) -> datetime.datetime:
    return NOW - datetime.timedelta(minutes=minutes)


def report(
    host: str,
    *states: DomainState,
    minutes: float = 1,
    identity: str = "verified",
    uuid: str = UUID,
    findings: tuple[records.ReportedFinding, ...] = (),
    source: str | None = None,
) -> records.PerHostReport:
    domains = tuple(records.SeenDomain(uuid, "instance-2a", s) for s in states)
    return records.PerHostReport(
        source or f"{host}.json", host, ago(minutes), identity, "why", domains, findings
    )


def server(host: str, task_state: str | None = None) -> Server:
    return Server(UUID, "web-1", host, "ACTIVE", "active", task_state)


def migration(src: str, dst: str, status: str, minutes: float) -> Migration:
    when = ago(minutes).replace(tzinfo=None).isoformat()  # Nova's times carry no zone
    return Migration(UUID, src, dst, "live-migration", status, when, when)


@dataclasses.dataclass(frozen=True)
class Case:
    reports: tuple[records.PerHostReport, ...]
    computes: tuple[str, ...] = ("a", "b")
    nova: Server | None = None
    migrations: tuple[Migration, ...] = ()
    bad: tuple[records.BadReport, ...] = ()
    split: tuple[str, ...] = ()
    moved: tuple[str, ...] = ()
    duplicates: tuple[str, ...] = ()
    standings: tuple[tuple[str, records.Standing], ...] = ()


T, S, U, R, M = (
    records.Standing.TRUSTED,
    records.Standing.STALE,
    records.Standing.UNRELIABLE,
    records.Standing.UNREADABLE,
    records.Standing.MISSING,
)
DELETED = records.ReportedFinding(OTHER, "instance-2b", Kind.DELETED, "deleted at ...")

CASES = {
    "one UUID running on two trusted hosts, Nova showing no move, is split-brain": Case(
        (report("a", RUNNING), report("b", RUNNING)),
        nova=server("a"),
        split=(UUID,),
        standings=(("a", T), ("b", T)),
    ),
    "a paused copy (live migration in flight) is no split-brain but a duplicate": Case(
        (report("a", RUNNING), report("b", PAUSED)),
        duplicates=(UUID,),
    ),
    "a shut-off copy on a second host is a duplicate, not split-brain": Case(
        (report("a", RUNNING), report("b", SHUTOFF)),
        duplicates=(UUID,),
    ),
    "a live migration a->b completed after the older report explains both copies": Case(
        (report("a", RUNNING, minutes=10), report("b", RUNNING, minutes=1)),
        nova=server("b"),
        migrations=(migration("a", "b", "completed", minutes=5),),
        moved=(UUID,),
    ),
    "a migration still running between the two hosts explains both copies": Case(
        (report("a", RUNNING, minutes=1), report("b", RUNNING, minutes=1)),
        nova=server("a"),
        migrations=(migration("a", "b", "running", minutes=60),),
        moved=(UUID,),
    ),
    "a migration that ended before both reports explains nothing: split-brain": Case(
        (report("a", RUNNING, minutes=2), report("b", RUNNING, minutes=1)),
        nova=server("b"),
        migrations=(migration("a", "b", "completed", minutes=20),),
        split=(UUID,),
    ),
    "a migration between other hosts explains nothing: split-brain": Case(
        (report("a", RUNNING, minutes=10), report("b", RUNNING, minutes=1)),
        nova=server("b"),
        migrations=(migration("a", "c", "completed", minutes=5),),
        split=(UUID,),
    ),
    "Nova's task_state (migrating) explains both copies": Case(
        (report("a", RUNNING), report("b", RUNNING)),
        nova=server("a", task_state="migrating"),
        moved=(UUID,),
    ),
    "a stale report never creates split-brain by itself": Case(
        (report("a", RUNNING), report("b", RUNNING, minutes=31)),
        standings=(("a", T), ("b", S)),
    ),
    "a report dated further in the future than the max age is unreliable (a clock ahead)": Case(
        (report("a", RUNNING), report("b", RUNNING, minutes=-31)),
        standings=(("a", T), ("b", U)),
    ),
    "a report dated ahead by more than the clock skew is unreliable, within the max age too": (
        Case(
            (report("a", RUNNING), report("b", RUNNING, minutes=-2)),
            standings=(("a", T), ("b", U)),
        )
    ),
    "a report dated ahead within the clock skew counts as written now": Case(
        (report("a", RUNNING), report("b", RUNNING, minutes=-0.5)),
        nova=server("a"),
        split=(UUID,),
        standings=(("a", T), ("b", T)),
    ),
    "an unproven identity makes the report unreliable: no split-brain from it": Case(
        (report("a", RUNNING), report("b", RUNNING, identity="unproven")),
        standings=(("a", T), ("b", U)),
    ),
    "an identity mismatch makes the report unreliable": Case(
        (report("a", RUNNING), report("b", RUNNING, identity="mismatch")),
        standings=(("a", T), ("b", U)),
    ),
    "a report without an identity verdict is unreliable": Case(
        (report("a", RUNNING), report("b", RUNNING, identity="absent")),
        standings=(("a", T), ("b", U)),
    ),
    "a compute host Nova lists with no report is missing, never empty": Case(
        (report("a", RUNNING),),
        standings=(("a", T), ("b", M)),
    ),
    "the newer of two agreeing reports of one host is used": Case(
        (
            report("a", RUNNING),
            report("b", RUNNING, minutes=2, source="b-new.json"),
            report("b", RUNNING, minutes=5, source="b-old.json"),
        ),
        nova=server("a"),
        split=(UUID,),
        standings=(("a", T), ("b", T)),
    ),
    "two current reports of one host that disagree make it unreliable: neither is merged": Case(
        (
            report("a", RUNNING),
            report("b", minutes=2, source="b-new.json"),
            report("b", RUNNING, minutes=5, source="b-old.json"),
        ),
        standings=(("a", T), ("b", U)),
    ),
    "a stale report of a host does not conflict with its current one": Case(
        (
            report("a", RUNNING),
            report("b", minutes=2, source="b-new.json"),
            report("b", RUNNING, minutes=45, source="b-old.json"),
        ),
        standings=(("a", T), ("b", T)),
    ),
    "a stale report is superseded by a fresh one of the same host": Case(
        (
            report("a", RUNNING),
            report("b", RUNNING, minutes=60, source="b-old.json"),
            report("b", RUNNING, minutes=1, source="b-new.json"),
        ),
        nova=server("a"),
        split=(UUID,),
        standings=(("a", T), ("b", T)),
    ),
    "an unusable report naming its host makes that host unreadable": Case(
        (report("a", RUNNING),),
        bad=(records.BadReport("b.json", "'domains' is not a list", "b"),),
        standings=(("a", T), ("b", R)),
    ),
    "a report for a host that runs no nova-compute Nova knows is unreliable, not merged": Case(
        (report("a", RUNNING), report("c", RUNNING)),
        computes=("a",),
        standings=(("a", T), ("c", U)),
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_merge(case: Case) -> None:
    asked: list[str] = []

    def ask_nova(uuid: str) -> tuple[Server | None, tuple[Migration, ...]]:
        asked.append(uuid)
        return case.nova, case.migrations

    hosts, _ = core.standings(case.reports, case.bad, case.computes, NOW, MAX_AGE)
    merged = core.merge(hosts, (), ask_nova, NOW, MAX_AGE)
    assert tuple(c.uuid for c in merged.split_brain) == case.split
    assert tuple(c.uuid for c in merged.moved) == case.moved
    assert tuple(c.uuid for c in merged.duplicates) == case.duplicates
    standing = {h.host: h.standing for h in merged.hosts}
    for host, expected in case.standings:
        assert standing[host] is expected, merged.hosts
    # Nova is asked about split-brain candidates only.
    assert asked == sorted({*case.split, *case.moved})


def test_split_brain_names_both_hosts_and_where_nova_places_the_server() -> None:
    hosts, _ = core.standings(
        [report("a", RUNNING), report("b", RUNNING)], [], ["a", "b"], NOW, MAX_AGE
    )
    merged = core.merge(hosts, (), lambda uuid: (server("b"), ()), NOW, MAX_AGE)
    (item,) = merged.split_brain
    assert item.running_on == ("a", "b")
    assert "running on a, b" in item.reason and "Nova places it on b" in item.reason
    assert merged.has_orphans


def test_the_newest_report_wins_and_the_note_says_which_was_set_aside() -> None:
    hosts, _ = core.standings(
        [report("b", minutes=9, source="old.json"), report("b", minutes=2, source="new.json")],
        [],
        ["b"],
        NOW,
        MAX_AGE,
    )
    (b,) = hosts
    assert b.report is not None and b.report.source == "new.json"
    (note,) = b.notes
    assert "2 reports for this host: the newest, new.json" in note and "old.json" in note


def test_only_a_trusted_reports_orphans_count() -> None:
    """A deleted guest in a stale report is not an orphan finding (the host is stale)."""
    stale = report("a", minutes=60, findings=(DELETED,))
    hosts, _ = core.standings([stale], [], ["a"], NOW, MAX_AGE)
    merged = core.merge(hosts, (), lambda uuid: (None, ()), NOW, MAX_AGE)
    assert not merged.has_orphans and [h.host for h in merged.incomplete] == ["a"]
    fresh = report("a", findings=(DELETED,))
    hosts, _ = core.standings([fresh], [], ["a"], NOW, MAX_AGE)
    merged = core.merge(hosts, (), lambda uuid: (None, ()), NOW, MAX_AGE)
    assert merged.has_orphans and not merged.incomplete


def test_a_bad_report_naming_no_host_is_listed_apart() -> None:
    bad = records.BadReport("junk.json", "not JSON")
    hosts, unattributed = core.standings([report("a")], [bad], ["a"], NOW, MAX_AGE)
    assert unattributed == (bad,)
    assert [h.host for h in hosts] == ["a"]


def test_a_report_dated_ahead_cannot_hide_the_hosts_real_orphan() -> None:
    """docs/design.md rule 20: a report dated 25 minutes ahead (within the max age) was
    taken as the host's newest and hid its real ``deleted`` orphan; it is unreliable."""
    real = report("a", findings=(DELETED,), minutes=5, source="a.json")
    ahead = report("a", minutes=-25, source="a-forged.json")
    hosts, _ = core.standings([real, ahead], [], ["a"], NOW, MAX_AGE)
    merged = core.merge(hosts, (), lambda uuid: (None, ()), NOW, MAX_AGE)
    (a,) = merged.hosts
    assert a.standing is records.Standing.UNRELIABLE and not a.trusted
    assert [h.host for h in merged.incomplete] == ["a"]  # exit 1, never a clean 0
    assert "a-forged.json is dated" in a.notes[0] and "1500 s ahead" in a.notes[0]
    assert f"{core.REPORT_CLOCK_SKEW.total_seconds():g} s allowed" in a.notes[0]


def test_a_report_dated_now_cannot_hide_the_hosts_real_orphan() -> None:
    """docs/design.md rule 20: a forged report dated just now, saying the host holds
    nothing, disagrees with the host's own report within the max age: neither is merged,
    and the note names both."""
    real = report("a", findings=(DELETED,), minutes=5, source="a.json")
    forged = report("a", minutes=0, source="a-forged.json")
    hosts, _ = core.standings([real, forged], [], ["a"], NOW, MAX_AGE)
    merged = core.merge(hosts, (), lambda uuid: (None, ()), NOW, MAX_AGE)
    (a,) = merged.hosts
    assert a.standing is records.Standing.UNRELIABLE and merged.incomplete == [a]
    assert "2 reports of this host within the max age disagree" in a.notes[0]
    assert "a-forged.json" in a.notes[0] and "a.json" in a.notes[0]


def test_a_report_for_a_host_nova_does_not_know_is_flagged_and_creates_no_split_brain() -> None:
    """docs/design.md rule 20: a report naming a host no nova-compute service has is
    unreliable: it neither counts its findings nor pairs with a real host's copy."""
    hosts, _ = core.standings(
        [report("a", RUNNING), report("ghost", RUNNING, findings=(DELETED,))],
        [],
        ["a"],
        NOW,
        MAX_AGE,
    )
    merged = core.merge(hosts, (), lambda uuid: (server("a"), ()), NOW, MAX_AGE)
    ghost = next(h for h in merged.hosts if h.host == "ghost")
    assert ghost.standing is records.Standing.UNRELIABLE and not ghost.known_to_nova
    assert "no nova-compute service of Nova runs on this host" in ghost.notes[0]
    assert merged.split_brain == () and not merged.has_orphans
    assert merged.incomplete == [ghost]
