"""The role ``nova_orphans.fleet.agent`` applied over ssh to a host of the loopback sshd,
into a prefix of its own (virtualenv, configuration, unit and textfile directories in a
temporary directory): the machine the tests run on is not changed.

One run after the other, as an operator would: ``--check`` on a fresh host, the first
apply, a second apply (no change), ``--check --diff`` of a new action (shown, not made) and
a bad option value (refused by the tool before the unit is touched).
"""

from __future__ import annotations

import dataclasses
import pathlib
import shutil
import subprocess
from typing import Any

import pytest
import yaml

from tests.ansible import loopback

TOOL_LINE = "nova-orphans: config error: "


@dataclasses.dataclass
class Host:
    prefix: pathlib.Path
    inventory: pathlib.Path
    home: pathlib.Path
    collections: pathlib.Path
    wheel: pathlib.Path
    runs: dict[str, subprocess.CompletedProcess[str]] = dataclasses.field(default_factory=dict)

    @property
    def conf(self) -> pathlib.Path:
        return self.prefix / "etc" / "nova-orphans.conf"

    @property
    def unit(self) -> pathlib.Path:
        return self.prefix / "units" / "nova-orphans.service"

    def apply(self, name: str, *args: str, **extra: Any) -> subprocess.CompletedProcess[str]:
        done = loopback.playbook(
            "agent",
            self.inventory,
            self.home,
            self.collections,
            {"nova_orphans_wheel": str(self.wheel), "nova_orphans_become": False, **extra},
            args,
        )
        self.runs[name] = done
        return done


def role_vars(prefix: pathlib.Path) -> dict[str, Any]:
    return {
        "nova_orphans_venv": str(prefix / "venv"),
        "nova_orphans_config_dir": str(prefix / "etc"),
        "nova_orphans_unit_dir": str(prefix / "units"),
        "nova_orphans_dist_dir": str(prefix / "dist"),
        "nova_orphans_textfile_dir": str(prefix / "textfile"),
        "nova_orphans_report_file": str(prefix / "state" / "report.json"),
        "nova_orphans_config": {
            "DEFAULT": {"host": "cmp-1", "deny_name_patterns": ["infra-*", "keep-*"]},
            "agent": {"state_dir": str(prefix / "state"), "grace_period": 7200},
            "libvirt": {"connection_uri": "test:///default"},
            "nova": {
                "auth_type": "admin_token",
                "endpoint": "http://127.0.0.1:9/v2.1",
                "token": "t",
            },
        },
    }


