"""Regions and endpoint-only credentials: ``region_name`` ([nova], clouds.yaml, OS_REGION_NAME)
is honoured for Nova, Placement, Cinder and Neutron alike (several regions and none named:
``test_one_region.py``); a failed endpoint is named with its service, region and URL; a service
with no endpoint of its own (admin_token + endpoint) is "not configured", never asked at Nova's.

A keystoneauth session over a served catalog (``tests/http_nova.py``) whose first region's
endpoints are dead (port 1).
"""

from __future__ import annotations

import json
import pathlib

import pytest

from nova_orphans import cli, exits
from tests import http_nova
from tests.unit.observe.test_services_through_keystoneauth import (
    PASSWORD,
    TOKEN,
    cloud,  # noqa: F401 (the fixture)
    config,
    dangers,
    orphan_world,
)

DEAD = ("DeadRegion", "http://127.0.0.1:1")


def run_audit(tmp_path: pathlib.Path, cloud_: http_nova.Cloud, capsys, conf: str):
    uri = orphan_world(tmp_path, cloud_)
    code = cli.main(["audit", "--config-file", conf, "--libvirt-uri", uri, "--format", "json"])
    out, err = capsys.readouterr()
    return code, out, err.splitlines()


@pytest.fixture
def two_regions(cloud):  # noqa: F811
    cloud.regions_before = (DEAD,)
    return cloud


@pytest.mark.parametrize("how", ["[nova] region_name", "OS_REGION_NAME"])
def test_the_named_region_serves_nova_placement_cinder_and_neutron(
    tmp_path, two_regions, capsys, monkeypatch, how
):
    monkeypatch.delenv("OS_REGION_NAME", raising=False)
    if how == "OS_REGION_NAME":
        monkeypatch.setenv("OS_REGION_NAME", "RegionOne")
        conf = config(tmp_path, two_regions)
    else:
        conf = config(tmp_path, two_regions, "region_name = RegionOne\n")
    code, out, err = run_audit(tmp_path, two_regions, capsys, conf)
    assert (code, err) == (exits.SHARED_VOLUME, [])
    assert dangers(json.loads(out)) == ["shared-volume", "address-conflict"]
    for service in ("placement", "volumev3", "network"):
        assert two_regions.services[service].requests, service


def test_a_clouds_yaml_region_is_honoured(tmp_path, two_regions, capsys, monkeypatch):
    clouds = tmp_path / "clouds.yaml"
    clouds.write_text(
        "clouds:\n  test:\n    region_name: RegionOne\n    auth:\n"
        f"      auth_url: {two_regions.auth_url}\n      username: nova-orphans\n"
        f"      password: {PASSWORD}\n      project_name: service\n"
        "      user_domain_name: Default\n      project_domain_name: Default\n"
    )
    monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", str(clouds))
    monkeypatch.delenv("OS_REGION_NAME", raising=False)
    conf = tmp_path / "cloud.conf"
    conf.write_text(f"[DEFAULT]\nhost = cmp-1\n[agent]\nstate_dir = {tmp_path / 's'}\n"
                    "[nova]\ncloud = test\n")  # fmt: skip
    code, _, err = run_audit(tmp_path, two_regions, capsys, str(conf))
    assert (code, err) == (exits.SHARED_VOLUME, [])


def test_a_dead_service_endpoint_is_named_with_its_service_region_and_url(
    tmp_path,
    cloud,  # noqa: F811
    capsys,
):
    conf = config(tmp_path, cloud, "[services]\nvolume_endpoint = http://127.0.0.1:1/v3\n")
    code, _, err = run_audit(tmp_path, cloud, capsys, conf)
    assert code == exits.FOUND
    (line,) = err
    assert "Cinder unreachable at http://127.0.0.1:1/v3 (block-storage, any region)" in line
    assert line.endswith("Connection refused")


def test_endpoint_only_credentials_ask_no_other_service_at_novas_endpoint(
    tmp_path,
    cloud,  # noqa: F811
    capsys,
):
    conf = tmp_path / "token.conf"
    conf.write_text(
        f"[DEFAULT]\nhost = cmp-1\n[agent]\nstate_dir = {tmp_path / 's'}\n"
        f"[nova]\nauth_type = admin_token\nendpoint = {cloud.url}\ntoken = {TOKEN}\ntimeout = 2\n"
    )
    code, out, err = run_audit(tmp_path, cloud, capsys, str(conf))
    assert code == exits.FOUND
    (line,) = err
    assert "Cinder not configured" in line and "Neutron not configured" in line
    assert "volume_endpoint" in line
    assert "Placement not configured" in json.loads(out)["cost"]["placement"]["error"]
    # Every request went to Nova's own API, none of them for another service.
    assert not any("/volumes/" in p or "/ports" in p or "resource_providers" in p
                   for p in cloud.paths_seen)  # fmt: skip
