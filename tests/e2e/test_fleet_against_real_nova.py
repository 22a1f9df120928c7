"""``nova-orphans fleet audit`` against the real Nova stack.

Hosts come from Nova's own service list; each host's libvirt is a ``test:///`` world named
by the URI template. One UUID running on two hosts is split-brain, whichever copy Nova
points to; a host that cannot be read is reported unreachable without spoiling the others.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import pathlib
import subprocess
from typing import Any

import harness
import pytest

from nova_orphans.classify.guests import classify
from nova_orphans.fakes import libvirt_node as worlds
from nova_orphans.fakes.nova_reference import reference_fleet_views
from nova_orphans.fleet import audit as fleet
from nova_orphans.fleet.scan import HostScan
from nova_orphans.model import Domain, DomainState, Finding
from nova_orphans.observe.nova.fleet import FleetNovaObserver
from nova_orphans.observe.nova.observer import NovaObserver
from tests import report_schema
from tests.e2e.test_lean_listing_against_real_nova import CountingTransport, domain

pytestmark = pytest.mark.nova

FAKE_HOSTS = ("host1", "host2")


def nova_domain(uuid: str, name: str, *devices: str) -> str:
    return worlds.node_domain(
        uuid=uuid, name=name, devices=devices, metadata=worlds.nova_metadata(name=name)
    )


def fleet_audit(conf: pathlib.Path, template: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return harness.run_cli(
        "fleet",
        "audit",
        "--config-file",
        str(conf),
        "--uri-template",
        template,
        "--format",
        "json",
        "--timeout",
        "30",
        *extra,
    )


def by_host(document: dict) -> dict[str, dict]:
    return {h["host"]: h for h in document["hosts"]}


def test_fleet_audit_finds_split_brain_and_leftovers_across_novas_hosts(
    nova_stack: harness.Nova, nova_orphans_cli: str, tmp_path: pathlib.Path
) -> None:
    """Hosts from os-services; a guest running on host1 and host2 is split-brain (the merge's
    one rule, its copy on host1 misplaced); a deleted server's guest lists its RBD volume and
    tap device as remnants."""
    nova = nova_stack
    managed = nova.boot("host1")["id"]
    twice = nova.boot("host2")["id"]
    gone = nova.boot("host2")["id"]
    try:
        nova.force_delete(gone)  # a fake compute leaves no domain: the world keeps one
        nova.wait_gone(gone)
        leftovers = (
            worlds.rbd_disk("volumes/volume-e2e"),
            worlds.bridge_interface("fa:16:3e:00:00:01", "tap-e2e0001"),
        )
        worlds.write_node_file(
            tmp_path,
            [nova_domain(managed, "instance-a"), nova_domain(twice, "instance-b")],
            name="host1.xml",
        )
        worlds.write_node_file(
            tmp_path,
            [nova_domain(twice, "instance-b"), nova_domain(gone, "instance-c", *leftovers)],
            name="host2.xml",
        )
        for empty in ("lvhost", harness.CELL2_HOST):
            worlds.write_node_file(tmp_path, [], name=f"{empty}.xml")
        conf = harness.write_cli_config(tmp_path / "fleet.conf", host="host1")

        done = fleet_audit(conf, f"test://{tmp_path}/{{host}}.xml")
        assert done.returncode == 3, (done.returncode, done.stderr[-2000:])
        document = report_schema.valid(json.loads(done.stdout))
        hosts = by_host(document)
        assert set(FAKE_HOSTS) <= set(hosts), hosts.keys()
        assert all(hosts[h]["status"] == "audited" for h in FAKE_HOSTS)

        found = {(h, f["uuid"]): f for h in FAKE_HOSTS for f in hosts[h]["findings"]}
        split = {c["uuid"]: c for c in document["split_brain"]}
        assert split[twice]["running_on"] == ["host1", "host2"]
        assert "Nova places it on host2" in split[twice]["reason"]
        assert found[("host1", twice)]["kind"] == "misplaced"
        assert ("host2", twice) not in found and ("host1", managed) not in found
        deleted = found[("host2", gone)]
        assert deleted["kind"] == "deleted"
        assert any("volumes/volume-e2e" in item for item in deleted["remnants"])
        assert any("tap-e2e0001" in item for item in deleted["remnants"])
        assert document["summary"]["split_brain"] >= 1 and document["counts"]["split-brain"] >= 1
    finally:
        for uuid in (managed, twice):
            nova.destroy(uuid)


def test_an_unreachable_host_and_one_nova_does_not_know_are_reported_not_read_as_empty(
    nova_stack: harness.Nova, nova_orphans_cli: str, tmp_path: pathlib.Path
) -> None:
    """``--hosts`` naming a host with no readable libvirt and one Nova never heard of: both
    are reported, the reachable host is still audited, and the exit code is 1."""
    nova = nova_stack
    managed = nova.boot("host1")["id"]
    try:
        worlds.write_node_file(tmp_path, [nova_domain(managed, "instance-a")], name="host1.xml")
        worlds.write_node_file(tmp_path, [], name="stranger.xml")
        conf = harness.write_cli_config(tmp_path / "fleet.conf", host="host1")

        done = fleet_audit(
            conf, f"test://{tmp_path}/{{host}}.xml", "--hosts", "host1,host2,stranger"
        )
        assert done.returncode == 1, (done.returncode, done.stderr[-2000:])
        hosts = by_host(report_schema.valid(json.loads(done.stdout)))
        assert hosts["host1"]["status"] == "audited"
        assert managed not in {f["uuid"] for f in hosts["host1"]["findings"]}
        assert hosts["host2"]["status"] == "unreachable"  # no host2.xml
        assert hosts["host2"]["findings"] is None
        assert hosts["stranger"]["known_to_nova"] is False
    finally:
        nova.destroy(managed)


def node_uuid(nova: harness.Nova, host: str) -> str:
    """The UUID of ``host``'s compute node, as Nova lists it."""
    nodes = nova.get("/os-hypervisors/detail")["hypervisors"]
    (uuid,) = [n["id"] for n in nodes if n["service"]["host"] == host]
    return str(uuid)


