"""Which sightings count as one more consecutive cycle (docs/design.md rules 4 and 15)."""

from __future__ import annotations

import datetime

from nova_orphans.decide.sightings import next_sightings
from nova_orphans.model import Domain, DomainState, Finding, Kind, NovaMetadata

T0 = datetime.datetime(2026, 11, 1, 12, 0, tzinfo=datetime.timezone.utc)
INTERVAL = 600.0
U = "11111111-2222-3333-4444-555555555555"


def finding(kind=Kind.UNKNOWN, state=DomainState.RUNNING):
    meta = NovaMetadata("http://openstack.org/xmlns/libvirt/nova/1.1")
    domain = Domain(U, "instance-1", state, True, False, meta)
    return Finding(U, "instance-1", kind, "why", domain, None)


def cycles(seconds, kind=Kind.UNKNOWN, state=DomainState.RUNNING, start=None):
    """The sighting after cycles at T0 + each of ``seconds``."""
    sightings = start or {}
    for s in seconds:
        sightings = next_sightings(
            sightings, [finding(kind, state)], T0 + datetime.timedelta(seconds=s), INTERVAL
        )
    return sightings


def test_cycles_an_interval_apart_each_count():
    s = cycles([0, 600, 1230, 1830])[U]
    assert (s.consecutive, s.first_seen, s.last_seen) == (4, T0, T0 + datetime.timedelta(0, 1830))


def test_a_crash_looping_agent_counts_nothing_however_often_it_restarts():
    # systemd restarts a crashing agent every 30 s; each start runs a cycle at once.
    s = cycles(range(0, 3600, 30))[U]
    assert s.consecutive == 1
    assert s.first_seen == T0  # the streak is kept, not restarted


def test_half_an_interval_after_the_last_sighting_counts_and_less_does_not():
    assert cycles([0, 299])[U].consecutive == 1
    assert cycles([0, 300])[U].consecutive == 2


def test_a_wall_clock_stepped_backwards_never_counts_as_progress():
    s = cycles([0, 600, -86400])[U]
    assert (s.consecutive, s.first_seen) == (2, T0)
    # The next cycle an interval later counts again; the streak was not lost.
    assert cycles([-85800], start={U: s})[U].consecutive == 3


def test_a_wall_clock_step_forward_is_one_cycle_only():
    s = cycles([0, 86400])[U]
    assert s.consecutive == 2


def test_cycles_seen_stopped_count_from_the_first_stopped_sighting():
    running = cycles([0, 600])
    stopped = cycles([1200, 1800, 1810, 2400], state=DomainState.SHUTOFF, start=running)[U]
    assert stopped.inactive_since == T0 + datetime.timedelta(seconds=1200)
    assert stopped.inactive_cycles == 2  # 1800 and 2400; 1810 came too soon
    again = cycles([3000], start={U: stopped})[U]  # someone started it again
    assert (again.inactive_since, again.inactive_cycles) == (None, 0)


def test_a_change_of_kind_starts_over():
    s = cycles([600], kind=Kind.DELETED, start=cycles([0]))[U]
    assert (s.consecutive, s.kind, s.first_seen) == (
        1,
        Kind.DELETED,
        T0 + datetime.timedelta(0, 600),
    )
