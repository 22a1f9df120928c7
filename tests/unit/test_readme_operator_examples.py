"""The README's install, systemd and alert examples run as written (with /etc moved into a
temporary directory)."""

from __future__ import annotations

import pathlib
import subprocess
import sys

from nova_orphans.cli import files
from nova_orphans.version import tool_version
from tests import tools

ROOT = pathlib.Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
SCRIPT = pathlib.Path(sys.executable).parent / "nova-orphans"


def example(prefix: str) -> str:
    """The one README line that starts with ``prefix``, its trailing comment removed."""
    lines = [line for line in README.splitlines() if line.startswith(prefix)]
    assert len(lines) == 1, (prefix, lines)
    return lines[0].split("  #")[0].split(" # ")[0].strip()


def run_shell(line: str, tmp_path: pathlib.Path) -> subprocess.CompletedProcess[str]:
    line = line.replace("/etc/", f"{tmp_path}/etc/").replace("nova-orphans ", f"{SCRIPT} ", 1)
    return subprocess.run(
        ["bash", "-c", line], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


def test_version_example_shows_the_installed_version(tmp_path):
    line = next(x for x in README.splitlines() if x.startswith(".venv/bin/nova-orphans --version"))
    assert line.split("# ")[1] == f"nova-orphans {tool_version()}"
    done = run_shell("nova-orphans --version", tmp_path)
    assert done.stdout.strip() == f"nova-orphans {tool_version()}"


def test_install_examples_write_the_sample_config_and_a_unit_that_verifies(tmp_path):
    (tmp_path / "etc" / "systemd" / "system").mkdir(parents=True)
    (tmp_path / "etc" / "nova-orphans").mkdir(parents=True)
    for prefix in ("nova-orphans sample-config >", "nova-orphans systemd-unit  >"):
        done = run_shell(example(prefix), tmp_path)
        assert done.returncode == 0, done.stderr
    sample = tmp_path / "etc" / "nova-orphans" / "nova-orphans.conf.sample"
    assert sample.read_text() == files.shipped(files.SAMPLE_CONFIG)
    unit = tmp_path / "etc" / "systemd" / "system" / "nova-orphans.service"
    assert unit.read_text() == files.unit_text(str(SCRIPT))
    tools.tool("systemd-analyze", "systemd")
    done = run_shell(example("systemd-analyze verify"), tmp_path)
    assert done.returncode == 0, done.stderr


def test_promtool_example_passes():
    tools.tool("promtool", "prometheus")
    done = subprocess.run(
        ["bash", "-c", example("promtool test rules")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout + done.stderr
