"""Benchmark: the Ansible collection's ``audit`` playbook over many inventory hosts here,
side by side with ``fleet audit`` over the same worlds, and the Nova load per host audited.

``--hosts`` (default 50) inventory hosts ``cmp-000``…, each an alias of 127.0.0.1 reached
over ssh through one private loopback sshd (``tests/ansible/loopback.py``: Ansible's real
``ssh`` connection plugin, pipelining on), each with its own libvirt ``test:///`` world of
``--domains`` guests and its own config (``compute_id`` proving its identity). One
simulated Nova, served over loopback HTTP, knows every host; each answer is held back for
what the calibrated model (``nova_costs.json``, server side) says nova-api spends on it.
Every 10th host has a deleted server's guest; one guest runs on two hosts (split-brain).

Measured: the playbook's wall time, split into the per-host audits (each ``command``
task's own start and end, as Ansible records them), the merge on the controller and the
rest (Ansible's own work: connections, modules, copying each report to the controller); and
``fleet audit`` over the same worlds (one process, its own thread pool over libvirt). Both
must find the same split-brain. Then the Nova requests and Nova time per host audited, and
what they come to for 1,000 and 10,000 hosts.

Run from the repository root (about 3 minutes for 50 hosts on 2 cores)::

    .venv/bin/python -m benchmarks.bench_ansible [--hosts 50] [--forks 25]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time
from typing import Any

from benchmarks.bench_audit import add_model_options, cost_model, serve
from benchmarks.nova_costs import CostModel, endpoint_of
from nova_orphans.fakes import libvirt_node as worlds
from nova_orphans.fakes.nova import SimulatedNova
from tests.ansible import loopback

SPLIT = "5b1175b1-0000-4000-8000-000000000001"
SCALES = (1_000, 10_000)


def host_name(n: int) -> str:
    return f"cmp-{n:03d}"


def build(
    root: pathlib.Path, hosts: int, domains: int, nova: SimulatedNova, endpoint: str
) -> dict[str, dict[str, Any]]:
    """Every host's world, nova.conf, compute_id and config; returns inventory host vars."""
    inventory: dict[str, dict[str, Any]] = {}
    (root / "worlds").mkdir()
    for n in range(hosts):
        host = host_name(n)
        compute = nova.add_compute(host, hypervisor_type="fake")
        if n == 0:
            nova.boot(host, "split", SPLIT)
        guests = [nova.boot(host) for _ in range(domains - 1)]
        if n % 10 == 5:
            nova.local_delete(guests[0])
        xml = [worlds.node_domain(uuid=u, name=f"instance-{u[-8:]}",
                                  metadata=worlds.nova_metadata()) for u in guests]  # fmt: skip
        if n in (0, 1):
            xml.append(worlds.node_domain(uuid=SPLIT, name="instance-split",
                                          metadata=worlds.nova_metadata()))  # fmt: skip
        home = root / host
        home.mkdir()
        worlds.write_node_file(root / "worlds", xml, name=f"{host}.xml")
        (home / "nova.conf").write_text(f"[DEFAULT]\nhost = {host}\nstate_path = {home}\n")
        (home / "compute_id").write_text(compute.node_uuid + "\n")
        (home / "nova-orphans.conf").write_text(
            f"[DEFAULT]\nhost = {host}\nnova_config_file = {home / 'nova.conf'}\n"
            f"[libvirt]\nconnection_uri = test://{root / 'worlds' / host}.xml\n"
            f"[nova]\nauth_type = none\nendpoint = {endpoint}\n"
        )
        inventory[host] = {"nova_orphans_config_file": str(home / "nova-orphans.conf")}
    return inventory


#: Runs the command after it, then writes its start and end (epoch seconds) to $1: the
#: playbook's own command, timed where it runs, its output and exit code unchanged.
TIMED = 'start=$EPOCHREALTIME; "${@:2}"; rc=$?; echo "$start $EPOCHREALTIME" > "$1"; exit $rc'


