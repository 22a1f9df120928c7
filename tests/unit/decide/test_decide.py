"""Table-driven tests of the pure decider: each case is one sentence."""

from __future__ import annotations

import dataclasses
import datetime

import pytest

from nova_orphans.classify.identity import State, Verdict
from nova_orphans.decide.plan import decide
from nova_orphans.decide.policy import Action, Policy, Step
from nova_orphans.decide.sightings import Sighting
from nova_orphans.model import Domain, DomainState, Finding, Kind, NovaMetadata, Selector

NOW = datetime.datetime(2026, 11, 1, 12, 0, tzinfo=datetime.timezone.utc)
HOUR = datetime.timedelta(hours=1)
U = "11111111-2222-3333-4444-555555555555"
META = NovaMetadata("http://openstack.org/xmlns/libvirt/nova/1.1")


def finding(kind=Kind.UNKNOWN, **domain_fields):
    fields = dict(
        name="instance-00000001",
        state=DomainState.RUNNING,
        persistent=True,
        job_active=False,
        metadata=META,
    )
    fields.update(domain_fields)
    return Finding(U, fields["name"], kind, "why", Domain(uuid=U, **fields), None)


#: Policy's default interval: an agent cycling every 10 minutes.
CYCLE = datetime.timedelta(seconds=Policy().interval)


def seen(kind=Kind.UNKNOWN, first=NOW - 2 * HOUR, count=None, inactive_since=None, stopped=None):
    """A sighting; by default with the cycles an agent running every CYCLE has counted."""
    if count is None:
        count = 1 + (NOW - first) // CYCLE
    if stopped is None:
        stopped = (NOW - inactive_since) // CYCLE if inactive_since else 0
    return {U: Sighting(U, kind, first, NOW, count, inactive_since, stopped)}


#: The host's identity, proven (the identity verdicts have their own tests).
VERIFIED = Verdict("cmp-1", State.VERIFIED, (), "identity verified")

REAP = {Kind.DELETED: Action.REAP, Kind.UNKNOWN: Action.REAP, Kind.MISPLACED: Action.REAP}

CASES = [
    (
        "an unknown guest seen long enough is stopped first",
        finding(),
        seen(),
        Policy(actions=REAP),
        Step.STOP,
        "stop first",
    ),
    (
        "a stopped guest is reaped once reap_delay has passed",
        finding(state=DomainState.SHUTOFF),
        seen(inactive_since=NOW - 2 * HOUR),
        Policy(actions=REAP, reap_delay=3600),
        Step.REAP,
        "reap",
    ),
    (
        "a stopped guest is not reaped before reap_delay",
        finding(state=DomainState.SHUTOFF),
        seen(inactive_since=NOW - HOUR / 2),
        Policy(actions=REAP, reap_delay=3600),
        None,
        "reap in",
    ),
    (
        "with action stop a stopped guest stays defined",
        finding(state=DomainState.SHUTOFF),
        seen(inactive_since=NOW - 100 * HOUR),
        Policy(actions={Kind.UNKNOWN: Action.STOP}),
        None,
        "stays defined",
    ),
    ("the default policy only logs", finding(), seen(), Policy(), None, "log only"),
    (
        "a foreign guest is never acted on even if configured",
        finding(Kind.FOREIGN),
        seen(Kind.FOREIGN),
        Policy(actions={Kind.FOREIGN: Action.REAP}),
        None,
        "never acted on",
    ),
    (
        "a protected guest is never acted on even if configured",
        finding(Kind.PROTECTED),
        seen(Kind.PROTECTED),
        Policy(actions={Kind.PROTECTED: Action.REAP}),
        None,
        "never acted on",
    ),
    (
        "a guest inside grace is only logged",
        finding(),
        seen(first=NOW - HOUR / 2),
        Policy(actions=REAP, grace_period=3600),
        None,
        "grace",
    ),
    (
        "too few sightings means waiting",
        finding(),
        seen(count=2),
        Policy(actions=REAP, sightings_required=3),
        None,
        "seen 2 of 3",
    ),
    (
        "a wall-clock step forward does not end the grace: it needs the cycles too",
        finding(),
        seen(first=NOW - 25 * HOUR, count=2),
        Policy(actions=REAP, grace_period=3600, sightings_required=1),
        None,
        "inside grace_period: 1 of 6 cycles",
    ),
    (
        "a wall-clock step forward does not end reap_delay: it needs the cycles too",
        finding(state=DomainState.SHUTOFF),
        seen(inactive_since=NOW - 25 * HOUR, stopped=1),
        Policy(actions=REAP, reap_delay=3600),
        None,
        "reap after 5 more cycles",
    ),
    (
        "a stopped guest is reaped once reap_delay and its cycles have passed",
        finding(state=DomainState.SHUTOFF),
        seen(inactive_since=NOW - 25 * HOUR, stopped=6),
        Policy(actions=REAP, reap_delay=3600),
        Step.REAP,
        "reap",
    ),
    (
        "a domain with a running libvirt job is left alone",
        finding(job_active=True),
        seen(),
        Policy(actions=REAP),
        None,
        "job",
    ),
    (
        "a transient domain is never stopped (nothing would be left to restore)",
        finding(persistent=False),
        seen(),
        Policy(actions=REAP),
        None,
        "transient",
    ),
    (
        "a guest outside a non-empty allow list is left alone",
        finding(),
        seen(),
        Policy(actions=REAP, allow=Selector(name_patterns=("test-*",))),
        None,
        "allow list",
    ),
    (
        "a guest in the allow list is acted on",
        finding(),
        seen(),
        Policy(actions=REAP, allow=Selector(uuids=frozenset({U}))),
        Step.STOP,
        "stop first",
    ),
    (
        "a finding without a sighting is never acted on",
        finding(),
        {},
        Policy(actions=REAP),
        None,
        "no domain",
    ),
]