@pytest.fixture(scope="module")
def host(
    loopback_sshd: loopback.Sshd, fleet_collection: pathlib.Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Host:  # fmt: skip
    """host-a, with the project's wheel built from this checkout, after the runs in order."""
    home = tmp_path_factory.mktemp("role")
    subprocess.run(
        [str(loopback.BIN / "pip"), "wheel", "-q", "--no-deps", "-w", str(home / "wheel"),
         str(loopback.REPO)],
        check=True, capture_output=True,
    )  # fmt: skip
    (wheel,) = (home / "wheel").glob("nova_orphans-*.whl")
    prefix = home / "host-a"
    inventory = loopback.write_inventory(
        home / "inventory.yml",
        {"compute": {"host-a": {**loopback_sshd.host_vars(), **role_vars(prefix)}}},
    )
    it = Host(prefix, inventory, home / "run", fleet_collection, wheel)
    it.apply("fresh check", "--check", "--diff")
    it.runs["fresh tree"] = _tree(prefix)  # type: ignore[assignment]
    it.apply("first")
    it.runs["first conf"] = it.conf.read_text()  # type: ignore[assignment]
    it.apply("second")
    it.apply("check diff", "--check", "--diff", nova_orphans_actions=_actions(deleted="stop"))
    it.runs["unit before bad"] = it.unit.stat().st_mtime_ns  # type: ignore[assignment]
    bad = role_vars(prefix)["nova_orphans_config"]
    bad["agent"]["action_unknown"] = "explode"
    it.apply("bad", nova_orphans_config=bad)
    two_lines = role_vars(prefix)["nova_orphans_config"]
    two_lines["DEFAULT"]["host"] = "cmp-1\n[agent]\naction_deleted = reap"
    it.apply("two lines", "--check", nova_orphans_config=two_lines)
    return it


def _actions(**kinds: str) -> dict[str, str]:
    return {"deleted": "log", "unknown": "log", "misplaced": "log", **kinds}


def _tree(prefix: pathlib.Path) -> list[str]:
    return sorted(str(p.relative_to(prefix)) for p in prefix.rglob("*")) if prefix.exists() else []


def ok(done: subprocess.CompletedProcess[str]) -> dict[str, int]:
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    return loopback.recap(done.stdout)["host-a"]


def test_check_mode_on_a_fresh_host_reports_changes_and_makes_none(host: Host) -> None:
    counters = ok(host.runs["fresh check"])
    assert counters["changed"] > 0 and counters["failed"] == 0
    assert host.runs["fresh tree"] == []  # type: ignore[comparison-overlap]


def test_the_first_apply_installs_configures_and_leaves_the_unit_unstarted(host: Host) -> None:
    done = host.runs["first"]
    assert ok(done)["changed"] > 0
    venv_script = host.prefix / "venv" / "bin" / "nova-orphans"
    checked = subprocess.run(
        [str(venv_script), "check-config", "--config-file", str(host.conf)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stderr
    text = host.runs["first conf"]
    for line in ("action_deleted = log", "action_unknown = log", "action_misplaced = log",
                 f"report_file = {host.prefix / 'state' / 'report.json'}",
                 f"textfile = {host.prefix / 'textfile' / 'nova_orphans.prom'}",
                 "deny_name_patterns = infra-*,keep-*", "grace_period = 7200"):  # fmt: skip
        assert f"\n{line}\n" in text, text
    assert (host.prefix / "textfile").is_dir()
    unit = host.unit.read_text()
    assert f"ExecStart={venv_script} run --config-file {host.conf}\n" in unit
    assert unit.endswith("WantedBy=multi-user.target\n")
    # NOTE: systemd is not PID 1 where these tests run: the start is skipped, and said.
    assert "systemd is not the service manager here" in done.stdout
    assert "TASK [nova_orphans.fleet.agent : Enable and start the agent]" in done.stdout
    if shutil.which("systemd-analyze"):
        verified = subprocess.run(["systemd-analyze", "verify", str(host.unit)],
                                  capture_output=True, text=True)  # fmt: skip
        assert verified.returncode == 0, verified.stderr


def test_a_second_apply_changes_nothing(host: Host) -> None:
    assert ok(host.runs["second"])["changed"] == 0


def test_check_and_diff_show_a_new_action_without_writing_it(host: Host) -> None:
    done = host.runs["check diff"]
    assert ok(done)["changed"] == 1
    assert "-action_deleted = log\n+action_deleted = stop" in done.stdout
    assert host.conf.read_text() == host.runs["first conf"]


def test_a_bad_option_value_fails_with_the_tools_line_before_the_unit(host: Host) -> None:
    done = host.runs["bad"]
    assert done.returncode != 0
    assert loopback.recap(done.stdout)["host-a"]["failed"] == 1
    lines = [line for line in done.stdout.splitlines() if TOOL_LINE in line]
    assert lines, done.stdout[-3000:]
    assert "[agent] action_unknown = explode is not valid" in lines[0]
    assert "TASK [nova_orphans.fleet.agent : Render the shipped unit" not in done.stdout
    assert host.conf.read_text() == host.runs["first conf"]  # the old file stays
    assert host.unit.stat().st_mtime_ns == host.runs["unit before bad"]


def test_a_value_of_two_lines_is_refused_before_anything_is_written(host: Host) -> None:
    """A newline in a value would write an option of its own (here: reap deleted guests)."""
    done = host.runs["two lines"]
    assert done.returncode != 0
    assert "nova_orphans_config: a value spans lines: host" in done.stdout, done.stdout[-2000:]
    assert "TASK [nova_orphans.fleet.agent : Install nova-orphans" not in done.stdout


def test_every_playbook_of_the_installed_collection_passes_the_syntax_check(
    host: Host, loopback_sshd: loopback.Sshd
) -> None:
    for name in ("agent", "audit", "collect", "merge"):
        extra = {"nova_orphans_run_dir": "/nonexistent"}
        done = loopback.playbook(
            name, host.inventory, host.home, host.collections, extra, ["--syntax-check"]
        )
        assert done.returncode == 0, (name, done.stdout[-2000:], done.stderr[-2000:])
    listed = yaml.safe_load((host.collections / "ansible_collections" / "nova_orphans" / "fleet"
                             / "MANIFEST.json").read_text())  # fmt: skip
    assert listed["collection_info"]["name"] == "fleet"