def timed(command: list[str], stamps: pathlib.Path) -> list[str]:
    """``command`` run under ``TIMED``, its start and end written to ``stamps``."""
    return ["bash", "-c", TIMED, "timed", str(stamps), *command]


def span(stamps: pathlib.Path) -> tuple[float, float]:
    start, end = stamps.read_text().split()
    return float(start), float(end)


class Answers(list[tuple[str, int]]):
    """The simulated Nova's answers (path, records), each with the time it was given."""

    def __init__(self) -> None:
        super().__init__()
        self.at: list[float] = []

    def append(self, item: tuple[str, int]) -> None:
        self.at.append(time.time())
        super().append(item)

    def between(self, start: float, end: float) -> list[tuple[str, int]]:
        return [a for a, t in zip(self, self.at, strict=True) if start <= t <= end]


def nova_seconds(model: CostModel, answered: list[tuple[str, int]]) -> float:
    """What the model says nova-api spent on these answers."""
    return sum(model.cost(path, records, side="server") for path, records in answered)


def run_playbook(
    root: pathlib.Path, sshd: loopback.Sshd, collections_path: pathlib.Path,
    hosts: dict[str, dict[str, Any]], central: pathlib.Path, forks: int,
) -> float:  # fmt: skip
    """The collection's ``audit`` over every host; returns its wall seconds."""
    command = [sys.executable, "-m", "nova_orphans.cli"]
    (root / "stamps").mkdir()
    inventory = loopback.write_inventory(
        root / "inventory.yml",
        {"compute": {h: {**sshd.host_vars(), **v,
                         "nova_orphans_command": timed(command, root / "stamps" / h)}
                     for h, v in hosts.items()}},
    )  # fmt: skip
    extra = {"nova_orphans_hosts": "compute", "nova_orphans_become": False,
             "nova_orphans_run_dir": str(root / "run"), "nova_orphans_central_config": str(central),
             "nova_orphans_controller_command": timed(command, root / "merge.stamps")}  # fmt: skip
    start = time.perf_counter()
    done = loopback.playbook(
        "audit", inventory, root / "ansible", collections_path, extra, ["--forks", str(forks)]
    )
    wall = time.perf_counter() - start
    if not (root / "run" / "exit-code").exists():
        raise SystemExit(f"the playbook did not end: {done.stdout[-3000:]}{done.stderr[-1000:]}")
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=50)
    parser.add_argument("--domains", type=int, default=20, help="guests per host")
    parser.add_argument("--forks", type=int, default=25, help="Ansible's forks")
    add_model_options(parser)
    args = parser.parse_args()
    model = cost_model(args)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; Nova model: "
          f"{model.describe()} (server side); {args.hosts} hosts x {args.domains} guests, "
          f"forks {args.forks}; connection: ssh to one loopback sshd")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="bench-ansible-") as directory:
        root = pathlib.Path(directory)
        nova = SimulatedNova()
        answered = Answers()
        with serve(nova, model, answered) as endpoint, loopback.sshd(root / "sshd") as sshd:
            hosts = build(root, args.hosts, args.domains, nova, endpoint)
            central = root / "central.conf"
            central.write_text(f"[nova]\nauth_type = none\nendpoint = {endpoint}\n")
            collections_path = loopback.build_and_install(root / "collection")
            wall = run_playbook(root, sshd, collections_path, hosts, central, args.forks)
            report(root, wall, answered, model, args.hosts)
            answered.clear()
            start = time.perf_counter()
            direct = subprocess.run(
                [sys.executable, "-m", "nova_orphans.cli", "fleet", "audit", "--config-file",
                 str(central), "--uri-template", f"test://{root / 'worlds'}/{{host}}.xml",
                 "--concurrency", str(args.forks), "--format", "json"],
                capture_output=True, text=True,
            )  # fmt: skip
            direct_wall = time.perf_counter() - start
            split = [s["running_on"] for s in json.loads(direct.stdout)["split_brain"]]
            assert split == [[host_name(0), host_name(1)]], (split, direct.stderr[-500:])
            print(f"fleet audit (libvirt, --concurrency {args.forks}): {direct_wall:.1f} s wall, "
                  f"exit {direct.returncode}, {len(answered)} Nova requests, "
                  f"{nova_seconds(model, answered):.2f} s Nova time; same split-brain")  # fmt: skip


