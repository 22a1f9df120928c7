"""The per-host reports as the fleet merge reads them, and what it makes of them. Pure.

Both fleet audits make these records, and only these: ``fleet/reports.py`` reads each host's
report (hostile input, docs/design.md rule 20) into them, and ``fleet/audit.py`` makes one
per host it scanned over libvirt. ``fleet/merge.py`` judges each host's standing, merges the
trusted ones and holds the one split-brain rule; ``render/fleet.py`` renders the result.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import enum
from collections.abc import Mapping

from nova_orphans.classify.leftover import LeftoverKind
from nova_orphans.model import ORPHAN_KINDS, DomainState, Finding, Kind, Usage

#: States in which the guest executes (and may write its disks). NOTE: a paused
#: copy is not running: during a live migration one side is always paused
#: (pre-copy: the destination; post-copy: the source), so a migration never
#: shows two running copies.
RUNNING_STATES = frozenset({DomainState.RUNNING, DomainState.BLOCKED, DomainState.SHUTDOWN})


@dataclasses.dataclass(frozen=True)
class SeenDomain:
    """One domain a host's report lists: its UUID, name and libvirt state."""

    uuid: str
    name: str
    state: DomainState

    @property
    def running(self) -> bool:
        """True when the guest executes (a paused copy does not)."""
        return self.state in RUNNING_STATES


@dataclasses.dataclass(frozen=True)
class ReportedFinding:
    """One finding as the host classified it."""

    uuid: str
    name: str
    kind: Kind
    reason: str
    #: What the guest consumed when the report was written (None: the report does not say).
    usage: Usage | None = None
    #: The reason in a few words (empty when the report has none).
    brief: str = ""
    #: What the domain XML of a deleted or unknown guest still points at (``remnants``);
    #: only a scan tells them.
    remnants: tuple[str, ...] = ()
    #: The whole finding when this process classified it over libvirt (a scan); None for
    #: a report's, of which only the fields above are read (docs/design.md rule 20).
    finding: Finding | None = None


@dataclasses.dataclass(frozen=True)
class ReportedLeftover:
    """One leftover as the host told it (docs/design.md §8b): no command is carried over,
    a report is hostile input (rule 20); the host's own audit prints it."""

    kind: LeftoverKind
    subject: str
    server: str | None


@dataclasses.dataclass(frozen=True)
class ReportedLeftovers:
    """A host's leftovers: how many of each kind (None: not checked there), and each."""

    counts: Mapping[LeftoverKind, int | None]
    items: tuple[ReportedLeftover, ...] = ()


@dataclasses.dataclass(frozen=True)
class PerHostReport:
    """One host's report, as read from ``source`` (its file ``H.json``, or ``stdin #N from H``)."""

    source: str
    host: str
    checked_at: datetime.datetime
    #: ``verified``, ``unproven`` or ``mismatch`` (docs/design.md rule 10).
    identity: str
    identity_reason: str
    domains: tuple[SeenDomain, ...]
    findings: tuple[ReportedFinding, ...]
    #: None when the report does not tell them (not looked for, or an older nova-orphans).
    leftovers: ReportedLeftovers | None = None

    @property
    def identity_verified(self) -> bool:
        """True only when the report proves its libvirt read is the host Nova means."""
        return self.identity == "verified"


@dataclasses.dataclass(frozen=True)
class BadReport:
    """A report that could not be used, and why; ``host`` when the document named one."""

    source: str
    reason: str
    host: str | None = None


class Standing(str, enum.Enum):
    """How far a host's report can be trusted. ``audited`` and ``unreachable`` are a scan's:
    its libvirt read just now by this process, or not read at all."""

    TRUSTED = "trusted"
    AUDITED = "audited"
    UNREACHABLE = "unreachable"
    STALE = "stale"
    UNRELIABLE = "unreliable"
    UNREADABLE = "unreadable"
    MISSING = "missing"


#: The standings whose report is merged as truth.
MERGED = frozenset({Standing.TRUSTED, Standing.AUDITED})


@dataclasses.dataclass(frozen=True)
class HostStanding:
    """One host of the merged fleet: its report (if any), how far it is trusted, and why."""

    host: str
    standing: Standing
    report: PerHostReport | None
    notes: tuple[str, ...]
    known_to_nova: bool
    #: A scan's: the libvirt URI read, and why it could not be (None for a report).
    uri: str | None = None
    error: str | None = None

    @property
    def trusted(self) -> bool:
        """True when this host's report is merged as truth."""
        return self.standing in MERGED and self.report is not None

    @property
    def findings(self) -> tuple[ReportedFinding, ...]:
        """The host's own findings when its report is trusted; none otherwise."""
        return self.report.findings if self.trusted and self.report else ()

    @property
    def leftovers(self) -> ReportedLeftovers | None:
        """The host's leftovers when its report is trusted and tells them; None otherwise."""
        return self.report.leftovers if self.trusted and self.report else None


@dataclasses.dataclass(frozen=True)
class CrossHost:
    """A UUID seen on two or more trusted hosts: where it is defined and where it runs."""

    uuid: str
    name: str
    hosts: tuple[str, ...]
    running_on: tuple[str, ...]
    reason: str


@dataclasses.dataclass(frozen=True)
class MergedFleet:
    """The fleet as its hosts' reports (or this process's scans of them) tell it, checked
    against Nova."""

    checked_at: datetime.datetime
    #: None for a scan: every host was read just now.
    max_age: datetime.timedelta | None
    hosts: tuple[HostStanding, ...]
    #: Reports that could not be used and name no host.
    unattributed: tuple[BadReport, ...]
    split_brain: tuple[CrossHost, ...]
    #: Split-brain candidates Nova explains by a migration between the two reports.
    moved: tuple[CrossHost, ...]
    #: Defined on two or more trusted hosts, running on at most one.
    duplicates: tuple[CrossHost, ...]
    nova_requests: int = 0
    #: ``scan`` (this process read every host's libvirt) or ``reports``.
    source: str = "reports"

    @property
    def incomplete(self) -> list[HostStanding]:
        """Hosts whose report is stale, unreliable, unreadable or missing, or whose libvirt
        could not be read (exit code 1)."""
        return [h for h in self.hosts if not h.trusted]

    @property
    def has_orphans(self) -> bool:
        """Split-brain, or an orphan in a trusted host's report (exit code 3)."""
        return bool(self.split_brain) or any(
            f.kind in ORPHAN_KINDS for h in self.hosts if h.trusted for f in h.findings
        )

    def counts(self) -> collections.Counter[Kind]:
        """Findings by kind: one split-brain per UUID, and the trusted hosts' own findings."""
        found = collections.Counter(f.kind for h in self.hosts for f in h.findings)
        found[Kind.SPLIT_BRAIN] += len(self.split_brain)
        return +found
