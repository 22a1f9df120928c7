"""Placement, Cinder and Neutron through the same keystoneauth session as Nova, served over HTTP.

``audit`` runs against the simulated Nova and simulated Placement, Cinder and Neutron
behind a Keystone whose catalog names them (or not). Each check fails closed on its own:
a service missing from the catalog, refusing (403), failing (500) or too slow makes that
danger ``unknown`` with its reason on one warning line; the audit still completes (exit 3).
"""

from __future__ import annotations

import json
import pathlib

import pytest

from nova_orphans import cli, exits
from nova_orphans.fakes import libvirt_node as worlds
from nova_orphans.fakes.nova import SimulatedNova
from nova_orphans.fakes.services import SimCinder, SimNeutron, SimPlacement
from tests import http_nova, report_schema

PASSWORD = "pw-services"
TOKEN = "admin-token-services"
VOLUME = "5a5a5a5a-0000-4000-8000-00000000005a"
OTHER_SERVER = "6b6b6b6b-0000-4000-8000-00000000006b"
MAC, OTHER_MAC = "fa:16:3e:12:34:56", "fa:16:3e:65:43:21"
#: Catalog types as a deployment names them; keystoneauth finds block-storage as volumev3.
CATALOG = {"placement": "placement", "volumev3": "Cinder", "network": "Neutron"}


@pytest.fixture
def cloud(tmp_path):
    nova = SimulatedNova()
    worlds.write_compute_id(nova.add_compute("cmp-1", **worlds.test_driver_node()).node_uuid)
    nova.boot("cmp-1", name="kept")
    placement, cinder, neutron = SimPlacement(), SimCinder(), SimNeutron()
    placement.add_provider(
        worlds.test_driver_node()["node"],
        nova.computes["cmp-1"].node_uuid,
        {"MEMORY_MB": {"total": 8192, "reserved": 0, "allocation_ratio": 1.0}},
        {"MEMORY_MB": 2048},
    )
    cinder.add_volume(VOLUME, "in-use", ((OTHER_SERVER, "cmp-2"),))
    neutron.add_port("port-9", MAC, OTHER_SERVER, ("10.1.0.9",), "cmp-2")
    with http_nova.serve(nova, PASSWORD, TOKEN) as served:
        served.services = {"placement": placement, "volumev3": cinder, "network": neutron}
        served.in_catalog = set(CATALOG)
        yield served


def orphan_world(tmp_path: pathlib.Path, cloud: http_nova.Cloud) -> str:
    """A deleted server's guest with a Cinder volume and two NICs, beside the kept one."""
    nova = cloud.nova
    gone = nova.boot("cmp-1", name="gone")
    nova.local_delete(gone, at=nova.clock)
    kept = next(u for u, s in nova.servers.items() if s.name == "kept")
    volume = (
        "<disk type='block' device='disk'><source dev='/dev/sdb'/>"
        f"<target dev='vdb' bus='virtio'/><serial>{VOLUME}</serial></disk>"
    )
    domains = [
        worlds.node_domain(uuid=kept, name="kept", metadata=worlds.nova_metadata()),
        worlds.node_domain(
            uuid=gone,
            name="gone",
            metadata=worlds.nova_metadata(),
            devices=[
                volume,
                worlds.bridge_interface(MAC, "tap1"),
                worlds.bridge_interface(OTHER_MAC, "tap2"),
            ],
        ),
    ]
    return worlds.write_node_file(tmp_path, domains)


def instances(tmp_path: pathlib.Path) -> pathlib.Path:
    """The host's instances_path: nothing in it."""
    path = tmp_path / "instances"
    path.mkdir(exist_ok=True)
    return path


def config(tmp_path: pathlib.Path, cloud: http_nova.Cloud, services: str = "") -> str:
    path = tmp_path / "nova-orphans.conf"
    path.write_text(
        f"[DEFAULT]\nhost = cmp-1\ninstances_path = {instances(tmp_path)}\n"
        f"[agent]\nstate_dir = {tmp_path / 'state'}\n"
        f"[nova]\ntimeout = 1\nauth_type = password\nauth_url = {cloud.auth_url}\n"
        f"username = nova-orphans\npassword = {PASSWORD}\nproject_name = service\n"
        "user_domain_name = Default\nproject_domain_name = Default\n" + services
    )
    return str(path)


