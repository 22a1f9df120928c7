"""Bookkeeping of how long, and how steadily, each finding has been seen. Pure."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterable, Mapping

from nova_orphans.core.model import Finding, Kind


@dataclasses.dataclass(frozen=True)
class Sighting:
    """The journal's memory of one finding across cycles."""

    uuid: str
    kind: Kind
    first_seen: datetime.datetime
    last_seen: datetime.datetime
    consecutive: int
    #: When the guest was first seen not running in this streak (reap_delay counts from here).
    inactive_since: datetime.datetime | None = None


def next_sightings(
    previous: Mapping[str, Sighting], findings: Iterable[Finding], now: datetime.datetime
) -> dict[str, Sighting]:
    """The sightings after a cycle that produced ``findings``.

    A finding that changed kind starts over; a finding not seen this cycle is
    forgotten, so "consecutive" really means consecutive.
    """
    result = {}
    for finding in findings:
        before = previous.get(finding.uuid)
        if before is not None and before.kind is not finding.kind:
            before = None
        active = finding.domain is not None and finding.domain.is_active
        inactive_since = (
            None if active else (before.inactive_since if before and before.inactive_since else now)
        )
        result[finding.uuid] = Sighting(
            uuid=finding.uuid,
            kind=finding.kind,
            first_seen=before.first_seen if before else now,
            last_seen=now,
            consecutive=before.consecutive + 1 if before else 1,
            inactive_since=inactive_since,
        )
    return result
