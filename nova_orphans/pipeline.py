"""The audit half of the pipeline: observe libvirt, observe Nova, classify."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Sequence
from typing import Protocol

from nova_orphans.core.classify import classify
from nova_orphans.core.model import ORPHAN_KINDS, Domain, Finding, Kind, Selector
from nova_orphans.observe.nova import NovaObserver


class Hypervisor(Protocol):
    """What the audit needs from a hypervisor observer."""

    def list_domains(self) -> Sequence[Domain]:
        """Every domain on the host, active and inactive."""


@dataclasses.dataclass(frozen=True)
class AuditReport:
    """The outcome of one audit of one host."""

    host: str
    checked_at: datetime.datetime
    findings: list[Finding]
    #: Domains carrying Nova metadata, and live servers Nova places here (for the brake).
    nova_guests: int = 0
    servers_here: int = 0

    @property
    def has_orphans(self) -> bool:
        """True when something needs the operator (or the agent): exit code 3."""
        return any(f.kind in ORPHAN_KINDS for f in self.findings)

    def count(self, kind: Kind) -> int:
        """How many findings of ``kind``."""
        return sum(1 for f in self.findings if f.kind is kind)


def audit(
    hypervisor: Hypervisor,
    nova: NovaObserver,
    host: str,
    now: datetime.datetime,
    deny: Selector | None = None,
) -> AuditReport:
    """Observe the host's domains and Nova's view of it, and classify; changes nothing.

    libvirt is read first so that Nova's answer is never older than the domains
    it is compared with.
    """
    domains = hypervisor.list_domains()
    view = nova.observe(host, (d.uuid for d in domains))
    findings = classify(domains, view, deny)
    nova_guests = sum(1 for d in domains if d.metadata is not None)
    return AuditReport(host, now, findings, nova_guests, len(view.servers_here))