@pytest.mark.parametrize(
    ("f", "sightings", "policy", "step", "words"), [pytest.param(*c[1:], id=c[0]) for c in CASES]
)
def test_decide(f, sightings, policy, step, words):
    plan = decide([f], sightings, policy, NOW, nova_guests=10, servers_here=9, identity=VERIFIED)
    (decision,) = plan.decisions
    assert decision.step is step
    assert words in decision.why


def test_a_guest_deleted_long_ago_waits_a_whole_grace_of_cycles_from_its_first_sighting():
    """docs/design.md rules 4 and 15: deleted 10 h ago, first seen a minute ago. The
    wall-clock grace (from Nova's deletion) has passed; the grace's cycles, counted from
    the first sighting, have not; once they have, the guest is stopped."""
    from nova_orphans.model import Server

    server = Server(U, "vm", "cmp-1", "DELETED", "deleted", None, True, NOW - 10 * HOUR)
    f = Finding(U, "vm", Kind.DELETED, "why", finding().domain, server)
    policy = Policy(actions=REAP, grace_period=3600, sightings_required=1)
    just_seen = decide([f], seen(Kind.DELETED, first=NOW - HOUR / 60), policy, NOW, 10, 9,
                       identity=VERIFIED)  # fmt: skip
    assert just_seen.decisions[0].step is None
    assert "0 of 6 cycles" in just_seen.decisions[0].why
    an_hour_on = decide([f], seen(Kind.DELETED, first=NOW - HOUR), policy, NOW, 10, 9,
                        identity=VERIFIED)  # fmt: skip
    assert an_hour_on.decisions[0].step is Step.STOP


def test_misplaced_grace_also_runs_from_novas_last_change_of_the_server():
    from nova_orphans.model import Server

    server = Server(U, "vm", "cmp-2", "ACTIVE", "active", None, updated_at=NOW - HOUR / 60)
    f = Finding(U, "vm", Kind.MISPLACED, "why", finding().domain, server)
    policy = Policy(actions=REAP, grace_period=600, sightings_required=1)
    plan = decide(
        [f], seen(Kind.MISPLACED, first=NOW - 10 * HOUR), policy, NOW, 10, 9, identity=VERIFIED
    )
    assert plan.decisions[0].step is None
    assert "grace" in plan.decisions[0].why
    old = Server(U, "vm", "cmp-2", "ACTIVE", "active", None, updated_at=NOW - HOUR)
    f = Finding(U, "vm", Kind.MISPLACED, "why", finding().domain, old)
    plan = decide(
        [f], seen(Kind.MISPLACED, first=NOW - 10 * HOUR), policy, NOW, 10, 9, identity=VERIFIED
    )
    assert plan.decisions[0].step is Step.STOP


def deleted_at(when):
    from nova_orphans.model import Server

    server = Server(U, "vm", "cmp-1", "DELETED", "deleted", None, True, when)
    return Finding(U, "vm", Kind.DELETED, "why", finding().domain, server)


@pytest.mark.parametrize(("count", "step"), [(3, None), (18, None), (19, Step.STOP)])
def test_the_whole_grace_needs_its_cycles_even_for_a_guest_deleted_before_its_first_sighting(
    count, step
):
    # docs/design.md rule 15. Deleted 5 h ago, grace 3 h, first seen 4 h ago: the wall clock
    # says the grace has passed, but the part of it before the first sighting is measured
    # between Nova's clock and ours, and a step forward of ours would shorten it; so the
    # whole grace, 18 cycles of 10 minutes, is counted from the first sighting.
    policy = Policy(actions=REAP, grace_period=3 * 3600, sightings_required=1)
    sightings = seen(Kind.DELETED, first=NOW - 4 * HOUR, count=count)
    plan = decide([deleted_at(NOW - 5 * HOUR)], sightings, policy, NOW, 10, 9, identity=VERIFIED)
    assert plan.decisions[0].step is step
    if step is None:
        assert f"{count - 1} of 18 cycles" in plan.decisions[0].why


def lost(uuid: str) -> Finding:
    from nova_orphans.model import Server

    server = Server(uuid, "vm", "cmp-1", "ACTIVE", "active", None)
    return Finding(uuid, "vm", Kind.LOST, "no such domain", None, server)


