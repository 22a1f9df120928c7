"""Play one history: the real agent over the simulated cloud, invariants after every step."""

from __future__ import annotations

import dataclasses
import datetime
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from typing import Any

from nova_orphans.act.actuator import Outcome, Steps
from nova_orphans.act.effects import Effects
from nova_orphans.act.quarantine import restore
from nova_orphans.act.recording import RecordingEffects
from nova_orphans.agent import Agent, CycleResult, no_context
from nova_orphans.audit import HostAudit
from nova_orphans.decide import gate
from nova_orphans.decide.plan import Plan
from nova_orphans.decide.policy import Step as PolicyStep
from nova_orphans.fakes.nova import Fault
from nova_orphans.observe.errors import HypervisorError
from nova_orphans.observe.nova.api import default_retry
from nova_orphans.observe.nova.observer import NovaObserver
from nova_orphans.record.entries import STAMP_FORMAT, QuarantineEntry
from nova_orphans.record.journal import Journal, JournalLocked
from nova_orphans.record.lock import LiveLock
from nova_orphans.sim import checks, commands, fleet, leftovers, operator, services
from nova_orphans.sim.cloud import CELLS, EPOCH, HOST, OTHER, Cloud, uuid_of
from nova_orphans.sim.effects import DESTRUCTIVE, CheckedEffects, Crash
from nova_orphans.sim.fleet import FORGERIES, UNKNOWN_HOST
from nova_orphans.sim.steps import Cycle, Event, Setup, Step

#: Where journals and quarantines go: memory-backed when the machine has it.
SCRATCH = "/dev/shm" if os.path.isdir("/dev/shm") else None
RACES = {"vanish": "vanish", "db_restore": "db_restore", "migrate": "migrate_back",
         "toggle": "toggle"}  # fmt: skip
#: The operator's own steps (``Event.op``), played by ``Run`` rather than by the cloud:
#: "config" edits the config and restarts the agent (``operator.Config.edited``);
#: "dry_run" runs one dry-run cycle beside the live agent; "second_agent" starts a
#: second live agent on the same journal; "clock" steps the agent's wall clock by
#: ``arg`` seconds (NTP), Nova's timestamps staying on true time; "release" releases the
#: guest longest on hold. (The operator's ``restore`` is the op "quarantine_restore", its
#: ``virsh start`` the cloud's "virsh_start".) "fleet" merges the agent's last report with
#: a forged one (``arg``: see ``FORGERIES``) the way ``fleet audit --reports`` does.
OPERATOR_OPS = frozenset({"config", "dry_run", "second_agent", "clock", "release", "fleet"})
__all__ = ["FORGERIES", "OPERATOR_OPS", "UNKNOWN_HOST", "Counters", "Run"]


class WatchedAgent(Agent):
    """The real agent; remembers the last plan, so that a crashed cycle's plan is known
    too, and hands each cycle's told report to ``on_told`` at the moment it is told."""

    last_plan: Plan | None = None
    on_told: Callable[[HostAudit, str | None], None] | None = None

    def _tell_leftovers(self, report: HostAudit, holds: Any, brake: str | None) -> HostAudit:
        report = super()._tell_leftovers(report, holds, brake)
        if self.on_told is not None:
            self.on_told(report, brake)
        return report

    def _log_plan(self, plan: Plan) -> None:
        self.last_plan = plan
        super()._log_plan(plan)


@dataclasses.dataclass(frozen=True)
class CycleRecord:
    """What one cycle (at step ``step``) planned and did (for the dry-run comparison)."""

    step: int
    plan: Plan | None
    outcomes: tuple[Outcome, ...]
    error: str | None
    acted: bool


