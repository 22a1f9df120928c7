"""What lost servers leave beside a guest (docs/design.md §8b, rule 21), built for real on the
stack's Nova, Placement, Cinder and Neutron, with ``nova-manage placement audit`` as reference.

On host1 (its nova-compute stopped and forced down, as an outage leaves it):

- server A, with a Cinder volume attached, is deleted: a local delete. Nova's API releases
  its allocation but leaves the attachment (it sends Cinder no service token); its instance
  directory stays in host1's ``instances_path`` (this test's own: host1's libvirt is a
  ``test:///`` world holding no guest, A's guest is gone). Its port is left bound to host1 as
  a Neutron that failed the unbind leaves it (planted through Neutron's admin API);
- server B is evacuated to host2: the source's allocation stays on host1's provider (Nova
  bug 1829479) until host1's compute comes back;
- server C's allocation on host1 is removed by hand (Placement's ``DELETE /allocations``);
- server D is building (its vm_state and task_state set in the cell database as Nova's
  build leaves them), and server E is being live-migrated to host2 (a ``running``
  live-migration record, E's task_state ``migrating``, the source's allocation moved to the
  migration's UUID and E's own to host2's provider, as Nova's conductor does): both have
  their instance directory on host1, and neither may be reported;
- server F is SHELVED_OFFLOADED (host and node cleared in the cell database, as
  ``_shelve_offload_instance`` leaves them) with a port still bound to host1, as a failed
  unbind leaves it: it must be unbound, never deleted (docs/design.md rule 22);
- a container's port (``compute:kuryr``, its device a UUID Nova never knew) is bound to host1,
  as Zun binds them: a foreign port, told without a command.

``nova-orphans audit`` must tell each with the right kind and command (rule 22's proofs:
host1's node pinned, each leftover seen in the one look ``[leftovers]`` asks for), and find at
least what ``nova-manage placement audit`` finds on host1's provider.
"""

from __future__ import annotations

import contextlib
import json
import pathlib
import re
import subprocess
import uuid as uuidlib
from collections.abc import Iterator
from typing import Any

import harness
import pytest
from keystoneauth1 import session as ks_session

from nova_orphans.fakes import libvirt_node as worlds
from tests import report_schema

pytestmark = pytest.mark.nova

PLACEMENT = {"OpenStack-API-Version": "placement 1.28"}
CONSUMER = re.compile(r"Allocations for consumer UUID ([0-9a-f-]{36}) on Resource Provider")


@pytest.fixture(scope="module")
def admin(nova_stack: harness.Nova) -> ks_session.Session:
    info = harness.keystone_info()["admin"]
    return harness.keystone_session(info["username"], info["password"], info["project_name"])


def placement(admin: ks_session.Session, method: str, path: str, body: Any = None,
              ok: tuple[int, ...] = (200,)) -> Any:  # fmt: skip
    return harness.service_call(admin, "placement", method, path, body, ok=ok, **PLACEMENT)


def provider(host: str) -> str:
    out = harness.cell_sql(
        f"SELECT uuid FROM compute_nodes WHERE host='{host}' AND deleted=0"
    ).split()
    assert len(out) == 1, out
    return out[0]


def allocations(admin: ks_session.Session, consumer: str) -> dict[str, Any]:
    return placement(admin, "GET", f"/allocations/{consumer}")


def move_allocation(admin: ks_session.Session, consumer: str, to: str, into: str) -> None:
    """Put ``consumer``'s resources on provider ``to`` under consumer ``into``."""
    held = allocations(admin, consumer)
    (resources,) = [a["resources"] for a in held["allocations"].values()]
    body = {"allocations": {to: {"resources": resources}}, "project_id": held["project_id"],
            "user_id": held["user_id"], "consumer_generation": None}  # fmt: skip
    if into == consumer:
        body["consumer_generation"] = held["consumer_generation"]
    placement(admin, "PUT", f"/allocations/{into}", body, ok=(204,))


def volume(admin: ks_session.Session, vid: str) -> dict[str, Any]:
    return harness.service_call(admin, "block-storage", "GET", f"/volumes/{vid}")["volume"]


