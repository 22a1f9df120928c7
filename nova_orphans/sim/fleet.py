"""``fleet audit --reports`` in a history: the agent's last report, one forged beside it,
and the other compute's own, merged as the product merges them.

Invariant 15 (``checks.fleet_merged``): a forged report never hides the host's orphans.
Invariant 17, **split-brain**: no healthy server is told as split-brain. The other
compute's report says what it runs at the moment the host's report was taken (every server
Nova places there); a server is healthy at that moment when it runs on the host Nova places
it on and nowhere else, judged from the simulated rows and domains, so two reports of one
moment can show no healthy server running twice.
"""

from __future__ import annotations

import dataclasses
import datetime
import json

from nova_orphans.audit import HostAudit
from nova_orphans.fleet.from_reports import merge_reports
from nova_orphans.fleet.records import MergedFleet, PerHostReport, SeenDomain
from nova_orphans.fleet.reports import parse_document
from nova_orphans.model import DomainState
from nova_orphans.observe.nova.fleet import FleetNovaObserver
from nova_orphans.render import host as host_report
from nova_orphans.sim import checks
from nova_orphans.sim.cloud import HOST, OTHER, Cloud
from nova_orphans.sim.steps import Setup
from nova_orphans.sim.truth import BUSY_MIGRATION

SPLIT_BRAIN = "17-split-brain"
#: Reports forged (or from a clock far off) beside the host's own, each claiming the host
#: holds no orphan: dated ahead, of a host Nova does not know, or disagreeing with the
#: host's own report at about the same time.
FORGERIES = ("ahead", "unknown-host", "conflicting")
#: A host no nova-compute service of Nova runs on.
UNKNOWN_HOST = "cmp-9"


@dataclasses.dataclass(frozen=True)
class Moment:
    """What ran where when a cycle of the agent looked: the other compute's servers
    (uuid, name), and the healthy servers of both computes."""

    elsewhere: tuple[tuple[str, str], ...]
    healthy: frozenset[str]


def moment(cloud: Cloud) -> Moment:
    """The other compute's servers and the healthy servers, now."""
    rows = [r for r in cloud.nova.servers.values() if not r.deleted]
    running_here = {u for u, d in cloud.hv.domains.items() if d.is_active}
    there = tuple(sorted((r.uuid, r.name) for r in rows if r.host == OTHER))
    healthy = {r.uuid for r in rows if r.host == HOST and r.uuid in running_here}
    healthy |= {u for u, _ in there if u not in running_here}
    # NOTE: a server Nova moves is neither here nor there yet.
    moving = {
        m.instance_uuid for m in cloud.nova.migrations.values()
        if not m.deleted and m.status in BUSY_MIGRATION
    }  # fmt: skip
    return Moment(there, frozenset(healthy - moving))


@dataclasses.dataclass(frozen=True)
class Merged:
    """One merge: whether the forged report was flagged, and the invariants it broke."""

    flagged: bool
    problems: tuple[tuple[str, str], ...]


def merge(
    forgery: str,
    report: HostAudit,
    seen: Moment,
    cloud: Cloud,
    setup: Setup,
    now: datetime.datetime,
) -> Merged:
    """Merge the host's ``report``, a forged one and the other
    compute's (of the moment ``seen``) at ``now`` on the agent's clock."""
    own = parse_document(json.loads(host_report.render_json(report)), f"{HOST}.json")
    assert isinstance(own, PerHostReport), own
    lie = dataclasses.replace(own, source="forged.json", findings=())
    if forgery == "ahead":
        lie = dataclasses.replace(lie, checked_at=now + datetime.timedelta(minutes=25))
    elif forgery == "unknown-host":
        lie = dataclasses.replace(lie, host=UNKNOWN_HOST, checked_at=now)
    else:
        lie = dataclasses.replace(lie, checked_at=own.checked_at + datetime.timedelta(seconds=1))
    there = dataclasses.replace(
        own, source=f"{OTHER}.json", host=OTHER, identity="verified", identity_reason="",
        domains=tuple(SeenDomain(u, n, DomainState.RUNNING) for u, n in seen.elsewhere),
        findings=(), leftovers=None,
    )  # fmt: skip
    max_age = datetime.timedelta(seconds=3 * setup.interval)
    nova = FleetNovaObserver(cloud.nova, page_size=setup.page_size)
    merged = merge_reports([own, lie, there], nova, now, max_age)
    standing = {h.host: h for h in merged.hosts}
    flagged = not standing[lie.host].trusted or standing[lie.host].report != lie
    problems = [(checks.FLEET, p) for p in checks.fleet_merged(own, lie, merged)]
    problems += [(SPLIT_BRAIN, p) for p in split_brain(merged, seen, cloud)]
    return Merged(flagged, tuple(problems))


def split_brain(merged: MergedFleet, seen: Moment, cloud: Cloud) -> list[str]:
    """Invariant 17: the healthy servers the merge tells as split-brain."""
    return [
        f"healthy server {_label(cloud, item.uuid)} told as split-brain: {item.reason}"
        for item in merged.split_brain
        if item.uuid in seen.healthy
    ]


def _label(cloud: Cloud, uuid: str) -> str:
    row = cloud.nova.servers.get(uuid)
    return row.name.removeprefix("instance-") if row is not None else uuid
