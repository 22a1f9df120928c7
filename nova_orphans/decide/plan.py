"""Decide, for each finding of a cycle, whether a destructive step is due. Pure.

Deciders never act (the actuator does); they only say what is due and why, or
why not yet. Every guard that can say "not now" is here, in one place, in the
order an operator would check them.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterable, Mapping

from nova_orphans.classify.danger import worst
from nova_orphans.classify.identity import Verdict
from nova_orphans.decide.holds import Hold, held_why
from nova_orphans.decide.policy import Action, Policy, Step
from nova_orphans.decide.sightings import Sighting
from nova_orphans.model import ACTIONABLE_KINDS, DangerKind, Finding, Kind, managed_here


@dataclasses.dataclass(frozen=True)
class Decision:
    """What to do about one finding this cycle. ``step`` None means: only log."""

    finding: Finding
    action: Action
    step: Step | None
    why: str
    #: A stop that skipped the wait for a shared-volume danger (docs/design.md rule 18):
    #: the actuator re-reads Cinder before it and refuses when the danger is gone.
    at_once: bool = False


@dataclasses.dataclass(frozen=True)
class Plan:
    """All decisions of a cycle; ``brake`` says why the whole cycle only reports."""

    decisions: list[Decision]
    brake: str | None = None

    @property
    def steps(self) -> list[Decision]:
        """The decisions that carry a destructive step, in execution order."""
        return [d for d in self.decisions if d.step is not None]


def decide(
    findings: Iterable[Finding],
    sightings: Mapping[str, Sighting],
    policy: Policy,
    now: datetime.datetime,
    nova_guests: int,
    servers_here: int,
    *,
    identity: Verdict,
    holds: Mapping[str, Hold] | None = None,
) -> Plan:
    """Plan the cycle.

    ``nova_guests``: domains on the host carrying Nova metadata;
    ``servers_here``: live servers Nova places on the host;
    ``identity``: whether the libvirt read is the host's (nothing is done unless verified);
    ``holds``: guests on hold by UUID — never given a step (docs/design.md rule 12).
    """
    holds = holds or {}
    findings = list(findings)
    brake = brake_of(findings, policy, nova_guests, servers_here, identity)
    due: list[Decision] = []
    decisions: list[Decision] = []
    for finding in findings:
        hold = holds.get(finding.uuid)
        decision = (
            Decision(finding, policy.action_for(finding.kind), None, held_why(hold))
            if hold
            else _decide_one(finding, sightings.get(finding.uuid), policy, now)
        )
        if decision.step is not None and brake:
            decision = dataclasses.replace(decision, step=None, why=f"brake: {brake}")
        (due if decision.step is not None else decisions).append(decision)
    due.sort(key=lambda d: (not d.at_once, _first_seen(d, sightings), d.finding.uuid))
    for rank, decision in enumerate(due):
        if rank >= policy.max_actions_per_cycle:
            decision = dataclasses.replace(
                decision,
                step=None,
                why=f"max_actions_per_cycle ({policy.max_actions_per_cycle}) reached",
            )
        decisions.append(decision)
    return Plan(decisions, brake)


def _first_seen(decision: Decision, sightings: Mapping[str, Sighting]) -> datetime.datetime:
    sighting = sightings.get(decision.finding.uuid)
    return (
        sighting.first_seen
        if sighting
        else datetime.datetime.max.replace(tzinfo=datetime.timezone.utc)
    )


def brake_of(
    findings: list[Finding],
    policy: Policy,
    nova_guests: int,
    servers_here: int,
    identity: Verdict,
) -> str | None:
    """Why the two views (libvirt, Nova) look too wrong to act in, or None.

    NOTE: docs/design.md rule 3: computed whatever the policy. A policy that acts on
    no kind has nothing for the brake to withhold, but a feature that makes a step of
    a ``log`` (``stop_shared_volume_at_once``) must meet the brake all the same; the
    agent tells a log-only deployment about it without an error every cycle.
    """
    if not identity.verified:
        return identity.reason
    lost = sum(1 for f in findings if f.kind is Kind.LOST)
    misplaced = sum(1 for f in findings if f.kind is Kind.MISPLACED)
    if misplaced and 2 * lost > servers_here:
        # NOTE: the shape of a wrong view (another host's libvirt, or another host's
        # name): this host's servers are missing while the guests present belong
        # elsewhere. Whatever the counts, even one of each (docs/design.md rule 10).
        return (
            f"{lost} of the {servers_here} servers Nova places on this host are missing "
            f"from libvirt while {misplaced} guests here belong to other hosts: this "
            "looks like another host's libvirt"
        )
    if nova_guests and not servers_here:
        return (
            f"Nova reports no servers on this host while libvirt holds {nova_guests} "
            "guests with Nova metadata"
        )
    if nova_guests and not _placed_here(findings, nova_guests, identity.host):
        # NOTE: docs/design.md rule 3: the two views share nothing. Whatever the kinds
        # (unknown, deleted, misplaced) and however few, not one guest is a server this
        # Nova places here while this Nova places servers here: another cloud's or
        # another region's Nova with the same host name looks exactly so.
        return (
            f"libvirt holds {nova_guests} guests with Nova metadata and Nova places "
            f"{servers_here} servers on this host, but not one guest is one of them: "
            "the two views share nothing"
        )
    orphans = sum(1 for f in findings if f.kind in ACTIONABLE_KINDS)
    if nova_guests and orphans >= policy.brake_min_orphans:
        fraction = orphans / nova_guests
        if fraction > policy.max_orphan_fraction:
            return (
                f"{orphans} of {nova_guests} Nova guests look orphaned "
                f"({fraction:.0%} > max_orphan_fraction {policy.max_orphan_fraction:.0%})"
            )
    return None


def _placed_here(findings: list[Finding], nova_guests: int, host: str) -> int:
    """How many of the ``nova_guests`` are servers Nova places on ``host``.

    A Nova guest with no finding is managed here (classify says nothing about it); a
    finding counts when its server is live and placed here (a deny-listed or
    protected guest of this host).
    """
    elsewhere = sum(
        1
        for f in findings
        if f.domain is not None
        and f.domain.metadata is not None
        and not (f.server is not None and managed_here(f.server, host))
    )
    return nova_guests - elsewhere


def _decide_one(
    finding: Finding, sighting: Sighting | None, policy: Policy, now: datetime.datetime
) -> Decision:
    action = policy.action_for(finding.kind)

    def wait(why: str) -> Decision:
        return Decision(finding, action, None, why)

    at_once = _stop_at_once(finding, sighting, policy, action)
    if at_once is not None:
        return at_once
    if action is Action.LOG:
        return wait(
            "log only"
            if finding.kind in ACTIONABLE_KINDS
            else f"{finding.kind.value}: never acted on"
        )
    domain = finding.domain
    if domain is None or sighting is None:
        return wait("no domain to act on")
    if not domain.persistent:
        # NOTE: stopping a transient domain destroys it: nothing would be left to restore.
        return wait("transient domain: never stopped or reaped")
    if not policy.allow.empty and not policy.allow.covers(domain):
        return wait("not in the allow list")
    start = _grace_start(finding, sighting)
    left = policy.grace_period - (now - start).total_seconds()
    if left > 0:
        return wait(f"inside grace_period ({left:.0f}s left)")
    if sighting.consecutive < policy.sightings_required:
        return wait(f"seen {sighting.consecutive} of {policy.sightings_required} cycles")
    # NOTE: docs/design.md rule 15: the whole grace also needs its cycles, counted from
    # the first sighting. The part of a deleted server's grace that ran before this agent
    # saw it is measured between Nova's clock and ours, and a step of ours would shorten
    # it; waiting the grace again in cycles costs time, never a guest.
    cycles = policy.cycles_for(policy.grace_period)
    if sighting.cycles_since_first < cycles:
        return wait(
            f"inside grace_period: {sighting.cycles_since_first} of {cycles} cycles "
            "since first seen (the wall clock alone does not end it)"
        )
    if domain.job_active:
        return wait("a libvirt job is running on the domain")
    if domain.is_active:
        return Decision(finding, action, Step.STOP, f"{action.value}: stop first")
    if action is Action.STOP:
        return wait("stopped; stays defined (action stop)")
    since = sighting.inactive_since or now
    left = policy.reap_delay - (now - since).total_seconds()
    if left > 0:
        return wait(f"stopped; reap in {left:.0f}s (reap_delay)")
    cycles = policy.cycles_for(policy.reap_delay)
    if sighting.inactive_cycles < cycles:
        return wait(
            f"stopped; reap after {cycles - sighting.inactive_cycles} more cycles "
            f"(reap_delay: {cycles} cycles seen stopped)"
        )
    return Decision(finding, action, Step.REAP, "reap: stopped for reap_delay")


def _stop_at_once(
    finding: Finding, sighting: Sighting | None, policy: Policy, action: Action
) -> Decision | None:
    """A stop without grace or sightings for a running ``deleted`` guest endangering a
    shared volume, when the operator opted in; None: decide as for any other guest.

    NOTE: docs/design.md rule 18: only this kind and this danger, only a stop, and
    every guard but the wait still holds (hold, brakes and cap are applied by the caller).
    """
    if not (
        policy.stop_shared_volume_at_once
        and finding.kind is Kind.DELETED
        and worst(finding.dangers) is DangerKind.SHARED_VOLUME
    ):
        return None
    domain = finding.domain
    if domain is None or sighting is None or not domain.is_active:
        return None
    stop = Action.STOP if action is Action.LOG else action

    def wait(why: str) -> Decision:
        return Decision(finding, stop, None, why)

    if not domain.persistent:
        return wait("transient domain: never stopped or reaped")
    if not policy.allow.empty and not policy.allow.covers(domain):
        return wait("not in the allow list")
    if domain.job_active:
        return wait("a libvirt job is running on the domain")
    return Decision(
        finding,
        stop,
        Step.STOP,
        "shared-volume: stop at once (stop_shared_volume_at_once), no grace",
        at_once=True,
    )


def _grace_start(finding: Finding, sighting: Sighting) -> datetime.datetime:
    """When the finding's grace_period starts running (on the wall clock)."""
    start = sighting.first_seen
    server = finding.server
    if finding.kind is Kind.DELETED and server and server.deleted_at:
        start = server.deleted_at
    elif finding.kind is Kind.MISPLACED and server and server.updated_at:
        # NOTE: a server Nova changed moments ago (a host flip at the end of a live
        # migration, an evacuation) may still be mid-clean-up on this host; the grace
        # runs from Nova's last change as well as from the first sighting.
        start = max(start, server.updated_at)
    return start
