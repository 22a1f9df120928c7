"""The actuator: the only code that executes destructive steps.

For each step of a plan it re-verifies the guest with a fresh Nova lookup and a
fresh domain read, journals the intent, performs the step through ``Effects``,
journals the outcome, and reports it once through ``_record``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import logging
from collections.abc import Callable
from typing import Protocol

from nova_orphans.act.effects import EffectError, Effects
from nova_orphans.act.manifest import Manifest
from nova_orphans.core.classify import classify
from nova_orphans.core.danger import worst
from nova_orphans.core.decide import Decision, Plan
from nova_orphans.core.leftovers import DEFAULT_INSTANCES_PATH
from nova_orphans.core.leftovers import leftovers as core_leftovers
from nova_orphans.core.model import Danger, DangerKind, Domain, Finding, Kind, NovaView, Selector
from nova_orphans.core.policy import STOP_TIMEOUT, Step
from nova_orphans.observe.errors import ObserveError
from nova_orphans.record.journal import STAMP_FORMAT, Journal, QuarantineEntry

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
    """What became of one planned step."""

    uuid: str
    kind: Kind
    step: Step
    outcome: str  # done | skipped | failed
    detail: str
    dry_run: bool


class Actuator:
    """Executes a plan's steps, each re-verified, journaled and recorded."""

    def __init__(
        self,
        effects: Effects,
        look: FreshLook,
        journal: Journal,
        clock: Callable[[], datetime.datetime],
        dry_run: bool,
        stop_timeout: float = STOP_TIMEOUT,
        deny: Selector | None = None,
        on_outcome: Callable[[Outcome], None] | None = None,
        instances_path: str = DEFAULT_INSTANCES_PATH,
    ) -> None:
        self._effects = effects
        self._look = look
        self._journal = journal
        self._clock = clock
        self._dry_run = dry_run
        self._stop_timeout = stop_timeout
        self._deny = deny
        self._on_outcome = on_outcome
        self._instances_path = instances_path

    def execute(self, plan: Plan, should_stop: Callable[[], bool] = lambda: False) -> list[Outcome]:
        """Run every step of ``plan`` in order; stop between steps when ``should_stop``."""
        outcomes = []
        for decision in plan.steps:
            if should_stop():
                break
            outcomes.append(self._execute_one(decision))
        return outcomes

    def _execute_one(self, decision: Decision) -> Outcome:
        assert decision.step is not None
        finding = decision.finding
        changed = self._changed_since(finding)
        if not changed and decision.at_once:
            changed = self._danger_gone(finding)
        if changed:
            self._journal.forget(finding.uuid)
            return self._record(decision, "skipped", f"re-verification: {changed}")
        # NOTE: the operator may have restored the guest since the plan was made: its
        # hold is read afresh, right before the step (docs/design.md rule 12).
        hold = self._journal.hold_of(finding.uuid)
        if hold is not None:
            return self._record(decision, "skipped", f"re-verification: {hold.describe()}")
        intent = self._journal.begin(
            finding.uuid, finding.kind, decision.step.value, self._dry_run, self._clock()
        )
        try:
            detail = self._perform(decision)
            outcome = "done"
        except EffectError as exc:
            detail, outcome = str(exc), "failed"
        self._journal.finish(intent, outcome, detail, self._clock())
        return self._record(decision, outcome, detail)

    def _changed_since(self, finding: Finding) -> str | None:
        """Why the guest no longer matches the finding, or None when it still does."""
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
        dangers = self._look.dangers(finding)
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
        leftovers = core_leftovers(finding.domain, self._instances_path) if finding.domain else []
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
                if self._look.domain(uuid) is not None:
                    copy = dataclasses.replace(saved, undefining=False)
                    self._effects.write_manifest(directory, copy)
            raise

    def _record(self, decision: Decision, outcome: str, detail: str) -> Outcome:
        assert decision.step is not None
        result = Outcome(
            decision.finding.uuid,
            decision.finding.kind,
            decision.step,
            outcome,
            detail,
            self._dry_run,
        )
        LOG.log(
            logging.WARNING if outcome == "failed" else logging.INFO,
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
