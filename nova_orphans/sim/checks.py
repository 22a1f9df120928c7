"""The invariants every step of every history must keep.

1. **safety** — no stop, undefine or file move of a guest whose server Nova still
   manages or protects *at the moment the effect runs* (live record on this host,
   SOFT_DELETED, task_state set, vm_state RESIZED, a migration of it in progress or
   awaiting confirmation, deny-listed), nor of a foreign guest; none at all while
   the host's cell does not answer Nova, nor on a guest whose record (or whose
   "no record") a down cell hides; no step beyond what the
   operator allowed for the guest's *true* kind (stop needs stop or reap, undefine and
   file moves need reap; the allow list applies); instance files move only for
   ``deleted``/``unknown``. Checked inside the effects against the simulated Nova's
   rows, not against the agent's view.
2. **liveness** — see ``Liveness``.
3. **restore** — every guest the agent undefined (and the operator has not restored
   since, and retention has not purged) is in the quarantine; restoring it gives the
   identical XML, domain, instance files and libvirt state (managed save, snapshots,
   backing chain — present again even after Nova's image cache removed the base);
   and the journal holds a restorable entry for it (written by the reap, or adopted by
   reconciliation after a crash) that says where the files are. Nothing is purged
   before ``retention`` has passed since its reap.
4. **journal** — after every step (so after reconciliation when the agent crashed)
   no intent is without an outcome, and every destructive call (purges included) ran
   while an intent for that guest was open.
5. **dry run** — see ``trial.compare_dry_run``.
6. **classification** — in a cycle where no injected fault reached the scan, every
   finding's kind (and every guest without a finding) agrees with the ground truth; but
   between full looks at Nova, after a fault reached a scan or rows were archived, the
   agent's incremental view may still hold a server as Nova's here (docs/design.md §8):
   then a guest classified "managed" and the lost servers are not judged (rule 1's
   safety invariant still is: such a guest is never acted on), nor a guest whose
   record (deleted, elsewhere, none) the view kept from an earlier cycle (liveness
   excuses it too): every step on it re-verifies afresh (rule 5).
7. **cap** — no cycle touches more guests than ``max_actions_per_cycle``.
8. **config** — every agent start loads the operator's config file (the setup rendered
   as INI text, see ``sim.operator``) with the product's strict loader: a file with a
   typo'd key or a bad value is refused, so no agent runs until the operator writes a
   correct one, and a file that loads gives the agent exactly the host, libvirt URI,
   policy and deny list written in it (a typo never silently changes behaviour).
9. **dry run apart** — a dry run beside the live agent (its own journal, as
   ``run --dry-run`` keeps) never changes the live journal's sightings, intents or
   quarantine entries.
10. **one live agent** — a second live agent started on the live agent's journal is
    refused by the lock, every time.
11. **time** — with the agent's wall clock stepped forward or back (NTP) while Nova
    stays on true time, no guest is stopped or undefined before ``grace_period`` of
    true time has passed since its grace started, nor undefined before ``reap_delay``
    of true time has passed since it was first seen stopped (see ``TimeCheck``).
12. **hold** — no stop, undefine or file move of a guest on hold (docs/design.md rule
    12: started by someone else after the agent stopped it, or restored), until the
    operator releases it.
13. **single copy** — no operator restore, through the product's restore decision,
    starts the guest while Nova has a live record of that server on any host.
14. **quarantine files** — after every step, no quarantine holds a backing file that
    leads (through the host's symlinks) anywhere but a file under instances_path: a
    device, a URL, a host file a guest's disk named (docs/design.md rule 20).
15. **fleet** — a forged report beside the host's own (dated ahead, of a host Nova does
    not know, or disagreeing with it) never hides the host's orphans: the merge shows
    them or does not trust the host, and never trusts a host Nova does not know.

Invariant 1 also forbids every destructive step (purges too) while the agent's
``[nova]`` section reaches another cloud, whatever the truth, and from an agent
configured ``dry_run``; a stop at once (docs/design.md rule 18) is allowed beyond the
kind's action only for a running ``deleted`` guest whose volume another server writes.

Invariant 1 is judged on the hypervisor the call truly changes: an agent configured
with another compute's ``host``, or reading another compute's libvirt, that acted
would be caught there.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterable

from nova_orphans.agent import CycleResult
from nova_orphans.decide.policy import Action
from nova_orphans.fakes.host import Quarantined, SimulatedHost
from nova_orphans.fleet.records import MergedFleet, PerHostReport
from nova_orphans.model import ORPHAN_KINDS, Domain, Kind, Selector
from nova_orphans.record.entries import STAMP_FORMAT
from nova_orphans.record.journal import Journal
from nova_orphans.sim.cloud import CELLS, HOST, Cloud
from nova_orphans.sim.effects import Reaped
from nova_orphans.sim.operator import URIS, Config, Loaded
from nova_orphans.sim.steps import Setup
from nova_orphans.sim.truth import (
    ORPHANS,
    Truth,
    lost,
    outside,
    still_managed,
    stops_at_once,
    truth_of,
)

SAFETY, LIVENESS, RESTORE, JOURNAL = "1-safety", "2-liveness", "3-restore", "4-journal"
DRY_RUN, CLASSIFICATION, CAP = "5-dry-run", "6-classification", "7-cap"
CONFIG, DRY_APART, LOCK, TIME = "8-config", "9-dry-run-apart", "10-one-agent", "11-time"
HOLD, SINGLE_COPY = "12-hold", "13-single-copy"
QUARANTINE_FILES, FLEET = "14-quarantine-files", "15-fleet"


@dataclasses.dataclass(frozen=True)
class Violation:
    """An invariant broken at a step of a history."""

    invariant: str
    step: int
    detail: str

    def __str__(self) -> str:
        return f"[{self.invariant}] step {self.step}: {self.detail}"


def effect_check(
    cloud: Cloud,
    journal: Journal,
    setup: Setup,
    method: str,
    uuid: str,
    domain: Domain,
    host: str = HOST,
) -> list[tuple[str, str]]:
    """Invariants 1 and 4 for one destructive call about to run (see ``CheckedEffects``).

    ``host``: the hypervisor whose libvirt the call changes, whatever host the agent
    believes it is on (a wrong ``host`` or ``connection_uri`` is judged by the truth).
    """
    label = cloud.labels.get(uuid, uuid)
    deny, policy = setup.deny(), setup.policy()
    found: list[tuple[str, str]] = []
    why = still_managed(cloud, domain, deny.covers(domain), host)
    if why:
        found.append((SAFETY, f"{method} of {label} while Nova still manages it ({host}): {why}"))
    hidden = _hidden_by_a_down_cell(cloud, uuid)
    if hidden:
        found.append((SAFETY, f"{method} of {label} while {hidden}"))
    truth = truth_of(cloud, domain, deny.covers(domain), any_host=True, host=host)
    if truth in ORPHANS:
        action = policy.action_for(Kind(truth.value))
        allowed = policy.allow.empty or policy.allow.covers(domain)
        # NOTE: docs/design.md rule 18: opted in, a running deleted guest whose volume
        # another server writes may be stopped whatever its kind's action.
        at_once = method == "stop" and stops_at_once(
            cloud, domain, setup.stop_shared_volume_at_once, host
        )
        if (
            not allowed
            or (action is Action.LOG and not at_once)
            or (method != "stop" and action is Action.STOP)
        ):
            found.append(
                (SAFETY, f"{method} of {label}, truly {truth.value}, which the operator "
                         f"allowed only to {'nothing' if not allowed else action.value}")
            )  # fmt: skip
    if method == "move_instance_files" and truth not in (Truth.DELETED, Truth.UNKNOWN):
        found.append((SAFETY, f"moved the instance files of {label}, a {truth.value} guest"))
    if not any(i.uuid == uuid for i in journal.open_intents()):
        found.append((JOURNAL, f"{method} of {label} without an open intent"))
    return found


def purge_check(
    journal: Journal,
    retention: datetime.timedelta,
    now: datetime.datetime,
    uuid: str,
    directory: str,
    reaped_at: datetime.datetime | None = None,
) -> list[tuple[str, str]]:
    """Invariants 3 and 4 for one purge about to run at true time ``now``.

    ``reaped_at``: the true time of the reap (the directory's stamp is on the agent's
    clock, which may have been stepped); by default read from the stamp.
    """
    found = []
    stamp = directory.rstrip("/").rsplit("/", 1)[-1]
    reaped = reaped_at or datetime.datetime.strptime(stamp, STAMP_FORMAT).replace(
        tzinfo=datetime.timezone.utc
    )
    if not retention or now - reaped < retention:
        found.append(
            (RESTORE, f"purged {directory} reaped {now - reaped} ago, retention {retention}")
        )
    if not any(i.uuid == uuid and i.step == "purge" for i in journal.open_intents()):
        found.append((JOURNAL, f"purge of {directory} without an open intent"))
    return found


def _hidden_by_a_down_cell(cloud: Cloud, uuid: str) -> str | None:
    """Why Nova cannot tell the truth about ``uuid`` now: a cell it needs is down."""
    down = cloud.nova.down_cells
    row = cloud.nova.servers.get(uuid)
    if CELLS[HOST] in down:
        return f"the host's cell {CELLS[HOST]} does not answer Nova"
    if row is not None and row.cell in down:
        return f"its record's cell {row.cell} does not answer Nova"
    if row is None and down:
        return f"cells {sorted(down)} do not answer Nova, so 'no record' is unknown"
    return None


def journal_closed(journal: Journal) -> list[str]:
    """Invariant 4: intents without an outcome."""
    return [f"intent {i.id} ({i.step} {i.uuid}) has no outcome" for i in journal.open_intents()]


def restorable(cloud: Cloud, reaped: dict[str, Reaped], journal: Journal) -> list[str]:
    """Invariant 3 for every guest the agent undefined and nobody restored since."""
    problems: list[str] = []
    entries = {e.uuid: e for e in journal.quarantine()}
    for uuid, was in list(reaped.items()):
        if uuid in cloud.hv.domains:
            # NOTE: Nova brought the server back to this host (evacuation, migration):
            # ``restore`` rightly refuses now, and the instance path is the new guest's.
            del reaped[uuid]
            continue
        label = cloud.labels.get(uuid, uuid)
        saved = cloud.hv.quarantine.get(uuid)
        if saved is None:
            problems.append(f"{label} was undefined but nothing is in its quarantine")
            continue
        problems += _compare_restore(label, uuid, was, saved, cloud.hv.files.get(uuid))
        entry = entries.get(uuid)
        if entry is None:
            problems.append(f"{label} was undefined but the journal has no quarantine entry")
        elif entry.files_moved != (saved.files is not None):
            problems.append(
                f"{label}: the journal says files_moved={entry.files_moved}, "
                f"the files are {'in quarantine' if saved.files else 'in place'}"
            )
    return problems


def _compare_restore(
    label: str, uuid: str, was: Reaped, saved: Quarantined, files_in_place: str | None
) -> list[str]:
    scratch = SimulatedHost(HOST)
    scratch.quarantine[uuid] = dataclasses.replace(saved)
    if files_in_place is not None:
        scratch.files[uuid] = files_in_place
    scratch.bases = set()  # NOTE: as if Nova's image cache had removed every base
    scratch.restore(uuid)
    problems = []
    if scratch.state.get(uuid) != was.state:
        problems.append(
            f"restoring {label} gives libvirt state {scratch.state.get(uuid)}, not {was.state}"
        )
    missing = {b.path for b in was.state.backing} - scratch.bases
    if missing:
        problems.append(f"restoring {label} leaves its disk without {sorted(missing)}")
    if scratch.xml.get(uuid) != was.xml:
        problems.append(f"restoring {label} gives different XML")
    if scratch.files.get(uuid) != was.files:
        problems.append(
            f"restoring {label} gives files {scratch.files.get(uuid)!r}, not {was.files!r}"
        )
    if scratch.domains.get(uuid) != dataclasses.replace(
        was.domain, state=scratch.domains[uuid].state
    ):
        problems.append(f"restoring {label} gives a different domain")
    return problems


def classification(
    result: CycleResult,
    truth: dict[str, Truth],
    lost_before: set[str],
    cloud: Cloud,
    carried_unsure: bool = False,
    kept: frozenset[str] = frozenset(),
) -> list[str]:
    """Invariant 6: the scan's kinds against the ground truth taken just before it.

    ``carried_unsure``: the view carried over servers Nova managed here from before a
    fault or an archive (see the module docstring): "managed" and lost are not judged,
    nor the guests in ``kept``, whose record the view kept from an earlier cycle.
    """
    if result.report is None:
        return []
    got = {f.uuid: f.kind.value for f in result.report.findings if f.kind is not Kind.LOST}
    problems = [
        f"{cloud.labels.get(uuid, uuid)} classified {got.get(uuid, 'managed')}, "
        f"truly {expected.value}"
        for uuid, expected in truth.items()
        if got.get(uuid, Truth.MANAGED.value) != expected.value
        and not (carried_unsure and (uuid not in got or uuid in kept))
    ]
    seen_lost = {f.uuid for f in result.report.findings if f.kind is Kind.LOST}
    if seen_lost != lost_before and not carried_unsure:
        problems.append(f"lost: classified {sorted(seen_lost)}, truly {sorted(lost_before)}")
    return problems


def truth_now(cloud: Cloud, deny: Selector) -> tuple[dict[str, Truth], set[str]]:
    """The ground truth of every domain on the host, and the lost servers, right now."""
    domains = cloud.hv.domains.values()
    return {d.uuid: truth_of(cloud, d, deny.covers(d)) for d in domains}, lost(cloud)


@dataclasses.dataclass
class _Episode:
    key: tuple[Truth, int, Action]
    start: datetime.datetime
    reported: bool = False


class Liveness:
    """Invariant 2: every true orphan the policy acts on is handled in time.

    An *episode* of a guest starts when the ground truth makes it an orphan of a kind
    whose configured action is stop or reap (allow list permitting, no libvirt job
    running), and starts afresh whenever the world (not the agent) changes that
    guest or its kind. It is *handled* when the guest is no longer running (action
    stop) or no longer defined (action reap). With interval I, grace_period G,
    sightings_required S and reap_delay R, it must be handled by

        start' + G + (S + 1)·I          (stop)
        start' + G + R + (S + 2)·I      (reap: stop, then reap_delay, then reap)

    where ``start'`` is the latest of the episode's start and the last *excuse*: a
    cycle that aborted (Nova or libvirt fault), crashed or braked (globally), or, for
    this guest, a plan that deferred it for ``max_actions_per_cycle`` or because it is on
    hold (docs/design.md rule 12), a step that was skipped or failed, a scan that an
    injected fault made see it as another kind, or a cycle between full looks at Nova,
    after a fault or an archive, whose incremental view still held it as Nova's or kept
    its earlier record (docs/design.md §8: a server deleted *and* archived between two
    cycles changes no row ``changes-since`` lists; the next full look sees it).
    Every excuse is visible in the cycle's plan, outcomes or error.

    The cycles grace_period and reap_delay also need (docs/design.md rule 15: ⌈G/I⌉
    cycles from the first sighting, ⌈R/I⌉ cycles seen stopped) end, with cycles every
    I, at the first cycle at or after the wall-clock delay, so they fit the same budget;
    the agent's clock stepped back (invariant 11's histories) excuses every guest until
    true time has caught up with the step, and delays every deadline by as much as the
    clock is behind.
    """

    def __init__(self, setup: Setup) -> None:
        self.policy, self.deny = setup.policy(), setup.deny()
        interval, s = setup.interval, setup.sightings_required
        self.budget = {
            Action.STOP: datetime.timedelta(seconds=setup.grace_period + (s + 1) * interval),
            Action.REAP: datetime.timedelta(
                seconds=setup.grace_period + setup.reap_delay + (s + 2) * interval
            ),
        }
        #: ``[agent] dry_run``: the agent never handles anything, by the operator's choice.
        self.reports_only = setup.dry_run
        self.episodes: dict[str, _Episode] = {}
        self.excused: dict[str, datetime.datetime] = {}
        self.all_excused = datetime.datetime.min.replace(tzinfo=datetime.timezone.utc)

    def excuse(self, uuids: Iterable[str] | None, when: datetime.datetime) -> None:
        """Restart the clock of ``uuids`` (None: of every guest) at ``when``."""
        if uuids is None:
            self.all_excused = when
            return
        for uuid in uuids:
            self.excused[uuid] = when

    def excuse_cycle(
        self,
        result: CycleResult | None,
        scan_faulted: bool,
        cloud: Cloud,
        carried_unsure: bool = False,
        kept: frozenset[str] = frozenset(),
    ) -> None:
        """Record the excuses one cycle gave (None: it crashed).

        ``carried_unsure``: the view carried over servers Nova managed here from before
        an archive or a fault since the agent's last full look (docs/design.md §8): a
        guest it holds as Nova's (no finding), seen as another kind than it is, is excused
        until the next full look, as invariant 6 excuses it; so is one of ``kept``, whose
        record the view kept from an earlier cycle.
        """
        now = cloud.now
        if result is None or result.error or result.plan is None or result.plan.brake:
            self.excuse(None, now)
            return
        deferred = ("max_actions", "on hold")  # NOTE: a held guest waits for the operator
        self.excuse(
            (d.finding.uuid for d in result.plan.decisions if d.why.startswith(deferred)), now
        )
        self.excuse((o.uuid for o in result.outcomes if o.outcome != "done"), now)
        if (scan_faulted or carried_unsure) and result.report is not None:
            seen = {f.uuid: f.kind.value for f in result.report.findings}
            truth, _ = truth_now(cloud, self.deny)
            unsure = (u for u in truth if scan_faulted or u not in seen or u in kept)
            self.excuse((u for u in unsure if seen.get(u) != truth[u].value), now)

    def check(self, cloud: Cloud, behind: float = 0.0) -> list[str]:
        """Episodes past their deadline, each reported once.

        ``behind``: seconds the agent's clock is behind true time (a clock stepped
        back): a ``deleted`` guest's grace runs from Nova's deletion time, on true
        time, so the agent rightly waits that much longer.
        """
        now, late = cloud.now, list[str]()
        if self.reports_only:
            return late
        lag = datetime.timedelta(seconds=max(0.0, behind))
        current: dict[str, _Episode] = {}
        for domain in cloud.hv.domains.values():
            truth = truth_of(cloud, domain, self.deny.covers(domain))
            action = self.policy.action_for(Kind(truth.value)) if truth in ORPHANS else Action.LOG
            allowed = self.policy.allow.empty or self.policy.allow.covers(domain)
            if action is Action.LOG or not allowed or domain.job_active:
                continue
            key = (truth, cloud.version[domain.uuid], action)
            episode = self.episodes.get(domain.uuid)
            if episode is None or episode.key != key:
                episode = _Episode(key, now)
            current[domain.uuid] = episode
            if action is Action.STOP and not domain.is_active:
                continue
            start = max(
                episode.start, self.excused.get(domain.uuid, episode.start), self.all_excused
            )
            deadline = start + self.budget[action] + lag
            if now > deadline and not episode.reported:
                episode.reported = True
                late.append(
                    f"{cloud.labels.get(domain.uuid, domain.uuid)} ({truth.value}, action "
                    f"{action.value}) an orphan since {episode.start:%H:%M:%S}, clock restarted "
                    f"{start:%H:%M:%S}, not handled by {deadline:%H:%M:%S} (now {now:%H:%M:%S})"
                )
        self.episodes = current
        return late


def config_loaded(setup: Setup, edits: Config, loaded: Loaded, instances: str = "") -> list[str]:
    """Invariant 8 for a config file the loader accepted (``instances``: the host's
    instances_path it must name, and name as the host's)."""
    if edits.typo is not None:
        return [f"a config with typo {edits.typo!r} loaded: an agent would run with it"]
    wanted = setup.policy()
    wanted = dataclasses.replace(wanted, actions={k: wanted.action_for(k) for k in _CONFIGURABLE})
    problems = []
    if loaded.policy != wanted:
        problems.append(f"the loaded policy {loaded.policy} is not the config's {wanted}")
    if loaded.deny != setup.deny():
        problems.append(f"the loaded deny list {loaded.deny} is not the config's")
    if (loaded.host, loaded.libvirt_uri) != (edits.host, URIS[edits.libvirt]):
        problems.append(f"the agent runs as {loaded.host} on {loaded.libvirt_uri}")
    if loaded.dry_run != setup.dry_run:
        problems.append(f"the agent loaded dry_run={loaded.dry_run}, the config says otherwise")
    if (loaded.pinned_node is not None) != setup.pin_node:
        problems.append(f"the agent loaded compute_node_uuid={loaded.pinned_node}")
    if instances and {loaded.instances_path, loaded.host_instances_path} != {instances}:
        problems.append(f"the agent loaded instances_path={loaded.instances_path}")
    return problems


def quarantine_files(host: SimulatedHost) -> list[str]:
    """Invariant 14: no quarantine holds a host file outside instances_path (a device, a
    URL, a file a guest's disk named elsewhere, or one a symlink leads elsewhere to)."""
    return [
        f"the quarantine of {uuid} holds {b.path}, outside {host.instances_path}"
        + (f" (it leads to {host.real_path(b.path)})" if host.real_path(b.path) != b.path else "")
        for uuid, saved in sorted(host.quarantine.items())
        for b in saved.kept.backing
        if outside(host, b.path)
    ]


_CONFIGURABLE = frozenset({Kind.DELETED, Kind.UNKNOWN, Kind.MISPLACED})


def journal_state(journal: Journal) -> tuple[object, ...]:
    """What a dry run beside the live agent must leave unchanged (invariant 9)."""
    intents = journal.history(limit=1_000_000)
    return (
        journal.sightings(),
        [(i.id, i.step, i.uuid, i.outcome) for i in intents],
        journal.quarantine(include_done=True),
    )


class TimeCheck:
    """Invariant 11: grace_period and reap_delay last in true time, whatever the clock says.

    The references are taken on true time, at each cycle (what any agent could have
    seen): a guest's grace starts at Nova's deletion time for ``deleted`` (the rule's
    own start, docs/design.md rule 4), otherwise at the first cycle from which the
    guest was continuously of its current orphan kind; its stop starts at the first
    cycle from which it was continuously not running. The bound, from rule 15 as
    ``core.decide`` and ``core.sightings`` implement it: the agent needs
    ⌈g/I⌉ counted cycles after its first sighting (g: the grace left then, on its
    clock) and ⌈R/I⌉ counted cycles seen stopped, and a sighting counts only at least
    I/2 after the previous one on its clock; the simulation's cycles come every I of
    true time and a counted sighting is a different cycle, so n counted cycles span
    at least n·I of true time whatever the clock did. Hence a stop or undefine comes
    at least G - I after the grace started, and an undefine at least R - I after the
    guest was first seen stopped (I of tolerance: the first sighting may come up to
    one interval after the reference).

    A known gap it finds (a strict xfail in tests/sim/test_operator.py): for ``deleted``
    the grace left at the first sighting, g, is the agent's clock minus Nova's deletion
    time, so a clock stepped forward before the first sighting shortens it by the step.
    (Retention is judged by invariant 3 on true time as well.)
    """

    def __init__(self, setup: Setup) -> None:
        self.grace = setup.grace_period
        self.reap_delay = setup.reap_delay
        self.at_once = setup.stop_shared_volume_at_once
        self.tolerance = setup.interval
        self.deny = setup.deny()
        #: Per guest: (truth, since) and stopped-since, both on true time, sampled at cycles.
        self.kind_since: dict[str, tuple[Truth, datetime.datetime]] = {}
        self.stopped_since: dict[str, datetime.datetime] = {}

    def sample(self, cloud: Cloud) -> None:
        """Record, before a cycle, each guest's kind and whether it runs."""
        now, kinds, stopped = cloud.now, {}, {}
        for domain in cloud.hv.domains.values():
            truth = truth_of(cloud, domain, self.deny.covers(domain))
            was = self.kind_since.get(domain.uuid)
            kinds[domain.uuid] = was if was is not None and was[0] is truth else (truth, now)
            if not domain.is_active:
                stopped[domain.uuid] = self.stopped_since.get(domain.uuid, now)
        self.kind_since, self.stopped_since = kinds, stopped

    def check(self, cloud: Cloud, method: str, uuid: str) -> list[tuple[str, str]]:
        """The violations a stop or undefine of ``uuid`` at true time now would commit."""
        if method not in ("stop", "undefine") or uuid not in self.kind_since:
            return []
        domain = cloud.hv.domains.get(uuid)
        if method == "stop" and domain and stops_at_once(cloud, domain, self.at_once):
            return []  # NOTE: docs/design.md rule 18: no wait, by the operator's choice
        label, now = cloud.labels.get(uuid, uuid), cloud.now
        truth, since = self.kind_since[uuid]
        row = cloud.nova.servers.get(uuid)
        if truth is Truth.DELETED and row is not None and row.deleted_at is not None:
            since = row.deleted_at
        found = []
        waited = (now - since).total_seconds()
        if truth in ORPHANS and waited < self.grace - self.tolerance:
            found.append(
                (TIME, f"{method} of {label} ({truth.value}) {waited:.0f}s of true time into "
                       f"its grace_period of {self.grace:.0f}s")
            )  # fmt: skip
        stopped = self.stopped_since.get(uuid)
        if method == "undefine" and stopped is not None:
            waited = (now - stopped).total_seconds()
            if waited < self.reap_delay - self.tolerance:
                found.append(
                    (TIME, f"undefine of {label} {waited:.0f}s of true time after it was seen "
                           f"stopped, reap_delay {self.reap_delay:.0f}s")
                )  # fmt: skip
        if method == "undefine" and stopped is None and self.reap_delay > self.tolerance:
            found.append((TIME, f"undefine of {label}, not seen stopped at any cycle before"))
        return found


def fleet_merged(own: PerHostReport, forged: PerHostReport, merged: MergedFleet) -> list[str]:
    """Invariant 15: a forged report (dated ahead, of a host Nova does not know, or
    disagreeing) never hides the orphans the host's own report shows: the merge shows
    them, or does not trust the host; and a host Nova does not know is never trusted."""
    standing = {h.host: h for h in merged.hosts}
    problems = []
    mine = standing[own.host]
    orphans = {(f.uuid, f.kind) for f in own.findings if f.kind in ORPHAN_KINDS}
    shown = {(f.uuid, f.kind) for f in mine.findings}
    if mine.trusted and not orphans <= shown:
        hidden = sorted(u for u, _ in orphans - shown)
        problems.append(
            f"a forged report ({forged.source}, {forged.host}, {forged.checked_at.isoformat()}) "
            f"hides the orphans {hidden} of {own.host}, which the merge trusts"
        )
    for host in merged.hosts:
        if host.trusted and not host.known_to_nova:
            problems.append(f"the merge trusts a report of {host.host}, a host Nova does not know")
    return problems
