"""The actuator: the only code that executes destructive steps.

Every step — a plan's stop and reap, the retention purge, the operator's restore —
goes through ``Steps.take``: the gate (the cycle's safety verdict, docs/design.md
rule 19) refuses it unless the verdict is clear; otherwise the intent is journaled,
the step performed, its outcome journaled and reported once through ``_record``.
A plan's steps are re-verified first, with a fresh Nova lookup and domain read.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import logging
from collections.abc import Callable
from typing import Protocol

from nova_orphans.act.effects import EffectError, Effects
from nova_orphans.act.quarantine import entries
from nova_orphans.act.quarantine.manifest import Manifest
from nova_orphans.classify.danger import worst
from nova_orphans.classify.guests import classify
from nova_orphans.classify.remnants import remnants
from nova_orphans.config.nova_compute import DEFAULT_INSTANCES_PATH
from nova_orphans.decide.gate import SafetyVerdict
from nova_orphans.decide.plan import Decision, Plan
from nova_orphans.decide.policy import STOP_TIMEOUT, Step
from nova_orphans.model import Danger, DangerKind, Domain, Finding, Kind, NovaView, Selector
from nova_orphans.observe.errors import ObserveError
from nova_orphans.record.entries import STAMP_FORMAT, QuarantineEntry
from nova_orphans.record.journal import Journal

LOG = logging.getLogger(__name__)

#: Kinds whose instance directory may be moved to quarantine. NOTE: a misplaced
#: guest's files may be the live copy's (shared storage, or the same path after a
#: failed migration clean-up): never touch them.
FILES_MAY_MOVE = frozenset({Kind.DELETED, Kind.UNKNOWN})


class FreshLook(Protocol):
    """A fresh, single-guest look at Nova and libvirt, for re-verification."""

    def domain(self, uuid: str) -> Domain | None:
        """The domain as libvirt has it now, or None if gone."""

    def nova(self, uuid: str) -> NovaView:
        """Nova's record and migrations of this UUID now, as a one-guest view."""

    def dangers(self, finding: Finding) -> tuple[Danger, ...]:
        """The finding's dangers now (Cinder and Neutron asked afresh)."""


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What became of one step."""

    uuid: str
    kind: Kind
    step: Step
    outcome: str  # done | skipped | failed | refused (the gate was closed)
    detail: str
    dry_run: bool


#: Steps that act on the quarantine: taken only with its lock held (a purge never
#: deletes what a restore is bringing back).
QUARANTINE_STEPS = frozenset({Step.PURGE, Step.RESTORE})


class Steps:
    """The one path every destructive step takes (docs/design.md rule 19).

    The gate (the safety verdict, given once), then the intent journaled, the step,
    its outcome journaled, one log line ``step uuid=… action=…`` and one count in
    the ``actions`` series. Stop, reap, purge and restore all come through ``take``.
    """

    def __init__(
        self,
        journal: Journal,
        clock: Callable[[], datetime.datetime],
        verdict: SafetyVerdict,
        *,
        dry_run: bool = False,
        on_outcome: Callable[[Outcome], None] | None = None,
        failure_level: int = logging.WARNING,
    ) -> None:
        self._journal = journal
        # NOTE: an operator's command prints a failed step as its one error line:
        # there the step line goes at INFO (the log file still has it).
        self._failure_level = failure_level
        self._clock = clock
        self._verdict = verdict
        self._dry_run = dry_run
        self._on_outcome = on_outcome

    def take(
        self,
        uuid: str,
        kind: Kind,
        step: Step,
        perform: Callable[[], str],
        recheck: Callable[[], str | None] = lambda: None,
    ) -> Outcome:
        """Take one step: refused when the gate is closed, skipped when ``recheck`` says
        why not (nothing journaled), else journaled around ``perform``.

        ``perform`` returns what it did and raises ``EffectError`` when it failed.
        """
        refused = self._refusal(step)
        if refused:
            return self._record(uuid, kind, step, "refused", refused)
        skipped = recheck()
        if skipped:
            return self._record(uuid, kind, step, "skipped", skipped)
        intent = self._journal.begin(uuid, kind, step.value, self._dry_run, self._clock())
        try:
            detail, outcome = perform(), "done"
        except EffectError as exc:
            detail, outcome = str(exc), "failed"
        self._journal.finish(intent, outcome, detail, self._clock())
        return self._record(uuid, kind, step, outcome, detail)

    def _refusal(self, step: Step) -> str | None:
        """Why the gate refuses ``step`` now; None when it may be taken.

        NOTE: the one place a destructive step can be refused whatever asked for it:
        no policy feature reaches a step past this check.
        """
        if not self._verdict.clear:
            return f"the gate is closed: {self._verdict.why}"
        if step in QUARANTINE_STEPS and not self._journal.holds_quarantine_lock:
            return "the gate is closed: the quarantine's lock is not held"
        return None

    def _record(self, uuid: str, kind: Kind, step: Step, outcome: str, detail: str) -> Outcome:
        result = Outcome(uuid, kind, step, outcome, detail, self._dry_run)
        LOG.log(
            self._failure_level if outcome in ("failed", "refused") else logging.INFO,
            "step uuid=%s kind=%s action=%s dry_run=%s outcome=%s detail=%s",
            result.uuid,
            result.kind.value,
            result.step.value,
            result.dry_run,
            outcome,
            detail,
        )
        if self._on_outcome:
            self._on_outcome(result)
        return result


class Actuator(Steps):
    """Executes a plan's steps, each re-verified, and the retention purge, through ``Steps``.

    ``look``: the fresh look a plan's steps are re-verified with; None for an actuator
    that only purges (``nova-orphans purge``): a plan's step is then always skipped.
    """

    def __init__(
        self,
        effects: Effects,
        look: FreshLook | None,
        journal: Journal,
        clock: Callable[[], datetime.datetime],
        dry_run: bool,
        verdict: SafetyVerdict,
        stop_timeout: float = STOP_TIMEOUT,
        deny: Selector | None = None,
        on_outcome: Callable[[Outcome], None] | None = None,
        instances_path: str = DEFAULT_INSTANCES_PATH,
        failure_level: int = logging.WARNING,
    ) -> None:
        super().__init__(
            journal,
            clock,
            verdict,
            dry_run=dry_run,
            on_outcome=on_outcome,
            failure_level=failure_level,
        )
        self._effects = effects
        self._look = look
        self._stop_timeout = stop_timeout
        self._deny = deny
        self._instances_path = instances_path

    def execute(self, plan: Plan, should_stop: Callable[[], bool] = lambda: False) -> list[Outcome]:
        """Run every step of ``plan`` in order; stop between steps when ``should_stop``."""
        outcomes = []
        for decision in plan.steps:
            if should_stop():
                break
            outcomes.append(self._execute_one(decision))
        return outcomes

    def purge(
        self, entry: QuarantineEntry, quarantine_root: str, closed: Callable[[], None]
    ) -> Outcome:
        """Delete one quarantine entry for good; ``closed`` (a live purge) tells the journal.

        NOTE: docs/design.md rule 7: never an entry not to be trusted.
        """

        def perform() -> str:
            tampered = entries.tampering(entry, quarantine_root)
            if tampered:
                raise EffectError(f"purge {entry.uuid}: {tampered}")
            detail = self._effects.purge(entry.uuid, entry.path)
            if not self._dry_run:
                closed()
            return detail

        return self.take(entry.uuid, Kind(entry.kind), Step.PURGE, perform)

    def _execute_one(self, decision: Decision) -> Outcome:
        assert decision.step is not None
        finding = decision.finding
        return self.take(
            finding.uuid,
            finding.kind,
            decision.step,
            lambda: self._perform(decision),
            recheck=lambda: self._recheck(decision),
        )

    def _recheck(self, decision: Decision) -> str | None:
        """Why the step must be skipped after all (re-verification, a hold); None: go on."""
        finding = decision.finding
        changed = self._changed_since(finding)
        if not changed and decision.at_once:
            changed = self._danger_gone(finding)
        if changed:
            self._journal.forget(finding.uuid)
            return f"re-verification: {changed}"
        # NOTE: the operator may have restored the guest since the plan was made: its
        # hold is read afresh, right before the step (docs/design.md rule 12).
        hold = self._journal.hold_of(finding.uuid)
        if hold is not None:
            return f"re-verification: {hold.describe()}"
        return None

    def _changed_since(self, finding: Finding) -> str | None:
        """Why the guest no longer matches the finding, or None when it still does."""
        if self._look is None:
            return "no fresh look to re-verify with"
        try:
            domain = self._look.domain(finding.uuid)
            view = self._look.nova(finding.uuid)
        except ObserveError as exc:
            return f"fresh look failed ({exc})"
        if domain is None:
            return "the domain is gone"
        before = finding.domain
        if before is None or (domain.state, domain.job_active) != (before.state, before.job_active):
            return "the domain's state or job changed"
        if _definition(domain) != _definition(before):
            # NOTE: the cycle's dangers were judged on the disks and interfaces it saw
            # (between full reads, the agent's kept view of libvirt): a step acts only
            # on a definition read afresh that is the one it was decided on.
            return "the domain's definition (Nova metadata, disks or interfaces) changed"
        fresh = classify([domain], view, self._deny)
        if [f.kind for f in fresh] != [finding.kind]:
            now = fresh[0].kind.value if fresh else "managed by Nova"
            return f"it is now {now}, not {finding.kind.value}"
        return None

    def _danger_gone(self, finding: Finding) -> str | None:
        """Why a stop at once no longer holds: Cinder no longer shows the shared volume.

        NOTE: docs/design.md rule 18: the wait is skipped only while Cinder says the
        volume is another server's (or available); a danger Cinder cannot confirm now
        (unknown) is no reason to skip it.
        """
        dangers = self._look.dangers(finding) if self._look else ()
        if worst(dangers) is DangerKind.SHARED_VOLUME:
            return None
        why = "; ".join(d.detail for d in dangers if d.kind is DangerKind.UNKNOWN)
        return "the shared-volume danger is gone" + (f" ({why})" if why else "")

    def _perform(self, decision: Decision) -> str:
        uuid = decision.finding.uuid
        if decision.step is Step.STOP:
            return self._effects.stop(uuid, self._stop_timeout)
        return self._reap(decision.finding)

    def _reap(self, finding: Finding) -> str:
        """Quarantine the XML and state, write the manifest, undefine, then move the files.

        NOTE: everything a restore needs (managed save, snapshots, backing chain…)
        is kept and the manifest written before the undefine, so a guest whose
        state cannot be kept is not reaped (docs/design.md rule 16) and a crash
        after the undefine leaves a self-describing quarantine. Undefine comes
        before the file move so that a failure can never leave a defined domain
        pointing at files that were moved away; the quarantine entry is journaled
        as soon as the domain is undefined, so a failed file move still leaves the
        guest restorable. Files move only for deleted/unknown.
        """
        uuid = finding.uuid
        stamp = self._clock().strftime(STAMP_FORMAT)
        directory = self._effects.quarantine_dir(uuid, stamp)
        self._effects.save_xml(directory, self._effects.domain_xml(uuid))
        leftovers = remnants(finding.domain, self._instances_path) if finding.domain else []
        name = finding.domain.name if finding.domain else ""
        saved = Manifest(uuid, finding.kind.value, stamp, name, False, tuple(leftovers))
        # NOTE: written first, so that even a reap refused below leaves no anonymous directory.
        self._effects.write_manifest(directory, saved)
        kept = self._effects.keep_state(uuid, directory)
        # NOTE: marked before the undefine: once the domain may be gone the manifest never
        # calls the directory a mere copy, even if no later write lands (docs/design.md §7).
        saved = dataclasses.replace(saved, kept=kept, undefining=True)
        self._effects.write_manifest(directory, saved)
        undefined = self._undefine(uuid, directory, saved)
        entry = QuarantineEntry(uuid, stamp, finding.kind.value, directory, False, leftovers)
        if not self._dry_run:
            self._journal.add_quarantine(entry)
        saved = dataclasses.replace(saved, undefined=True)
        self._effects.write_manifest(directory, saved)
        files_detail = "files left in place: the live copy may use them"
        if finding.kind in FILES_MAY_MOVE:
            files = self._effects.move_instance_files(uuid, directory)
            files_detail = files.detail
            if files.moved:
                saved = dataclasses.replace(saved, files_moved=True)
                if not self._dry_run:
                    self._journal.mark_files_moved(entry)
                self._effects.write_manifest(directory, saved)
        return f"{undefined}; kept {saved.holds()}; {files_detail}" + (
            f"; left for the operator: {', '.join(leftovers)}" if leftovers else ""
        )

    def _undefine(self, uuid: str, directory: str, saved: Manifest) -> str:
        """Undefine; when that fails with the domain still defined, the directory is a copy."""
        try:
            return self._effects.undefine(uuid, directory)
        except EffectError:
            # NOTE: only a fresh look that sees the domain clears the mark; in doubt
            # (libvirt unreachable, the write failing) it stays: restore refuses a defined UUID.
            with contextlib.suppress(EffectError, ObserveError):
                if self._look is not None and self._look.domain(uuid) is not None:
                    copy = dataclasses.replace(saved, undefining=False)
                    self._effects.write_manifest(directory, copy)
            raise


def _definition(domain: Domain) -> tuple[object, ...]:
    """What re-verification compares of a domain's definition: its name, Nova metadata,
    disks and interfaces."""
    return (domain.name, domain.metadata, domain.metadata_error, domain.disks, domain.interfaces)
