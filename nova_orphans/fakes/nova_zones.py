"""The simulated Nova's availability zones: ``GET /os-availability-zone`` as Nova answers it.

A compute host is in the zone ``SimulatedNova.zones`` names for it, ``nova`` (Nova's
``[DEFAULT] default_availability_zone``) when it names none. ``SimulatedNova``
(fakes/nova.py) is the only user. Facts marked NOTE were checked in openstack/nova
(api/openstack/compute/availability_zone.py, availability_zones.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from nova_orphans.fakes.nova_views import SimCompute

#: NOTE: ``[DEFAULT] default_availability_zone``: a compute in no zone's aggregate.
DEFAULT_ZONE = "nova"


def zone_of(compute: SimCompute, zones: Mapping[str, str]) -> str:
    """The availability zone of ``compute``."""
    return zones.get(compute.host, DEFAULT_ZONE)


def zone_listing(
    computes: Iterable[SimCompute], zones: Mapping[str, str], down_cells: set[str]
) -> dict[str, Any]:
    """The body of ``GET /os-availability-zone`` (the summary: no hosts).

    NOTE: availability_zones.get_availability_zones: the zones of the enabled services
    are available, those of only disabled ones not, each list sorted, available first;
    a cell that does not answer is skipped (scatter-gather, no down-cell support). The
    internal zone (the scheduler's, the conductor's) is never listed, so here only the
    computes' zones are.
    """
    up = [c for c in computes if c.cell not in down_cells]
    available = {zone_of(c, zones) for c in up if c.enabled}
    unavailable = {zone_of(c, zones) for c in up if not c.enabled} - available
    return {
        "availabilityZoneInfo": [
            {"zoneName": name, "zoneState": {"available": state}, "hosts": None}
            for names, state in ((available, True), (unavailable, False))
            for name in sorted(names)
        ]
    }
