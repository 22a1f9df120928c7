"""The role ``nova_orphans.fleet.agent`` applied over ssh to two hosts of the loopback sshd,
each into a prefix of its own (virtualenv, configuration, unit and textfile directories in a
temporary directory): the machine the tests run on is not changed.

One run after the other, as an operator would: ``--check`` on fresh hosts, the first
apply, a second apply (no change), ``--check --diff`` of a new action (shown, not made) and
a bad option value (refused by the tool before the unit is touched). host-b's report file and
textfile directories exist before the role runs (a sticky /tmp-like one, a /var/lib/nova-like
one): their modes stay. One more run over hosts whose variables would inject options (a
newline in a list element, an option name, a section; a control character) fails each of them
before anything is written.
"""

from __future__ import annotations

import dataclasses
import pathlib
import shutil
import stat
import subprocess
from typing import Any

import pytest
import yaml

from tests.ansible import loopback

TOOL_LINE = "nova-orphans: config error: "


HOSTS = ("host-a", "host-b")
#: host-b's directories that exist before the role runs, and their modes: a /tmp (sticky,
#: everyone's) for its report file, a /var/lib/nova (QEMU reaches the instances through it)
#: for its metrics textfile.
PRE_EXISTING = {"tmp": 0o1777, "nova": 0o751}


@dataclasses.dataclass
class Host:
    prefix: pathlib.Path
    prefix_b: pathlib.Path
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


