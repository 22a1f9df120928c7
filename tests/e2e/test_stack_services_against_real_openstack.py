"""The stack's real Keystone, Neutron and Cinder do what the other end-to-end tests rely on.

Keystone's catalog lists every service and each one takes its tokens; a server booted with a
port on ``e2e-net`` has that port in Neutron (MAC, fixed IP, device, host); a Cinder volume
attached to a server is ``in-use`` with the attachment naming the server.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from typing import Any

import harness
import pytest
from keystoneauth1 import session as ks_session

pytestmark = pytest.mark.nova

SERVICE_TYPES = ("compute", "placement", "image", "network", "block-storage")


@pytest.fixture(scope="module")
def admin(nova_stack: harness.Nova) -> ks_session.Session:
    """An admin session with password auth against the stack's Keystone."""
    info = harness.keystone_info()["admin"]
    return harness.keystone_session(info["username"], info["password"], info["project_name"])


def test_the_catalog_lists_every_service_and_each_takes_keystone_tokens(
    admin: ks_session.Session,
) -> None:
    for service_type in SERVICE_TYPES:
        assert admin.get_endpoint(service_type=service_type, interface="public")
    version = {"OpenStack-API-Version": "placement 1.14"}
    hosts = harness.service_call(admin, "placement", "GET", "/resource_providers", **version)
    # NOTE: the fake computes' nodes are named after their hosts (lvhost's after the machine).
    assert {"host1", "host2", "host3"} <= {rp["name"] for rp in hosts["resource_providers"]}
    assert harness.service_call(admin, "network", "GET", "/v2.0/networks?name=e2e-net")["networks"]
    assert "volume_types" in harness.service_call(admin, "block-storage", "GET", "/types")
    images = harness.service_call(admin, "image", "GET", "/v2/images")["images"]
    assert harness.stack_info()["image_id"] in {i["id"] for i in images}
    servers = harness.service_call(admin, "compute", "GET", "/servers/detail?all_tenants=1&limit=1")
    assert "servers" in servers


def test_a_bad_token_is_refused_by_every_authenticated_service(
    admin: ks_session.Session,
) -> None:
    for service_type, path in (
        ("compute", "/servers"),
        ("placement", "/resource_providers"),
        ("network", "/v2.0/networks"),
        ("block-storage", "/volumes"),
    ):
        url = admin.get_endpoint(service_type=service_type, interface="public") + path
        resp = admin.get(
            url,
            headers={"X-Auth-Token": "not-a-keystone-token"},
            authenticated=False,
            raise_exc=False,
        )
        assert resp.status_code == 401, (service_type, resp.status_code, resp.text[:300])


@pytest.fixture
def server_with_port(nova_stack: harness.Nova) -> Iterator[dict[str, Any]]:
    net = harness.stack_info()["network_id"]
    server = nova_stack.boot("host1", networks=[{"uuid": net}])
    try:
        yield server
    finally:
        nova_stack.destroy(server["id"])


def test_a_server_booted_on_e2e_net_has_its_port_in_neutron(
    admin: ks_session.Session, nova_stack: harness.Nova, server_with_port: dict[str, Any]
) -> None:
    uuid = server_with_port["id"]
    (port,) = harness.service_call(admin, "network", "GET", f"/v2.0/ports?device_id={uuid}")[
        "ports"
    ]
    assert port["binding:host_id"] == "host1"
    assert port["binding:vif_type"] == "tap"
    assert port["device_owner"].startswith("compute:")
    (fixed,) = port["fixed_ips"]
    assert ipaddress.ip_address(fixed["ip_address"]) in ipaddress.ip_network("10.20.0.0/24")
    shown = nova_stack.server(uuid)
    assert shown is not None
    assert [a["addr"] for a in shown["addresses"]["e2e-net"]] == [fixed["ip_address"]]
    assert shown["addresses"]["e2e-net"][0]["OS-EXT-IPS-MAC:mac_addr"] == port["mac_address"]
    nova_stack.destroy(uuid)
    harness.wait_for(
        "the port's removal",
        lambda: (
            not harness.service_call(admin, "network", "GET", f"/v2.0/ports?device_id={uuid}")[
                "ports"
            ]
        ),
    )


def test_a_cinder_volume_attached_to_a_server_is_in_use_by_it(
    admin: ks_session.Session, nova_stack: harness.Nova
) -> None:
    body = {"volume": {"size": 1, "name": "e2e-vol"}}
    volume = harness.service_call(admin, "block-storage", "POST", "/volumes", body, ok=(202,))[
        "volume"
    ]
    vid = volume["id"]
    server = nova_stack.boot("host2")
    try:
        harness.wait_for(
            "the volume",
            lambda: (
                harness.service_call(admin, "block-storage", "GET", f"/volumes/{vid}")["volume"][
                    "status"
                ]
                == "available"
            ),
        )
        nova_stack.request(
            "POST",
            f"/servers/{server['id']}/os-volume_attachments",
            json_body={"volumeAttachment": {"volumeId": vid}},
        )
        shown = harness.wait_for(
            "the attachment",
            lambda: (
                v
                if (
                    v := harness.service_call(admin, "block-storage", "GET", f"/volumes/{vid}")[
                        "volume"
                    ]
                )["status"]
                == "in-use"
                else None
            ),
        )
        assert [a["server_id"] for a in shown["attachments"]] == [server["id"]]
        listed = nova_stack.get(f"/servers/{server['id']}/os-volume_attachments")
        assert [a["volumeId"] for a in listed["volumeAttachments"]] == [vid]
    finally:
        nova_stack.destroy(server["id"])
        # NOTE: the fake driver's detach on delete is not waited for: the volume is reset.
        harness.service_call(
            admin,
            "block-storage",
            "POST",
            f"/volumes/{vid}/action",
            {"os-reset_status": {"status": "available", "attach_status": "detached"}},
            ok=(202,),
        )
        harness.service_call(admin, "block-storage", "DELETE", f"/volumes/{vid}", ok=(202,))
