"""A whole compute host in memory: simulated Nova, simulated libvirt, real journal and agent."""

from __future__ import annotations

import datetime
import pathlib

from nova_orphans.act.actuator import Steps
from nova_orphans.act.quarantine.restore import Restored, guarded_restore
from nova_orphans.act.recording import RecordingEffects
from nova_orphans.agent import Agent, CycleResult, no_context
from nova_orphans.decide import gate
from nova_orphans.decide.policy import Action, Policy
from nova_orphans.fakes.host import SimulatedEffects, SimulatedHost
from nova_orphans.fakes.nova import START, SimulatedNova
from nova_orphans.model import DomainState, Kind
from nova_orphans.observe.nova.observer import NovaObserver
from nova_orphans.record.entries import QuarantineEntry
from nova_orphans.record.journal import Journal
from nova_orphans.record.lock import LiveLock

HOST, OTHER = "cmp-1", "cmp-2"
DESTRUCTIVE = frozenset({"stop", "undefine", "move_instance_files"})
ALL_REAP = {Kind.DELETED: Action.REAP, Kind.UNKNOWN: Action.REAP, Kind.MISPLACED: Action.REAP}


class SimWorld:
    """One host with its Nova and its agent, on a clock the test moves."""

    def __init__(self, tmp_path: pathlib.Path, dry_run: bool = False, **policy: object) -> None:
        self.now = START + datetime.timedelta(days=1)
        self.nova = SimulatedNova(start=START)
        self.nova.add_compute(HOST)
        self.nova.add_compute(OTHER)
        self.hv = SimulatedHost(HOST)
        self.effects = SimulatedEffects(self.hv)
        # Dry run swaps only the effects, exactly as `nova-orphans run --dry-run` does.
        self.recorder = RecordingEffects()
        # The live agent's journal: its lock held, as `nova-orphans run` holds it (rule 19).
        self.journal = Journal(str(tmp_path / "journal.sqlite"), exclusive=True)
        fields: dict[str, object] = dict(
            actions=ALL_REAP,
            grace_period=0.0,
            sightings_required=1,
            reap_delay=0.0,
            max_actions_per_cycle=100,
            brake_min_orphans=100,
            interval=60.0,  # what ``cycle`` advances the clock by, unless told otherwise
        )
        fields.update(policy)
        #: This machine's nova-compute state_path: its compute_id names Nova's node of HOST
        #: (docs/design.md rule 10: without it, or a pinned node UUID, nothing is done).
        self.state_path = tmp_path / "nova-state"
        self.state_path.mkdir(exist_ok=True)
        (self.state_path / "compute_id").write_text(self.nova.computes[HOST].node_uuid)
        self.agent = Agent(
            host=HOST,
            open_hypervisor=lambda: no_context(self.hv),
            nova=NovaObserver(self.nova, retry=lambda call: call()),
            effects=self.recorder if dry_run else self.effects,
            journal=self.journal,
            policy=Policy(**fields),  # type: ignore[arg-type]
            quarantine_root=str(tmp_path / "quarantine"),
            compute_id_dirs=(str(self.state_path),),
            dry_run=dry_run,
            # NOTE: a live agent holds this host's live lock (docs/design.md rule 14); each
            # world is a host of its own.
            live_lock=None
            if dry_run
            else LiveLock.take(str(tmp_path / f"live-{id(self)}.lock"), str(tmp_path)),
            clock=lambda: self.now,
        )

    def boot(self, name: str, host: str = HOST, running: bool = True) -> str:
        """A server Nova runs on ``host``; its domain is on our host when ``host`` is ours."""
        uuid = self.nova.boot(host, name, at=self.now)
        if host == HOST:
            self.hv.define(uuid, name, running=running)
        return uuid

    def orphan(self, name: str, kind: Kind) -> str:
        """A guest on our host that is an orphan of ``kind``."""
        uuid = self.boot(name)
        if kind is Kind.DELETED:
            self.nova.local_delete(uuid, at=self.now)
        elif kind is Kind.UNKNOWN:
            self.nova.local_delete(uuid, at=self.now)
            self.nova.archive()
        elif kind is Kind.MISPLACED:
            self.nova.live_migrate(uuid, OTHER, at=self.now)
        return uuid

    def cycle(self, advance: float = 60.0) -> CycleResult:
        """Move the clock, then run one agent cycle."""
        self.now += datetime.timedelta(seconds=advance)
        return self.agent.cycle()

    def touched(self) -> set[str]:
        """UUIDs the effects changed (any destructive call)."""
        return {
            u for m, u in self.effects.calls if m in ("stop", "undefine", "move_instance_files")
        }

    def start(self, uuid: str) -> None:
        """The operator starts the guest (``virsh start``)."""
        self.hv.change(uuid, state=DomainState.RUNNING)

    def restore(self, uuid: str, *, start: bool = False, force: bool = False) -> Restored:
        """``nova-orphans restore UUID [--start] [--force]``: the real guards, the real
        journal, the simulated libvirt define."""

        def define(entry: QuarantineEntry, start: bool) -> str:
            self.hv.restore(entry.uuid)
            if start:
                self.start(entry.uuid)
            return f"restored {entry.uuid}" + ("; started" if start else "")

        (entry,) = [e for e in self.journal.quarantine() if e.uuid == uuid]
        with self.journal.quarantine_held(0):
            return guarded_restore(
                entry,
                nova=self.agent.nova,
                host=HOST,
                journal=self.journal,
                define=define,
                now=self.now,
                steps=Steps(self.journal, lambda: self.now, gate.operator_command("restore")),
                start=start,
                force=force,
                saved_state=self.hv.quarantine[uuid].kept.managed_save,
            )