def instance_dir(root: pathlib.Path, uuid: str) -> None:
    directory = root / uuid
    directory.mkdir(parents=True)
    (directory / "disk").write_bytes(b"\0" * 4096 + b"\1" * 65536)
    (directory / "disk.info").write_text("{}")
    (directory / "console.log").write_text("login:\n")


def keystone_auth() -> str:
    info = harness.keystone_info()["admin"]
    return (
        f"auth_type = password\nauth_url = {harness.KEYSTONE_URL}\n"
        f"username = {info['username']}\npassword = {info['password']}\n"
        f"project_name = {info['project_name']}\nuser_domain_name = Default\n"
        "project_domain_name = Default\n"
    )


def audit(directory: pathlib.Path, instances: pathlib.Path) -> subprocess.CompletedProcess[str]:
    # NOTE: rule 22: commands only on a proven identity (host1's node pinned), at a path the
    # host names (this may run in a container), once seen in as many looks as asked.
    conf = directory / "nova-orphans.conf"
    conf.write_text(
        f"[DEFAULT]\nhost = host1\ninstances_path = {instances}\n"
        f"compute_node_uuid = {provider('host1')}\n"
        f"[agent]\nstate_dir = {directory / 'state'}\n"
        f"[leftovers]\nsightings_required = 1\ngrace_period = 0\n"
        f"host_instances_path = {instances}\n"
        f"[nova]\n{keystone_auth()}timeout = 30\n"
    )
    world = worlds.write_node_file(directory, [])
    return harness.run_audit(conf, "host1", world)


def nova_manage_audit(rp: str) -> set[str]:
    """The consumers ``nova-manage placement audit --verbose`` finds orphaned on ``rp``."""
    done = harness.nova_manage("placement", "audit", "--verbose", "--resource_provider", rp)
    assert done.returncode in (0, 3), (done.returncode, done.stdout, done.stderr[-2000:])
    return set(CONSUMER.findall(done.stdout))


@contextlib.contextmanager
def compute_down_through_an_evacuation(nova: harness.Nova, host: str) -> Iterator[None]:
    """``harness.compute_down``, for a host a server was evacuated from meanwhile.

    NOTE: Nova refuses to force the host up while a ``done`` evacuation remains: its
    compute must start first, which cleans the evacuated guest up and moves the record
    to ``completed``; then the service is forced up again.
    """
    harness.stop_compute(host)
    try:
        nova.force_down(host, True)
        yield
    finally:
        harness.start_compute(host)

        def forced_up() -> bool:
            try:
                nova.force_down(host, False)
            except harness.StackError:
                return False
            return True

        harness.wait_for(f"{host} forced up", forced_up, timeout=180)
        nova.wait_service_state(host, "up")


