"""The agent: one cycle is observe -> classify -> decide -> act -> record; ``run`` repeats it.

A cycle that cannot observe Nova or libvirt acts on nothing and reports why;
the loop carries on with the next cycle.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import datetime
import logging
import random
import time
from collections.abc import Callable, Iterator
from typing import Protocol

from nova_orphans import audit
from nova_orphans.act.actuator import Actuator, Outcome
from nova_orphans.act.effects import Effects
from nova_orphans.act.quarantine import retention
from nova_orphans.act.reconcile import reconcile
from nova_orphans.classify import leftover
from nova_orphans.classify.identity import Verdict
from nova_orphans.classify.nova_delta import FULL_LOOK_EVERY
from nova_orphans.config.nova_compute import DEFAULT_INSTANCES_PATH
from nova_orphans.decide import gate
from nova_orphans.decide.holds import Hold, started_by_someone_else
from nova_orphans.decide.plan import Plan, decide
from nova_orphans.decide.policy import STOP_TIMEOUT, Policy, Step
from nova_orphans.decide.sightings import next_sightings
from nova_orphans.fresh_look import FreshLook
from nova_orphans.model import DangerKind, Domain, Finding, Selector
from nova_orphans.observe.errors import HypervisorError, IdentityMismatch, ObserveError
from nova_orphans.observe.libvirt_view import LibvirtView
from nova_orphans.observe.nova.observer import NovaObserver
from nova_orphans.observe.nova.tracker import NovaTracker
from nova_orphans.record.journal import Journal, QuarantineBusy
from nova_orphans.record.lock import LiveLock
from nova_orphans.record.metrics import Metrics

LOG = logging.getLogger(__name__)
#: Seconds a cycle's retention purge waits for an operator's restore to finish.
QUARANTINE_WAIT = 5.0


class HostHypervisor(audit.Hypervisor, Protocol):
    """A hypervisor observer that can also re-read one domain."""

    def look_up(self, uuid: str) -> Domain | None:
        """A fresh read of one domain; None when it does not exist."""


@dataclasses.dataclass(frozen=True)
class CycleResult:
    """What one cycle saw, planned and did, or why it could not."""

    report: audit.HostAudit | None = None
    plan: Plan | None = None
    outcomes: tuple[Outcome, ...] = ()
    error: str | None = None

    @property
    def exit_code(self) -> int:
        """What ``run --once`` exits with (``audit.exit_code``): 4 when it acted."""
        acted = any(o.outcome == "done" and not o.dry_run for o in self.outcomes)
        return audit.exit_code(self.report, acted=acted, failed=bool(self.error))


@dataclasses.dataclass
class Agent:
    """Everything a cycle needs, wired once at start-up."""

    host: str
    open_hypervisor: Callable[[], contextlib.AbstractContextManager[HostHypervisor]]
    nova: NovaObserver
    effects: Effects
    journal: Journal
    policy: Policy
    quarantine_root: str
    #: This host's live lock, held by a live agent for as long as it runs (docs/design.md
    #: rule 14); None for a dry run, which never takes it. ``live_lock.held`` says
    #: whether this process holds it now.
    live_lock: LiveLock | None = None
    instances_path: str = DEFAULT_INSTANCES_PATH
    #: ``[leftovers] host_instances_path``: ``instances_path`` as the host names it.
    host_instances_path: str | None = None
    #: Where nova-compute's compute_id may be (``conf.compute_id_dirs``).
    compute_id_dirs: tuple[str, ...] = ()
    #: Nova's node UUID of this host as the operator pinned it (``compute_node_uuid``).
    pinned_node: str | None = None
    #: How long a quarantine entry is kept before the agent purges it; 0 keeps it forever.
    retention: datetime.timedelta = datetime.timedelta(0)
    deny: Selector = dataclasses.field(default_factory=Selector)
    #: Placement, Cinder and Neutron: what orphans cost and endanger (None: not asked).
    services: audit.Services | None = None
    dry_run: bool = False
    #: For a dry run: the live agent's journal, whose holds the dry run honours too
    #: (read-only; the dry run keeps its own journal, docs/design.md rules 12 and 14).
    live_journal_path: str | None = None
    stop_timeout: float = STOP_TIMEOUT
    metrics: Metrics = dataclasses.field(default_factory=Metrics)
    clock: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.timezone.utc)
    #: The view of libvirt that ``open_hypervisor`` keeps between cycles, closed with the agent.
    libvirt_view: LibvirtView | None = None
    #: One cycle in this many looks at every server of the host; the others ask Nova
    #: only what changed since the last view (``observe/nova/tracker.py``).
    full_look_every: int = FULL_LOOK_EVERY

    def __post_init__(self) -> None:
        self.nova_views = NovaTracker(self.nova, self.full_look_every)
        self._last_brake: str | None = None
        self._leftovers: leftover.Leftovers | None = None

    @property
    def holds_live_locks(self) -> bool:
        """Whether this process holds what acting needs (docs/design.md rule 14): its
        journal's lock and, unless it is a dry run, this host's live lock."""
        if not self.journal.holds_lock:
            return False
        return self.dry_run or (self.live_lock is not None and self.live_lock.held)

    def close(self) -> None:
        """Close the effects and the journal, and give this host's live lock up."""
        try:
            self.effects.close()
            self.journal.close()
            if self.libvirt_view is not None:
                self.libvirt_view.close()
        finally:
            if self.live_lock is not None:
                self.live_lock.release()

    def cycle(self, should_stop: Callable[[], bool] = lambda: False) -> CycleResult:
        """Run one cycle; never raises for an observation failure."""
        started = time.monotonic()
        try:
            with self.open_hypervisor() as hypervisor:
                result = self._cycle(hypervisor, should_stop)
        except IdentityMismatch as exc:
            self.metrics.identity_verified.set(0)
            self.metrics.cycles_aborted.labels(reason="identity").inc()
            LOG.error("IDENTITY: cycle aborted, nothing was done: %s", exc)
            result = CycleResult(error=str(exc))
        except ObserveError as exc:
            reason = "libvirt" if isinstance(exc, HypervisorError) else "nova"
            self.metrics.cycles_aborted.labels(reason=reason).inc()
            LOG.error("cycle aborted, nothing was done: %s", exc)
            result = CycleResult(error=str(exc))
        if result.error:
            self.nova_views.invalidate("the last cycle failed")
        self.metrics.last_cycle_success.set(0 if result.error else 1)
        self.metrics.cycle_duration.observe(time.monotonic() - started)
        return result

    def _tell_leftovers(
        self, report: audit.HostAudit, holds: dict[str, Hold], brake: str | None
    ) -> audit.HostAudit:
        """The report with its leftovers told (docs/design.md rule 22), their sightings kept.

        NOTE: the holds, quarantine entries and sightings that count are the live agent's
        (a dry run reads them beside its own) and this agent's own; a look not proven to be
        this host's counts no sighting, as for the guests.
        """
        if report.leftovers is not None and not report.leftovers.carried:
            self._leftovers = report.leftovers
        live = audit.read_journal(self.live_journal_path)
        own = audit.state_of(self.journal)
        state = audit.JournalState(
            holds, (*live.quarantine, *own.quarantine), own.leftover_sightings
        )
        report, sightings = audit.tell(
            report,
            state,
            self.policy,
            brake=brake,
            deny=self.deny,
            host_instances_path=self.host_instances_path,
            instances_path=self.instances_path,
        )
        if report.identity.verified and report.leftovers is not None:
            self.journal.replace_leftover_sightings(sightings)
        return report

    def _count_looks(self) -> None:
        """Count this cycle's looks at Nova and libvirt, full or from changes.

        NOTE: one full look in ``full_look_every`` (``libvirt_full_look_every``) is the design; a
        higher rate says something keeps the agent in doubt, and its log says what.
        """
        self.metrics.looked("nova", full=self.nova_views.last_was_full)
        read = self.libvirt_view.last_read if self.libvirt_view is not None else None
        self.metrics.looked("libvirt", full=read is None or read.full)

    def _cycle(self, hypervisor: HostHypervisor, should_stop: Callable[[], bool]) -> CycleResult:
        now = self.clock()
        report = audit.audit(
            hypervisor,
            self.nova,
            self.host,
            now,
            self.deny,
            self.compute_id_dirs,
            observe_nova=self.nova_views.look,
            services=self.services,
            pinned_node=self.pinned_node,
            instances_path=self.instances_path,
            # NOTE: leftovers are report only and their listings are the cloud's (Cinder's
            # attachments): a steady cycle must not pay for them (docs/design.md §8b), so
            # they are looked for with each full look at Nova and carried in between.
            leftovers_due=lambda: self.nova_views.last_was_full,
            earlier_leftovers=self._leftovers if self.services is not None else None,
        )
        self._count_looks()
        self._log_identity(report.identity)
        if self.nova_views.clock_ahead is not None:
            self.metrics.nova_clock_ahead.set(self.nova_views.clock_ahead)
        self.metrics.last_success.set(now.timestamp())
        self.metrics.set_findings(collections.Counter(f.kind for f in report.findings))
        self.metrics.set_costs(report.untracked, {k: report.dangers(k) for k in DangerKind})
        holds = self._holds(report.findings, now)
        # NOTE: a held guest is not counted: once released it must be seen afresh.
        counted = [f for f in report.findings if f.uuid not in holds]
        sightings = next_sightings(self.journal.sightings(), counted, now, self.policy.interval)
        if report.identity.verified:
            # NOTE: a view not proven to be this host's must not count towards
            # sightings_required: the cycle after the proof would act on it at once.
            self.journal.replace_sightings(sightings)
        plan = decide(
            report.findings,
            sightings,
            self.policy,
            now,
            report.nova_guests,
            report.servers_here,
            identity=report.identity,
            holds=holds,
        )
        # NOTE: docs/design.md rule 19: the one safety verdict of the cycle; the
        # actuator refuses every step (stop, reap, purge) unless it is clear.
        verdict = gate.judge(
            identity=report.identity, brake=plan.brake, holds_lock=self.holds_live_locks
        )
        report = self._tell_leftovers(report, holds, plan.brake)
        self.metrics.set_leftovers(report.leftovers)
        self._log_plan(plan)
        actuator = Actuator(
            self.effects,
            FreshLook(hypervisor, self.nova, self.host, self.services),
            self.journal,
            self.clock,
            dry_run=self.dry_run,
            verdict=verdict,
            stop_timeout=self.stop_timeout,
            deny=self.deny,
            on_outcome=self._count_outcome,
            instances_path=self.instances_path,
        )
        outcomes = actuator.execute(plan, should_stop)
        if any(o.outcome == "skipped" for o in outcomes):
            # NOTE: the fresh look before a step saw something the cycle's view did not.
            self.nova_views.invalidate("re-verification skipped a step")
        for outcome in outcomes:
            if outcome.step is Step.STOP and outcome.outcome == "done" and not outcome.dry_run:
                self.journal.mark_stopped(outcome.uuid, self.clock())
        if verdict.clear:
            self._purge_expired(actuator, now)
        elif self.retention:
            # NOTE: the actuator would refuse each purge (rule 19); withheld here so
            # that a long brake is not one refusal line per expired entry every cycle.
            LOG.info("retention purge withheld this cycle: %s", verdict.why)
        return CycleResult(report, plan, tuple(outcomes))

    def _holds(self, findings: list[Finding], now: datetime.datetime) -> dict[str, Hold]:
        """Every guest on hold, after holding those someone started since the agent stopped them.

        NOTE: docs/design.md rule 12: a guest someone started after the agent stopped
        it is the operator's decision, not a new orphan; it stays on hold until released.
        """
        holds = {**audit.read_holds(self.live_journal_path), **self.journal.holds()}
        started = started_by_someone_else(
            findings, self.journal.last_live_steps(), self.journal.last_releases(), holds
        )
        for uuid, reason in started.items():
            holds[uuid] = self.journal.hold(uuid, reason, now)
            LOG.warning(
                "put on hold uuid=%s: %s; release with `nova-orphans release %s`",
                uuid,
                reason,
                uuid,
            )
        self.metrics.on_hold.set(len(holds))
        return holds

    def _purge_expired(self, actuator: Actuator, now: datetime.datetime) -> None:
        """Purge quarantine entries older than ``retention`` through the cycle's actuator
        (its gate; a dry run only records)."""
        if not self.retention:
            return
        try:
            retention.purge_expired(
                actuator,
                self.journal,
                self.quarantine_root,
                now,
                self.retention,
                cycles=self.policy,
                wait=QUARANTINE_WAIT,
            )
        except QuarantineBusy as exc:
            # NOTE: an operator's restore is under way; the next cycle purges.
            LOG.info("retention purge skipped this cycle: %s", exc)

    def _log_identity(self, verdict: Verdict) -> None:
        self.metrics.identity_verified.set(1 if verdict.verified else 0)
        if verdict.verified:
            LOG.info("%s", verdict.reason)
        else:
            LOG.error("IDENTITY: nothing will be done this cycle: %s", verdict.reason)

    def _log_plan(self, plan: Plan) -> None:
        self._log_brake(plan.brake)
        for d in plan.decisions:
            for danger_found in d.finding.dangers or ():
                LOG.warning(
                    "danger uuid=%s danger=%s: %s",
                    d.finding.uuid,
                    danger_found.kind.value,
                    danger_found.detail,
                )
            LOG.info(
                "finding uuid=%s kind=%s action=%s dry_run=%s next=%s why=%s reason=%s",
                d.finding.uuid,
                d.finding.kind.value,
                d.action.value,
                self.dry_run,
                d.step.value if d.step else "none",
                d.why,
                d.finding.reason,
            )

    def _log_brake(self, brake: str | None) -> None:
        """Say that a brake holds: an error each cycle for a policy that acts.

        NOTE: docs/design.md rule 3: the brake is computed whatever the policy. A
        log-only policy acts on nothing anyway: no brake state (which would alert), no
        aborted cycle, and one INFO line when the brake appears or its reason changes.
        """
        acts = self.policy.acts
        self.metrics.brake_engaged.set(1 if brake and acts else 0)
        if brake and acts:
            self.metrics.cycles_aborted.labels(reason="brake").inc()
            LOG.error("BRAKE: this cycle only reports: %s", brake)
        elif brake and brake != self._last_brake:
            LOG.info("brake (every action is log: nothing is acted on anyway): %s", brake)
        self._last_brake = brake

    def _count_outcome(self, outcome: Outcome) -> None:
        self.metrics.actions.labels(
            action=outcome.step.value, outcome=outcome.outcome, dry_run=str(outcome.dry_run).lower()
        ).inc()

    def reconcile(self) -> list[str]:
        """Close intents a crash left open, from what libvirt shows now; repeat nothing."""
        return reconcile(self.journal, self.effects, self.open_hypervisor, self.clock)


def next_wait(interval: float, jitter: float) -> float:
    """Seconds until the next cycle: ``interval`` plus up to ``jitter`` of it, at random.

    NOTE: the jitter keeps a fleet's agents from all asking Nova at once.
    """
    return interval * (1 + random.uniform(0, jitter))


@contextlib.contextmanager
def no_context(value: HostHypervisor) -> Iterator[HostHypervisor]:
    """Wrap an already open hypervisor observer for ``Agent.open_hypervisor``."""
    yield value