@dataclasses.dataclass
class Counters:
    """What a history (or many) did."""

    histories: int = 0
    steps: int = 0
    events: int = 0
    events_applied: int = 0
    cycles: int = 0
    cycles_aborted: int = 0
    brakes: int = 0
    faults: int = 0
    crashes: int = 0
    stops: int = 0
    reaps: int = 0
    purges: int = 0
    skipped: int = 0
    failed: int = 0
    #: The operator: config edits (restarts), typo'd configs refused, cycles the agent did
    #: not run for want of a config, cycles refused for identity, dry runs beside the live
    #: agent, second live agents refused, wall-clock steps.
    config_edits: int = 0
    configs_refused: int = 0
    cycles_not_running: int = 0
    identity_refused: int = 0
    dry_runs_beside: int = 0
    second_agents_refused: int = 0
    clock_steps: int = 0
    restores: int = 0
    restores_refused: int = 0
    releases: int = 0
    #: The new faults: histories whose ``[nova]`` reaches another cloud (cycles that ran
    #: so), guests whose disks turned hostile and reaps refused for them, guests whose
    #: volume another server writes and the stops at once, fleet merges with forged
    #: reports (and those the merge flagged), histories with Nova's API clock off its
    #: database's, configured dry runs, and histories without the compute_id proof.
    wrong_cloud_cycles: int = 0
    hostile_disks: int = 0
    hostile_reaps_refused: int = 0
    shared_volumes: int = 0
    stops_at_once: int = 0
    fleet_merges: int = 0
    forged_flagged: int = 0
    api_clock_skewed: int = 0
    configured_dry_runs: int = 0
    unproven_setups: int = 0
    #: The leftovers: what the looks told, what the world left (``commands.Tally``).
    leftovers: commands.Tally = dataclasses.field(default_factory=commands.Tally)
    violations: int = 0

    def add(self, other: Counters) -> None:
        """Add ``other`` into this."""
        for field in dataclasses.fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))


