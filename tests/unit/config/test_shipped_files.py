"""The sample config, the systemd unit, the Nova policy, the alert rules, the dashboard and the
report schema ship in the package, and the commands print them."""

from __future__ import annotations

import os
import pathlib
import stat
import subprocess
import sys

import pytest
import yaml

from nova_orphans import cli
from nova_orphans.cli import files
from tests import tools

ROOT = tools.ROOT
DATA = ROOT / "nova_orphans" / "data"
SCRIPT = pathlib.Path(sys.executable).parent / "nova-orphans"


def exec_start(unit: str) -> str:
    (line,) = [x for x in unit.splitlines() if x.startswith("ExecStart=")]
    return line.removeprefix("ExecStart=")


def test_each_shipped_file_has_one_copy_in_the_repository():
    listed = tools.repository_files()
    for name in ("nova-orphans.conf.sample", "nova-orphans.service", "nova-policy.yaml"):
        assert [p for p in listed if p.endswith(name)] == [f"nova_orphans/data/{name}"]


#: Shipped files whose one copy lives outside the package (others edit them there): the package
#: links to it, so the shipped copy cannot drift from the tested one.
LINKED = {
    "nova-orphans.rules.yml": "deploy/prometheus/nova-orphans.rules.yml",
    "nova-orphans.json": "deploy/grafana/nova-orphans.json",
    "report.schema.json": "docs/schema/report.schema.json",
}


@pytest.mark.parametrize(("name", "source"), LINKED.items())
def test_the_package_links_the_one_copy_of_rules_dashboard_and_schema(name, source):
    link = DATA / name
    assert link.is_symlink() and link.resolve() == (ROOT / source).resolve()
    assert name in tools.pyproject()["tool"]["setuptools"]["package-data"]["nova_orphans.data"]


@pytest.mark.parametrize(
    ("command", "source"),
    [
        ("alert-rules", "deploy/prometheus/nova-orphans.rules.yml"),
        ("grafana-dashboard", "deploy/grafana/nova-orphans.json"),
        ("report-schema", "docs/schema/report.schema.json"),
    ],
)
def test_each_monitoring_file_is_printed_as_the_repository_has_it(capsys, command, source):
    assert cli.main([command]) == 0
    assert capsys.readouterr().out == (ROOT / source).read_text()


def test_alert_rules_makes_every_runbook_url_absolute_under_the_published_docs(capsys):
    assert cli.main(["alert-rules", "--runbook-base", "https://docs.example.com/nova-orphans"]) == 0
    rules = yaml.safe_load(capsys.readouterr().out)
    urls = [
        r["annotations"]["runbook_url"] for g in rules["groups"] for r in g["rules"] if "alert" in r
    ]
    assert urls and all(
        u.startswith("https://docs.example.com/nova-orphans/admin/metrics.html#") for u in urls
    ), urls


