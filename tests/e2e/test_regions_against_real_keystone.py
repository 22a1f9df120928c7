"""Regions against the stack's real Keystone catalog: a second region whose compute endpoint is
dead is added through Keystone's API for the module and removed after it.

With the region named (``[nova] region_name``) Nova and its sibling services are looked up in
that region only; the dead region named is one line naming Nova, the region and the URL; with
none named and two regions in the catalog, nothing is asked and the config error names both.
"""

from __future__ import annotations

import logging
import pathlib
import uuid as uuidlib
from collections.abc import Iterator
from typing import Any

import harness
import pytest

from nova_orphans import config
from nova_orphans.observe.errors import NovaUnreachable
from nova_orphans.observe.nova.session import RegionNotNamed, transport_from_conf
from nova_orphans.observe.services.client import KeystoneClient, ServiceError, sibling

pytestmark = pytest.mark.nova

DEAD_URL = "http://127.0.0.1:1/v2.1"


@pytest.fixture(scope="module")
def keystone(nova_stack: harness.Nova) -> dict[str, Any]:
    return harness.keystone_info()


@pytest.fixture(scope="module")
def dead_region(keystone: dict[str, Any]) -> Iterator[str]:
    """A region whose only endpoint is a dead compute endpoint (every interface)."""
    admin = keystone["admin"]
    session = harness.keystone_session(admin["username"], admin["password"], admin["project_name"])
    url = harness.KEYSTONE_URL
    region = f"DeadRegion-{uuidlib.uuid4().hex[:6]}"
    session.post(f"{url}/regions", json={"region": {"id": region}}).raise_for_status()
    made: list[str] = []
    try:
        services = session.get(f"{url}/services?type=compute").json()["services"]
        for interface in ("public", "internal", "admin"):
            body = {"endpoint": {"service_id": services[0]["id"], "interface": interface,
                                 "region_id": region, "url": DEAD_URL}}  # fmt: skip
            answer = session.post(f"{url}/endpoints", json=body)
            answer.raise_for_status()
            made.append(answer.json()["endpoint"]["id"])
        yield region
    finally:
        for endpoint in made:
            session.delete(f"{url}/endpoints/{endpoint}")
        session.delete(f"{url}/regions/{region}")


def load(tmp_path: pathlib.Path, keystone: dict[str, Any], region: str | None) -> Any:
    reader = keystone["reader"]
    path = tmp_path / "nova-orphans.conf"
    path.write_text(
        "[nova]\nauth_type = password\n"
        f"auth_url = {keystone['auth_url']}\nusername = {reader['username']}\n"
        f"password = {reader['password']}\nproject_name = {reader['project_name']}\n"
        "user_domain_name = Default\nproject_domain_name = Default\ntimeout = 10\n"
        + (f"region_name = {region}\n" if region else "")
    )
    return config.load([str(path)])


def test_the_named_region_serves_nova(tmp_path, keystone, dead_region, caplog, monkeypatch):
    monkeypatch.delenv("OS_REGION_NAME", raising=False)
    transport = transport_from_conf(load(tmp_path, keystone, keystone["region"]))
    with caplog.at_level(logging.WARNING):
        status, _ = transport.get("/os-services?binary=nova-compute")
    assert status == 200
    assert not [r for r in caplog.records if "none is named" in r.getMessage()]


def test_the_dead_region_named_is_one_line_naming_nova_the_region_and_the_url(
    tmp_path, keystone, dead_region, monkeypatch
):
    monkeypatch.delenv("OS_REGION_NAME", raising=False)
    transport = transport_from_conf(load(tmp_path, keystone, dead_region))
    with pytest.raises(NovaUnreachable) as failed:
        transport.get("/os-services?binary=nova-compute")
    line = str(failed.value)
    assert line == f"Nova unreachable at {DEAD_URL} (region {dead_region}): Connection refused"
    # The other services are looked up in the same region, where the catalog has none.
    placement = KeystoneClient(sibling(transport.adapter, "placement", None), "Placement")
    with pytest.raises(ServiceError, match=f"no placement endpoint .*region {dead_region}"):
        placement.get("/resource_providers")


def test_two_regions_and_none_named_are_refused_naming_both(
    tmp_path, keystone, dead_region, monkeypatch
):
    monkeypatch.delenv("OS_REGION_NAME", raising=False)
    transport = transport_from_conf(load(tmp_path, keystone, None))
    with pytest.raises(RegionNotNamed) as refused:
        transport.get("/os-services?binary=nova-compute")
    line = str(refused.value)
    assert dead_region in line and keystone["region"] in line
    assert "set [nova] region_name" in line


def test_os_region_name_names_the_region(tmp_path, keystone, dead_region, monkeypatch):
    monkeypatch.setenv("OS_REGION_NAME", dead_region)
    transport = transport_from_conf(load(tmp_path, keystone, None))
    with pytest.raises(NovaUnreachable, match=f"region {dead_region}"):
        transport.get("/os-services?binary=nova-compute")
