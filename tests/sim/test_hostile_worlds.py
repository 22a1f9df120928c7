"""The simulation's hostile worlds (issue 17): each generated, and each invariant fires on a
broken product.

Another cloud's Nova with a same-named compute, every option combination, hostile disks,
forged fleet reports, Nova's API clock off its database's, a second agent with a state
directory of its own. Each "breaks" test replays a small history with the real product,
which keeps every invariant, then with one safety mechanism removed, which must break one.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools

import pytest

from nova_orphans.act import images
from nova_orphans.classify import identity
from nova_orphans.decide import plan as decide_module
from nova_orphans.fleet import merge, records
from nova_orphans.model import Kind
from nova_orphans.observe.nova import tracker as nova_tracker
from nova_orphans.record.lock import LiveLock
from nova_orphans.sim import checks, trial
from nova_orphans.sim.cloud import HOSTILE_DISKS
from nova_orphans.sim.fleet import SPLIT_BRAIN
from nova_orphans.sim.generate import FAULT_NAMES, Generator
from nova_orphans.sim.operator import OTHER_CLOUD
from nova_orphans.sim.play import FORGERIES
from nova_orphans.sim.steps import Cycle, Event, History, Setup
from tests.sim.conftest import cycles, history, invariants


@functools.cache
def generated_events() -> tuple[Event, ...]:
    """The world's and the operator's events of 60 generated histories (seed 11)."""
    steps = (s for i in range(60) for s in trial.run_generated(11, i).history.steps)
    return tuple(s for s in steps if isinstance(s, Event))


def none_generated(exclude: str, ops: tuple[str, ...], histories: int = 12) -> bool:
    """True when histories drawn without ``exclude`` hold no event of ``ops``."""
    return not any(
        isinstance(s, Event) and s.op in ops
        for i in range(histories)
        for s in trial.run_generated(11, i, exclude=frozenset({exclude})).history.steps
    )


# --- another cloud with a same-named compute --------------------------------------------------

#: Two guests here (one deleted in this cloud), the ``[nova]`` section reaching another
#: cloud whose compute has the same host name, hostname and type: there, both guests have
#: no record and its own two servers on this host look lost.
REAPS_EVERYTHING = (("deleted", "reap"), ("unknown", "reap"), ("misplaced", "reap"))
PROOFS = {
    "compute_id": dict(compute_id=True),
    "pinned UUID": dict(compute_id=False, pin_node=True),
    "no proof": dict(compute_id=False),
}


def wrong_cloud(**proof: bool) -> History:
    return history(
        Setup(interval=60.0, actions=REAPS_EVERYTHING, **proof),  # type: ignore[arg-type]
        Event(0.0, "config", "", f"cloud:{OTHER_CLOUD}"),
        Event(1.0, "boot_here", "s1"),
        Event(2.0, "boot_here", "s2"),
        Event(3.0, "local_delete", "s2"),
        *cycles(1, 5),
    )


@pytest.mark.parametrize("proof", sorted(PROOFS))
def test_an_agent_whose_nova_is_another_cloud_acts_on_nothing(proof):
    result = trial.replay(wrong_cloud(**PROOFS[proof]))
    assert result.violations == []
    assert result.counters.wrong_cloud_cycles == 5
    assert result.counters.stops == result.counters.reaps == result.counters.purges == 0


def test_with_names_as_proof_another_cloud_reaps_a_guest_nova_manages(monkeypatch):
    # NOTE: the product before issue 17: hostname and type proved identity when no
    # compute_id was reachable, and no brake saw that the two views share nothing.
    monkeypatch.setattr(identity, "PROOF", identity.PROOF | {identity.Check.HOSTNAME})
    monkeypatch.setattr(decide_module, "_placed_here", lambda findings, guests, host: guests)
    found = trial.replay(wrong_cloud(compute_id=False)).violations
    safety = [v.detail for v in found if v.invariant == checks.SAFETY]
    assert any("of s1 while Nova still manages it" in d for d in safety), safety
    assert any("while [nova] reaches another cloud" in d for d in safety), safety


def test_another_cloud_is_generated_with_and_without_the_proof_and_can_be_excluded():
    setups = [Generator(11, i, 25).setup for i in range(300)]
    assert {(s.compute_id, s.pin_node) for s in setups} == set(
        itertools.product((True, False), (True, False))
    )
    assert any(Generator(11, i, 25).operator.wrong == "cloud" for i in range(300))
    without = frozenset({"operator:wrong-cloud"})
    assert all(Generator(11, i, 25, without).operator.wrong != "cloud" for i in range(300))


# --- every option combination ----------------------------------------------------------------


def test_every_option_is_drawn_in_every_combination_with_stop_shared_volume_at_once():
    setups = [Generator(11, i, 25).setup for i in range(400)]
    for kind in ("deleted", "unknown", "misplaced"):
        pairs = {(s.stop_shared_volume_at_once, dict(s.actions)[kind]) for s in setups}
        assert pairs == set(itertools.product((True, False), ("log", "stop", "reap")))
    for field in ("dry_run", "allow_patterns", "deny_patterns", "retention", "api_clock_offset"):
        assert len({bool(getattr(s, field)) for s in setups}) == 2, field


#: A server evacuated away while its guest here kept running, holding a volume Cinder
#: has attached to another server since; misplaced is only logged.
MISPLACED_SHARING = history(
    Setup(interval=60.0, stop_shared_volume_at_once=True, actions=(("deleted", "stop"),)),
    Event(1.0, "boot_here", "s1"),
    Event(2.0, "boot_here", "s2"),
    Event(3.0, "share_volume", "s2"),
    Event(4.0, "evacuate", "s2", "running"),
    *cycles(1, 3),
)

#: The same volume on a deleted guest: stopped at once, its kind only logged.
DELETED_SHARING = history(
    Setup(interval=60.0, grace_period=600.0, sightings_required=3,
          stop_shared_volume_at_once=True, actions=(("deleted", "log"),)),
    Event(1.0, "boot_here", "s1"),
    Event(2.0, "boot_here", "s2"),
    Event(3.0, "share_volume", "s2"),
    Event(4.0, "local_delete", "s2"),
    *cycles(1, 3),
)  # fmt: skip


def test_stop_shared_volume_at_once_stops_only_a_deleted_guest_and_only_at_once():
    deleted = trial.replay(DELETED_SHARING)
    assert deleted.violations == []
    assert deleted.counters.stops == deleted.counters.stops_at_once == 1
    misplaced = trial.replay(MISPLACED_SHARING)
    assert misplaced.violations == [] and misplaced.counters.stops == 0


def test_a_stop_at_once_of_any_kind_breaks_the_safety_invariant(monkeypatch):
    real = decide_module._stop_at_once

    def any_kind(finding, sighting, policy, action):  # type: ignore[no-untyped-def]
        decided = real(dataclasses.replace(finding, kind=Kind.DELETED), sighting, policy, action)
        return decided and dataclasses.replace(decided, finding=finding)

    monkeypatch.setattr(decide_module, "_stop_at_once", any_kind)
    found = trial.replay(MISPLACED_SHARING).violations
    assert any(v.invariant == checks.SAFETY and "truly misplaced" in v.detail for v in found), found


def test_a_configured_dry_run_changes_nothing():
    setup = dataclasses.replace(DELETED_SHARING.setup, dry_run=True, actions=REAPS_EVERYTHING)
    result = trial.replay(dataclasses.replace(DELETED_SHARING, setup=setup))
    assert result.violations == []
    assert result.counters.stops == result.counters.reaps == 0


# --- hostile disks -----------------------------------------------------------------------------


def hostile(arg: str) -> History:
    return history(
        Setup(interval=60.0, actions=(("deleted", "reap"),)),
        Event(1.0, "boot_here", "s1"),
        Event(2.0, "boot_here", "s2"),
        Event(3.0, "hostile_disk", "s2", arg),
        Event(4.0, "local_delete", "s2"),
        *cycles(1, 4),
    )


@pytest.mark.parametrize("arg", sorted(HOSTILE_DISKS))
def test_a_hostile_disk_puts_no_host_file_in_the_quarantine(arg):
    result = trial.replay(hostile(arg))
    assert result.violations == []
    if arg == "forged-raw":  # read as raw, as its XML declares: nothing to follow
        assert result.counters.reaps == 1
    else:
        assert result.counters.reaps == 0 and result.counters.hostile_reaps_refused == 3


@pytest.mark.parametrize("arg", sorted(HOSTILE_DISKS))
def test_a_reap_that_follows_what_the_disk_names_breaks_the_quarantine_invariant(arg, monkeypatch):
    # NOTE: a product that probes the format and follows any backing file (the reap
    # before issue 17, through ``qemu-img info --backing-chain`` without ``-f``).
    def probed(image, named, instances_path):  # type: ignore[no-untyped-def]
        return named

    monkeypatch.setattr(images, "backing_path", probed)
    monkeypatch.setattr(images, "check_regular", lambda *args, **kwargs: None)
    found = trial.replay(hostile(arg)).violations
    files = [v.detail for v in found if v.invariant == checks.QUARANTINE_FILES]
    assert files and f"holds {HOSTILE_DISKS[arg][1]}" in files[0], found


def test_only_the_symlink_check_keeps_a_symlinked_base_out(monkeypatch):
    monkeypatch.setattr(images, "check_regular", lambda *args, **kwargs: None)
    found = trial.replay(hostile("symlink-base")).violations
    assert [v.invariant for v in found] == [checks.QUARANTINE_FILES]
    assert "(it leads to /etc/shadow)" in found[0].detail


def test_hostile_disks_are_generated_and_can_be_excluded():
    ops = generated_events()
    assert {s.arg for s in ops if s.op == "hostile_disk"} == set(HOSTILE_DISKS)
    assert any(s.op == "share_volume" for s in ops)
    assert none_generated("disk:hostile", ("hostile_disk",))
    assert none_generated("cinder:shared-volume", ("share_volume",))


# --- forged and future-dated reports -----------------------------------------------------------


def fleet(forgery: str) -> History:
    """A deleted guest only logged, so every report of the host shows it; a forged report
    beside the host's own claims the host holds nothing."""
    return history(
        Setup(interval=60.0),
        Event(1.0, "boot_here", "s1"),
        Event(2.0, "boot_here", "s2"),
        Event(3.0, "local_delete", "s2"),
        *cycles(1, 2),
        Event(121.0, "fleet", "", forgery),
        *cycles(3, 3),
    )


