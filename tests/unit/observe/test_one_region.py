"""One region: Nova, Placement, Cinder and Neutron are all asked in the region of Nova's endpoint.

With no region named keystoneauth takes each service's first endpoint in the catalog, which may
be another region's for one service and not for the next: another region's resources would be
told as this host's. So nothing is guessed: the region named (``[nova] region_name``,
``OS_REGION_NAME``, the clouds.yaml cloud's) serves every service; a catalog of one region has
it pinned for every service; a catalog of several regions, for compute or for any service asked
through it, with none named is one config error line naming them and the option (exit 2).

A keystoneauth session over a served catalog (``tests/http_nova.py``).
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

from nova_orphans import cli, config, exits
from nova_orphans.cli import audit as audit_cli
from nova_orphans.observe.nova.session import RegionNotNamed
from tests import http_nova
from tests.unit.observe.test_services_through_keystoneauth import (
    PASSWORD,
    VOLUME,
    cloud,  # noqa: F401 (the fixture)
    dangers,
    orphan_world,
)
from tests.unit.observe.test_services_through_keystoneauth import config as conf_file

DEAD = "http://127.0.0.1:1"
#: Catalog type, the type the services are asked by (keystoneauth finds block-storage as
#: volumev3), and the service in the operator's words.
SERVICES = [("placement", "placement", "Placement"), ("volumev3", "block-storage", "Cinder"),
            ("network", "network", "Neutron")]  # fmt: skip
#: A request each simulated service answers with 200.
ASK = {"Placement": "/resource_providers", "Cinder": f"/volumes/{VOLUME}",
       "Neutron": "/v2.0/ports"}  # fmt: skip


@pytest.fixture(autouse=True)
def _no_region_from_the_environment(monkeypatch):
    monkeypatch.delenv("OS_REGION_NAME", raising=False)


def run(capsys, *argv: str) -> tuple[int, str, list[str]]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err.splitlines()


def audit(tmp_path: pathlib.Path, cloud_: http_nova.Cloud, capsys, conf: str):
    uri = orphan_world(tmp_path, cloud_)
    return run(capsys, "audit", "--config-file", conf, "--libvirt-uri", uri, "--format", "json")


def second_region(monkeypatch, service_type: str, url: str = DEAD) -> None:
    """The catalog Keystone issues also offers ``service_type`` in RegionTwo, after RegionOne."""
    made = http_nova.token_body

    def token_body(*args: Any, **kwargs: Any) -> dict[str, Any]:
        token = made(*args, **kwargs)
        for entry in token["token"]["catalog"]:
            if entry["type"] == service_type:
                entry["endpoints"] += [
                    dict(e, id=f"{e['id']}-2", region="RegionTwo", region_id="RegionTwo", url=url)
                    for e in entry["endpoints"]
                ]
        return token

    monkeypatch.setattr(http_nova, "token_body", token_body)


def refusal(err: list[str]) -> str:
    (line,) = err
    assert line.startswith("nova-orphans: config error: the service catalog holds regions ")
    assert "and none is named: set [nova] region_name" in line
    return line


# ------------------------------------------------------------------ several regions, none named


@pytest.mark.parametrize("command", ["audit", "run --once"])
def test_two_regions_and_none_named_stop_the_command_with_one_line_naming_both(
    tmp_path,
    cloud,  # noqa: F811
    capsys,
    command,
):
    """Nova itself in two regions: nothing is asked of either, the command exits 2."""
    cloud.regions_before = (("RegionTwo", DEAD),)
    uri = orphan_world(tmp_path, cloud)
    code, out, err = run(capsys, *command.split(), "--config-file", conf_file(tmp_path, cloud),
                         "--libvirt-uri", uri)  # fmt: skip
    if command == "run --once":
        # The agent's start and stop lines are logged beside the refusal.
        err = [line for line in err if "config error" in line]
    assert code == exits.USAGE, err
    assert out == ""
    line = refusal(err)
    assert "regions RegionTwo, RegionOne (compute in RegionTwo, RegionOne;" in line
    assert cloud.paths_seen == []  # no Nova, no service asked, in either region


@pytest.mark.parametrize(("catalog", "asked", "name"), SERVICES)
def test_a_service_in_two_regions_and_none_named_is_refused_unless_its_endpoint_is_named(
    tmp_path,
    cloud,  # noqa: F811
    capsys,
    monkeypatch,
    catalog,
    asked,
    name,
):
    """Nova in one region, one service in two: which is this host's is no guess either."""
    second_region(monkeypatch, catalog)
    code, out, err = audit(tmp_path, cloud, capsys, conf_file(tmp_path, cloud))
    assert (code, out) == (exits.USAGE, "")
    line = refusal(err)
    assert "regions RegionOne, RegionTwo (compute in RegionOne;" in line
    assert f"; {asked} in RegionOne, RegionTwo" in line
    assert cloud.paths_seen == []
    # The same catalog with that service's endpoint named: the catalog is not asked for it.
    option = {"Placement": "placement_endpoint", "Cinder": "volume_endpoint",
              "Neutron": "network_endpoint"}[name]  # fmt: skip
    services = f"[services]\n{option} = {cloud.base}/{catalog}\n"
    code, out, err = audit(tmp_path, cloud, capsys, conf_file(tmp_path, cloud, services))
    assert (code, err) == (exits.SHARED_VOLUME, [])
    assert dangers(json.loads(out)) == ["shared-volume", "address-conflict"]