class Run:
    """One history being played; ``dry_run`` swaps the effects for ``RecordingEffects``."""

    def __init__(self, setup: Setup, dry_run: bool = False) -> None:
        self.setup, self.dry_run = setup, dry_run
        self.cloud = Cloud()
        if setup.max_limit:
            self.cloud.nova.max_limit = setup.max_limit
        # NOTE: the API node's clock off the database's (docs/design.md §8): the tracker
        # must notice and look in full; every invariant holds all the same.
        self.cloud.nova.api_clock_offset = datetime.timedelta(seconds=setup.api_clock_offset)
        self.workdir = tempfile.mkdtemp(prefix="nova-orphans-sim-", dir=SCRATCH)
        self.quarantine_root = f"{self.workdir}/quarantine"
        #: This machine's nova-compute state_path: its compute_id names Nova's node of HOST,
        #: the proof of identity (docs/design.md rule 10) whatever the config names.
        self.node_uuid = self.cloud.nova.computes[HOST].node_uuid
        self.nova_state = operator.nova_state(self.node_uuid, SCRATCH)
        self.counters = Counters(histories=1)
        c = self.counters
        c.api_clock_skewed = bool(setup.api_clock_offset)
        c.configured_dry_runs = setup.dry_run
        c.unproven_setups = not (setup.compute_id or setup.pin_node)
        self.violations: list[checks.Violation] = []
        self._reported: set[tuple[str, str]] = set()
        self._index = 0
        #: The operator's config edits, and the agent's wall clock minus true time (seconds).
        self.edits = operator.Config()
        self.skew = 0.0
        self.loaded = self._load()
        assert self.loaded is not None, "the setup's own config must load"
        self.journal_path = self.loaded.journal
        self.journal = Journal(self.journal_path, exclusive=True)
        #: This host's live lock (docs/design.md rule 14), held by the history's live agent
        #: across its restarts, as a host's one agent unit holds it.
        self.live_lock = LiveLock.take(f"{self.workdir}/live.lock", self.journal_path)
        self.deny = setup.deny()
        self.checked = CheckedEffects(
            self.cloud.hv, self.quarantine_root, self._effect_check, self._purge_check
        )
        self.checked.before_effect = self._before_effect
        #: The effects of an agent that reads the other compute's libvirt (wrong URI).
        self.other_checked = CheckedEffects(
            self.cloud.other_hv, self.quarantine_root, self._other_effect_check
        )
        self.time = checks.TimeCheck(setup)
        #: True time of each reap, by (UUID, quarantine stamp on the agent's clock).
        self._reaped_at: dict[tuple[str, str], datetime.datetime] = {}
        #: Invariant 12, kept apart from the product's own holds: guests the agent
        #: stopped, those the operator started since (held once a cycle sees them
        #: running), and every guest on hold by the operator's doing until released.
        self._agent_stopped: set[str] = set()
        self._started_by_operator: set[str] = set()
        self.held: set[str] = set()
        retry: Callable[[Callable[[], Any]], Any] = (
            default_retry(setup.retry_attempts, 0.0)
            if setup.retry_attempts > 1
            else lambda call: call()
        )
        self.observer = NovaObserver(self.cloud.nova, page_size=setup.page_size, retry=retry)
        #: The Nova a ``[nova]`` section of another cloud reaches (built when first needed).
        self._other_cloud_observer: NovaObserver | None = None
        self.world = services.World(self.cloud, setup, operator.instances_dir(self.workdir))
        self.world.on_look = self._look_started
        self.cloud.after_apply = self.world.settle
        self.services = self.world.services
        #: What ran where when the last live cycle looked, for the fleet merge (invariant 17).
        self._seen: fleet.Moment | None = None
        self._last_seen: fleet.Moment | None = None
        #: The last report a cycle of the live agent wrote (``[agent] report_file``).
        self.last_report: CycleResult | None = None
        self.agent = self._agent()
        self.liveness = checks.Liveness(setup)
        self.records: list[CycleRecord] = []
        self.played: list[Step] = []
        self._nova_faults: dict[int, str] = {}
        self._reads: list[tuple[int, str]] = []
        self._requests = self._read_count = self._fired = 0
        self._scan_fired: int | None = None
        #: Nova faults fired when the leftovers' look began (its faults reach no scan).
        self._look_fired: int | None = None
        #: Since the agent's last full look at Nova, a fault reached a scan or rows were
        #: archived: its incremental view may still hold a server as Nova's (safe: never
        #: acted on) until the next full look (docs/design.md §8).
        self._carried_unsure = False

    def _load(self) -> operator.Loaded | None:
        """The operator's config file, through the product's strict loader (None: refused).

        Invariant 8: a typo'd file is refused; a file that loads gives the agent exactly
        the host, libvirt, policy and deny list the operator wrote.
        """
        try:
            loaded = operator.load(self.setup, self.edits, self.workdir, self.node_uuid)
        except operator.ConfigError as exc:
            if self.edits.typo is None:
                raise AssertionError(f"the simulation's own config was refused: {exc}") from exc
            self.counters.configs_refused += 1
            return None
        instances = operator.instances_dir(self.workdir)
        for problem in checks.config_loaded(self.setup, self.edits, loaded, instances):
            self._violation(checks.CONFIG, problem)
        return loaded

    def _agent(self, journal: Journal | None = None, dry_run: bool = False) -> WatchedAgent | None:
        """The agent as started from the loaded config (None: no config, no agent).

        ``journal``/``dry_run``: a dry run beside the live agent, on its own journal.
        """
        if self.loaded is None:
            return None
        # NOTE: ``[agent] dry_run`` is wired as the command line wires it: recording effects.
        dry_run = dry_run or self.dry_run or self.loaded.dry_run
        libvirt = operator.host_of(self.loaded.libvirt_uri)
        effects: Effects = self.checked if libvirt == HOST else self.other_checked
        agent = WatchedAgent(
            host=self.loaded.host,
            open_hypervisor=lambda: no_context(
                self.cloud.hv if libvirt == HOST else self.cloud.mirror()
            ),
            nova=self._nova_observer(),
            effects=RecordingEffects() if dry_run else effects,
            journal=journal or self.journal,
            policy=self.setup.policy(),
            quarantine_root=self.quarantine_root,
            compute_id_dirs=(self.nova_state,) if self.setup.compute_id else (),
            pinned_node=self.loaded.pinned_node,
            services=self.services,
            deny=self.loaded.deny,
            dry_run=dry_run,
            live_lock=None if dry_run else self.live_lock,
            live_journal_path=self.loaded.journal if journal is not None else None,
            clock=self.agent_clock,
            retention=datetime.timedelta(seconds=self.setup.retention),
            instances_path=self.loaded.instances_path,
            host_instances_path=self.loaded.host_instances_path,
        )
        agent.on_told = self._told
        return agent

    def _nova_observer(self) -> NovaObserver:
        """The Nova the config's ``[nova]`` section reaches: this cloud's, or another's."""
        if not self.edits.wrong_cloud:
            return self.observer
        if self._other_cloud_observer is None:
            self._other_cloud_observer = NovaObserver(
                self.cloud.other_cloud, page_size=self.setup.page_size
            )
        return self._other_cloud_observer

    def agent_clock(self) -> datetime.datetime:
        """The agent's wall clock: true time plus the steps NTP made."""
        return self.cloud.now + datetime.timedelta(seconds=self.skew)

    def close(self) -> None:
        """Close the journal, give the live lock up and remove the scratch directory."""
        self.journal.close()
        self.live_lock.release()
        shutil.rmtree(self.workdir, ignore_errors=True)

    # --- playing ---------------------------------------------------------------------------

    def play(self, steps: Iterable[Step], until_cycle: int | None = None) -> None:
        """Apply ``steps`` in order (stop after cycle number ``until_cycle``)."""
        for step in steps:
            if until_cycle is not None and len(self.records) > until_cycle:
                return
            self.step(step)

    def step(self, step: Step) -> None:
        """Apply one step, then check the invariants."""
        self.played.append(step)
        self.counters.steps += 1
        self.cloud.now = max(self.cloud.now, EPOCH + datetime.timedelta(seconds=step.at))
        if isinstance(step, Event):
            self._event(step)
        else:
            self._cycle(step)
        if not self.dry_run:
            self._check_step()
        self._index += 1

    def _event(self, event: Event) -> None:
        self.counters.events += 1
        if event.op in OPERATOR_OPS:
            self.counters.events_applied += 1
            self._operator(event)
            return
        if event.op == "quarantine_restore":
            self.counters.events_applied += self._operator_restore(event.label, event.arg)
            return
        if event.op in leftovers.OPS:
            applied = leftovers.apply(self.world, event.op, event.label, event.arg)
            self.counters.events_applied += applied
            self.counters.leftovers.events += applied
            return
        if self.cloud.apply(event.op, event.label, event.arg):
            self.counters.events_applied += 1
            self.counters.hostile_disks += event.op == "hostile_disk"
            self.counters.shared_volumes += event.op == "share_volume"
            if event.op == "archive":
                self._carried_unsure = True
            if event.op == "virsh_start" and uuid_of(event.label) in self._agent_stopped:
                self._started_by_operator.add(uuid_of(event.label))

    def _operator_restore(self, label: str, arg: str) -> bool:
        """``nova-orphans restore [--start]`` through the product's restore decision.

        Invariant 13: a restore that starts the guest while Nova has a live record of
        the server (on any host) starts a second copy.
        """
        uuid, start = uuid_of(label), arg == "start"
        entries = [e for e in self.journal.quarantine() if e.uuid == uuid]
        if not entries or uuid in self.cloud.hv.domains or uuid not in self.cloud.hv.quarantine:
            return False

        def define(entry: QuarantineEntry, start: bool) -> str:
            self.cloud.apply("quarantine_restore", label, "start" if start else "")
            return "defined" + ("; started" if start else "")

        try:
            with self.journal.quarantine_held(0):
                restore.guarded_restore(
                    entries[-1],
                    nova=self.observer,
                    host=HOST,
                    journal=self.journal,
                    define=define,
                    now=self.agent_clock(),
                    steps=Steps(self.journal, self.agent_clock, gate.operator_command("restore")),
                    start=start,
                )
        except restore.RestoreRefused:
            self.counters.restores_refused += 1
            return False
        self.counters.restores += 1
        self.held.add(uuid)
        row = self.cloud.nova.servers.get(uuid)
        if start and row is not None and not row.deleted:
            self._violation(
                checks.SINGLE_COPY,
                f"restore --start of {label} while Nova has it on {row.host} ({row.vm_state})",
            )
        self._check_restored(label, uuid)
        return True

    def _check_restored(self, label: str, uuid: str) -> None:
        """Invariant 3 at the operator's restore: the XML and files came back."""
        was = self.checked.reaped.pop(uuid, None)
        if was is not None and (
            self.cloud.hv.xml.get(uuid) != was.xml or self.cloud.hv.files.get(uuid) != was.files
        ):
            self._violation(checks.RESTORE, f"restore of {label} did not bring back XML and files")

    # --- the operator ---------------------------------------------------------------------

    def _operator(self, event: Event) -> None:
        if event.op == "config":
            self.counters.config_edits += 1
            self.edits = self.edits.edited(event.arg)
            self.loaded = self._load()
            self._restart()
        elif event.op == "clock":
            self.counters.clock_steps += 1
            self.skew += float(event.arg)
            if float(event.arg) < 0:
                # NOTE: docs/design.md rule 15: a clock stepped back makes every wall-clock
                # wait last until the clock has caught up; liveness allows for it.
                back = datetime.timedelta(seconds=-float(event.arg))
                self.liveness.excuse(None, self.cloud.now + back)
        elif event.op == "dry_run":
            self._dry_run_beside()
        elif event.op == "second_agent":
            self._second_agent()
        elif event.op == "release":
            self._release()
        elif event.op == "fleet":
            self._fleet(event.arg)

    def _release(self) -> None:
        """``nova-orphans release UUID`` of the guest longest on hold (if any)."""
        holds = sorted(self.journal.holds().values(), key=lambda h: (h.since, h.uuid))
        if holds:
            self.counters.releases += 1
            self.journal.release(holds[0].uuid, self.agent_clock())
            self.held.discard(holds[0].uuid)
            self._agent_stopped.discard(holds[0].uuid)
            # NOTE: a start by hand before the release is covered by it: the release
            # is the operator's latest word (seed 7 index 397: started, then released).
            self._started_by_operator.discard(holds[0].uuid)

    def _dry_run_beside(self) -> None:
        """``run --once --dry-run`` beside the live agent: its own journal, one cycle."""
        if self.loaded is None:
            return
        self.counters.dry_runs_beside += 1
        before = checks.journal_state(self.journal)
        try:
            journal = Journal(self.loaded.dry_run_journal, exclusive=True)
        except JournalLocked:
            # NOTE: a dry run that shares the live journal is refused by its lock: fine.
            return
        try:
            agent = self._agent(journal, dry_run=True)
            assert agent is not None
            agent.reconcile()
            agent.cycle()
        finally:
            journal.close()
        if checks.journal_state(self.journal) != before:
            self._violation(checks.DRY_APART, "a dry run beside the live agent changed its journal")

    def _second_agent(self) -> None:
        """A second ``nova-orphans run`` on the live agent's state (``operator.second_agent``)."""
        if self.loaded is not None:
            refused, problems = operator.second_agent(
                self.journal_path, self.live_lock.path, self.workdir
            )
            self.counters.second_agents_refused += refused
            for problem in problems:
                self._violation(checks.LOCK, problem)

    def _fleet(self, forgery: str) -> None:
        """``fleet audit --reports`` over the agent's last report, one forged beside it and
        the other compute's (``sim/fleet.py``: invariants 15 and 17)."""
        result, seen = self.last_report, self._last_seen
        if result is None or result.report is None or seen is None:
            return
        self.counters.fleet_merges += 1
        merged = fleet.merge(forgery, result.report, seen, self.cloud, self.setup,
                             self.agent_clock())  # fmt: skip
        self.counters.forged_flagged += merged.flagged
        self.counters.leftovers.split_brains += any(
            i == fleet.SPLIT_BRAIN for i, _ in merged.problems
        )
        for invariant, problem in merged.problems:
            self._violation(invariant, problem)

    def _told(self, report: HostAudit, brake: str | None) -> None:
        """Invariant 16 at the moment a cycle tells its leftovers (``sim/commands.py``)."""
        if not self.dry_run:
            self._seen = fleet.moment(self.cloud)
            for problem in commands.at_tell(self, report, brake):
                self._violation(commands.TOLD, problem)

    def _look_started(self) -> None:
        """The agent started looking at the services: later Nova faults miss the scan."""
        if self._look_fired is None:
            self._look_fired = self._fired

    # --- the agent's cycles ----------------------------------------------------------------

    def _cycle(self, cycle: Cycle) -> None:
        self.counters.cycles += 1
        if not self.dry_run:
            self.time.sample(self.cloud)
        if self.agent is None:
            # NOTE: the operator's config was refused: no agent runs until it is right.
            self.counters.cycles_not_running += 1
            self.records.append(CycleRecord(self._index, None, (), "not running", False))
            self.liveness.excuse(None, self.cloud.now)
            return
        truth, lost = checks.truth_now(self.cloud, self.deny)
        self._arm(cycle)
        calls_before = self.checked.total_calls + self.other_checked.total_calls
        result: CycleResult | None = None
        self.agent.last_plan = None
        plan = None
        try:
            result = self.agent.cycle()
        except Crash:
            plan = self.agent.last_plan
            self.counters.crashes += 1
            self._disarm()
            self._restart()
        finally:
            self._disarm()
        marks = [m for m in (self._look_fired, self._scan_fired) if m is not None]
        scan_faulted = bool(min(marks) if marks else self._fired)
        acted = self.checked.total_calls + self.other_checked.total_calls > calls_before
        if result is not None and result.error and self.edits.wrong_view:
            self.counters.identity_refused += 1
        self.counters.wrong_cloud_cycles += self.edits.wrong_cloud
        if result is not None and result.report is not None and not self.dry_run:
            self.last_report, self._last_seen = result, self._seen
        self._count(result)
        self._held_after(result.plan if result else plan)
        for o in result.outcomes if result else ():
            # NOTE: as rule 12 reads: the agent's *last* step was a stop, and no release
            # came after it.
            if o.step is PolicyStep.STOP and o.outcome == "done" and not o.dry_run:
                self._agent_stopped.add(o.uuid)
            elif o.outcome == "done" and not o.dry_run:
                self._agent_stopped.discard(o.uuid)
        self.records.append(
            CycleRecord(
                self._index,
                result.plan if result else plan,
                result.outcomes if result else (),
                result.error if result else "crashed",
                acted,
            )
        )
        if self.dry_run:
            return
        full_look = self.agent is None or self.agent.nova_views.last_was_full
        carried = self._carried_unsure and not full_look
        # NOTE: a record the agent kept from an earlier cycle may be stale after an archive
        # or a fault since the last full look (docs/design.md §8): a step re-verifies.
        kept = self.agent.nova_views.kept if carried and self.agent is not None else frozenset()
        self.liveness.excuse_cycle(result, scan_faulted, self.cloud, carried, kept)
        # NOTE: another cloud's Nova has no record of this host's guests: its view is
        # wrong by construction (and unproven or a mismatch); only safety is judged.
        if result is not None and not scan_faulted and not self.edits.wrong_cloud:
            for problem in checks.classification(result, truth, lost, self.cloud, carried, kept):
                self._violation(checks.CLASSIFICATION, problem)
        self._carried_unsure = scan_faulted or result is None or carried
        if len(self.checked.cycle_guests) > self.setup.max_actions_per_cycle:
            self._violation(
                checks.CAP,
                f"{len(self.checked.cycle_guests)} guests touched, "
                f"max_actions_per_cycle {self.setup.max_actions_per_cycle}",
            )

    def _count(self, result: CycleResult | None) -> None:
        c = self.counters
        if result is None:
            return
        c.cycles_aborted += bool(result.error)
        c.brakes += bool(result.plan and result.plan.brake)
        c.skipped += sum(o.outcome == "skipped" for o in result.outcomes)
        c.failed += sum(o.outcome == "failed" for o in result.outcomes)
        hostile = self.cloud.hv.hostile
        c.hostile_reaps_refused += sum(
            o.outcome == "failed" and o.uuid in hostile and "backing" in o.detail
            for o in result.outcomes
        )
        at_once = (
            {d.finding.uuid for d in result.plan.decisions if d.at_once} if result.plan else set()
        )
        c.stops_at_once += sum(
            o.uuid in at_once and o.outcome == "done" and not o.dry_run for o in result.outcomes
        )

    def _seen_running(self, plan: Plan | None) -> set[str]:
        """The guests the operator started that ``plan``'s scan saw running (rule 12)."""
        if plan is None:
            return set()
        return {
            d.finding.uuid
            for d in plan.decisions
            if d.finding.uuid in self._started_by_operator
            and d.finding.domain is not None
            and d.finding.domain.is_active
        }

    def _held_after(self, plan: Plan | None) -> None:
        """A guest the operator started is on hold once a cycle's scan has seen it running."""
        if plan is not None:
            self.held |= self._seen_running(plan)
            self._started_by_operator = set()

    def _restart(self) -> None:
        """The agent died or was restarted: a new process opens the same journal and
        reconciles first (no process at all while the config is refused)."""
        self.journal.close()
        self.journal = Journal(self.journal_path, exclusive=True)
        self.agent = self._agent()
        if self.agent is not None:
            self.agent.reconcile()

    # --- fault injection -------------------------------------------------------------------

    def _arm(self, cycle: Cycle) -> None:
        self._nova_faults = dict(cycle.nova_faults)
        self._reads = list(cycle.reads)
        self._requests = self._read_count = self._fired = 0
        self._scan_fired = self._look_fired = self._seen = None
        self.world.before_cycle(cycle.services)
        self.cloud.nova.fault_hook = self._nova_fault
        self.cloud.nova.down_cells = {CELLS[cycle.cell_down]} if cycle.cell_down else set()
        self.counters.faults += bool(cycle.cell_down)
        self.cloud.hv.before_read = self._before_read
        effects = self.agent.effects if self.agent is not None else None
        if isinstance(effects, CheckedEffects):
            effects.new_cycle(cycle.crash, cycle.fail)

    def _disarm(self) -> None:
        self.world.after_cycle()
        self.cloud.nova.fault_hook = None
        self.cloud.nova.down_cells = set()
        self.cloud.hv.before_read = None
        for checked in (self.checked, self.other_checked):
            checked.crash, checked.fail = None, set()

    def _nova_fault(self, path: str) -> Fault | None:
        fault = self._nova_faults.pop(self._requests, None)
        self._requests += 1
        if fault is None:
            return None
        self._fired += 1
        self.counters.faults += 1
        return Fault(fault)

    def _before_read(self, what: str) -> None:
        n = self._read_count
        self._read_count += 1
        lookup = what.startswith("lookup ")
        if lookup and self._scan_fired is None:
            self._scan_fired = self._fired
        for entry in list(self._reads):
            at, action = entry
            if action == "drop" and at == n:
                self._reads.remove(entry)
                self.counters.faults += 1
                raise HypervisorError(uri="qemu:///system", reason="connection dropped (injected)")
            if action in RACES and lookup and n >= at:
                self._race(entry, what.split()[1])

    def _before_effect(self, uuid: str) -> None:
        """A race still pending when the first step starts without any fresh look happens now.

        NOTE: the real actuator always looks again first, and the race happens at that
        look; this only matters for an actuator that skips re-verification.
        """
        # NOTE: a quarantine directory is stamped on the agent's clock; remember the true time.
        self._reaped_at[(uuid, self.agent_clock().strftime(STAMP_FORMAT))] = self.cloud.now
        if self._scan_fired is None:
            for entry in [e for e in self._reads if e[1] in RACES]:
                self._race(entry, uuid)

    def _race(self, entry: tuple[int, str], uuid: str) -> None:
        """The world changes under the agent, between its scan and its step."""
        self._reads.remove(entry)
        self.counters.faults += 1
        label = self.cloud.labels.get(uuid)
        if label:
            self.cloud.apply(RACES[entry[1]], label, "")

    # --- invariants ------------------------------------------------------------------------

    def _wrong_setup(self, method: str, uuid: str) -> list[tuple[str, str]]:
        """Safety (1) whatever the truth: nothing destructive while the agent's ``[nova]``
        reaches another cloud, nor from an agent configured ``dry_run``."""
        label = self.cloud.labels.get(uuid, uuid)
        found = []
        if self.edits.wrong_cloud:
            found.append((checks.SAFETY, f"{method} of {label} while [nova] reaches another cloud"))
        if self.loaded is not None and self.loaded.dry_run:
            found.append((checks.SAFETY, f"{method} of {label} by an agent configured dry_run"))
        return found

    def _effect_check(self, method: str, uuid: str, domain: Any) -> list[tuple[str, str]]:
        found = checks.effect_check(self.cloud, self.journal, self.setup, method, uuid, domain)
        if method in DESTRUCTIVE:
            found += self._wrong_setup(method, uuid)
        last_plan = self.agent.last_plan if self.agent is not None else None
        if method in DESTRUCTIVE and (uuid in self.held or uuid in self._seen_running(last_plan)):
            label = self.cloud.labels.get(uuid, uuid)
            found.append((checks.HOLD, f"{method} of {label}, on hold"))
        return found + self.time.check(self.cloud, method, uuid)

    def _other_effect_check(self, method: str, uuid: str, domain: Any) -> list[tuple[str, str]]:
        found = checks.effect_check(
            self.cloud, self.journal, self.setup, method, uuid, domain, host=OTHER
        )
        return found + (self._wrong_setup(method, uuid) if method in DESTRUCTIVE else [])

    def _purge_check(self, uuid: str, directory: str) -> list[tuple[str, str]]:
        retention = datetime.timedelta(seconds=self.setup.retention)
        stamp = directory.rstrip("/").rsplit("/", 1)[-1]
        reaped = self._reaped_at.get((uuid, stamp))
        return checks.purge_check(
            self.journal, retention, self.cloud.now, uuid, directory, reaped_at=reaped
        ) + self._wrong_setup("purge", uuid)

    def _violation(self, invariant: str, detail: str) -> None:
        if (invariant, detail) in self._reported:
            return
        self._reported.add((invariant, detail))
        self.violations.append(checks.Violation(invariant, self._index, detail))
        self.counters.violations += 1

    def _check_step(self) -> None:
        for checked in (self.checked, self.other_checked):
            for invariant, detail in checked.violations:
                self._violation(invariant, detail)
            checked.violations.clear()
        for problem in checks.journal_closed(self.journal):
            self._violation(checks.JOURNAL, problem)
        for problem in checks.restorable(self.cloud, self.checked.reaped, self.journal):
            self._violation(checks.RESTORE, problem)
        for hv in (self.cloud.hv, self.cloud.other_hv):
            for problem in checks.quarantine_files(hv):
                self._violation(checks.QUARANTINE_FILES, problem)
        for problem in self.liveness.check(self.cloud, behind=-self.skew):
            self._violation(checks.LIVENESS, problem)
        self.counters.stops = self.checked.stops_done + self.other_checked.stops_done
        self.counters.reaps = self.checked.reaps_done + self.other_checked.reaps_done
        self.counters.purges = self.checked.purges_done
        self.counters.leftovers.leaks = self.world.leaked
        self.counters.leftovers.service_faults = self.world.faults
