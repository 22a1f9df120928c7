"""What an orphan endangers, built for real on the stack's Keystone, Cinder and Neutron.

Server A on host1 has two Cinder volumes and a port on ``e2e-net``. host1's nova-compute goes
down and A is deleted: a local delete, which releases A's volume attachments and its port in
Cinder and Neutron while A's guest keeps running. host1's libvirt is played by a ``test:///``
world holding A's domain as Nova's libvirt driver wrote it: each volume's id as its disk's
``<serial>``, the port's MAC on its interface. Then the first volume is attached to a new
server B, the second stays ``available``, and a new port with A's MAC and IP is given to a new
server C. Server D, deleted in the same outage, left a guest that endangers nothing.

``nova-orphans audit``, through the real Keystone's catalog, must flag A with
``shared-volume`` naming B (listed first, exit 5, ``"shared_volume": true``), ``shared-volume``
for the available volume and ``address-conflict`` naming C's port, C and the IP; the agent's
metric must count it; and when Cinder or Neutron cannot be asked the danger is ``unknown``
with the reason, never "none", and the audit still completes.
"""

from __future__ import annotations

import json
import pathlib
import re
import subprocess
from collections.abc import Iterator
from typing import Any

import harness
import pytest
from keystoneauth1 import session as ks_session
from prometheus_client.parser import text_string_to_metric_families

from nova_orphans import exits
from nova_orphans.fakes import libvirt_node as worlds
from tests import report_schema

pytestmark = pytest.mark.nova

#: The operator guide's page whose example is this audit's output.
GUIDE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "admin" / "audit.md"
#: Where nothing listens: a service there is unreachable at once.
NOWHERE = "http://127.0.0.1:9"


@pytest.fixture(scope="module")
def admin(nova_stack: harness.Nova) -> ks_session.Session:
    info = harness.keystone_info()["admin"]
    return harness.keystone_session(info["username"], info["password"], info["project_name"])


def volume(admin: ks_session.Session, vid: str) -> dict[str, Any]:
    return harness.service_call(admin, "block-storage", "GET", f"/volumes/{vid}")["volume"]


def attach(nova: harness.Nova, admin: ks_session.Session, server: str, vid: str) -> None:
    nova.request("POST", f"/servers/{server}/os-volume_attachments",
                 json_body={"volumeAttachment": {"volumeId": vid}})  # fmt: skip
    harness.wait_for(
        f"{vid} attached to {server}",
        lambda: [a["server_id"] for a in volume(admin, vid)["attachments"]] == [server],
    )


def release(admin: ks_session.Session, vid: str, server: str) -> None:
    """Wait until the volume is free again after ``server``'s local delete.

    NOTE: Cinder refuses to delete an attachment Nova still uses unless the request carries
    Nova's service token (Cinder bug 2004555); a nova-api that sends none (this stack's) leaves
    its local delete's attachments behind. Once Nova has no such server, Cinder lets an
    operator delete them (``openstack volume attachment delete``): the volume is free either way.
    """
    for attachment in volume(admin, vid)["attachments"]:
        if attachment["server_id"] == server:
            path = f"/attachments/{attachment['attachment_id']}"
            harness.service_call(admin, "block-storage", "DELETE", path,
                                 **{"OpenStack-API-Version": "volume 3.27"})  # fmt: skip
    harness.wait_for(f"{vid} released", lambda: volume(admin, vid)["status"] == "available")


def ports_of(admin: ks_session.Session, server: str) -> list[dict[str, Any]]:
    return harness.service_call(admin, "network", "GET", f"/v2.0/ports?device_id={server}")["ports"]