@pytest.mark.parametrize("forgery", FORGERIES)
def test_a_forged_report_never_hides_the_hosts_orphans(forgery):
    result = trial.replay(fleet(forgery))
    assert result.violations == []
    assert result.counters.fleet_merges == result.counters.forged_flagged == 1


@pytest.mark.parametrize("forgery", FORGERIES)
def test_a_merge_that_trusts_every_report_breaks_the_fleet_invariant(forgery, monkeypatch):
    real = merge._standing

    def trusting(seen, bad, known, now, max_age, skew):  # type: ignore[no-untyped-def]
        if seen is None:
            return real(seen, bad, known, now, max_age, skew)
        return records.Standing.TRUSTED, []

    monkeypatch.setattr(merge, "_standing", trusting)
    found = trial.replay(fleet(forgery)).violations
    # NOTE: a trusted report of a host Nova does not know running the host's servers also
    # makes them split-brain (invariant 17).
    assert [v.invariant for v in found if v.invariant != SPLIT_BRAIN] == [checks.FLEET], found


def test_forged_reports_are_generated_and_can_be_excluded():
    assert {s.arg for s in generated_events() if s.op == "fleet"} == set(FORGERIES)
    assert none_generated("operator:fleet-forged", ("fleet",))


# --- Nova's API clock off its database's --------------------------------------------------------

