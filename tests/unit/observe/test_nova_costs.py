"""The benchmarks' Nova cost model: request-log parsing, the fit, and what the simulation charges.

No timing here: the charged sleeps are recorded, not waited for.
"""

from __future__ import annotations

import pathlib

import pytest

from benchmarks import bench_audit
from benchmarks.nova_costs import (
    Cost,
    CostModel,
    Sample,
    endpoint_of,
    fit,
    parse_request_log,
    records_in,
)
from nova_orphans.fakes.nova import SimulatedNova

UUID = "0b6bd5a1-3f44-4d0e-9d4e-8f0c6e1f2a3b"
LOG = [
    "2026-11-30 13:47:27.601 31849 INFO nova.api.openstack.requestlog [None req-1 admin "
    'nova-orphans-bench - - - -] 127.0.0.1 "GET /v2.1/servers/detail?all_tenants=1&host=host1'
    '&limit=1000" status: 200 len: 1532 microversion: 2.69 time: 5.250000',
    "2026-11-30 13:47:27.611 31849 INFO nova.api.openstack.requestlog [None req-2 admin admin "
    f'- - - -] 127.0.0.1 "GET /v2.1/servers/{UUID}" status: 404 len: 111 microversion: 2.96 '
    "time: 0.019073",
    "2026-11-30 13:47:27.621 31849 INFO nova.api.openstack.wsgi [None req-3 admin "
    "nova-orphans-bench - - - -] HTTP exception thrown: Instance x could not be found.",
    "2026-11-30 13:47:27.631 31849 INFO nova.api.openstack.requestlog [None req-4 admin "
    f'nova-orphans-bench - - - -] 127.0.0.1 "GET /v2.1/servers/{UUID}" status: 404 len: 111 '
    "microversion: 2.69 time: 0.020500",
]


@pytest.mark.parametrize(
    ("path", "endpoint"),
    [
        ("/servers/detail?all_tenants=1&host=h", "servers/detail"),
        ("/v2.1/servers?all_tenants=1&host=h", "servers"),
        (f"/servers/{UUID}", "servers/show"),
        (f"/v2.1/servers/{UUID}/migrations", "servers/migrations"),
        ("/os-migrations?host=h&limit=1000", "os-migrations"),
        ("/os-hypervisors/detail?hypervisor_hostname_pattern=x", "os-hypervisors/detail"),
        ("/os-services?binary=nova-compute", "os-services"),
        ("/flavors", "other"),
    ],
)
def test_endpoint_of_names_the_endpoint_whatever_the_prefix_and_query(
    path: str, endpoint: str
) -> None:
    assert endpoint_of(path) == endpoint


def test_records_in_counts_listings_and_single_servers() -> None:
    assert records_in({"servers": [{}, {}, {}], "servers_links": []}) == 3
    assert records_in({"migrations": []}) == 0
    assert records_in({"server": {"id": UUID}}) == 1
    assert records_in({"itemNotFound": {"code": 404}}) == 0
    assert records_in(None) == 0


def test_request_log_keeps_the_projects_requests_in_order() -> None:
    found = parse_request_log(LOG, "nova-orphans-bench")
    assert [(r.endpoint, r.status, r.seconds) for r in found] == [
        ("servers/detail", 200, 5.25),
        ("servers/show", 404, 0.0205),
    ]
    assert found[0].uri.endswith("host=host1&limit=1000")
    assert [r.uri for r in parse_request_log(LOG, "admin")] == [f"/v2.1/servers/{UUID}"]


def test_fit_recovers_fixed_and_per_record_cost() -> None:
    cost = fit([(100, 0.02 + 100 * 0.005), (1000, 0.02 + 1000 * 0.005), (0, 0.02)])
    assert cost.fixed == pytest.approx(0.02)
    assert cost.per_record == pytest.approx(0.005)
    assert cost.of(10) == pytest.approx(0.07)


def test_fit_is_flat_for_one_record_count_or_a_falling_line() -> None:
    assert fit([(1, 0.01), (1, 0.03), (1, 0.02)]) == Cost(0.02)
    assert fit([(0, 0.05), (10, 0.01), (20, 0.02)]) == Cost(0.02)
    with pytest.raises(ValueError):
        fit([])


def test_model_fits_both_sides_and_round_trips(tmp_path: pathlib.Path) -> None:
    samples = [
        Sample("servers/detail", 100, 0.6, 0.5),
        Sample("servers/detail", 1000, 5.1, 5.0),
        Sample("servers/show", 1, 0.02, 0.015),
        Sample("servers/show", 0, 0.02),
    ]
    model = CostModel.fitted(samples, {"date": "2026-11-30"})
    assert model.cost("/servers/detail?host=h", 500) == pytest.approx(0.6 + 400 * 0.005)
    assert model.cost("/servers/detail?host=h", 500, side="server") == pytest.approx(2.5)
    assert model.cost(f"/servers/{UUID}", 1, side="server") == pytest.approx(0.015)
    assert model.cost("/os-services", 3) == 0.0  # no fit: the default
    path = tmp_path / "costs.json"
    path.write_text(model.to_json())
    again = CostModel.load(path)
    assert again.about["date"] == "2026-11-30"
    for side in ("client", "server"):
        assert again.cost("/servers/detail", 700, side) == pytest.approx(
            model.cost("/servers/detail", 700, side), rel=1e-3
        )


def test_simulated_nova_charges_the_model_per_request_and_per_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    charged: list[float] = []
    monkeypatch.setattr(bench_audit.time, "sleep", charged.append)
    nova = SimulatedNova()
    for _ in range(7):
        nova.boot("h1")
    model = CostModel({"servers/detail": Cost(0.01, 0.001)}, {}, Cost(0.002))
    transport = bench_audit.Latent(nova, model)
    status, body = transport.get("/servers/detail?all_tenants=1&host=h1")
    assert status == 200 and len(body["servers"]) == 7
    transport.get("/os-services?binary=nova-compute")
    assert charged == pytest.approx([0.01 + 7 * 0.001, 0.002])
    assert nova.request_count == 2