@pytest.mark.parametrize(
    "base",
    [
        "docs.example.com",
        "ftp://docs.example.com/",
        'https://x/"a',
        "https://x/\nexpr: up",
        "https://x/\\",
    ],
)
def test_alert_rules_refuses_a_runbook_base_that_is_not_a_url_with_one_line(capsys, base):
    assert cli.main(["alert-rules", "--runbook-base", base]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and "--runbook-base" in err


def test_sample_config_prints_the_shipped_sample(capsys):
    assert cli.main(["sample-config"]) == 0
    assert capsys.readouterr().out == (DATA / "nova-orphans.conf.sample").read_text()


def test_nova_policy_prints_the_shipped_policy_rules(capsys):
    """The same file the end-to-end stack's nova-api enforces (tests/e2e/stack/stack.sh)."""
    assert cli.main(["nova-policy"]) == 0
    assert capsys.readouterr().out == (DATA / "nova-policy.yaml").read_text()


def test_the_shipped_unit_runs_the_agent_from_where_pip_puts_the_script():
    unit = (DATA / "nova-orphans.service").read_text()
    assert exec_start(unit) == (
        "/usr/local/bin/nova-orphans run --config-file /etc/nova-orphans/nova-orphans.conf"
    )


def test_systemd_unit_names_the_console_script_it_runs_from(tmp_path):
    done = subprocess.run(
        [str(SCRIPT), "systemd-unit"], capture_output=True, text=True, check=True, timeout=60
    )
    assert exec_start(done.stdout).split()[0] == str(SCRIPT)
    assert exec_start(done.stdout).split()[1:] == [
        "run",
        "--config-file",
        "/etc/nova-orphans/nova-orphans.conf",
    ]
    shipped = (DATA / "nova-orphans.service").read_text()
    assert done.stdout == shipped.replace("/usr/local/bin/nova-orphans", str(SCRIPT))


def test_systemd_unit_under_python_m_names_the_script_beside_the_interpreter():
    done = subprocess.run(
        [sys.executable, "-m", "nova_orphans.cli", "systemd-unit"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert exec_start(done.stdout).split()[0] == str(SCRIPT)


def test_systemd_unit_escapes_a_percent_for_systemd(tmp_path, capsys):
    script = tmp_path / "50%" / "nova-orphans"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    assert cli.main(["systemd-unit", "--executable", str(script)]) == 0
    assert exec_start(capsys.readouterr().out).split()[0] == f"{tmp_path}/50%%/nova-orphans"


@pytest.mark.parametrize(
    ("executable", "words"),
    [
        ("nova-orphans", "not an absolute path"),
        ("/nonexistent/bin/nova-orphans", "no executable nova-orphans at /nonexistent"),
        ("/opt/my venv/bin/nova-orphans", "without blanks"),
        ("/etc/passwd", "no executable nova-orphans at /etc/passwd"),
    ],
)
def test_systemd_unit_refuses_a_bad_executable_with_one_line(capsys, executable, words):
    assert cli.main(["systemd-unit", "--executable", executable]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.splitlines()) == 1 and err.startswith("nova-orphans: usage error: ")
    assert words in err


def test_the_written_unit_passes_systemd_analyze_verify(tmp_path):
    analyze = tools.tool("systemd-analyze", "systemd")
    unit = tmp_path / "nova-orphans.service"
    unit.write_text(files.unit_text(str(SCRIPT)))
    done = subprocess.run(
        [analyze, "verify", str(unit)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and "nova-orphans.service" not in done.stderr, done.stderr


def test_systemd_analyze_verify_would_catch_a_unit_whose_script_is_missing(tmp_path):
    analyze = tools.tool("systemd-analyze", "systemd")
    unit = tmp_path / "nova-orphans.service"
    unit.write_text(files.unit_text(str(SCRIPT)).replace(str(SCRIPT), "/nonexistent/nova-orphans"))
    done = subprocess.run(
        [analyze, "verify", str(unit)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0 and "/nonexistent/nova-orphans" in done.stderr


def test_a_missing_tool_fails_when_services_are_required(monkeypatch):
    monkeypatch.setenv("NOVA_ORPHANS_REQUIRE_SERVICES", "1")
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(pytest.fail.Exception):
        tools.tool("no-such-tool-anywhere", "nothing")
    monkeypatch.setenv("NOVA_ORPHANS_REQUIRE_SERVICES", "0")
    with pytest.raises(pytest.skip.Exception):
        tools.tool("no-such-tool-anywhere", "nothing")


def test_the_script_beside_the_interpreter_is_the_one_pip_installed():
    assert os.access(SCRIPT, os.X_OK), SCRIPT


def unit_settings(unit: str) -> dict[str, list[str]]:
    """Every ``Key=value`` of a unit, by key (a key may repeat)."""
    settings: dict[str, list[str]] = {}
    for line in unit.splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, value = line.split("=", 1)
            settings.setdefault(key, []).append(value)
    return settings


def security(analyze: str, unit: pathlib.Path) -> tuple[int, float]:
    """``systemd-analyze security``'s exit code at threshold 5.0 and the exposure it gives."""
    done = subprocess.run(
        [analyze, "security", "--offline=true", "--threshold=50", "--no-pager", str(unit)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    (line,) = [x for x in done.stdout.splitlines() if "Overall exposure level" in x]
    return done.returncode, float(line.split(":", 1)[1].split()[0])


def test_the_unit_is_hardened_to_an_exposure_of_5_or_better(tmp_path):
    analyze = tools.tool("systemd-analyze", "systemd")
    unit = tmp_path / "nova-orphans.service"
    unit.write_text(files.unit_text(str(SCRIPT)))
    code, exposure = security(analyze, unit)
    assert code == 0 and exposure <= 5.0, exposure


def test_the_exposure_check_fails_a_unit_without_the_hardening(tmp_path):
    analyze = tools.tool("systemd-analyze", "systemd")
    text = files.unit_text(str(SCRIPT))
    bare = text.split("# Hardening", 1)[0] + "\n[Install]\nWantedBy=multi-user.target\n"
    unit = tmp_path / "nova-orphans.service"
    unit.write_text(bare)
    code, exposure = security(analyze, unit)
    assert code != 0 and exposure > 5.0, exposure


def test_the_unit_keeps_only_the_capabilities_file_moves_need_and_runs_after_libvirt():
    settings = unit_settings((DATA / "nova-orphans.service").read_text())
    assert settings["CapabilityBoundingSet"] == [
        "CAP_CHOWN CAP_DAC_OVERRIDE CAP_DAC_READ_SEARCH CAP_FOWNER CAP_FSETID"
    ]
    for key in (
        "ProtectKernelTunables", "ProtectKernelModules", "ProtectKernelLogs",
        "ProtectControlGroups", "RestrictNamespaces", "NoNewPrivileges", "PrivateTmp",
    ):  # fmt: skip
        assert settings[key] == ["true"], key
    assert settings["ProtectSystem"] == ["strict"]
    # NOTE: the instances path and libvirt's state (managed-save images, NVRAM): reaps move,
    # link and copy them (docs/design.md rule 16).
    assert {"-/var/lib/nova", "-/var/lib/libvirt"} <= set(settings["ReadWritePaths"][0].split())
    assert settings["LogsDirectory"] == ["nova-orphans"]
    assert settings["StateDirectory"] == ["nova-orphans"]
    after = settings["After"][0].split()
    assert "libvirtd.service" in after and "virtqemud.service" in after


def test_a_unit_started_before_its_config_exists_fails_once_with_one_line(tmp_path):
    """Exit 2 (configuration) is not restarted; other failures stop after StartLimitBurst."""
    settings = unit_settings((DATA / "nova-orphans.service").read_text())
    assert settings["Restart"] == ["on-failure"]
    assert settings["RestartPreventExitStatus"] == ["2"]
    assert int(settings["StartLimitBurst"][0]) <= 5
    assert int(settings["StartLimitIntervalSec"][0]) >= 5 * int(settings["RestartSec"][0])
    # The unit's own command line, its config file not there yet.
    argv = exec_start(files.unit_text(str(SCRIPT))).split()
    missing = tmp_path / "etc" / "nova-orphans" / "nova-orphans.conf"
    argv[argv.index("/etc/nova-orphans/nova-orphans.conf")] = str(missing)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stdout == "" and len(done.stderr.splitlines()) == 1, done.stderr
    assert str(missing) in done.stderr
