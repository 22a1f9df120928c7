"""Merge per-host audit reports into one fleet view. Pure: no I/O, no clock.

Each host's agent (``[agent] report_file``) or a per-host ``audit --format json`` writes what
it saw; the fleet merges those reports with Nova's list of compute hosts, so no central process
needs a libvirt connection to every hypervisor.

Only *trusted* reports (fresh, identity verified, of a host Nova knows, not dated ahead, not
contradicted) are merged as truth: the others are reported, never "no domains", and never
create split-brain or duplicates (docs/design.md §9; reports are hostile input, rule 20).

NOTE: reports are not one snapshot: host A may have written its report before a live migration
to host B finished and B after it. So a UUID seen running on two trusted hosts is only a
*candidate*; it is split-brain unless Nova shows the server moving between those hosts since
the older of the two reports (``confirm``). A paused copy never counts as running
(``records.RUNNING_STATES``): during a live migration one side is always paused. A scan's hosts
are merged here too (``fleet/audit.py``): this is the fleet's only split-brain rule.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable, Iterable, Mapping, Sequence

from nova_orphans import shapes
from nova_orphans.classify.guests import MIGRATION_IN_PROGRESS
from nova_orphans.classify.leftover import LeftoverKind
from nova_orphans.fleet.records import (
    BadReport,
    CrossHost,
    HostStanding,
    MergedFleet,
    PerHostReport,
    SeenDomain,
    Standing,
)
from nova_orphans.model import Migration, Server

#: How far ahead of this host's clock a report may be dated and still count as written now
#: (docs/design.md §9): NTP keeps hosts within milliseconds, so a minute is generous; a
#: report dated further ahead is unreliable, whatever the max age (a clock far off, or a
#: forged report made to stay "newest"; reports are hostile input, rule 20).
REPORT_CLOCK_SKEW = datetime.timedelta(seconds=60)


def _content(report: PerHostReport) -> tuple[frozenset[tuple[str, str]], ...]:
    """What a report says the host holds: its domains (UUID, state) and findings (UUID, kind)."""
    return (
        frozenset((d.uuid, d.state.value) for d in report.domains),
        frozenset((f.uuid, f.kind.value) for f in report.findings),
    )


@dataclasses.dataclass(frozen=True)
class _Reports:
    """One host's reports: the one shown (the newest), and what the others say against it."""

    chosen: PerHostReport
    #: Reports dated more than ``REPORT_CLOCK_SKEW`` ahead of now.
    ahead: tuple[PerHostReport, ...]
    #: Reports within the max age (and not ahead) that disagree with the newest of them.
    conflicting: tuple[PerHostReport, ...]
    note: str | None


def _of_one_host(
    candidates: Sequence[PerHostReport],
    now: datetime.datetime,
    max_age: datetime.timedelta,
    skew: datetime.timedelta,
) -> _Reports:
    """The newest report (ties: the first source by name), the reports dated ahead, and
    the current reports (within the max age, not ahead) that disagree with the newest
    current one: those are *conflicting* (docs/design.md §9)."""
    ordered = sorted(candidates, key=lambda r: (-r.checked_at.timestamp(), r.source))
    ahead = tuple(r for r in ordered if r.checked_at - now > skew)
    current = [r for r in ordered if r not in ahead and now - r.checked_at <= max_age]
    conflicting = tuple(r for r in current[1:] if _content(r) != _content(current[0]))
    note = None
    if len(ordered) > 1:
        older = ", ".join(f"{r.source} ({r.checked_at.isoformat()})" for r in ordered[1:])
        note = (
            f"{len(ordered)} reports for this host: the newest, {ordered[0].source} "
            f"({ordered[0].checked_at.isoformat()}), is used; set aside: {older}"
        )
    if conflicting:
        note = None  # NOTE: none is used; the standing names them all
    return _Reports(ordered[0], ahead, (current[0], *conflicting) if conflicting else (), note)


