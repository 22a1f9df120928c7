"""What a real orphan costs, beside the real Placement's view of its host.

A server booted on lvhost (a real QEMU guest through Nova's libvirt driver) is deleted while
lvhost's nova-compute is down: the API releases its Placement allocation, the guest keeps
running. ``nova-orphans audit`` must report that guest's memory, vCPUs and disk, and Placement's
inventory and usages of lvhost's provider exactly as Placement itself answers them.
"""

from __future__ import annotations

import configparser
import json
import pathlib
import shutil
from collections.abc import Iterator
from typing import Any

import pytest
from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint

from tests.e2e.stack import harness

PLACEMENT = "http://127.0.0.1:8778"
MIB = 1024**2


def placement(path: str) -> Any:
    session = ks_session.Session(auth=token_endpoint.Token(PLACEMENT, harness.ADMIN_TOKEN))
    response = session.get(
        PLACEMENT + path, headers={"OpenStack-API-Version": "placement 1.14"}, timeout=30
    )
    assert response.status_code == 200, response.text
    return response.json()


def lvhost_provider() -> tuple[str, str]:
    """lvhost's compute node name and its resource provider's UUID."""
    nodes = harness.Nova().get("/os-hypervisors/detail")["hypervisors"]
    (name,) = [n["hypervisor_hostname"] for n in nodes if n["service"]["host"] == "lvhost"]
    (provider,) = placement(f"/resource_providers?name={name}")["resource_providers"]
    return name, provider["uuid"]


def usages(provider: str) -> dict[str, int]:
    return placement(f"/resource_providers/{provider}/usages")["usages"]


def instances_path() -> pathlib.Path:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(harness.STATE / "etc" / "compute-lvhost.conf")
    return pathlib.Path(parser["DEFAULT"]["instances_path"])


@pytest.fixture
def keeper_and_victim(nova_stack: harness.Nova) -> Iterator[tuple[str, str]]:
    nova = nova_stack
    booted: list[str] = []
    try:
        booted += [nova.boot("lvhost", wait=False)["id"] for _ in range(2)]
        for uuid in booted:
            nova.wait_status(uuid, "ACTIVE", timeout=300)
            assert harness.domain_state(uuid) == "running"
        yield booted[0], booted[1]
    finally:
        nova.wait_service_state("lvhost", "up")
        for uuid in booted:
            nova.destroy(uuid)
            harness.remove_domain(uuid)
            shutil.rmtree(instances_path() / uuid, ignore_errors=True)


def test_a_real_orphan_uses_what_real_placement_released(nova_stack, keeper_and_victim, tmp_path):
    nova = nova_stack
    keeper, victim = keeper_and_victim
    flavor = nova.get(f"/flavors/{harness.stack_info()['flavor_id']}")["flavor"]
    node, provider = lvhost_provider()
    others = sorted(_all_domains() - {keeper, victim})
    conf = tmp_path / "nova-orphans.conf"
    conf.write_text(
        # NOTE: the guests other tests run here are deny-listed: protected, not counted.
        f"[DEFAULT]\nhost = lvhost\ndeny_uuids = {','.join(others)}\n"
        f"[libvirt]\nconnection_uri = {harness.LIBVIRT_URI}\n"
        f"[nova]\nauth_type = admin_token\nendpoint = {harness.NOVA_ENDPOINT}\n"
        f"token = {harness.ADMIN_TOKEN}\ntimeout = 20\n"
        f"[services]\nplacement_endpoint = {PLACEMENT}\n"
        f"[agent]\nstate_dir = {tmp_path / 'state'}\n"
    )
    with harness.compute_down(nova, "lvhost"):
        try:
            before = usages(provider)
            nova.delete(victim)  # a local delete: the allocation goes, the guest stays
            assert harness.domain_state(victim) == "running"
            after = usages(provider)
            done = harness.run_audit(conf, "lvhost", harness.LIBVIRT_URI)
            table = harness.run_audit(
                conf, "lvhost", harness.LIBVIRT_URI, "--format", "table", "--wide"
            )
        finally:
            harness.remove_domain(victim)
            shutil.rmtree(instances_path() / victim, ignore_errors=True)
    assert done.returncode == 3, done.stderr
    report = json.loads(done.stdout)
    (found,) = [f for f in report["findings"] if f["uuid"] == victim]
    assert found["kind"] == "deleted"
    assert found["dangers"] == []  # no volume, no port: nothing for Cinder or Neutron
    # The guest's own numbers, from the one bulk libvirt call.
    usage = found["usage"]
    assert usage["vcpus"] == flavor["vcpus"]
    assert usage["memory_bytes"] == flavor["ram"] * MIB
    assert usage["disk_bytes"] > 0 and usage["cpu_seconds"] > 0
    # Placement released exactly the flavor; the orphan still holds it.
    assert before["MEMORY_MB"] - after["MEMORY_MB"] == flavor["ram"]
    assert before["VCPU"] - after["VCPU"] == flavor["vcpus"]
    cost = report["cost"]
    assert cost["untracked"] == {
        "guests": 1,
        "vcpus": flavor["vcpus"],
        "memory_bytes": flavor["ram"] * MIB,
        "disk_bytes": usage["disk_bytes"],
        "unmeasured": [],
        "incomplete": [],
    }
    seen = cost["placement"]
    assert (seen["provider"], seen["uuid"], seen["error"]) == (node, provider, None)
    inventories = placement(f"/resource_providers/{provider}/inventories")["inventories"]
    for rc, inventory in inventories.items():
        assert seen["resources"][rc] == {
            "total": inventory["total"],
            "reserved": inventory["reserved"],
            "allocation_ratio": inventory["allocation_ratio"],
            "used": after.get(rc, 0),
        }
    memory = next(line for line in cost["summary"] if line.startswith("memory: "))
    assert memory.endswith(
        f"non-managed guests use another {flavor['ram'] / 1024:.1f} GiB it does not know about"
    )
    # The table ends with the same sentences (docs/admin/audit.md's example).
    print(table.stdout)
    assert table.stdout.rstrip().endswith("\n".join(cost["summary"]))


def _all_domains() -> set[str]:
    done = harness.virsh("list", "--all", "--uuid")
    assert done.returncode == 0, done.stderr
    return {line.strip() for line in done.stdout.splitlines() if line.strip()}