@pytest.fixture(scope="module")
def scene(nova_stack: harness.Nova, admin: ks_session.Session) -> Iterator[dict[str, Any]]:
    """The dangerous situation, built through the APIs as it happens in a cloud."""
    nova = nova_stack
    net = harness.stack_info()["network_id"]
    servers: list[str] = []
    ports: list[str] = []
    volumes = [
        harness.service_call(admin, "block-storage", "POST", "/volumes",
             {"volume": {"size": 1, "name": f"e2e-danger-{i}"}}, ok=(202,))["volume"]["id"]
        for i in (1, 2)
    ]  # fmt: skip
    try:
        for vid in volumes:
            harness.wait_for(
                f"volume {vid}", lambda v=vid: volume(admin, v)["status"] == "available"
            )
        a = nova.boot("host1", networks=[{"uuid": net}])["id"]
        servers.append(a)
        d = nova.boot("host1")["id"]
        servers.append(d)
        while d > a:
            # NOTE: D must come before A in the findings' own order (kind, then UUID), so
            # that only A's danger can put A first.
            nova.destroy(d)
            d = nova.boot("host1")["id"]
            servers.append(d)
        for vid in volumes:
            attach(nova, admin, a, vid)
        (port,) = ports_of(admin, a)
        mac, ip = port["mac_address"], port["fixed_ips"][0]["ip_address"]
        with harness.compute_down(nova, "host1"):
            nova.delete(a)  # local deletes: the port is released, the guests are left
            nova.delete(d)
            harness.wait_for("the port's removal", lambda: not ports_of(admin, a))
        for vid in volumes:
            release(admin, vid, a)
        b = nova.boot("host2")["id"]
        servers.append(b)
        attach(nova, admin, b, volumes[0])
        # NOTE: Nova takes only a port of the server's own project.
        project = nova.get(f"/servers/{b}")["server"]["tenant_id"]
        body = {"port": {"network_id": net, "mac_address": mac, "project_id": project,
                         "fixed_ips": [{"ip_address": ip}]}}  # fmt: skip
        reused = harness.service_call(admin, "network", "POST", "/v2.0/ports", body, ok=(201,))[
            "port"
        ]
        ports.append(reused["id"])
        c = nova.boot("host2", networks=[{"port": reused["id"]}])["id"]
        servers.append(c)
        assert [p["id"] for p in ports_of(admin, c)] == [reused["id"]]
        yield {"a": a, "b": b, "c": c, "d": d, "volumes": volumes, "mac": mac, "ip": ip,
               "port": reused["id"]}  # fmt: skip
    finally:
        for uuid in servers:
            nova.destroy(uuid)
        for port_id in ports:
            harness.service_call(
                admin, "network", "DELETE", f"/v2.0/ports/{port_id}", ok=(204, 404)
            )
        for vid in volumes:
            # NOTE: the fake driver's detach on delete is not waited for: the volume is reset.
            harness.service_call(admin, "block-storage", "POST", f"/volumes/{vid}/action",
                 {"os-reset_status": {"status": "available", "attach_status": "detached"}},
                 ok=(202,))  # fmt: skip
            harness.service_call(admin, "block-storage", "DELETE", f"/volumes/{vid}", ok=(202,))


def host1_world(scene: dict[str, Any], directory: pathlib.Path) -> str:
    """host1's libvirt: A's guest holding both volumes and its MAC, D's guest holding nothing."""
    disks = [
        f"<disk type='block' device='disk'><source dev='/dev/sd{letter}'/>"
        f"<target dev='vd{letter}' bus='virtio'/><serial>{vid}</serial></disk>"
        for letter, vid in zip("bc", scene["volumes"], strict=True)
    ]
    return worlds.write_node_file(
        directory,
        [
            worlds.node_domain(
                uuid=scene["a"],
                name="instance-0000a001",
                metadata=worlds.nova_metadata(name="db-1", flavor="e2e-tiny"),
                devices=[*disks, worlds.bridge_interface(scene["mac"], "tap-a")],
            ),
            worlds.node_domain(
                uuid=scene["d"],
                name="instance-0000d001",
                metadata=worlds.nova_metadata(name="web-1", flavor="e2e-tiny"),
            ),
        ],
    )


def keystone_auth() -> str:
    info = harness.keystone_info()["admin"]
    return (
        f"auth_type = password\nauth_url = {harness.KEYSTONE_URL}\n"
        f"username = {info['username']}\npassword = {info['password']}\n"
        f"project_name = {info['project_name']}\nuser_domain_name = Default\n"
        "project_domain_name = Default\n"
    )


def write_conf(
    directory: pathlib.Path, nova: str, extra: str = "", agent: str = ""
) -> pathlib.Path:
    conf = directory / "nova-orphans.conf"
    conf.write_text(
        f"[DEFAULT]\nhost = host1\n[agent]\nstate_dir = {directory / 'state'}\n{agent}"
        f"[nova]\n{nova}timeout = 30\n{extra}"
    )
    return conf


