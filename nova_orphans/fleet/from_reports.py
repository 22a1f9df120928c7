"""The report-based fleet audit: merge the hosts' own reports with Nova's host list.

Nova requests: one listing of the nova-compute services, whatever the size of
the fleet, plus, for each UUID seen running on two trusted hosts, the server's
record and its migrations (two requests; usually there is none). No libvirt
connection is opened: every host's agent or tooling wrote what it saw.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Sequence

from nova_orphans.fleet import merge, records
from nova_orphans.observe.nova.fleet import FleetNovaObserver


def merge_reports(
    parsed: Sequence[records.PerHostReport | records.BadReport],
    nova: FleetNovaObserver,
    now: datetime.datetime,
    max_age: datetime.timedelta,
) -> records.MergedFleet:
    """Merge the reports; raises ``NovaError`` when Nova fails (nothing is concluded then)."""
    reports = [p for p in parsed if isinstance(p, records.PerHostReport)]
    bad = [p for p in parsed if isinstance(p, records.BadReport)]
    hosts, unattributed = merge.standings(reports, bad, nova.compute_hosts(), now, max_age)
    merged = merge.merge(hosts, unattributed, nova.look_up_with_migrations, now, max_age)
    return dataclasses.replace(merged, nova_requests=nova.requests_made)
