"""The pure rules of docs/design.md rules 12 and 13: the decider's hold rule, who is put
on hold, and what ``restore`` may do after asking Nova. Each case is one sentence."""

from __future__ import annotations

import datetime

import pytest

from nova_orphans.classify.identity import State, Verdict
from nova_orphans.decide.holds import (
    Hold,
    LastStep,
    restore_verdict,
    started_by_someone_else,
)
from nova_orphans.decide.plan import decide
from nova_orphans.decide.policy import Action, Policy, Step
from nova_orphans.decide.sightings import Sighting
from nova_orphans.model import Domain, DomainState, Finding, Kind, NovaMetadata, Server

NOW = datetime.datetime(2026, 11, 1, 12, 0, tzinfo=datetime.timezone.utc)
HOUR = datetime.timedelta(hours=1)
U = "11111111-2222-3333-4444-555555555555"
META = NovaMetadata("http://openstack.org/xmlns/libvirt/nova/1.1")
VERIFIED = Verdict("cmp-1", State.VERIFIED, (), "identity verified")
REAP = {Kind.DELETED: Action.REAP, Kind.UNKNOWN: Action.REAP, Kind.MISPLACED: Action.REAP}
HOLD = Hold(U, NOW - HOUR, "restored from quarantine (reaped 20261101T100000Z as deleted)")


def finding(kind=Kind.UNKNOWN, state=DomainState.RUNNING):
    domain = Domain(U, "instance-1", state, persistent=True, job_active=False, metadata=META)
    return Finding(U, "instance-1", kind, "why", domain, None)


def seen(kind=Kind.UNKNOWN, inactive_since=None):
    return {U: Sighting(U, kind, NOW - 10 * HOUR, NOW, 50, inactive_since)}


# --- the decider ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("f", "sightings"),
    [
        pytest.param(finding(), seen(), id="a running guest that would be stopped"),
        pytest.param(
            finding(state=DomainState.SHUTOFF),
            seen(inactive_since=NOW - 100 * HOUR),
            id="a stopped guest that would be reaped",
        ),
        pytest.param(
            finding(Kind.MISPLACED), seen(Kind.MISPLACED), id="a duplicate that would be stopped"
        ),
    ],
)
def test_a_held_guest_gets_no_step_whatever_else_says_it_is_due(f, sightings):
    policy = Policy(actions=REAP, grace_period=0, sightings_required=1, reap_delay=0)
    free = decide([f], sightings, policy, NOW, 10, 9, identity=VERIFIED)
    assert free.decisions[0].step in (Step.STOP, Step.REAP)  # due, were it not held
    held = decide([f], sightings, policy, NOW, 10, 9, identity=VERIFIED, holds={U: HOLD})
    (decision,) = held.decisions
    assert decision.step is None and held.steps == []
    assert decision.why == (
        f"on hold: {HOLD.reason}, since {HOLD.since.isoformat()} — "
        f"release with `nova-orphans release {U}`"
    )
    assert decision.action is Action.REAP


def test_a_hold_on_another_guest_changes_nothing_for_this_one():
    other = Hold("99999999-2222-3333-4444-555555555555", NOW, "restored")
    policy = Policy(actions=REAP, grace_period=0, sightings_required=1)
    plan = decide(
        [finding()], seen(), policy, NOW, 10, 9, identity=VERIFIED, holds={other.uuid: other}
    )
    assert plan.decisions[0].step is Step.STOP


def test_a_held_guest_takes_no_place_under_max_actions_per_cycle():
    second = "22222222-2222-3333-4444-555555555555"
    domain = Domain(second, "i-2", DomainState.RUNNING, True, False, META)
    other = Finding(second, "i-2", Kind.UNKNOWN, "why", domain, None)
    sightings = {**seen(), second: Sighting(second, Kind.UNKNOWN, NOW - 2 * HOUR, NOW, 9)}
    policy = Policy(actions=REAP, grace_period=0, sightings_required=1, max_actions_per_cycle=1)
    plan = decide(
        [finding(), other], sightings, policy, NOW, 10, 9, identity=VERIFIED, holds={U: HOLD}
    )
    assert [d.finding.uuid for d in plan.steps] == [second]


# --- who is put on hold ---------------------------------------------------------------------

STOP = LastStep("stop", NOW - HOUR, intent=7)


