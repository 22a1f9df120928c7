"""``nova-orphans audit`` against a real Nova control plane (the stack in ``tests/e2e/stack``).

The CLI runs as a subprocess, exactly as an operator would run it; the tests assert on its JSON
report and exit code, always on the UUIDs they created (other tests may share the cloud and
``qemu:///system``).
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import subprocess
from typing import Any

import harness
import pytest

from nova_orphans import exits
from nova_orphans.fakes import libvirt_node as worlds
from tests import report_schema

pytestmark = pytest.mark.nova

QEMU = harness.LIBVIRT_URI


def audit(
    conf: pathlib.Path, host: str, uri: str, *, expect: tuple[int, ...] = (exits.OK, exits.FOUND)
) -> tuple[subprocess.CompletedProcess[str], dict[str, dict[str, Any]]]:
    done = harness.run_audit(conf, host, uri)
    assert done.returncode in expect, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    report = report_schema.valid(json.loads(done.stdout))
    assert report["host"] == host
    assert report["checked_at"]
    return done, {f["uuid"]: f for f in report["findings"]}


def nova_domain(uuid: str, name: str) -> str:
    """A running test-driver domain with the metadata Nova writes for its guests."""
    return worlds.node_domain(
        uuid=uuid, name=name, metadata=worlds.nova_metadata(name=name, flavor="e2e-tiny")
    )


def assert_one_line_error(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode == exits.ERROR, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert any(w in lines[0].lower() for w in words), lines[0]
    assert not done.stdout.strip(), done.stdout


# --------------------------------------------------------------------------- seed case 1


@pytest.mark.parametrize(
    ("how", "vm_state"),
    [
        # reclaim_instance_interval > 0: a DELETE is a soft delete; with the compute down the
        # API deletes the row at once but leaves vm_state "soft-delete" on it.
        ("delete", "soft-delete"),
        ("forceDelete", "deleted"),
    ],
)
def test_local_delete_leaves_real_guest_reported_deleted_then_unknown(
    nova_stack: harness.Nova,
    nova_orphans_cli: str,
    tmp_path: pathlib.Path,
    how: str,
    vm_state: str,
) -> None:
    """A server deleted while its (real libvirt) compute was down keeps running in QEMU:
    ``deleted`` while Nova still has the row, ``unknown`` once the row is archived."""
    nova = nova_stack
    conf = harness.write_cli_config(tmp_path / "lvhost.conf", host="lvhost")
    server = nova.boot("lvhost")
    uuid = server["id"]
    try:
        assert harness.domain_state(uuid) == "running"
        _, found = audit(conf, "lvhost", QEMU)
        assert uuid not in found, found.get(uuid)

        with harness.compute_down(nova, "lvhost"):
            try:
                # A local delete: the compute is down.
                if how == "delete":
                    nova.delete(uuid)
                else:
                    nova.force_delete(uuid)
                deleted = nova.find_server(uuid, deleted="1")
                assert deleted is not None and deleted["status"] == "DELETED"
                assert harness.domain_state(uuid) == "running"

                _, found = audit(conf, "lvhost", QEMU, expect=(exits.FOUND,))
                finding = found[uuid]
                assert finding["kind"] == "deleted", finding
                assert finding["vm_state"] == vm_state
                assert finding["deleted_at"]
                assert finding["nova_host"] == "lvhost"
                assert finding["domain_state"] == "running"
                assert harness.domain_state(uuid) == "running"  # audit changes nothing

                assert harness.archive_deleted_rows() == 1
                assert nova.find_server(uuid, deleted="1") is None

                _done, found = audit(conf, "lvhost", QEMU, expect=(exits.FOUND,))
                finding = found[uuid]
                assert finding["kind"] == "unknown", finding
                assert finding["nova_host"] is None
                assert finding["deleted_at"] is None
                assert harness.domain_state(uuid) == "running"
            finally:
                # Before lvhost's compute comes back: the guest is the test's to remove.
                harness.remove_domain(uuid)
    finally:
        harness.remove_domain(uuid)
        nova.destroy(uuid)
    assert harness.domain_state(uuid) is None


# --------------------------------------------------------------------------- seed case 2


@pytest.fixture
def host1_world(nova_stack: harness.Nova, tmp_path: pathlib.Path) -> Any:
    """Servers in every situation the test world of host1 needs; cleaned up afterwards."""
    nova = nova_stack
    created: list[str] = []
    stuck: list[str] = []

    def boot(host: str) -> dict[str, Any]:
        srv = nova.boot(host)
        created.append(srv["id"])
        return srv

    try:
        world: dict[str, Any] = {}
        world["managed"] = boot("host1")
        world["migrated"] = boot("host1")
        world["soft_deleted"] = boot("host1")
        world["busy"] = boot("host2")
        world["lost"] = boot("host1")

        nova.live_migrate(world["migrated"]["id"], "host2")
        nova.soft_delete(world["soft_deleted"]["id"])
        harness.set_task_state(world["busy"]["id"], "migrating")
        stuck.append(world["busy"]["id"])
        world["foreign_uuid"] = worlds.random_uuid()
        yield world
    finally:
        for uuid in stuck:
            harness.set_task_state(uuid, None)
        for uuid in created:
            nova.destroy(uuid)


def test_host1_world_misplaced_protected_foreign_lost(
    nova_stack: harness.Nova,
    nova_orphans_cli: str,
    host1_world: dict[str, Any],
    tmp_path: pathlib.Path,
) -> None:
    """The libvirt of host1 as a test:/// world, judged against real Nova records."""
    nova = nova_stack
    w = host1_world
    migrated = w["migrated"]["id"]
    soft = w["soft_deleted"]["id"]
    busy = w["busy"]["id"]
    managed = w["managed"]["id"]
    lost = w["lost"]["id"]
    foreign = w["foreign_uuid"]

    # What Nova says, first: the premises of each case.
    srv = nova.server(migrated)
    assert srv["OS-EXT-SRV-ATTR:host"] == "host2"
    migs = nova.migrations(instance_uuid=migrated)
    assert any(
        m["migration_type"] == "live-migration"
        and m["source_compute"] == "host1"
        and m["status"] == "completed"
        for m in migs
    ), migs
    assert nova.server(soft)["status"] == "SOFT_DELETED"
    assert nova.server(busy)["OS-EXT-STS:task_state"] == "migrating"

    uri = worlds.write_node_file(
        tmp_path,
        [
            nova_domain(managed, "instance-managed"),
            nova_domain(migrated, "instance-migrated"),
            nova_domain(soft, "instance-soft"),
            nova_domain(busy, "instance-busy"),
            worlds.node_domain(uuid=foreign, name="operator-test-vm"),
        ],
        name="host1.xml",
    )
    world_file = pathlib.Path(uri.removeprefix("test://"))
    before = hashlib.sha256(world_file.read_bytes()).hexdigest()
    conf = harness.write_cli_config(tmp_path / "host1.conf", host="host1", libvirt_uri=uri)

    _done, found = audit(conf, "host1", uri, expect=(exits.FOUND,))

    assert managed not in found, found.get(managed)

    assert found[migrated]["kind"] == "misplaced", found[migrated]
    assert "live-migration source" in found[migrated]["reason"], found[migrated]
    assert found[migrated]["nova_host"] == "host2"

    assert found[soft]["kind"] == "protected", found[soft]
    assert "SOFT_DELETED" in found[soft]["reason"]

    assert found[busy]["kind"] == "protected", found[busy]
    assert "migrating" in found[busy]["reason"]

    assert found[foreign]["kind"] == "foreign", found[foreign]

    assert found[lost]["kind"] == "lost", found[lost]
    assert found[lost]["nova_host"] == "host1"
    assert found[lost]["domain_state"] in (None, "", "absent"), found[lost]

    # The audit only read the world; Nova is as it was.
    assert hashlib.sha256(world_file.read_bytes()).hexdigest() == before
    assert nova.server(managed)["status"] == "ACTIVE"
    assert nova.server(soft)["status"] == "SOFT_DELETED"