def report_config(tmp_path: pathlib.Path, host: str, nova: harness.Nova, uri: str) -> pathlib.Path:
    """A fake-driver host's config whose compute_id (Nova's node UUID) proves its identity."""
    home = tmp_path / host
    home.mkdir()
    (home / "nova.conf").write_text(f"[DEFAULT]\nhost = {host}\nstate_path = {home}\n")
    (home / "compute_id").write_text(node_uuid(nova, host) + "\n")
    return harness.write_cli_config(
        home / "nova-orphans.conf",
        host=host,
        libvirt_uri=uri,
        extra=f"[DEFAULT]\nnova_config_file = {home / 'nova.conf'}\n",
    )


def audit_json(conf: pathlib.Path) -> str:
    done = harness.run_cli("audit", "--config-file", str(conf), "--format", "json")
    assert done.returncode in (0, 3), (done.returncode, done.stderr[-2000:])
    assert json.loads(done.stdout)["identity"]["state"] == "verified", done.stdout[-2000:]
    return done.stdout


def test_reports_of_lvhost_and_host1_merged_without_any_libvirt_connection_find_split_brain(
    nova_stack: harness.Nova, nova_orphans_cli: str, tmp_path: pathlib.Path
) -> None:
    """lvhost's report (the real libvirtd, identity verified by hostname, type and compute_id)
    and host1's (a test:/// world holding a running copy of lvhost's guest) merged by
    ``fleet audit --reports``: split-brain, with one Nova request for the hosts and two for
    the candidate."""
    nova = nova_stack
    guest = nova.boot("lvhost", timeout=300)["id"]
    try:
        assert harness.domain_state(guest) == "running"
        reports = tmp_path / "reports"
        reports.mkdir()
        lvhost = harness.write_cli_config(
            tmp_path / "lvhost.conf",
            host="lvhost",
            extra=f"[DEFAULT]\nnova_config_file = {harness.STATE}/etc/compute-lvhost.conf\n",
        )
        (reports / "lvhost.json").write_text(audit_json(lvhost))
        host1_world = worlds.write_node_file(
            tmp_path, [nova_domain(guest, "instance-copy")], name="host1.xml"
        )
        host1 = report_config(tmp_path, "host1", nova, host1_world)
        (reports / "host1.json").write_text(audit_json(host1))
        services = nova.get("/os-services?binary=nova-compute")["services"]
        others = sorted({s["host"] for s in services} - {"lvhost", "host1"})
        for host in others:  # every other compute Nova lists reports no domain
            world = worlds.write_node_file(tmp_path, [], name=f"{host}.xml")
            (reports / f"{host}.json").write_text(
                audit_json(report_config(tmp_path, host, nova, world))
            )
        conf = harness.write_cli_config(tmp_path / "central.conf", host="central")

        done = harness.run_cli(
            "fleet", "audit", "--config-file", str(conf), "--reports", str(reports),
            "--format", "json",
        )  # fmt: skip
        assert done.returncode == 3, (done.returncode, done.stderr[-2000:])
        document = json.loads(done.stdout)
        split = {s["uuid"]: s for s in document["split_brain"]}
        assert split[guest]["running_on"] == ["host1", "lvhost"]
        assert "Nova places it on lvhost" in split[guest]["reason"]
        statuses = {h["host"]: h["status"] for h in document["hosts"]}
        assert statuses == dict.fromkeys(["host1", "lvhost", *others], "trusted")
        candidates = len(document["split_brain"]) + len(document["moved_between_reports"])
        assert document["summary"]["nova_requests"] == 1 + 2 * candidates
    finally:
        nova.destroy(guest)


