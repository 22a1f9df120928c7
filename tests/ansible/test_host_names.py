"""The playbooks ``audit`` and ``collect`` name each host's report and failure record on the
controller after the host (its inventory name, its ``nova_orphans_nova_host``): a name that is
no RFC 1123 host name (``..``, ``../../escape``, ``a/b``) fails that host before it is audited,
with one line naming the variable, and no file is written outside the run directory; the
record of why is named after a digest of the name, so the merge still counts the host as one
that gave no report (exit 1). The other host is audited as usual.

No Nova: each host's "audit" prints a line, the controller's "merge" is ``true``; what is
checked is where the files go.
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import subprocess

import pytest

from tests.ansible import loopback

BAD_INVENTORY_NAMES = ("../../escape", "..", "a/b")
#: host -> what it fails with.
REFUSED = {
    **{name: f"the inventory name {name!r} is not a host name (RFC 1123" for name in
       BAD_INVENTORY_NAMES},
    "host-nova-bad": "nova_orphans_nova_host '../outside' is not a host name (RFC 1123",
}  # fmt: skip


def _record_name(name: str) -> str:
    return "not-a-host-name-" + hashlib.sha256(name.encode()).hexdigest()[:16]


@pytest.fixture(scope="module")
def runs(
    loopback_sshd: loopback.Sshd, fleet_collection: pathlib.Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[pathlib.Path, dict[str, subprocess.CompletedProcess[str]]]:  # fmt: skip
    home = tmp_path_factory.mktemp("names")
    report = home / "report.json"
    report.write_text("{}\n")
    common = {**loopback_sshd.host_vars(), "nova_orphans_command": ["echo", "{}"],
              "nova_orphans_report_file": str(report)}  # fmt: skip
    hosts = {name: dict(common) for name in BAD_INVENTORY_NAMES}
    hosts["host-ok"] = dict(common)
    hosts["host-nova-bad"] = {**common, "nova_orphans_nova_host": "../outside"}
    inventory = loopback.write_inventory(home / "inventory.yml", {"compute": hosts})
    done = {}
    for playbook in ("audit", "collect"):
        done[playbook] = loopback.playbook(
            playbook, inventory, home / "ansible", fleet_collection,
            {"nova_orphans_run_dir": str(home / "runs" / playbook / "run"),
             "nova_orphans_become": False, "nova_orphans_controller_command": ["true"]},
        )  # fmt: skip
    return home, done


@pytest.mark.parametrize("playbook", ["audit", "collect"])
def test_a_bad_name_fails_its_host_with_one_line_and_the_others_are_gathered(runs, playbook):
    _, done = runs
    output = done[playbook].stdout
    assert done[playbook].returncode != 0
    recap = loopback.recap(output)
    failed = loopback.failures(output)
    for host, line in REFUSED.items():
        assert recap[host]["failed"] == 1, (host, output[-3000:])
        assert line in failed[host], (host, failed.get(host))
    assert recap["host-ok"]["failed"] == 0 and "host-ok" not in failed


@pytest.mark.parametrize("playbook", ["audit", "collect"])
def test_no_file_is_written_outside_the_run_directory(runs, playbook):
    home, _ = runs
    base = home / "runs" / playbook
    written = sorted(str(p.relative_to(base)) for p in base.rglob("*") if p.is_file())
    records = sorted(f"run/failed/{_record_name(n)}.json" for n in BAD_INVENTORY_NAMES)
    assert written == sorted(["run/exit-code", "run/failed.json", "run/reports/host-ok.json",
                              "run/failed/host-nova-bad.json", *records])  # fmt: skip
    assert not (home / "runs" / "escape.json").exists()


@pytest.mark.parametrize("playbook", ["audit", "collect"])
def test_the_merge_counts_every_refused_host_as_one_that_gave_no_report(runs, playbook):
    home, _ = runs
    run = home / "runs" / playbook / "run"
    assert (run / "exit-code").read_text().strip() == "1"
    records = json.loads((run / "failed.json").read_text())
    assert sorted(r["host"] for r in records) == sorted(REFUSED)
    for record in records:
        assert record["outcome"] == "failed"
        assert REFUSED[record["host"]] in record["message"]