def test_a_service_asked_before_nova_is_refused_the_same_way(
    tmp_path,
    cloud,  # noqa: F811
    monkeypatch,
):
    """The region is settled before any endpoint is used, whichever service comes first; the
    refusal is the config error, never one service's failure ("not consulted")."""
    second_region(monkeypatch, "placement")
    _, services = clients(tmp_path, cloud, monkeypatch)
    with pytest.raises(RegionNotNamed, match="placement in RegionOne, RegionTwo") as refused:
        services["Placement"].get(ASK["Placement"])
    assert refused.value.exit_code == exits.USAGE
    assert cloud.paths_seen == []


# ------------------------------------------------------------------------- the region named


def clients(
    tmp_path: pathlib.Path, cloud_: http_nova.Cloud, monkeypatch, nova: str = ""
) -> tuple[Any, dict[str, Any]]:
    """Nova's transport and the three services' clients, as ``audit`` builds them."""
    conf = config.load([conf_file(tmp_path, cloud_, nova)])
    transport = audit_cli.transport_from_conf(conf)
    made = built(monkeypatch)
    assert audit_cli.services_from_conf(conf, transport) is not None
    return transport, made


def built(monkeypatch) -> dict[str, Any]:
    """The services' clients ``audit`` makes from now on, by name (filled as it makes them)."""
    made: dict[str, Any] = {}
    real = audit_cli.KeystoneClient

    def record(*args: Any, **kwargs: Any) -> Any:
        client = real(*args, **kwargs)
        made[client.name] = client
        return client

    monkeypatch.setattr(audit_cli, "KeystoneClient", record)
    return made


def test_the_named_region_serves_every_service_never_the_others(
    tmp_path,
    cloud,  # noqa: F811
    capsys,
    monkeypatch,
):
    """RegionTwo comes first in every service's catalog entry; ``[nova] region_name`` names
    RegionOne, beside the section's own credentials or a clouds.yaml cloud (whose entry names
    no region)."""
    cloud.regions_before = (("RegionTwo", f"{cloud.base}/region-two"),)
    named = "region_name = RegionOne\n"
    transport, services = clients(tmp_path, cloud, monkeypatch, named)
    for name, client in services.items():
        assert client.get(ASK[name])[0] == 200, name
        assert client._adapter.region_name == "RegionOne", name
        assert client._adapter.get_endpoint().startswith(f"{cloud.base}/"), name
        assert "region-two" not in client._adapter.get_endpoint(), name
    assert transport.get("/os-services")[0] == 200
    assert transport.adapter.get_endpoint() == cloud.url
    code, _, err = audit(tmp_path, cloud, capsys, conf_file(tmp_path, cloud, named))
    assert (code, err) == (exits.SHARED_VOLUME, [])

    clouds = tmp_path / "clouds.yaml"
    clouds.write_text(
        "clouds:\n  test:\n    auth:\n"
        f"      auth_url: {cloud.auth_url}\n      username: nova-orphans\n"
        f"      password: {PASSWORD}\n      project_name: service\n"
        "      user_domain_name: Default\n      project_domain_name: Default\n"
    )
    monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", str(clouds))
    conf = tmp_path / "cloud.conf"
    conf.write_text(f"[DEFAULT]\nhost = cmp-1\n[agent]\nstate_dir = {tmp_path / 's'}\n"
                    f"[nova]\ncloud = test\n{named}")  # fmt: skip
    made = built(monkeypatch)
    code, _, err = audit(tmp_path, cloud, capsys, str(conf))
    assert (code, err) == (exits.SHARED_VOLUME, [])
    assert {n: c._adapter.region_name for n, c in made.items()} == dict.fromkeys(ASK, "RegionOne")
    assert cloud.paths_seen and not [p for p in cloud.paths_seen if "region-two" in p]


# ---------------------------------------------------------------------------- one region


def test_the_one_region_of_the_catalog_is_pinned_for_nova_and_every_service(
    tmp_path,
    cloud,  # noqa: F811
    capsys,
    monkeypatch,
):
    made = built(monkeypatch)
    code, _, err = audit(tmp_path, cloud, capsys, conf_file(tmp_path, cloud))
    assert (code, err) == (exits.SHARED_VOLUME, [])
    assert sorted(made) == ["Cinder", "Neutron", "Placement"]
    for name, client in made.items():
        assert client._adapter.region_name == "RegionOne", name
    transport, _ = clients(tmp_path, cloud, monkeypatch)
    assert transport.get("/os-services")[0] == 200
    assert transport.adapter.region_name == "RegionOne"


def test_a_nova_endpoint_override_is_no_catalogs_and_the_services_still_are(
    tmp_path,
    cloud,  # noqa: F811
    capsys,
    monkeypatch,
):
    """``[nova] endpoint_override``: Nova's endpoint comes from no catalog, so compute's
    regions there decide nothing; the services' one region is pinned for them."""
    second_region(monkeypatch, "compute")
    override = f"endpoint_override = {cloud.url}\n"
    transport, services = clients(tmp_path, cloud, monkeypatch, override)
    assert transport.get("/os-services")[0] == 200
    assert transport.adapter.get_endpoint() == cloud.url
    for name, client in services.items():
        assert client.get(ASK[name])[0] == 200, name
        assert client._adapter.region_name == "RegionOne", name
    code, _, err = audit(tmp_path, cloud, capsys, conf_file(tmp_path, cloud, override))
    assert (code, err) == (exits.SHARED_VOLUME, [])