def standings(
    reports: Iterable[PerHostReport],
    bad: Iterable[BadReport],
    compute_hosts: Sequence[str],
    now: datetime.datetime,
    max_age: datetime.timedelta,
    skew: datetime.timedelta = REPORT_CLOCK_SKEW,
) -> tuple[tuple[HostStanding, ...], tuple[BadReport, ...]]:
    """Every host Nova lists or a report names, with its standing; and the bad reports
    that name no host. Sorted by host name."""
    by_host: dict[str, list[PerHostReport]] = {}
    for each in reports:
        by_host.setdefault(each.host, []).append(each)
    chosen = {h: _of_one_host(r, now, max_age, skew) for h, r in by_host.items()}
    bad_by_host: dict[str, list[BadReport]] = {}
    unattributed = []
    for item in bad:
        if item.host is None:
            unattributed.append(item)
        else:
            bad_by_host.setdefault(item.host, []).append(item)
    known = set(compute_hosts)
    result = []
    for host in sorted(known | chosen.keys() | bad_by_host.keys()):
        seen = chosen.get(host)
        extra = [seen.note] if seen and seen.note else []
        extra += [f"{b.source}: {b.reason}" for b in bad_by_host.get(host, [])]
        standing, why = _standing(seen, bad_by_host.get(host), host in known, now, max_age, skew)
        report = seen.chosen if seen else None
        result.append(HostStanding(host, standing, report, tuple([*why, *extra]), host in known))
    return tuple(result), tuple(unattributed)


def _standing(
    seen: _Reports | None,
    bad: list[BadReport] | None,
    known: bool,
    now: datetime.datetime,
    max_age: datetime.timedelta,
    skew: datetime.timedelta,
) -> tuple[Standing, list[str]]:
    """A host's standing and why. NOTE: reports are hostile input (docs/design.md rule 20):
    a host Nova does not know, a report dated ahead and reports that disagree are each
    unreliable, so that no report can stand in for, or hide, another host's."""
    if seen is None:
        if bad:
            return Standing.UNREADABLE, ["its only report(s) could not be used"]
        return Standing.MISSING, ["Nova lists a nova-compute service here; no report"]
    report = seen.chosen
    if not known:
        return Standing.UNRELIABLE, [
            "no nova-compute service of Nova runs on this host: a report for a host Nova "
            "does not know is not merged"
        ]
    if seen.ahead:
        first = seen.ahead[0]
        return Standing.UNRELIABLE, [
            f"{first.source} is dated {first.checked_at.isoformat()}, "
            f"{_seconds(first.checked_at - now)} ahead of this host's clock (more than the "
            f"{_seconds(skew)} allowed; is that host's clock right, or the report forged?): "
            "not merged"
        ]
    if seen.conflicting:
        named = ", ".join(f"{r.source} ({r.checked_at.isoformat()})" for r in seen.conflicting)
        return Standing.UNRELIABLE, [
            f"{len(seen.conflicting)} reports of this host within the max age disagree on "
            f"its domains or findings: {named}; none is merged"
        ]
    age = now - report.checked_at
    if age > max_age:
        return Standing.STALE, [
            f"report from {report.checked_at.isoformat()} is {_seconds(age)} old "
            f"(max age {_seconds(max_age)}): not merged"
        ]
    if not report.identity_verified:
        return Standing.UNRELIABLE, [
            f"identity {report.identity}: {report.identity_reason} (not merged)"
        ]
    return Standing.TRUSTED, []


def _seconds(delta: datetime.timedelta) -> str:
    return f"{delta.total_seconds():g} s"


def candidates(hosts: Iterable[HostStanding]) -> tuple[list[CrossHost], list[CrossHost]]:
    """Over trusted hosts only: UUIDs running on two or more hosts (split-brain
    candidates) and UUIDs defined on two or more but running on at most one (duplicates)."""
    seen: dict[str, list[tuple[str, SeenDomain]]] = {}
    for standing in hosts:
        if standing.trusted and standing.report is not None:
            for domain in standing.report.domains:
                seen.setdefault(domain.uuid, []).append((standing.host, domain))
    split: list[CrossHost] = []
    duplicates: list[CrossHost] = []
    for uuid, copies in sorted(seen.items()):
        on = tuple(sorted({h for h, _ in copies}))
        if len(on) < 2:
            continue
        running = tuple(sorted({h for h, d in copies if d.running}))
        states = ", ".join(f"{h}: {d.state.value}" for h, d in sorted(copies, key=lambda c: c[0]))
        item = CrossHost(uuid, copies[0][1].name, on, running, states)
        (split if len(running) >= 2 else duplicates).append(item)
    return split, duplicates