#: Nova's API node runs 30 minutes ahead; a server here is deleted between incremental looks.
API_AHEAD = history(
    Setup(interval=60.0, api_clock_offset=1800.0, actions=(("deleted", "stop"),)),
    Event(1.0, "boot_here", "s1"),
    Event(2.0, "boot_here", "s2"),
    Event(3.0, "boot_here", "s3"),
    *cycles(1, 2),
    Event(150.0, "local_delete", "s2"),
    *cycles(3, 6),
)


def test_nova_api_clock_ahead_of_its_database_keeps_every_invariant():
    result = trial.replay(API_AHEAD)
    assert result.violations == []
    assert result.counters.api_clock_skewed == 1 and result.counters.stops == 1


def test_a_delete_between_cycles_is_seen_even_with_changes_dated_by_the_api_clock_alone(
    monkeypatch,
):
    # NOTE: the tracker before issue 17 dated changes-since from Nova's Date, never checked
    # against the reports its database holds; with a cloud-wide change listing that hid
    # the delete (a classification violation). A steady cycle now finds what left the host
    # from the host's own listing, whatever the date: the delete is seen all the same.
    monkeypatch.setattr(nova_tracker, "_clocks_disagree", lambda date, reported: None)
    monkeypatch.setattr(nova_tracker, "min", lambda date, reported: date, raising=False)
    assert checks.CLASSIFICATION not in invariants(trial.replay(API_AHEAD))


def test_nova_api_clock_skew_is_generated_and_can_be_excluded():
    offsets = {Generator(11, i, 25).setup.api_clock_offset for i in range(200)}
    assert {o > 300 for o in offsets} == {True, False} and any(o < -300 for o in offsets)
    skew = frozenset({"nova:api-clock-skew"})
    assert {Generator(11, i, 25, skew).setup.api_clock_offset for i in range(200)} == {0.0}


# --- a second agent with a state directory of its own -----------------------------------------

SECOND = history(
    Setup(interval=60.0, actions=(("deleted", "stop"),)),
    Event(1.0, "boot_here", "s1"),
    Cycle(60.0),
    Event(61.0, "second_agent"),
    Cycle(120.0),
)


def test_a_live_lock_per_state_directory_breaks_the_one_agent_invariant(monkeypatch):
    assert trial.replay(SECOND).violations == []
    real = LiveLock.take.__func__  # type: ignore[attr-defined]

    def per_state_directory(cls, path, journal):  # type: ignore[no-untyped-def]
        return real(cls, f"{journal}.live.lock", journal)

    monkeypatch.setattr(LiveLock, "take", classmethod(per_state_directory))
    found = trial.replay(SECOND).violations
    assert [v.invariant for v in found] == [checks.LOCK]
    assert "another state directory took the live lock" in found[0].detail


def test_second_agents_are_generated():
    assert any(s.op == "second_agent" for s in generated_events())


def test_every_new_fault_has_a_without_name():
    for name in ("operator:wrong-cloud", "operator:fleet-forged", "operator:no-compute-id",
                 "nova:api-clock-skew", "disk:hostile", "cinder:shared-volume"):  # fmt: skip
        assert name in FAULT_NAMES
