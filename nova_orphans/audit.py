"""The audit half of the pipeline: establish identity, observe libvirt and Nova, classify."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from nova_orphans import exits
from nova_orphans.classify import cost, danger, identity, leftover, leftover_judge
from nova_orphans.classify.guests import classify
from nova_orphans.decide import gate, told
from nova_orphans.decide.holds import Hold, held_why
from nova_orphans.decide.plan import brake_of
from nova_orphans.decide.policy import Policy
from nova_orphans.model import (
    ORPHAN_KINDS,
    DangerKind,
    Domain,
    Finding,
    Kind,
    NovaView,
    Selector,
    Server,
)
from nova_orphans.observe.errors import IdentityMismatch, ObserveError
from nova_orphans.observe.instance_dirs import instance_dirs
from nova_orphans.observe.mounts import files_root, shared_storage_refusal
from nova_orphans.observe.nova import nodes as nova_nodes
from nova_orphans.observe.nova.observer import BULK_LOOKUP_FROM, NovaObserver
from nova_orphans.observe.services.client import ServiceError
from nova_orphans.observe.services.dangers import DangerObserver
from nova_orphans.observe.services.leftovers import LeftoverObserver
from nova_orphans.observe.services.placement import PlacementObserver
from nova_orphans.record.entries import QuarantineEntry
from nova_orphans.record.journal import Journal


class ObserveNova(Protocol):
    """``NovaObserver.look``'s signature: Nova's view of a host and its domains."""

    def __call__(
        self, host: str, domain_uuids: Sequence[str], details_for: Sequence[str]
    ) -> NovaView:
        """Everything Nova says about ``host`` and the domains found on it."""


class Hypervisor(Protocol):
    """What the audit needs from a hypervisor observer."""

    def look(self) -> Sequence[Domain]:
        """Every domain on the host, active and inactive."""

    def identity(self) -> identity.LibvirtIdentity:
        """What the libvirt connection says it is (hostname, type, host UUID)."""


@dataclasses.dataclass(frozen=True)
class Services:
    """The services asked beside Nova: what orphans cost (Placement) and endanger."""

    placement: PlacementObserver
    dangers: DangerObserver
    #: What lost servers left: ports, attachments, allocations (None: not looked for).
    strays: LeftoverObserver | None = None


@dataclasses.dataclass(frozen=True)
class HostAudit:
    """The outcome of one audit of one host (its JSON form is the host's report)."""

    host: str
    checked_at: datetime.datetime
    findings: list[Finding]
    #: Whether the libvirt read is the hypervisor Nova calls ``host`` (never a mismatch here).
    identity: identity.Verdict
    #: Domains carrying Nova metadata, and live servers Nova places here (for the brake).
    nova_guests: int = 0
    servers_here: int = 0
    #: Guests on hold, by UUID, as the journal (if any) says; audit still classifies them.
    holds: Mapping[str, Hold] = dataclasses.field(default_factory=dict)
    #: Every domain read on the host (a fleet merge needs each UUID and its state).
    domains: tuple[Domain, ...] = ()
    #: Placement's view of the host's provider; None when no services were asked.
    placement: cost.PlacementAnswer | None = None
    #: What lost servers left on and around the host; None when not looked for.
    leftovers: leftover.Leftovers | None = None

    @property
    def untracked(self) -> cost.Untracked:
        """What the guests Nova does not manage here consume (Placement does not count it)."""
        return cost.untracked(self.findings)

    @property
    def shared_volumes(self) -> int:
        """Findings whose guest holds a volume another server may write: the worst there is."""
        return sum(1 for f in self.findings if danger.worst(f.dangers) is DangerKind.SHARED_VOLUME)

    def dangers(self, kind: DangerKind) -> int:
        """How many findings carry a danger of ``kind``."""
        return sum(1 for f in self.findings if any(d.kind is kind for d in f.dangers or ()))

    @property
    def has_orphans(self) -> bool:
        """True when something needs the operator (or the agent): exit code 3."""
        return any(f.kind in ORPHAN_KINDS for f in self.findings)

    def count(self, kind: Kind) -> int:
        """How many findings of ``kind``."""
        return sum(1 for f in self.findings if f.kind is kind)


@dataclasses.dataclass(frozen=True)
class JournalState:
    """What a told step needs from a journal: holds, live quarantine entries, and the
    leftovers' sightings of the earlier looks."""

    holds: Mapping[str, Hold] = dataclasses.field(default_factory=dict)
    quarantine: tuple[QuarantineEntry, ...] = ()
    leftover_sightings: Mapping[str, told.LeftoverSighting] = dataclasses.field(
        default_factory=dict
    )


def read_journal(journal_path: str | None) -> JournalState:
    """The holds, live quarantine entries and leftover sightings in the journal at
    ``journal_path``, read without locking or changing it; none when there is no journal.

    NOTE: docs/design.md rules 12, 14 and 22: ``audit`` and a dry run beside the live
    agent honour the live agent's holds and quarantine, and never take its lock.
    """
    journal = Journal.read_only(journal_path) if journal_path else None
    if journal is None:
        return JournalState()
    try:
        return state_of(journal)
    finally:
        journal.close()


def state_of(journal: Journal) -> JournalState:
    """``journal``'s holds, live quarantine entries and leftover sightings."""
    return JournalState(journal.holds(), tuple(journal.quarantine()), journal.leftover_sightings())


def read_holds(journal_path: str | None) -> dict[str, Hold]:
    """The guests on hold in the journal at ``journal_path`` (``read_journal``)."""
    return dict(read_journal(journal_path).holds)


def exit_code(report: HostAudit | None, *, acted: bool = False, failed: bool = False) -> int:
    """What an audit (or one agent cycle) exits with: 1 it failed, 4 it acted, 5 a finding
    endangers a shared volume, 3 it found orphans, else 0."""
    if failed:
        return exits.ERROR
    if acted:
        return exits.ACTED
    if report is not None and report.shared_volumes:
        return exits.SHARED_VOLUME
    return exits.FOUND if report is not None and report.has_orphans else exits.OK


def check_identity(
    hypervisor: Hypervisor,
    nova: NovaObserver,
    host: str,
    compute_id_dirs: Sequence[str],
    pinned_node: str | None = None,
) -> identity.Verdict:
    """Compare Nova's node(s) of ``host`` with the libvirt read, the local compute_id
    (looked for in ``compute_id_dirs``) and the operator's ``pinned_node``.

    Raises ``IdentityMismatch`` (one line naming both identities) on a mismatch;
    returns the verdict otherwise (verified, or unproven: the caller says so).
    """
    libvirt = hypervisor.identity()
    nodes = nova_nodes.nodes_for(nova, host, libvirt.hostname)
    local = nova_nodes.read_compute_id(compute_id_dirs)
    verdict = identity.verify(host, nodes, libvirt, local, pinned_node)
    if verdict.state is identity.State.MISMATCH:
        raise IdentityMismatch(reason=verdict.reason)
    return verdict


def audit(
    hypervisor: Hypervisor,
    nova: NovaObserver,
    host: str,
    now: datetime.datetime,
    deny: Selector | None = None,
    compute_id_dirs: Sequence[str] = (),
    observe_nova: ObserveNova | None = None,
    services: Services | None = None,
    pinned_node: str | None = None,
    instances_path: str | None = None,
    leftovers_due: Callable[[], bool] | None = None,
    earlier_leftovers: leftover.Leftovers | None = None,
) -> HostAudit:
    """Establish identity, observe the host's domains and Nova's view of it, and classify.

    ``observe_nova`` replaces ``nova.look`` (the agent's incremental view).
    Changes nothing. NOTE: identity comes first: a view of the wrong host is
    never classified (docs/design.md rule 10). libvirt is read before Nova so
    that Nova's answer is never older than the domains it is compared with.
    With ``services``, each orphan's dangers (Cinder, Neutron) and Placement's
    view of the host are added; their failures never fail the audit. With
    ``services.strays`` and ``instances_path``, the leftovers (docs/design.md §8b) too,
    unless ``leftovers_due`` (asked once Nova was observed) says this is not the cycle for
    them: then ``earlier_leftovers`` are carried, filtered against this cycle's views
    (``decide/told.carry``: they keep their look's time and get no command).
    """
    verdict = check_identity(hypervisor, nova, host, compute_id_dirs, pinned_node)
    domains = hypervisor.look()
    # NOTE: a deny-listed guest's finding shows Nova's full record even when Nova
    # manages it here, so its details are asked for.
    denied = [d.uuid for d in domains if deny is not None and deny.covers(d)]
    view = (observe_nova or nova.look)(host, [d.uuid for d in domains], denied)
    findings = classify(domains, view, deny)
    placement = leftovers = None
    if services is not None:
        facts = services.dangers.look(findings)
        findings = danger.with_dangers(findings, facts, host, view.servers_here.keys())
        placement = services.placement.look(node_name(verdict, host))
        due = leftovers_due is None or leftovers_due()
        if services.strays is not None and instances_path and due:
            leftovers = look_for_leftovers(
                services.strays, nova, view, domains, placement, instances_path
            )
            leftovers = dataclasses.replace(leftovers, looked_at=now)
        elif earlier_leftovers is not None:
            leftovers = told.carry(earlier_leftovers, [d.uuid for d in domains], view)
    nova_guests = sum(1 for d in domains if d.metadata is not None)
    return HostAudit(
        host,
        now,
        findings,
        verdict,
        nova_guests,
        len(view.servers_here),
        domains=tuple(domains),
        placement=placement,
        leftovers=leftovers,
    )


def look_for_leftovers(
    observer: LeftoverObserver,
    nova: NovaObserver,
    view: NovaView,
    domains: Sequence[Domain],
    placement: cost.PlacementAnswer,
    instances_path: str,
) -> leftover.Leftovers:
    """What lost servers left on and around the host, judged against Nova (docs/design.md
    §8b). Changes nothing; a look that fails makes its kind "not checked".

    Requests beyond the audit's: one listing per service (``observe/services/leftovers.py``),
    then from Nova the migrations touching the host (unless the audit asked them), the
    host's deleted servers when Cinder names servers it does not know (or from 5 UUIDs
    to explain on), one lookup per other UUID to explain, and the every-cell check when
    one has no record.
    """
    host = view.host
    provider = placement.provider.uuid if placement.provider else None
    seen = observer.look(host, provider)
    try:
        seen = dataclasses.replace(seen, dirs=instance_dirs(instances_path))
    except ObserveError as exc:
        seen = dataclasses.replace(
            seen, not_read={**seen.not_read, leftover.LeftoverKind.FILES: str(exc)}
        )
    uuids = [d.uuid for d in domains]
    try:
        view, records = _records(nova, view, seen, uuids)
        zones = nova.availability_zones() if seen.ports is not None else None
    except ObserveError as exc:
        return leftover_judge.find(seen, view, {}, uuids, instances_path, nova_error=str(exc))
    shared = shared_storage_refusal(instances_path) if seen.dirs else None
    found = leftover_judge.find(seen, view, records, uuids, instances_path, shared, zones=zones)
    return dataclasses.replace(found, attachment_hosts=_connectors(observer, found))


def _connectors(
    observer: LeftoverObserver, found: leftover.Leftovers
) -> dict[str, str | None] | str:
    """The host whose connector made each attachment that is a leftover (Cinder's
    ``host_name``), or why Cinder could not say."""
    pairs = [
        (i.volume, i.subject)
        for i in found.of(leftover.LeftoverKind.ATTACHMENT)
        if i.volume and i.remedy is not None
    ]
    if not pairs:
        return {}
    try:
        return observer.attachment_hosts(pairs)
    except ServiceError as exc:
        return str(exc)


def _records(
    nova: NovaObserver, view: NovaView, seen: leftover.Seen, domains: Sequence[str]
) -> tuple[NovaView, dict[str, Server | None]]:
    """``view`` with the host's migrations, and Nova's records of the UUIDs to judge."""
    if not view.migrations and leftover_judge.wanted(seen, view, domains):
        view = dataclasses.replace(view, migrations=nova.migrations_touching(view.host))
    wanted = leftover_judge.wanted(seen, view, domains)
    named = leftover_judge.attachment_servers(seen) - view.servers_here.keys() - view.lookups.keys()
    records: dict[str, Server | None] = {}
    if named - wanted or len(wanted) >= BULK_LOOKUP_FROM:
        deleted = nova.deleted_on_host(view.host)
        records.update({u: deleted[u] for u in (named | wanted) & deleted.keys()})
    records.update({u: nova.look_up(u) for u in sorted(wanted - records.keys())})
    if None in records.values():
        # NOTE: "no record" holds only when every cell answered (docs/design.md rule 17).
        nova.require_cells_answer()
    return view, records


def node_name(verdict: identity.Verdict, host: str) -> str | None:
    """The ``hypervisor_hostname`` of Nova's one compute node of ``host``: its provider's name."""
    names = {n.hypervisor_hostname for n in verdict.nodes if n.host == host}
    return names.pop() if len(names) == 1 else None


def tell(
    report: HostAudit,
    journal: JournalState,
    policy: Policy,
    *,
    brake: str | None,
    deny: Selector | None = None,
    host_instances_path: str | None = None,
    instances_path: str | None = None,
) -> tuple[HostAudit, dict[str, told.LeftoverSighting]]:
    """``report`` with its leftovers told (``decide/told.py``: a command, or why none), and
    the leftovers' sightings after this look.

    ``journal``: the holds, quarantine entries and earlier sightings that count (the live
    agent's, and the dry run's own); ``brake``: the cycle's (``brake``); ``deny``:
    deny-listed UUIDs get no command.
    """
    leftovers = report.leftovers
    if leftovers is None:
        return report, dict(journal.leftover_sightings)
    sightings = (
        dict(journal.leftover_sightings)
        if leftovers.carried
        else told.next_sightings(
            journal.leftover_sightings, leftovers, report.checked_at, policy.interval
        )
    )
    root, root_why = files_root(instances_path or "", host_instances_path)
    proofs = told.Proofs(
        verdict=gate.judge_told(identity=report.identity, brake=brake),
        host=report.host,
        now=report.checked_at,
        sightings=sightings,
        required=policy.leftover_looks,
        grace=datetime.timedelta(seconds=policy.leftover_grace),
        holds={u: held_why(h) for u, h in journal.holds.items()},
        denied=deny.uuids if deny is not None else frozenset(),
        quarantined={e.uuid: f"{e.path} (reaped {e.reaped_at})" for e in journal.quarantine},
        node_uuid=identity.proven_node(report.identity),
        files_root=root if instances_path else None,
        files_root_why=root_why if instances_path else "instances_path is not known",
        attachment_hosts=leftovers.attachment_hosts,
    )
    return dataclasses.replace(report, leftovers=told.tell(leftovers, proofs)), sightings


def brake(report: HostAudit, policy: Policy) -> str | None:
    """Why ``report``'s views look too wrong to act in (the decider's brake), or None."""
    return brake_of(
        report.findings, policy, report.nova_guests, report.servers_here, report.identity
    )