def confirm(
    candidate: CrossHost,
    reports: Mapping[str, PerHostReport],
    server: Server | None,
    migrations: Sequence[Migration],
) -> tuple[bool, CrossHost]:
    """Is a UUID seen running on two trusted hosts split-brain? Returns (verdict, item
    with the reason).

    Not split-brain when Nova shows the server moving between those hosts after the
    older of the reports was taken (or still moving): the copies were seen at
    different times, and the next reports settle it. Otherwise it is, whichever host
    Nova points to.
    """
    taken = [reports[h].checked_at for h in candidate.running_on]
    oldest = min(taken)
    hosts = set(candidate.running_on)
    between = [
        m
        for m in migrations
        if m.instance_uuid == candidate.uuid
        and {m.source_compute, m.dest_compute} <= hosts
        and _after(m, oldest)
    ]
    seen = f"running on {', '.join(candidate.running_on)} ({candidate.reason})"
    moving = [f"{m.migration_type} {m.source_compute}->{m.dest_compute} {m.status}"
              for m in between]  # fmt: skip
    if server is not None and server.task_state:
        moving.append(f"task_state {server.task_state}")
    if moving:
        why = f"{seen}; Nova shows it moving since the older report ({', '.join(moving)})"
        why += ": not split-brain"
        return False, dataclasses.replace(candidate, reason=why)
    return True, dataclasses.replace(candidate, reason=f"{seen}; {_nova_says(server)}")


def _after(migration: Migration, moment: datetime.datetime) -> bool:
    """In progress, or last changed at or after ``moment`` (no usable time: it might have)."""
    if migration.status in MIGRATION_IN_PROGRESS:
        return True
    changed = _time(migration.updated_at) or _time(migration.created_at)
    return changed is None or changed >= moment


def _time(value: str | None) -> datetime.datetime | None:
    if not value:
        return None
    try:
        return shapes.parse_time(value)
    except ValueError:
        return None


def _nova_says(server: Server | None) -> str:
    if server is None:
        return "Nova has no record of it"
    if server.deleted:
        return "Nova has it only as deleted"
    return f"Nova places it on {server.host or 'no host'}"


#: Nova's record of a server and its migrations (the shell asks Nova).
AskNova = Callable[[str], tuple[Server | None, Sequence[Migration]]]


def merge(
    hosts: tuple[HostStanding, ...],
    unattributed: tuple[BadReport, ...],
    ask_nova: AskNova,
    now: datetime.datetime,
    max_age: datetime.timedelta | None,
) -> MergedFleet:
    """The merged fleet. Nova is asked (``ask_nova``) about split-brain candidates only:
    nothing else in the merge needs more than Nova's list of compute hosts.

    NOTE: the one split-brain rule (``candidates``, then ``confirm``), for reports and
    scans alike: a scan's hosts are read one after another, not at one instant either."""
    split, duplicates = candidates(hosts)
    reports = {h.host: h.report for h in hosts if h.trusted and h.report is not None}
    confirmed: list[CrossHost] = []
    moved: list[CrossHost] = []
    for candidate in split:
        server, migrations = ask_nova(candidate.uuid)
        is_split, item = confirm(candidate, reports, server, migrations)
        (confirmed if is_split else moved).append(item)
    return MergedFleet(
        now, max_age, hosts, unattributed, tuple(confirmed), tuple(moved), tuple(duplicates)
    )


def leftover_totals(hosts: Iterable[HostStanding]) -> dict[LeftoverKind, int | None]:
    """Each kind's leftovers across the trusted hosts; None when one of them did not check
    it (or told no leftovers): never a total that reads "none" for a look not made.

    NOTE: Cinder's attachments and Placement's allocations are the cloud's, so one told
    by two hosts is counted once; files are each host's own.
    """
    trusted = [h for h in hosts if h.trusted]
    totals: dict[LeftoverKind, int | None] = {}
    for kind in LeftoverKind:
        told = [h.leftovers for h in trusted]
        if any(t is None or t.counts.get(kind) is None for t in told):
            totals[kind] = None
            continue
        seen = {
            (h.host if kind is LeftoverKind.FILES else "", i.subject)
            for h in trusted
            for i in (h.leftovers.items if h.leftovers else ())
            if i.kind is kind
        }
        totals[kind] = len(seen)
    return totals