def test_restored_server_is_managed_again(
    nova_stack: harness.Nova, nova_orphans_cli: str, tmp_path: pathlib.Path
) -> None:
    """SOFT_DELETED is protected; after ``restore`` the same domain is simply Nova's again."""
    nova = nova_stack
    uuid = nova.boot("host1")["id"]
    try:
        uri = worlds.write_node_file(tmp_path, [nova_domain(uuid, "instance-restore")])
        conf = harness.write_cli_config(tmp_path / "h1.conf", host="host1", libvirt_uri=uri)
        nova.soft_delete(uuid)
        _, found = audit(conf, "host1", uri)
        assert found[uuid]["kind"] == "protected", found[uuid]
        nova.restore(uuid)
        _, found = audit(conf, "host1", uri)
        assert uuid not in found, found.get(uuid)
    finally:
        nova.destroy(uuid)


def test_host_and_libvirt_uri_read_from_the_computes_nova_conf(
    nova_stack: harness.Nova,
    nova_orphans_cli: str,
    unknown_qemu_guest: str,
    tmp_path: pathlib.Path,
) -> None:
    """``nova_config_file`` pointed at lvhost's real nova-compute config: no --host, no
    --libvirt-uri; the audit works out host lvhost on qemu:///system by itself."""
    nova = nova_stack
    conf = tmp_path / "from-nova-conf.conf"
    conf.write_text(
        "[DEFAULT]\n"
        f"nova_config_file = {harness.STATE / 'etc' / 'compute-lvhost.conf'}\n"
        "[nova]\n"
        "auth_type = admin_token\n"
        f"endpoint = {harness.NOVA_ENDPOINT}\n"
        f"token = {harness.ADMIN_TOKEN}\n"
    )
    uuid = nova.boot("lvhost")["id"]
    try:
        done = harness.run_cli("audit", "--config-file", str(conf), "--format", "json")
        assert done.returncode == exits.FOUND, (done.returncode, done.stdout, done.stderr)
        report = report_schema.valid(json.loads(done.stdout))
        assert report["host"] == "lvhost"
        found = {f["uuid"]: f for f in report["findings"]}
        assert uuid not in found, found.get(uuid)
        assert found[unknown_qemu_guest]["kind"] == "unknown"
    finally:
        nova.destroy(uuid)  # lvhost is up: Nova removes its guest itself
        harness.remove_domain(uuid)


