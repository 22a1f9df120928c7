"""The collection's ``audit`` and ``collect`` playbooks against the real Nova stack.

Each of Nova's compute hosts is an inventory host of its own behind the loopback sshd
(Ansible's real ``ssh`` connection): host-a, host-b and host-c are host1, host2 and host3
(cell2), each with its own ``test:///`` world and config whose ``compute_id`` proves the
identity; host-lv is lvhost on the real libvirtd. The controller merges with the real Nova.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
from typing import Any

import harness
import pytest

from nova_orphans.fakes import libvirt_node as worlds
from tests import report_schema
from tests.ansible import loopback
from tests.e2e.test_fleet_against_real_nova import fleet_audit, node_uuid, nova_domain

pytestmark = pytest.mark.nova

#: Inventory host -> Nova's compute host.
FAKE = {"host-a": "host1", "host-b": "host2", "host-c": harness.CELL2_HOST}
WORLD_HOSTS = ",".join(FAKE.values())


class Fleet:
    """Worlds, configs and the inventory of the four hosts; the controller's config."""

    def __init__(self, tmp: pathlib.Path, nova: harness.Nova, sshd: loopback.Sshd) -> None:
        self.tmp, self.nova, self.sshd = tmp, nova, sshd
        self.worlds = tmp / "worlds"
        self.worlds.mkdir()
        self.central = harness.write_cli_config(tmp / "central.conf", host="central")
        self.hosts: dict[str, dict[str, Any]] = {}
        self.fake = dict(FAKE)
        services = nova.get("/os-services?binary=nova-compute")["services"]
        for host in sorted({s["host"] for s in services} - {*FAKE.values(), "lvhost"}):
            self.fake[f"host-{host}"] = host  # every other compute Nova lists: an empty world
        for alias, host in self.fake.items():
            self.hosts[alias] = self._fake_host(alias, host)
            self.plant(host)
        lv_conf = harness.write_cli_config(
            tmp / "host-lv.conf",
            host="lvhost",
            extra=f"[DEFAULT]\nnova_config_file = {harness.STATE}/etc/compute-lvhost.conf\n"
            f"[agent]\nreport_file = {tmp / 'host-lv' / 'report.json'}\n",
        )
        self.hosts["host-lv"] = self._vars(lv_conf, tmp / "host-lv" / "report.json", "lvhost")

    def _fake_host(self, alias: str, host: str) -> dict[str, Any]:
        home = self.tmp / alias
        home.mkdir()
        (home / "nova.conf").write_text(f"[DEFAULT]\nhost = {host}\nstate_path = {home}\n")
        (home / "compute_id").write_text(node_uuid(self.nova, host) + "\n")
        report = home / "state" / "report.json"
        conf = harness.write_cli_config(
            home / "nova-orphans.conf",
            host=host,
            libvirt_uri=f"test://{self.worlds / host}.xml",
            extra=f"[DEFAULT]\nnova_config_file = {home / 'nova.conf'}\n"
            f"[agent]\nstate_dir = {home / 'state'}\nreport_file = {report}\n",
        )
        return self._vars(conf, report, host)

    def _vars(self, conf: pathlib.Path, report: pathlib.Path, host: str) -> dict[str, Any]:
        return {
            **self.sshd.host_vars(),
            # NOTE: the inventory's names are not Nova's: each report file is named after
            # the Nova host it came from, the merge counts it for that host only.
            "nova_orphans_nova_host": host,
            "nova_orphans_command": loopback.tool_command(),
            "nova_orphans_config_file": str(conf),
            "nova_orphans_report_file": str(report),
        }

    def plant(self, host: str, *domains: str) -> None:
        worlds.write_node_file(self.worlds, list(domains), name=f"{host}.xml")

    def run(
        self, name: str, run: str, **override: dict[str, Any]
    ) -> tuple[subprocess.CompletedProcess[str], pathlib.Path]:
        """Playbook ``name`` over the four hosts (``override``: alias -> host variables)."""
        hosts = {a: {**v, **override.get(a.replace("-", "_"), {})} for a, v in self.hosts.items()}
        inventory = loopback.write_inventory(self.tmp / f"{run}.yml", {"compute": hosts})
        run_dir = self.tmp / run
        done = loopback.playbook(
            name,
            inventory,
            self.tmp / "ansible",
            self.collections,
            {
                "nova_orphans_hosts": "compute",
                "nova_orphans_become": False,
                "nova_orphans_run_dir": str(run_dir),
                "nova_orphans_central_config": str(self.central),
                "nova_orphans_controller_command": loopback.tool_command(),
            },
            ["--forks", "4"],
        )
        return done, run_dir

    collections: pathlib.Path


@pytest.fixture
def fleet(
    nova_stack: harness.Nova, loopback_sshd: loopback.Sshd, fleet_collection: pathlib.Path,
    tmp_path: pathlib.Path,
) -> Fleet:  # fmt: skip
    it = Fleet(tmp_path, nova_stack, loopback_sshd)
    it.collections = fleet_collection
    return it


def merged(run_dir: pathlib.Path) -> dict[str, Any]:
    return report_schema.valid(json.loads((run_dir / "fleet.json").read_text()))


def exit_code(run_dir: pathlib.Path) -> int:
    return int((run_dir / "exit-code").read_text())


