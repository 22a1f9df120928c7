"""Nova's availability zones (``GET /os-availability-zone``): the names a port's owner
``compute:<zone>`` is checked against; an unusable answer is Nova's error, never no zones."""

from __future__ import annotations

from typing import Any

import pytest

from nova_orphans.fakes.nova import Fault, SimulatedNova
from nova_orphans.observe.errors import NovaBadAnswer, NovaError
from nova_orphans.observe.nova.observer import NovaObserver


def observer(nova: Any) -> NovaObserver:
    return NovaObserver(nova, retry=lambda call: call())


class Answering:
    """A Nova that answers every request with ``body``."""

    def __init__(self, body: Any, status: int = 200) -> None:
        self.body, self.status = body, status
        self.requests: list[str] = []

    def get(self, path: str) -> tuple[int, Any]:
        self.requests.append(path)
        return self.status, self.body


def zone(name: Any, available: bool = True) -> dict[str, Any]:
    return {"zoneName": name, "zoneState": {"available": available}, "hosts": None}


def test_the_default_zone_is_nova_in_one_request():
    nova = SimulatedNova()
    nova.add_compute("cmp-1")
    assert observer(nova).availability_zones() == frozenset({"nova"})
    assert nova.log == ["/os-availability-zone"]


def test_every_compute_s_zone_is_named_available_or_not():
    nova = SimulatedNova()
    for host in ("cmp-1", "cmp-2", "cmp-3", "cmp-4"):
        nova.add_compute(host)
    nova.zones.update({"cmp-2": "az-east", "cmp-3": "az-west", "cmp-4": "az-west"})
    nova.computes["cmp-2"].enabled = False
    nova.computes["cmp-3"].enabled = False
    zones = observer(nova).availability_zones()
    assert zones == frozenset({"nova", "az-east", "az-west"})
    # NOTE: as Nova: the available zones first, a zone with one enabled service available.
    status, body = nova.get("/os-availability-zone")
    listed = [(z["zoneName"], z["zoneState"]["available"]) for z in body["availabilityZoneInfo"]]
    assert status == 200
    assert listed == [("az-west", True), ("nova", True), ("az-east", False)]


def test_a_down_cell_s_zones_are_not_listed_as_nova_skips_them():
    nova = SimulatedNova()
    nova.add_compute("cmp-1")
    nova.add_compute("cmp-9", cell="cell2")
    nova.zones["cmp-9"] = "az-far"
    nova.down_cells.add("cell2")
    assert observer(nova).availability_zones() == frozenset({"nova"})


def test_no_compute_no_zone():
    nova = SimulatedNova()
    assert observer(nova).availability_zones() == frozenset()
    nova.add_compute("cmp-1")
    nova.inject(Fault.EMPTY, path="/os-availability-zone")
    assert observer(nova).availability_zones() == frozenset()


def test_an_unavailable_zone_and_the_internal_one_are_names_too():
    body = {"availabilityZoneInfo": [zone("nova"), zone("internal"), zone("az-2", False)]}
    assert observer(Answering(body)).availability_zones() == {"nova", "internal", "az-2"}


def test_nova_failing_the_listing_is_nova_s_error():
    nova = SimulatedNova()
    nova.add_compute("cmp-1")
    nova.inject(Fault.SERVER_ERROR, path="/os-availability-zone")
    with pytest.raises(NovaError):
        observer(nova).availability_zones()


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(None, id="no body"),
        pytest.param([zone("nova")], id="a list"),
        pytest.param({}, id="no availabilityZoneInfo"),
        pytest.param({"availabilityZoneInfo": {"nova": {}}}, id="zones a dict"),
        pytest.param({"availabilityZoneInfo": [zone("nova"), "az-2"]}, id="an entry no dict"),
        pytest.param({"availabilityZoneInfo": [{"zoneState": {}}]}, id="no zoneName"),
        pytest.param({"availabilityZoneInfo": [zone(None)]}, id="zoneName null"),
        pytest.param({"availabilityZoneInfo": [zone(7)]}, id="zoneName a number"),
        pytest.param({"availabilityZoneInfo": [zone("")]}, id="zoneName empty"),
        pytest.param({"availabilityZoneInfo": [zone("z" * 100_000)]}, id="zoneName huge"),
    ],
)
def test_an_unusable_zone_listing_is_a_bad_answer(body):
    with pytest.raises(NovaBadAnswer, match="availability zone listing") as caught:
        observer(Answering(body)).availability_zones()
    assert len(str(caught.value)) < 400


def test_a_zone_listing_nova_refuses_is_a_bad_answer():
    with pytest.raises(NovaBadAnswer, match="HTTP 404"):
        observer(Answering({"itemNotFound": {"message": "no"}}, status=404)).availability_zones()