def role_vars(prefix: pathlib.Path, host: str = "cmp-1") -> dict[str, Any]:
    return {
        "nova_orphans_venv": str(prefix / "venv"),
        "nova_orphans_config_dir": str(prefix / "etc"),
        "nova_orphans_unit_dir": str(prefix / "units"),
        "nova_orphans_dist_dir": str(prefix / "dist"),
        "nova_orphans_textfile_dir": str(prefix / "textfile"),
        "nova_orphans_report_file": str(prefix / "state" / "report.json"),
        "nova_orphans_config": {
            "DEFAULT": {"host": host, "deny_name_patterns": ["infra-*", "keep-*"]},
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
    """host-a and host-b, with the project's wheel built from this checkout, after the runs in
    order."""
    home = tmp_path_factory.mktemp("role")
    subprocess.run(
        [str(loopback.BIN / "pip"), "wheel", "-q", "--no-deps", "-w", str(home / "wheel"),
         str(loopback.REPO)],
        check=True, capture_output=True,
    )  # fmt: skip
    (wheel,) = (home / "wheel").glob("nova_orphans-*.whl")
    prefix, prefix_b = home / "host-a", home / "host-b"
    for name, mode in PRE_EXISTING.items():
        (prefix_b / name).mkdir(parents=True)
        (prefix_b / name).chmod(mode)
    vars_b = role_vars(prefix_b, "cmp-2") | {
        "nova_orphans_report_file": str(prefix_b / "tmp" / "report.json"),
        "nova_orphans_textfile_dir": str(prefix_b / "nova"),
    }
    inventory = loopback.write_inventory(
        home / "inventory.yml",
        {"compute": {"host-a": {**loopback_sshd.host_vars(), **role_vars(prefix)},
                     "host-b": {**loopback_sshd.host_vars(), **vars_b}}},
    )  # fmt: skip
    it = Host(prefix, prefix_b, inventory, home / "run", fleet_collection, wheel)
    it.apply("fresh check", "--check", "--diff")
    it.runs["fresh tree"] = _tree(prefix)  # type: ignore[assignment]
    it.runs["fresh tree b"] = _tree(prefix_b)  # type: ignore[assignment]
    it.apply("first")
    it.runs["first conf"] = it.conf.read_text()  # type: ignore[assignment]
    it.apply("second")
    it.runs["modes b"] = _modes(prefix_b)  # type: ignore[assignment]
    it.apply(
        "check diff", "--check", "--diff", "-l", "host-a",
        nova_orphans_actions=_actions(deleted="stop"),
    )  # fmt: skip
    it.runs["unit before bad"] = it.unit.stat().st_mtime_ns  # type: ignore[assignment]
    bad = role_vars(prefix)["nova_orphans_config"]
    bad["agent"]["action_unknown"] = "explode"
    it.apply("bad", "-l", "host-a", nova_orphans_config=bad)
    two_lines = role_vars(prefix)["nova_orphans_config"]
    two_lines["DEFAULT"]["host"] = "cmp-1\n[agent]\naction_deleted = reap"
    it.apply("two lines", "--check", "-l", "host-a", nova_orphans_config=two_lines)
    injected = {}
    for name, (variable, change) in INJECTIONS.items():
        bad_vars = role_vars(home / name) | {"nova_orphans_actions": _actions()}
        change(bad_vars[variable])
        injected[name] = {**loopback_sshd.host_vars(), **bad_vars}
    injections = loopback.write_inventory(home / "injections.yml", {"compute": injected})
    it.runs["injections"] = loopback.playbook(
        "agent", injections, home / "run", fleet_collection,
        {"nova_orphans_wheel": str(wheel), "nova_orphans_become": False},
    )  # fmt: skip
    it.runs["injected trees"] = {n: _tree(home / n) for n in INJECTIONS}  # type: ignore[assignment]
    return it


#: host name -> (the role variable changed, how), and below the one line each host fails with.
INJECTIONS: dict[str, tuple[str, Any]] = {
    "inj-list": ("nova_orphans_config", lambda c: c["DEFAULT"].update(
        deny_name_patterns=["infra-*", "x\n[agent]\naction_deleted = reap"])),
    "inj-name": ("nova_orphans_config", lambda c: c["agent"].update(
        {"grace_period = 1\naction_deleted": "reap"})),
    "inj-section": ("nova_orphans_config", lambda c: c.update(
        {"agent]\naction_deleted = reap\n[agent": {"grace_period": 1}})),
    "inj-control": ("nova_orphans_config", lambda c: c["DEFAULT"].update(
        host="cmp-1\x0baction_deleted = reap")),
    "inj-actions": ("nova_orphans_actions", lambda a: a.update(
        unknown="log\naction_deleted = reap")),
}  # fmt: skip
INJECTION_LINES = {
    "inj-list": "nova_orphans_config.DEFAULT.deny_name_patterns[1]: the list element holds "
    "a newline",
    "inj-name": "nova_orphans_config.agent: option name 'grace_period = 1\\naction_deleted' "
    "is not [a-z_][a-z0-9_]*: it holds a newline",
    "inj-section": "nova_orphans_config: section 'agent]\\naction_deleted = reap\\n[agent' "
    "is not one of the tool's",
    "inj-control": "nova_orphans_config.DEFAULT.host: the value holds a control character (U+000B)",
    "inj-actions": "nova_orphans_actions.unknown: the value holds a newline",
}


def _modes(prefix: pathlib.Path) -> dict[str, int]:
    return {name: stat.S_IMODE((prefix / name).stat().st_mode) for name in PRE_EXISTING}


def _actions(**kinds: str) -> dict[str, str]:
    return {"deleted": "log", "unknown": "log", "misplaced": "log", **kinds}


def _tree(prefix: pathlib.Path) -> list[str]:
    return sorted(str(p.relative_to(prefix)) for p in prefix.rglob("*")) if prefix.exists() else []


def ok(done: subprocess.CompletedProcess[str], name: str = "host-a") -> dict[str, int]:
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    return loopback.recap(done.stdout)[name]


def test_check_mode_on_fresh_hosts_reports_changes_and_makes_none(host: Host) -> None:
    for name in HOSTS:
        counters = ok(host.runs["fresh check"], name)
        assert counters["changed"] > 0 and counters["failed"] == 0
    assert host.runs["fresh tree"] == []  # type: ignore[comparison-overlap]
    assert host.runs["fresh tree b"] == sorted(PRE_EXISTING)  # type: ignore[comparison-overlap]


def test_the_first_apply_installs_configures_and_leaves_the_unit_unstarted(host: Host) -> None:
    done = host.runs["first"]
    assert ok(done)["changed"] > 0 and ok(done, "host-b")["changed"] > 0
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


def test_the_second_host_is_configured_as_its_own_variables_say(host: Host) -> None:
    conf = (host.prefix_b / "etc" / "nova-orphans.conf").read_text()
    for line in ("host = cmp-2", f"report_file = {host.prefix_b / 'tmp' / 'report.json'}",
                 f"textfile = {host.prefix_b / 'nova' / 'nova_orphans.prom'}"):  # fmt: skip
        assert f"\n{line}\n" in conf, conf
    checked = subprocess.run(
        [str(host.prefix_b / "venv" / "bin" / "nova-orphans"), "check-config", "--config-file",
         str(host.prefix_b / "etc" / "nova-orphans.conf")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stderr


def test_directories_the_role_makes_have_their_documented_modes(host: Host) -> None:
    for name, mode in {"etc": 0o750, "state": 0o700, "textfile": 0o755, "units": 0o755,
                       "dist": 0o755}.items():  # fmt: skip
        assert stat.S_IMODE((host.prefix / name).stat().st_mode) == mode, name


def test_directories_that_existed_keep_their_modes(host: Host) -> None:
    """A report file in /tmp or beside the instances must not make its directory 0700 (QEMU
    would lose the instances; /tmp its sticky bit)."""
    assert host.runs["modes b"] == PRE_EXISTING  # type: ignore[comparison-overlap]
    assert _modes(host.prefix_b) == PRE_EXISTING


def test_a_second_apply_changes_nothing(host: Host) -> None:
    for name in HOSTS:
        assert ok(host.runs["second"], name)["changed"] == 0


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
    assert loopback.failures(done.stdout)["host-a"] == (
        "the configuration cannot be written: nova_orphans_config.DEFAULT.host: the value "
        "holds a newline"
    ), done.stdout[-2000:]
    assert "TASK [nova_orphans.fleet.agent : Install nova-orphans" not in done.stdout


def test_variables_that_would_inject_options_fail_their_hosts_before_anything_is_written(
    host: Host,
) -> None:
    done = host.runs["injections"]
    assert done.returncode != 0
    recap = loopback.recap(done.stdout)
    failed = loopback.failures(done.stdout)
    for name, line in INJECTION_LINES.items():
        assert recap[name]["failed"] == 1, (name, done.stdout[-3000:])
        assert f"the configuration cannot be written: {line}" in failed[name], (name, failed)
    assert "TASK [nova_orphans.fleet.agent : Look for the directories" not in done.stdout
    assert host.runs["injected trees"] == {n: [] for n in INJECTIONS}  # type: ignore[comparison-overlap]


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