def misplaced() -> Finding:
    from nova_orphans.model import Server

    server = Server(U, "vm", "cmp-2", "ACTIVE", "active", None, updated_at=NOW - 10 * HOUR)
    return Finding(U, "vm", Kind.MISPLACED, "Nova runs it on cmp-2", finding().domain, server)


LOST_1, LOST_2 = "aaaaaaaa-0000-4000-8000-000000000001", "aaaaaaaa-0000-4000-8000-000000000002"
ACT_NOW = Policy(actions=REAP, grace_period=0, sightings_required=1)

#: (sentence, findings, Nova guests in libvirt, servers Nova places here, brakes?, why).
#: NOTE: the Nova guests count each managed guest too (a present server is a guest with
#: no finding): the two-view brake (docs/design.md rule 3) reads them.
BRAKE_CASES = [
    (
        "one lost and one misplaced on a one-server host: the view is another host's; brake",
        [lost(LOST_1), misplaced()],
        1,
        1,
        True,
        "another host's libvirt",
    ),
    (
        "two of three servers lost while a guest looks misplaced: brake",
        [lost(LOST_1), lost(LOST_2), misplaced()],
        2,
        3,
        True,
        "another host's libvirt",
    ),
    (
        "a misplaced guest on a host whose servers are all present is acted on",
        [misplaced()],
        4,
        3,
        False,
        "",
    ),
    (
        "one lost server of three beside a misplaced guest is not most of them: acted on",
        [lost(LOST_1), misplaced()],
        3,
        3,
        False,
        "",
    ),
    (
        "this host's one guest unknown while Nova's servers here are lost (a wrong cloud): brake",
        [finding(), lost(LOST_1)],
        1,
        1,
        True,
        "share nothing",
    ),
    (
        "the one guest unknown, Nova's three servers here all lost: brake whatever the counts",
        [finding(), lost(LOST_1), lost(LOST_2)],
        1,
        3,
        True,
        "share nothing",
    ),
    (
        "every guest deleted while Nova places servers here libvirt lacks: brake",
        [finding(Kind.DELETED), lost(LOST_1)],
        1,
        1,
        True,
        "share nothing",
    ),
    (
        "an unknown guest beside one server Nova places here: the views share one; acted on",
        [finding()],
        2,
        1,
        False,
        "",
    ),
]


@pytest.mark.parametrize(
    ("findings", "nova_guests", "servers_here", "brakes", "words"),
    [pytest.param(*c[1:], id=c[0]) for c in BRAKE_CASES],
)
def test_structural_brakes(findings, nova_guests, servers_here, brakes, words):
    """docs/design.md rule 3: the structural brakes, whatever the kinds and counts."""
    policy = dataclasses.replace(ACT_NOW, brake_min_orphans=100)
    sightings = seen(next(f.kind for f in findings if f.domain is not None))
    plan = decide(findings, sightings, policy, NOW, nova_guests, servers_here, identity=VERIFIED)
    assert bool(plan.brake) is brakes, plan.brake
    assert bool(plan.steps) is not brakes
    assert words in (plan.brake or "")


def test_a_deny_listed_server_of_this_host_is_shared_by_both_views():
    """A guest the operator deny-listed is a finding (protected), yet Nova places it here:
    one orphan beside it is not a view that shares nothing (docs/design.md rule 3)."""
    from nova_orphans.model import Server

    denied = "dddddddd-0000-4000-8000-00000000000d"
    server = Server(denied, "db", "cmp-1", "ACTIVE", "active", None)
    protected = Finding(denied, "db", Kind.PROTECTED, "deny-listed", finding().domain, server)
    plan = decide([finding(), protected], seen(), ACT_NOW, NOW, 2, 1, identity=VERIFIED)
    assert plan.brake is None
    assert [d.finding.uuid for d in plan.steps] == [U]


@pytest.mark.parametrize(
    "state",
    [State.UNPROVEN, State.MISMATCH],
    ids=["an unproven identity acts on nothing", "a mismatched identity acts on nothing"],
)
def test_identity_not_verified_blocks_every_step(state):
    verdict = Verdict("cmp-1", state, (), f"identity {state.value}: why")
    plan = decide([finding()], seen(), ACT_NOW, NOW, 10, 9, identity=verdict)
    assert plan.steps == []
    assert plan.brake == f"identity {state.value}: why"
    assert plan.decisions[0].why == f"brake: identity {state.value}: why"


def test_the_brakes_hold_whatever_the_policy():
    """docs/design.md rule 3: no early return for a log-only policy. It acts on nothing
    either way, but a feature that makes a step of a `log` (rule 18) meets the brake."""
    findings = [lost(LOST_1), misplaced()]
    acting = decide(findings, seen(Kind.MISPLACED), ACT_NOW, NOW, 1, 1, identity=VERIFIED)
    log_only = dataclasses.replace(ACT_NOW, actions={})
    plan = decide(findings, seen(Kind.MISPLACED), log_only, NOW, 1, 1, identity=VERIFIED)
    assert acting.brake and acting.steps == []
    assert plan.brake == acting.brake
    assert plan.steps == []
    assert [d.why for d in plan.decisions if d.finding.kind is Kind.MISPLACED] == ["log only"]