def audit(
    scene: dict[str, Any], directory: pathlib.Path, nova: str, extra: str = "", *args: str
) -> subprocess.CompletedProcess[str]:
    conf = write_conf(directory, nova, extra)
    return harness.run_audit(conf, "host1", host1_world(scene, directory), *args)


def by_uuid(done: subprocess.CompletedProcess[str]) -> dict[str, dict[str, Any]]:
    return {f["uuid"]: f for f in report_schema.valid(json.loads(done.stdout))["findings"]}


def test_the_orphan_holding_a_volume_attached_elsewhere_is_flagged_first_with_exit_5(
    scene: dict[str, Any], tmp_path: pathlib.Path
) -> None:
    done = audit(scene, tmp_path, keystone_auth())
    assert done.returncode == exits.SHARED_VOLUME, done.stderr
    assert "danger unknown" not in done.stderr
    report = report_schema.valid(json.loads(done.stdout))
    assert report["shared_volume"] is True
    assert report["dangers"] == {"shared-volume": 1, "address-conflict": 1, "unknown": 0}
    mine = [f for f in report["findings"] if f["uuid"] in (scene["a"], scene["d"])]
    # D sorts before A by kind and UUID; the shared volume puts A first of all.
    assert scene["d"] < scene["a"]
    assert report["findings"][0]["uuid"] == scene["a"]
    assert [(f["uuid"], f["kind"]) for f in mine] == [
        (scene["a"], "deleted"), (scene["d"], "deleted"),
    ]  # fmt: skip
    assert mine[1]["dangers"] == []
    shared, available, conflict = mine[0]["dangers"]
    attached, free = scene["volumes"]
    assert (shared["danger"], shared["subject"], shared["other_server"]) == (
        "shared-volume", attached, scene["b"],
    )  # fmt: skip
    assert f"volume {attached} is attached to server {scene['b']}" in shared["detail"]
    assert (available["danger"], available["subject"], available["other_server"]) == (
        "shared-volume", free, None,
    )  # fmt: skip
    assert f"volume {free} is available in Cinder" in available["detail"]
    assert conflict["danger"] == "address-conflict"
    assert (conflict["subject"], conflict["port"], conflict["other_server"]) == (
        scene["mac"], scene["port"], scene["c"],
    )  # fmt: skip
    assert conflict["fixed_ips"] == [scene["ip"]]
    assert f"of server {scene['c']} on host2" in conflict["detail"]


def test_the_agent_counts_the_danger_in_its_metric_and_exits_5(
    scene: dict[str, Any], tmp_path: pathlib.Path
) -> None:
    metrics = tmp_path / "metrics.prom"
    extra = f"[metrics]\ntextfile = {metrics}\n"
    conf = write_conf(tmp_path, keystone_auth(), extra, agent="dry_run = true\n")
    done = harness.run_cli(
        "run", "--once", "--config-file", str(conf),
        "--libvirt-uri", host1_world(scene, tmp_path), timeout=180,
    )  # fmt: skip
    assert done.returncode == exits.SHARED_VOLUME, done.stderr
    samples = {
        s.labels.get("danger"): s.value
        for family in text_string_to_metric_families(metrics.read_text())
        if family.name == "nova_orphans_dangers"
        for s in family.samples
    }
    assert samples == {"shared-volume": 1, "address-conflict": 1, "unknown": 0}


def endpoint_only() -> str:
    """``[nova]`` of an endpoint-only setup (``admin_token``): no service catalog at all."""
    return (
        f"auth_type = admin_token\nendpoint = {harness.NOVA_ENDPOINT}\n"
        f"token = {harness.ADMIN_TOKEN}\n"
    )