# --------------------------------------------------------------------------- bad input


@pytest.fixture
def unknown_qemu_guest() -> Any:
    """A real running guest carrying Nova metadata for a UUID Nova never heard of."""
    uuid = worlds.random_uuid()
    xml = worlds.qemu_domain(
        uuid=uuid, name=f"e2e-unknown-{uuid[:8]}", metadata=worlds.nova_metadata(name="ghost")
    )
    path = pathlib.Path("/tmp") / f"e2e-unknown-{uuid}.xml"
    path.write_text(xml)
    try:
        done = harness.virsh("create", str(path))
        assert done.returncode == 0, done.stderr
        yield uuid
    finally:
        harness.remove_domain(uuid)
        path.unlink(missing_ok=True)


@pytest.mark.parametrize(
    ("label", "token", "endpoint"),
    [
        ("invalid token", "not-a-token", harness.NOVA_ENDPOINT),
        ("not an admin", "demo:demo", harness.NOVA_ENDPOINT),
        ("unreachable endpoint", harness.ADMIN_TOKEN, "http://127.0.0.1:1/v2.1"),
        ("wrong path", harness.ADMIN_TOKEN, "http://127.0.0.1:8774/nope"),
    ],
)
def test_bad_nova_credentials_or_endpoint_fail_closed(
    nova_stack: harness.Nova,
    nova_orphans_cli: str,
    unknown_qemu_guest: str,
    tmp_path: pathlib.Path,
    label: str,
    token: str,
    endpoint: str,
) -> None:
    """Any Nova failure: exit 1, one line on stderr naming Nova, no report, nothing changed."""
    conf = harness.write_cli_config(
        tmp_path / "bad.conf", host="lvhost", token=token, endpoint=endpoint
    )
    done = harness.run_audit(conf, "lvhost", QEMU)
    assert_one_line_error(done, "nova")
    assert harness.domain_state(unknown_qemu_guest) == "running"

    # The same guest with good credentials: it is found, so the failure above hid a finding.
    good = harness.write_cli_config(tmp_path / "good.conf", host="lvhost")
    _, found = audit(good, "lvhost", QEMU, expect=(exits.FOUND,))
    assert found[unknown_qemu_guest]["kind"] == "unknown"
    assert harness.domain_state(unknown_qemu_guest) == "running"


@pytest.mark.parametrize(
    "uri",
    [
        "qemu:///system?socket=/nonexistent/libvirt-sock",
        "qemu+tcp://127.0.0.1:1/system",
        "missing-test-world",
    ],
)
def test_unreachable_libvirt_fails_with_one_line(
    nova_stack: harness.Nova, nova_orphans_cli: str, tmp_path: pathlib.Path, uri: str
) -> None:
    """libvirt cannot be reached: exit 1, one line on stderr naming libvirt."""
    if uri == "missing-test-world":
        uri = f"test://{tmp_path / 'no-such-world.xml'}"
    conf = harness.write_cli_config(tmp_path / "h1.conf", host="host1", libvirt_uri=uri)
    done = harness.run_audit(conf, "host1", uri)
    assert_one_line_error(done, "libvirt")


def test_many_deleted_guests_are_explained_by_the_hosts_deleted_listing(
    nova_stack: harness.Nova, nova_orphans_cli: str, tmp_path: pathlib.Path
) -> None:
    """Six servers deleted from host2 while host2's libvirt still holds their guests: the
    audit explains them through one listing of host2's deleted rows (``deleted=1&host=``) and
    reports each one ``deleted``; a guest Nova never heard of among them stays ``unknown``."""
    nova = nova_stack
    gone = [nova.boot("host2")["id"] for _ in range(6)]
    for uuid in gone:
        nova.destroy(uuid)
    for uuid in gone:
        nova.wait_gone(uuid)
    never = worlds.random_uuid()
    uri = worlds.write_node_file(
        tmp_path,
        [nova_domain(u, f"instance-{i:08x}") for i, u in enumerate([*gone, never])],
        name="host2.xml",
    )
    conf = harness.write_cli_config(tmp_path / "host2.conf", host="host2", libvirt_uri=uri)
    _, found = audit(conf, "host2", uri, expect=(exits.FOUND,))
    assert {found[u]["kind"] for u in gone} == {"deleted"}
    assert all(found[u]["nova_host"] == "host2" and found[u]["deleted_at"] for u in gone)
    assert found[never]["kind"] == "unknown"
