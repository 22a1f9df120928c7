"""Bookkeeping of how long, and how steadily, each finding has been seen. Pure."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterable, Mapping

from nova_orphans.model import Finding, Kind


@dataclasses.dataclass(frozen=True)
class Sighting:
    """The journal's memory of one finding across cycles."""

    uuid: str
    kind: Kind
    first_seen: datetime.datetime
    last_seen: datetime.datetime
    #: Sightings that counted (see ``counts``), the first one included.
    consecutive: int
    #: When the guest was first seen not running in this streak (reap_delay counts from here).
    inactive_since: datetime.datetime | None = None
    #: Sightings that counted since ``inactive_since`` (reap_delay needs as many cycles as it
    #: implies, as well as the wall-clock delay).
    inactive_cycles: int = 0

    @property
    def cycles_since_first(self) -> int:
        """Counted cycles since the first sighting (grace needs as many as it implies)."""
        return self.consecutive - 1


def counts(before: Sighting, now: datetime.datetime, interval: float) -> bool:
    """Whether a sighting at ``now`` counts as one more consecutive cycle after ``before``.

    NOTE: only a sighting at least half an ``interval`` after the previous one
    counts. A crash-looping agent (systemd restarting it every few seconds, each
    start running a cycle at once), a ``run --once`` repeated by hand, or a wall
    clock stepped backwards (``now`` before ``last_seen``) would otherwise run
    through sightings_required, and the cycles grace and reap_delay need, in
    seconds. Such a sighting keeps the streak, but adds nothing to it.
    """
    return counts_after(before.last_seen, now, interval)


def counts_after(last: datetime.datetime, now: datetime.datetime, interval: float) -> bool:
    """Whether a cycle at ``now`` counts as one more after the one counted at ``last``."""
    return (now - last).total_seconds() >= interval / 2


def next_sightings(
    previous: Mapping[str, Sighting],
    findings: Iterable[Finding],
    now: datetime.datetime,
    interval: float,
) -> dict[str, Sighting]:
    """The sightings after a cycle at ``now`` that produced ``findings``.

    A finding that changed kind starts over; a finding not seen this cycle is
    forgotten, so "consecutive" really means consecutive.
    """
    result = {}
    for finding in findings:
        before = previous.get(finding.uuid)
        if before is not None and before.kind is not finding.kind:
            before = None
        active = finding.domain is not None and finding.domain.is_active
        if before is None:
            result[finding.uuid] = Sighting(
                finding.uuid, finding.kind, now, now, 1, None if active else now
            )
            continue
        step = int(counts(before, now, interval))
        inactive_since, inactive_cycles = None, 0
        if not active and before.inactive_since is None:
            inactive_since = now
        elif not active:
            inactive_since, inactive_cycles = before.inactive_since, before.inactive_cycles + step
        result[finding.uuid] = dataclasses.replace(
            before,
            last_seen=now,
            consecutive=before.consecutive + step,
            inactive_since=inactive_since,
            inactive_cycles=inactive_cycles,
        )
    return result