@pytest.mark.parametrize(
    ("nova", "extra", "code", "dangers", "reasons"),
    [
        pytest.param(
            keystone_auth, f"[services]\nvolume_endpoint = {NOWHERE}/v3\n", exits.FOUND,
            ["address-conflict", "unknown"], ["Cinder unreachable"], id="cinder-unreachable",
        ),
        pytest.param(
            keystone_auth, f"[services]\nnetwork_endpoint = {NOWHERE}\n", exits.SHARED_VOLUME,
            ["shared-volume", "shared-volume", "unknown"], ["Neutron unreachable"],
            id="neutron-unreachable",
        ),
        pytest.param(
            # NOTE: the catalog has public endpoints only: asked for internal ones, it has
            # none for Cinder and Neutron (Nova is named by endpoint_override).
            lambda: keystone_auth() + "valid_interfaces = internal\n"
            f"endpoint_override = {harness.NOVA_ENDPOINT}\n",
            "", exits.FOUND, ["unknown", "unknown"],
            ["Cinder: no block-storage endpoint in the service catalog",
             "Neutron: no network endpoint in the service catalog"],
            id="missing-from-the-catalog",
        ),
        pytest.param(
            # NOTE: admin_token hands Nova's endpoint out for every service type: Cinder and
            # Neutron have no endpoint of their own, and are never asked at Nova's.
            endpoint_only, "", exits.FOUND, ["unknown", "unknown"],
            ["Cinder not configured", "set [services] volume_endpoint",
             "Neutron not configured"],
            id="endpoint-only-setup-without-service-endpoints",
        ),
    ],
)  # fmt: skip
def test_cinder_or_neutron_not_asked_is_danger_unknown_with_the_reason_and_the_audit_completes(
    scene: dict[str, Any],
    tmp_path: pathlib.Path,
    nova: Any,
    extra: str,
    code: int,
    dangers: list[str],
    reasons: list[str],
) -> None:
    done = audit(scene, tmp_path, nova(), extra)
    assert done.returncode == code, done.stderr
    found = by_uuid(done)
    assert [d["danger"] for d in found[scene["a"]]["dangers"]] == dangers
    assert found[scene["d"]]["dangers"] == []
    (line,) = [x for x in done.stderr.splitlines() if "danger unknown" in x]
    assert line.startswith("nova-orphans: warning: danger unknown for 1 findings: ")
    for reason in reasons:
        assert reason in line
    unknown = [d for d in found[scene["a"]]["dangers"] if d["danger"] == "unknown"]
    assert all(d["detail"] and d["other_server"] is None for d in unknown)


def shape(text: str) -> str:
    """``text`` with what differs from run to run (UUIDs, MACs, IPs, times, sizes) replaced."""
    for pattern, token in (
        (r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<uuid>"),
        (r"([0-9a-f]{2}:){5}[0-9a-f]{2}", "<mac>"),
        (r"\d{4}-\d\d-\d\dT[\d:.]+\+00:00", "<time>"),
        (r"\b\d+(\.\d+){3}\b", "<ip>"),
        (r"\b\d+(\.\d+)?\b", "<n>"),
    ):
        text = re.sub(pattern, token, text)
    # NOTE: the table's column widths follow its longest cells, other tests' leftovers too.
    return " ".join(text.split())


def guide_example() -> list[str]:
    text = GUIDE.read_text().split("\nFrom the end-to-end stack", 1)[1]
    return text.split("```text\n", 1)[1].split("\n```", 1)[0].splitlines()


def test_the_guide_s_example_is_this_output(scene: dict[str, Any], tmp_path: pathlib.Path) -> None:
    """The operator guide shows the table of this audit: the same lines, up to UUIDs and figures."""
    done = audit(scene, tmp_path, keystone_auth(), "", "--format", "table", "--wide")
    assert done.returncode == exits.SHARED_VOLUME, done.stderr
    print(done.stdout)
    starts = ("KIND ", "DANGER ", "host host1 at ", "untracked:", "memory:", "vCPUs:", "disk:")
    shown = [
        line
        for line in done.stdout.splitlines()
        if line.startswith(starts) or line.split()[1:2] in ([scene["a"]], [scene["d"]])
    ]
    example = [line for line in guide_example() if line != "…"]
    assert len(example) == len(shown), done.stdout
    for wanted, got in zip(example, shown, strict=True):
        if wanted.startswith("host host1 at "):
            # NOTE: other tests' servers on host1 add their kinds to the summary's counts.
            assert set(kinds(wanted)) <= set(kinds(got)), got
        else:
            assert shape(wanted) == shape(got)


def kinds(summary: str) -> list[str]:
    """The counts of a table's summary line ("host H at T: 1 deleted, 2 lost"), shaped."""
    return [shape(item) for item in summary.split(": ", 1)[1].split(", ")]