@pytest.mark.parametrize(
    ("words", "f", "last", "release", "holds", "held"),
    [
        ("a guest running again after the agent's stop is held", finding(), STOP, None, {}, True),
        (
            "a guest still stopped after the agent's stop is not held",
            finding(state=DomainState.SHUTOFF),
            STOP,
            None,
            {},
            False,
        ),
        (
            "a paused guest counts as started",
            finding(state=DomainState.PAUSED),
            STOP,
            None,
            {},
            True,
        ),
        (
            "a guest whose last step was a reap (then restored) is not held by this rule",
            finding(),
            LastStep("reap", NOW - HOUR, 8),
            None,
            {},
            False,
        ),
        ("a guest the agent never stopped is not held", finding(), None, None, {}, False),
        (
            "a guest released after the stop is a fresh finding",
            finding(),
            STOP,
            {U: 7},
            {},
            False,
        ),
        (
            "a release before the stop does not count",
            finding(),
            STOP,
            {U: 6},
            {},
            True,
        ),
        ("a guest on hold already is not held twice", finding(), STOP, None, {U: HOLD}, False),
    ],
)
def test_started_by_someone_else(words, f, last, release, holds, held):
    found = started_by_someone_else([f], {U: last} if last else {}, release or {}, holds)
    assert (U in found) is held, words
    if held:
        assert found[U] == (
            f"started by someone else after the agent stopped it at {STOP.finished_at.isoformat()}"
        )


# --- what restore may do --------------------------------------------------------------------

ACTIVE_ELSEWHERE = Server(U, "vm", "cmp-2", "ACTIVE", "active", None)
HERE = Server(U, "vm", "cmp-1", "ACTIVE", "active", None)
SOFT_DELETED = Server(U, "vm", "cmp-2", "SOFT_DELETED", "soft-delete", None)
SHELVED = Server(U, "vm", None, "SHELVED_OFFLOADED", "shelved_offloaded", None)
DELETED = Server(U, "vm", "cmp-1", "DELETED", "deleted", None, deleted=True)


def test_a_define_that_brings_back_a_managed_save_is_refused_like_a_start():
    """Restoring a managed-save image runs the guest paused: a second copy (rule 13)."""
    verdict = restore_verdict(
        U, ACTIVE_ELSEWHERE, None, start=False, force=False, reaped="T", saved_state=True
    )
    assert verdict.refusal and "managed-save" in verdict.refusal and "--force" in verdict.refusal
    forced = restore_verdict(
        U, ACTIVE_ELSEWHERE, None, start=False, force=True, reaped="T", saved_state=True
    )
    assert forced.refusal is None and forced.warning
    gone = restore_verdict(U, DELETED, None, start=False, force=False, reaped="T", saved_state=True)
    assert gone.refusal is None


@pytest.mark.parametrize(
    ("words", "server", "error", "start", "force", "refused", "warned"),
    [
        ("start of a server Nova runs elsewhere", ACTIVE_ELSEWHERE, None, True, False, True, False),
        ("start of a server Nova runs on this very host", HERE, None, True, False, True, False),
        ("start of a SOFT_DELETED server Nova may restore", SOFT_DELETED, None, True, False, True, False),  # noqa: E501
        ("start of a shelved server Nova may unshelve", SHELVED, None, True, False, True, False),
        ("define of a server Nova runs elsewhere warns", ACTIVE_ELSEWHERE, None, False, False, False, True),  # noqa: E501
        ("start of a server Nova has only as deleted", DELETED, None, True, False, False, False),
        ("start of a server Nova never heard of", None, None, True, False, False, False),
        ("start when Nova cannot be asked", None, "HTTP 500", True, False, True, False),
        ("define when Nova cannot be asked", None, "HTTP 401", False, False, True, False),
        ("forced start of a server Nova runs", ACTIVE_ELSEWHERE, None, True, True, False, True),
        ("forced start when Nova cannot be asked", None, "timeout", True, True, False, True),
    ],
)  # fmt: skip
def test_restore_verdict(words, server, error, start, force, refused, warned):
    verdict = restore_verdict(U, server, error, start=start, force=force, reaped="T as misplaced")
    assert (verdict.refusal is not None) is refused, words
    assert (verdict.warning is not None) is warned, words
    assert verdict.hold_reason.startswith("restored from quarantine"), words
    assert ("forced" in verdict.hold_reason) is force, words
    if server is not None and server.host and not server.deleted:
        assert f"on host {server.host}" in (verdict.refusal or verdict.warning or "")