def findings_of(document: dict[str, Any]) -> set[tuple[str, str, str]]:
    """(host, uuid, kind) of the worlds' hosts' own findings, and (host, uuid, "split-brain")
    for each host a split-brain UUID runs on: a scan's document and a merge's have one shape."""
    found = {
        (h, s["uuid"], "split-brain") for s in document["split_brain"] for h in s["running_on"]
    }
    found |= {(host["host"], f["uuid"], f["kind"])
              for host in document["hosts"] for f in host["findings"] or []}  # fmt: skip
    return {f for f in found if f[0] in FAKE.values()}


def test_audit_through_ansible_merges_what_fleet_audit_finds_split_brain_included(
    fleet: Fleet,
) -> None:
    """A guest running on host1 (where Nova has it) and on host2 is split-brain; a deleted
    server's guest on host2 is deleted. The merged findings of the four hosts' reports are
    those of the scanning ``fleet audit`` over the same worlds (one merge, one shape); every
    host trusted; exit 3, kept."""
    nova = fleet.nova
    twice = nova.boot("host1")["id"]
    gone = nova.boot("host2")["id"]
    try:
        nova.force_delete(gone)
        nova.wait_gone(gone)
        fleet.plant("host1", nova_domain(twice, "instance-a"))
        fleet.plant("host2", nova_domain(twice, "instance-a"), nova_domain(gone, "instance-g"))
        fleet.plant(harness.CELL2_HOST)

        done, run_dir = fleet.run("audit", "run-all")
        assert done.returncode != 0, done.stdout[-3000:]  # the play fails: something found
        assert exit_code(run_dir) == 3, done.stdout[-4000:]
        assert "nova-orphans fleet: exit 3 (found orphans (or split-brain))" in done.stdout
        assert "split-brain" in done.stdout  # the merged table, printed
        document = merged(run_dir)
        statuses = {h["host"]: h["status"] for h in document["hosts"]}
        assert statuses == dict.fromkeys([*fleet.fake.values(), "lvhost"], "trusted"), statuses
        (split,) = [s for s in document["split_brain"] if s["uuid"] == twice]
        assert split["running_on"] == ["host1", "host2"]
        assert json.loads((run_dir / "failed.json").read_text()) == []
        assert {p.name for p in (run_dir / "reports").iterdir()} == {
            f"{h}.json" for h in [*fleet.fake.values(), "lvhost"]
        }

        direct = fleet_audit(fleet.central, f"test://{fleet.worlds}/{{host}}.xml",
                             "--hosts", WORLD_HOSTS)  # fmt: skip
        assert direct.returncode == 3, direct.stderr[-2000:]
        scanned = findings_of(report_schema.valid(json.loads(direct.stdout)))
        assert findings_of(document) == scanned
        assert ("host2", gone, "deleted") in scanned
        assert {("host1", twice, "split-brain"), ("host2", twice, "split-brain")} <= scanned
        assert ("host2", twice, "misplaced") in scanned  # Nova has it on host1
    finally:
        nova.destroy(twice)


def test_an_unreachable_host_is_reported_unreachable_never_dropped(fleet: Fleet) -> None:
    """host-c's ssh port has nothing listening: it is named unreachable, Nova's host3 has no
    report (missing, not "no domains"), the others are merged, and the fleet exits 1."""
    dead = {"ansible_port": loopback.free_port()}
    done, run_dir = fleet.run("audit", "run-dead", host_c=dead)
    assert done.returncode != 0
    assert exit_code(run_dir) == 1
    (failed,) = json.loads((run_dir / "failed.json").read_text())
    assert failed["host"] == "host-c" and failed["outcome"] == "unreachable", failed
    assert "host-c: unreachable: " in done.stdout
    statuses = {h["host"]: h["status"] for h in merged(run_dir)["hosts"]}
    assert statuses[harness.CELL2_HOST] == "missing"
    assert statuses["host1"] == statuses["host2"] == "trusted"


def test_collect_merges_the_agents_own_reports_and_names_a_host_without_one(fleet: Fleet) -> None:
    """The agents of host1..host3 ran a cycle (log only) and wrote their report files; lvhost's
    agent wrote none. collect finds the split-brain from the files alone and names host-lv's
    missing file: exit 1."""
    nova = fleet.nova
    twice = nova.boot("host2")["id"]
    try:
        fleet.plant("host1", nova_domain(twice, "instance-t"))
        fleet.plant("host2", nova_domain(twice, "instance-t"))
        fleet.plant(harness.CELL2_HOST)
        for alias in fleet.fake:
            cycle = harness.run_cli("run", "--once", "--config-file",
                                    fleet.hosts[alias]["nova_orphans_config_file"])  # fmt: skip
            assert cycle.returncode in (0, 3), cycle.stderr[-2000:]
        done, run_dir = fleet.run("collect", "run-collect")
        assert exit_code(run_dir) == 1, done.stdout[-3000:]
        (failed,) = json.loads((run_dir / "failed.json").read_text())
        assert failed["host"] == "host-lv" and failed["outcome"] == "failed", failed
        document = merged(run_dir)
        (split,) = [s for s in document["split_brain"] if s["uuid"] == twice]
        assert split["running_on"] == ["host1", "host2"]
        statuses = {h["host"]: h["status"] for h in document["hosts"]}
        assert statuses["lvhost"] == "missing"
    finally:
        nova.destroy(twice)