@pytest.fixture(scope="module")
def scene(
    nova_stack: harness.Nova, admin: ks_session.Session, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    nova = nova_stack
    directory = tmp_path_factory.mktemp("leftovers")
    instances = directory / "instances"
    (instances / "_base").mkdir(parents=True)
    host1, host2 = provider("host1"), provider("host2")
    servers: list[str] = []
    ports: list[str] = []
    migration = str(uuidlib.uuid4())
    vid = harness.service_call(admin, "block-storage", "POST", "/volumes",
         {"volume": {"size": 1, "name": "e2e-leftover"}}, ok=(202,))["volume"]["id"]  # fmt: skip
    try:
        harness.wait_for("the volume", lambda: volume(admin, vid)["status"] == "available")
        a, b, c, d, e, f = (nova.boot("host1")["id"] for _ in range(6))
        servers += [a, b, c, d, e, f]
        container = str(uuidlib.uuid4())
        nova.request("POST", f"/servers/{a}/os-volume_attachments",
                     json_body={"volumeAttachment": {"volumeId": vid}})  # fmt: skip
        harness.wait_for(
            "the attachment",
            lambda: [x["server_id"] for x in volume(admin, vid)["attachments"]] == [a],
        )
        for uuid in (a, d, e):
            instance_dir(instances, uuid)
        placement(admin, "DELETE", f"/allocations/{c}", ok=(204,))
        project = nova.get(f"/servers/{a}")["server"]["tenant_id"]
        with compute_down_through_an_evacuation(nova, "host1"):
            nova.delete(a)  # a local delete
            net = harness.stack_info()["network_id"]
            body = {"port": {"network_id": net, "project_id": project, "device_id": a,
                             "device_owner": "compute:nova",
                             "binding:host_id": "host1"}}  # fmt: skip
            port = harness.service_call(admin, "network", "POST", "/v2.0/ports", body,
                                        ok=(201,))["port"]  # fmt: skip
            ports.append(port["id"])
            harness.cell_sql(
                "UPDATE instances SET vm_state='shelved_offloaded', host=NULL, node=NULL "
                f"WHERE uuid='{f}'"
            )
            placement(admin, "DELETE", f"/allocations/{f}", ok=(204,))
            body["port"] |= {"device_id": f}
            shelved = harness.service_call(admin, "network", "POST", "/v2.0/ports", body,
                                           ok=(201,))["port"]  # fmt: skip
            ports.append(shelved["id"])
            body["port"] |= {"device_id": container, "device_owner": "compute:kuryr"}
            kuryr = harness.service_call(admin, "network", "POST", "/v2.0/ports", body,
                                         ok=(201,))["port"]  # fmt: skip
            ports.append(kuryr["id"])
            nova.action(b, {"evacuate": {"host": "host2"}})
            harness.wait_for(
                "the evacuation",
                # NOTE: rebuilt in the power state Nova last recorded (ACTIVE or SHUTOFF).
                lambda: (
                    (s := nova.server(b)) is not None
                    and s.get("OS-EXT-SRV-ATTR:host") == "host2"
                    and s["status"] in ("ACTIVE", "SHUTOFF")
                    and not s.get("OS-EXT-STS:task_state")
                ),
                timeout=300,
            )
            harness.cell_sql(
                f"UPDATE instances SET vm_state='building', task_state='spawning' WHERE uuid='{d}'"
            )
            harness.cell_sql(
                "INSERT INTO migrations (created_at, updated_at, deleted, source_compute, "
                "dest_compute, source_node, dest_node, status, instance_uuid, migration_type, "
                "hidden, uuid, cross_cell_move) VALUES (NOW(), NOW(), 0, 'host1', 'host2', "
                f"'host1', 'host2', 'running', '{e}', 'live-migration', 0, '{migration}', 0)"
            )
            harness.set_task_state(e, "migrating")
            move_allocation(admin, e, host1, migration)
            move_allocation(admin, e, host2, e)
            done = audit(directory, instances)
            reference = nova_manage_audit(host1)
        yield {"a": a, "b": b, "c": c, "d": d, "e": e, "f": f, "shelved": shelved["id"],
               "kuryr": kuryr["id"], "container": container, "port": port["id"], "volume": vid,
               "migration": migration, "host1": host1, "instances": instances, "done": done,
               "reference": reference}  # fmt: skip
    finally:
        harness.cell_sql(f"DELETE FROM migrations WHERE uuid='{migration}'")
        placement(admin, "DELETE", f"/allocations/{migration}", ok=(204, 404))
        for uuid in servers:
            harness.set_task_state(uuid, None)
            nova.destroy(uuid)
        for port_id in ports:
            harness.service_call(
                admin, "network", "DELETE", f"/v2.0/ports/{port_id}", ok=(204, 404)
            )
        for attachment in volume(admin, vid)["attachments"]:
            harness.service_call(admin, "block-storage", "DELETE",
                                 f"/attachments/{attachment['attachment_id']}", ok=(200, 404),
                                 **{"OpenStack-API-Version": "volume 3.27"})  # fmt: skip
        harness.service_call(admin, "block-storage", "POST", f"/volumes/{vid}/action",
             {"os-reset_status": {"status": "available", "attach_status": "detached"}},
             ok=(202,))  # fmt: skip
        harness.service_call(admin, "block-storage", "DELETE", f"/volumes/{vid}", ok=(202,))


def leftovers(scene: dict[str, Any]) -> dict[str, Any]:
    done = scene["done"]
    assert done.returncode in (0, 3), done.stderr
    found = report_schema.valid(json.loads(done.stdout))["leftovers"]
    assert found["not_checked"] == {}, found["not_checked"]
    return found


def of(found: dict[str, Any], server: str) -> list[tuple[str, str]]:
    return sorted((i["kind"], i["subject"]) for i in found["items"] if i["server"] == server)


def test_a_local_delete_leaves_files_a_port_and_an_attachment(scene: dict[str, Any]) -> None:
    found = leftovers(scene)
    a = scene["a"]
    items = {i["kind"]: i for i in found["items"] if i["server"] == a}
    assert sorted(items) == ["stray-attachment", "stray-files", "stray-port"]
    path = str(scene["instances"] / a)
    assert items["stray-files"]["command"] == f"rm -r -- {path}"
    assert items["stray-files"]["disk_bytes"] >= 65536
    assert items["stray-port"]["subject"] == scene["port"]
    # NOTE: rule 22: a deleted server's port is unbound (Nova keeps a user's ports).
    assert items["stray-port"]["command"] == f"openstack port unset --host {scene['port']}"
    attachment = items["stray-attachment"]
    assert attachment["volume"] == scene["volume"]
    assert attachment["command"] == (
        f"openstack --os-volume-api-version 3.27 volume attachment delete {attachment['subject']}"
    )
    assert all(f"Nova deleted server {a}" in i["reason"] for i in items.values())
    assert all(i["held_by"] is None and i["seen"] == 1 for i in items.values())


def test_a_shelved_offloaded_server_s_port_is_unbound_never_deleted(scene: dict[str, Any]) -> None:
    found = leftovers(scene)
    (item,) = [i for i in found["items"] if i["server"] == scene["f"]]
    assert (item["kind"], item["subject"]) == ("stray-port", scene["shelved"])
    assert item["command"] == f"openstack port unset --host {scene['shelved']}"
    assert "on no host (shelved_offloaded)" in item["reason"]


def test_a_container_s_port_is_foreign_and_gets_no_command(scene: dict[str, Any]) -> None:
    found = leftovers(scene)
    (item,) = [i for i in found["items"] if i["subject"] == scene["kuryr"]]
    assert (item["kind"], item["command"], item["held_by"]) == ("foreign-port", None, "owner")
    assert "'compute:kuryr' names no zone of Nova's" in item["reason"]
    assert scene["container"] in item["reason"]
    assert found["counts"]["foreign-port"] == 1


def test_an_evacuation_leaves_the_source_s_allocation(scene: dict[str, Any]) -> None:
    found = leftovers(scene)
    (item,) = [i for i in found["items"] if i["server"] == scene["b"]]
    assert (item["kind"], item["subject"], item["server_host"]) == (
        "stray-allocation", scene["b"], "host2",
    )  # fmt: skip
    assert item["command"] == (
        "openstack --os-placement-api-version 1.12 resource provider allocation unset "
        f"--provider {scene['host1']} {scene['b']}"
    )
    assert item["vcpus"] and item["memory_mb"]


def test_a_server_whose_allocation_was_removed_by_hand(scene: dict[str, Any]) -> None:
    found = leftovers(scene)
    (item,) = [i for i in found["items"] if i["server"] == scene["c"]]
    assert (item["kind"], item["missing"]) == ("stray-allocation", True)
    assert item["command"] == f"nova-manage placement heal_allocations --instance {scene['c']}"


def test_a_building_server_and_a_live_migration_in_flight_are_not_reported(
    scene: dict[str, Any],
) -> None:
    found = leftovers(scene)
    assert of(found, scene["d"]) == []
    assert of(found, scene["e"]) == []
    assert scene["migration"] not in {i["subject"] for i in found["items"]}


def test_it_finds_at_least_what_nova_manage_placement_audit_finds(scene: dict[str, Any]) -> None:
    found = leftovers(scene)
    ours = {i["subject"] for i in found["items"] if i["kind"] == "stray-allocation"}
    assert scene["b"] in scene["reference"]  # the reference saw the evacuation's leftover
    assert scene["reference"] <= ours, scene["reference"] - ours
    assert scene["migration"] not in scene["reference"]