def audit(tmp_path, cloud, capsys, services: str = "") -> tuple[int, dict, str]:
    uri = orphan_world(tmp_path, cloud)
    argv = ["audit", "--config-file", config(tmp_path, cloud, services), "--libvirt-uri", uri]
    code = cli.main([*argv, "--format", "json"])
    out, err = capsys.readouterr()
    return code, report_schema.valid(json.loads(out)), err


def dangers(document: dict) -> list[str]:
    (finding,) = [f for f in document["findings"] if f["kind"] == "deleted"]
    return [d["danger"] for d in finding["dangers"]]


def test_every_service_found_in_the_catalog_with_one_request_per_check(tmp_path, cloud, capsys):
    code, document, err = audit(tmp_path, cloud, capsys)
    assert code == exits.SHARED_VOLUME, err
    assert err == ""
    assert dangers(document) == ["shared-volume", "address-conflict"]
    assert document["shared_volume"] is True
    assert document["dangers"] == {"shared-volume": 1, "address-conflict": 1, "unknown": 0}
    assert document["cost"]["placement"]["resources"]["MEMORY_MB"]["used"] == 2048
    # One request for all the MACs, one per volume, three for Placement; then for the
    # leftovers one listing each (docs/design.md §8b): ports bound here, the attachments,
    # the provider's allocations.
    assert cloud.services["network"].requests == [
        f"/v2.0/ports?mac_address={MAC.replace(':', '%3A')}"
        f"&mac_address={OTHER_MAC.replace(':', '%3A')}",
        "/v2.0/ports?binding%3Ahost_id=cmp-1",
    ]
    assert cloud.services["volumev3"].requests == [
        f"/volumes/{VOLUME}",
        "/attachments?all_tenants=1",
    ]
    node = cloud.nova.computes["cmp-1"].node_uuid
    assert len(cloud.services["placement"].requests) == 4
    assert cloud.services["placement"].requests[-1] == f"/resource_providers/{node}/allocations"
    assert document["leftovers"]["counts"] == {
        "stray-files": 0, "stray-port": 0, "stray-attachment": 0, "stray-allocation": 1,
        "foreign-port": 0,
    }  # fmt: skip
    # Through the one session: the token Keystone issued, nothing else.
    assert set(cloud.tokens_seen) == {http_nova.ISSUED_TOKEN}


@pytest.mark.parametrize(
    ("break_it", "reason"),
    [
        pytest.param(
            lambda c: c.in_catalog.discard("volumev3"),
            "no block-storage endpoint in the service catalog",
            id="missing from the catalog",
        ),
        pytest.param(lambda c: setattr(c.services["volumev3"], "fail", 403), "HTTP 403", id="403"),
        pytest.param(lambda c: setattr(c.services["volumev3"], "fail", 500), "HTTP 500", id="500"),
        pytest.param(lambda c: c.delay.update(volumev3=2.5), "Cinder unreachable", id="timeout"),
    ],
)  # fmt: skip
def test_cinder_failing_makes_the_volume_danger_unknown_and_the_audit_completes(
    tmp_path, cloud, capsys, break_it, reason
):
    break_it(cloud)
    code, document, err = audit(tmp_path, cloud, capsys)
    assert code == exits.FOUND
    assert dangers(document) == ["address-conflict", "unknown"]
    (line,) = err.splitlines()
    assert line.startswith("nova-orphans: warning: danger unknown for 1 findings: Cinder")
    assert reason in line
    # docs/design.md rule 21: the attachments were not checked, never "none left".
    assert document["leftovers"]["counts"]["stray-attachment"] is None
    assert reason in document["leftovers"]["not_checked"]["stray-attachment"]
    assert document["dangers"]["unknown"] == 1 and document["shared_volume"] is False


def test_neutron_failing_leaves_the_shared_volume_found(tmp_path, cloud, capsys):
    cloud.in_catalog.discard("network")
    code, document, err = audit(tmp_path, cloud, capsys)
    assert code == exits.SHARED_VOLUME
    assert dangers(document) == ["shared-volume", "unknown"]
    assert "Neutron: no network endpoint in the service catalog" in err