def test_the_fleets_cheap_listing_gives_the_findings_of_the_cloud_wide_detail_listing(
    nova_stack: harness.Nova,
) -> None:
    """host1 and host2 as one fleet: managed, split-brain (Nova places it on host1), a
    duplicate (its host2 copy shut off), SOFT_DELETED with its domain, migrated to host2 with
    its host1 domain left behind, deleted with its domain left on two hosts, never known to
    Nova on two hosts, and lost on host2. Each host's plain listing with details where they
    change a finding gives the findings (Nova's records included) of the detail listing of the
    whole cloud, with no detail listing and one lookup per UUID."""
    nova = nova_stack
    booted = {name: nova.boot(host, wait=False)["id"] for name, host in (
        ("managed", "host1"), ("split", "host1"), ("duplicate", "host2"), ("soft", "host1"),
        ("migrated", "host1"), ("deleted", "host2"), ("lost", "host2"),
    )}  # fmt: skip
    try:
        for uuid in booted.values():
            nova.wait_status(uuid, "ACTIVE")
        nova.soft_delete(booted["soft"])
        nova.live_migrate(booted["migrated"], "host2")
        nova.soft_delete(booted["deleted"])
        nova.force_delete(booted["deleted"])
        unknown = worlds.random_uuid()

        def off(uuid: str) -> Domain:
            return dataclasses.replace(domain(uuid), state=DomainState.SHUTOFF)

        # copies on two hosts: only the split-brain one runs on both
        hosts = {
            "host1": [domain(booted[n]) for n in ("managed", "split", "soft")]
            + [off(booted[n]) for n in ("duplicate", "migrated", "deleted")]
            + [off(unknown)],
            "host2": [domain(booted[n]) for n in ("split", "duplicate", "migrated", "deleted")]
            + [domain(unknown)],
        }
        uuids = {*booted.values(), unknown}

        def ours(found: dict[str, list[Finding]]) -> dict[str, list[Finding]]:
            return {h: [f for f in fs if f.uuid in uuids] for h, fs in found.items()}

        detail = reference_fleet_views(NovaObserver(CountingTransport(), retry=_once), hosts)
        before = ours({h: classify(ds, detail[h]) for h, ds in hosts.items()})
        transport = CountingTransport()
        scans = [HostScan(h, f"test:///{h}", tuple(ds)) for h, ds in hosts.items()]
        report = fleet.fleet_audit(
            scans, FleetNovaObserver(transport, retry=_once), ["host1", "host2"], _NOW
        )
        cheap = ours({h.host: [f.finding for f in h.findings if f.finding] for h in report.hosts})

        assert cheap == before
        assert [(c.uuid, c.running_on) for c in report.split_brain if c.uuid in uuids] == [
            (booted["split"], ("host1", "host2"))
        ]
        kinds = {(h, f.uuid): f.kind.value for h, fs in cheap.items() for f in fs}
        assert kinds == {
            ("host2", booted["split"]): "misplaced",
            ("host1", booted["duplicate"]): "misplaced",
            ("host1", booted["soft"]): "protected",
            ("host1", booted["deleted"]): "deleted",
            ("host2", booted["deleted"]): "deleted",
            ("host1", unknown): "unknown",
            ("host2", unknown): "unknown",
            ("host1", booted["migrated"]): "misplaced",
            ("host2", booted["lost"]): "lost",
        }
        asked = transport.asked
        assert sum(p.startswith("/servers?all_tenants=1&host=") for p in asked) >= 2
        lookups = [p for p in asked if "uuid=" in p]
        assert len(lookups) == len(set(lookups))
        if len(asked) < 40:  # no other test's servers without domains on host1 or host2
            assert not any(
                p.startswith("/servers/detail") and "uuid=" not in p and "deleted=1" not in p
                for p in asked
            )
    finally:
        for uuid in booted.values():
            nova.destroy(uuid)


def _once(call: Any) -> Any:
    return call()


_NOW = datetime.datetime.now(datetime.timezone.utc)