def report(
    root: pathlib.Path, wall: float, answered: Answers, model: CostModel, hosts: int
) -> None:
    """Print the playbook's times, the merged result and the Nova load, per host and scaled."""
    spans = [span(p) for p in (root / "stamps").iterdir()]
    per_host = [e - s for s, e in spans]
    first, last = min(s for s, _ in spans), max(e for _, e in spans)
    merge_start, merge_end = span(root / "merge.stamps")
    merged = json.loads((root / "run" / "fleet.json").read_text())
    assert [s["running_on"] for s in merged["split_brain"]] == [[host_name(0), host_name(1)]]
    code = (root / "run" / "exit-code").read_text().strip()
    merge_s = merge_end - merge_start
    print(f"\nansible-playbook nova_orphans.fleet.audit: {wall:.1f} s wall, fleet exit {code}, "
          f"{merged['summary']['trusted']} hosts trusted, split-brain found")  # fmt: skip
    print(f"  per-host audits: {len(per_host)} hosts, {sum(per_host) / len(per_host):.2f} s "
          f"mean, {max(per_host):.2f} s max; {last - first:.1f} s from the first start to the "
          "last end")  # fmt: skip
    print(f"  merge on the controller (fleet audit --reports): {merge_s:.2f} s")
    print(f"  Ansible's own (the rest): {wall - (last - first) - merge_s:.1f} s")
    audits = answered.between(first, last)
    merge = answered.between(merge_start, merge_end)
    by_endpoint = collections.Counter(endpoint_of(path(p)) for p, _ in audits)
    print(f"\nNova requests of the {hosts} host audits: {dict(by_endpoint)}; the merge: "
          f"{len(merge)} requests, {nova_seconds(model, merge) * 1e3:.1f} ms")  # fmt: skip
    # NOTE: the test driver's hostname is not Nova's node name, so each audit here also reads
    # every node of the cloud (nodes.py: the fallback listing, `hosts` records): on a libvirt
    # compute the search by hostname finds the host's node (one record) and stops there.
    listings = [(p, r) for p, r in audits if is_node_listing(p)]
    searches = [(p, r) for p, r in audits if "hypervisor_hostname_pattern" in p]
    own = [(p, r) for p, r in audits if not is_node_listing(p) and (p, r) not in searches]
    real = own + [(p, 1) for p, _ in searches]
    per_req, per_s = len(real) / hosts, nova_seconds(model, real) / hosts
    listing_s = nova_seconds(model, listings) / max(len(listings), 1)
    print(f"per host audited, on libvirt computes: {per_req:.1f} requests, "
          f"{per_s * 1e3:.1f} ms Nova time (here also the node listing: {listing_s * 1e3:.0f} ms "
          f"for {hosts} nodes, {model.cost('/os-hypervisors/detail', 1, side='server') * 1e3:.0f}"
          " ms + 7 ms per node wherever libvirt's hostname is not Nova's node name)")  # fmt: skip
    merge_lookups = nova_seconds(model, merge[1:])
    print(" hosts  requests  Nova s  (host audits, then the merge: the service list and "
          f"{len(merge) - 1} split-brain lookups)")  # fmt: skip
    for scale in SCALES:
        services = model.cost("/os-services", scale, side="server")
        print(f"{scale:>6} {per_req * scale + len(merge):>9.0f} "
              f"{per_s * scale + services + merge_lookups:>7.1f}")  # fmt: skip


def is_node_listing(request: str) -> bool:
    """The paged listing of every compute node (no search by hostname)."""
    return endpoint_of(path(request)) == "os-hypervisors/detail" and "pattern" not in request


def path(request: str) -> str:
    """A request's path without the API prefix and the query."""
    return request.split("?")[0].removeprefix("/v2.1")


if __name__ == "__main__":
    main()