def test_placement_missing_is_said_and_the_costs_still_reported(tmp_path, cloud, capsys):
    cloud.in_catalog.discard("placement")
    _, document, _ = audit(tmp_path, cloud, capsys)
    placement = document["cost"]["placement"]
    assert placement["provider"] is None
    assert "no placement endpoint in the service catalog" in placement["error"]
    assert document["cost"]["untracked"]["guests"] == 1


def test_a_configured_endpoint_is_used_where_the_catalog_has_none(tmp_path, cloud, capsys):
    cloud.in_catalog.clear()
    services = (
        f"[services]\nplacement_endpoint = {cloud.base}/placement\n"
        f"volume_endpoint = {cloud.base}/volumev3\nnetwork_endpoint = {cloud.base}/network\n"
    )
    code, document, err = audit(tmp_path, cloud, capsys, services)
    assert (code, err) == (exits.SHARED_VOLUME, "")
    assert dangers(document) == ["shared-volume", "address-conflict"]
    assert document["cost"]["placement"]["provider"] == worlds.test_driver_node()["node"]


@pytest.mark.parametrize(
    ("services", "message"),
    [
        (
            "[services]\nvolume_endpoint = ftp://cinder\n",
            "[services] volume_endpoint = ftp://cinder is not valid",
        ),
        (
            "[services]\nvolume_endpont = http://cinder\n",
            "[services] volume_endpont is not an option; did you mean volume_endpoint?",
        ),
    ],
)  # fmt: skip
def test_the_endpoints_are_checked_like_every_option(tmp_path, cloud, capsys, services, message):
    argv = ["audit", "--config-file", config(tmp_path, cloud, services)]
    assert cli.main([*argv, "--libvirt-uri", "test:///default"]) == exits.USAGE
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("nova-orphans: config error: ") and message in line
    assert cloud.tokens_seen == []


def test_a_volume_cinder_does_not_know_endangers_nothing(tmp_path, cloud, capsys):
    cloud.services["volumev3"].volumes.clear()
    code, document, err = audit(tmp_path, cloud, capsys)
    assert (code, err) == (exits.FOUND, "")
    assert dangers(document) == ["address-conflict"]


def test_a_404_from_an_endpoint_that_is_not_cinders_is_unknown_not_no_such_volume(
    tmp_path, cloud, capsys
):
    """A wrong volume_endpoint (here Neutron's) answers 404 to every volume: that is not
    Cinder saying it has no such volume, so the danger is unknown (docs/design.md rule 3)."""
    services = f"[services]\nvolume_endpoint = {cloud.base}/network\n"
    code, document, err = audit(tmp_path, cloud, capsys, services)
    assert code == exits.FOUND
    assert dangers(document) == ["address-conflict", "unknown"]
    (line,) = err.splitlines()
    assert f"Cinder answered GET /volumes/{VOLUME} with HTTP 404" in line
    assert "is this Cinder's endpoint?" in line
    assert document["leftovers"]["not_checked"]["stray-attachment"].startswith(
        "Cinder answered GET /attachments?all_tenants=1 with HTTP 404"
    )


def test_leftovers_one_line_per_kind_and_listed_with_their_commands(tmp_path, cloud, capsys):
    """docs/design.md §8b: the table says each kind in one line; ``--leftovers`` lists each
    with the command that removes it (the server here Placement has no allocation of), on
    rule 22's proofs: the node pinned, seen in the one look asked for."""
    uri = orphan_world(tmp_path, cloud)
    node = cloud.nova.computes["cmp-1"].node_uuid
    proofs = "[leftovers]\nsightings_required = 1\ngrace_period = 0\n"
    conf = config(tmp_path, cloud, proofs)
    pathlib.Path(conf).write_text(
        pathlib.Path(conf).read_text().replace("[agent]", f"compute_node_uuid = {node}\n[agent]")
    )
    argv = ["audit", "--config-file", conf, "--libvirt-uri", uri]
    cli.main(argv)
    table = capsys.readouterr().out
    assert "leftovers stray-allocation: 1 (1 servers here with no allocation)" in table, table
    assert "leftovers stray-files: 0" in table and "heal_allocations" not in table
    cli.main([*argv, "--leftovers"])
    listed = capsys.readouterr().out.splitlines()
    kept = next(u for u, s in cloud.nova.servers.items() if s.name == "kept")
    assert f"    nova-manage placement heal_allocations --instance {kept}" in listed
