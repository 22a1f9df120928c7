"""The operator examples of the README and of the pages they moved to in docs — install,
configuration, systemd, alerts, JSON — run as written (with /etc moved into a temporary
directory)."""

from __future__ import annotations

import pathlib
import subprocess
import sys

from nova_orphans.cli import files
from nova_orphans.version import tool_version
from tests import tools

ROOT = pathlib.Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
DOC = ROOT / "docs"
SCRIPT = pathlib.Path(sys.executable).parent / "nova-orphans"


def page(name: str) -> str:
    """The text of the documentation page ``name`` (a path under docs)."""
    return (DOC / name).read_text()


def example(prefix: str, text: str) -> str:
    """The one line of ``text`` that starts with ``prefix``, its trailing comment removed."""
    lines = [line for line in text.splitlines() if line.startswith(prefix)]
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
        done = run_shell(example(prefix, page("install.md")), tmp_path)
        assert done.returncode == 0, done.stderr
    sample = tmp_path / "etc" / "nova-orphans" / "nova-orphans.conf.sample"
    assert sample.read_text() == files.shipped(files.SAMPLE_CONFIG)
    unit = tmp_path / "etc" / "systemd" / "system" / "nova-orphans.service"
    assert unit.read_text() == files.unit_text(str(SCRIPT))
    tools.tool("systemd-analyze", "systemd")
    done = run_shell(example("systemd-analyze verify", page("admin/deploy.md")), tmp_path)
    assert done.returncode == 0, done.stderr


def test_the_install_example_installs_the_pinned_versions_into_a_fresh_venv(tmp_path):
    """The README's and the install page's venv line, /opt moved into a temporary directory."""
    line = example("python3 -m venv /opt/nova-orphans", README)
    assert line == example("python3 -m venv /opt/nova-orphans", page("install.md"))
    assert "-c constraints.txt" in line
    python = pathlib.Path(sys.base_prefix) / "bin" / "python3"
    line = line.replace("/opt/", f"{tmp_path}/opt/").replace("python3 -m venv", f"{python} -m venv")
    done = subprocess.run(
        ["bash", "-c", line], cwd=ROOT, capture_output=True, text=True, timeout=540
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    venv = tmp_path / "opt" / "nova-orphans" / "bin"
    frozen = subprocess.run(
        [str(venv / "pip"), "freeze"], capture_output=True, text=True, check=True, timeout=120
    ).stdout.splitlines()
    pinned = set((ROOT / "constraints.txt").read_text().splitlines())
    assert [x for x in frozen if not x.startswith("nova-orphans") and x not in pinned] == []
    version = subprocess.run(
        [str(venv / "nova-orphans"), "--version"], capture_output=True, text=True, timeout=60
    )
    assert version.stdout.strip() == f"nova-orphans {tool_version()}"


def test_the_monitoring_examples_write_the_shipped_rules_dashboard_and_schema(tmp_path):
    for directory in ("prometheus", "grafana", "nova-orphans"):
        (tmp_path / "etc" / directory).mkdir(parents=True)
    for prefix in ("nova-orphans alert-rules", "nova-orphans grafana-dashboard",
                   "nova-orphans report-schema"):  # fmt: skip
        done = run_shell(example(prefix, page("install.md")), tmp_path)
        assert done.returncode == 0, done.stderr
    rules = tmp_path / "etc" / "prometheus" / "nova-orphans.rules.yml"
    assert "https://docs.example.com/nova-orphans/admin/metrics.html#" in rules.read_text()
    assert (tmp_path / "etc" / "grafana" / "nova-orphans.json").read_text() == (
        ROOT / "deploy" / "grafana" / "nova-orphans.json"
    ).read_text()
    assert (tmp_path / "etc" / "nova-orphans" / "report.schema.json").read_text() == (
        ROOT / "docs" / "schema" / "report.schema.json"
    ).read_text()
    promtool = tools.tool("promtool", "prometheus")
    done = subprocess.run(
        [promtool, "check", "rules", str(rules)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_promtool_example_passes():
    tools.tool("promtool", "prometheus")
    done = subprocess.run(
        ["bash", "-c", example("promtool test rules", page("admin/metrics.md"))],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout + done.stderr


def block_after(heading: str, fence: str, text: str) -> str:
    """The first ``fence`` code block of ``text`` after its line ``heading``."""
    text = text.split(f"\n{heading}\n", 1)[1]
    return text.split(f"```{fence}\n", 1)[1].split("\n```", 1)[0]


def test_the_sample_generator_example_writes_the_shipped_sample(tmp_path):
    out = tmp_path / "sample.conf"
    line = example(".venv/bin/oslo-config-generator", page("admin/configure.md"))
    line = line.replace(".venv/bin/", "")
    generator = pathlib.Path(sys.executable).parent / "oslo-config-generator"
    done = run_shell(f"{generator} {line.split(' ', 1)[1]} --output-file {out}", tmp_path)
    assert done.returncode == 0, done.stderr
    assert out.read_text() == files.shipped(files.SAMPLE_CONFIG)


def test_the_strict_config_example_is_the_line_a_typo_gives(tmp_path):
    guide = page("admin/configure.md")
    expected = block_after("and any invalid value, with one line and exit 2:", "text", guide)
    conf = tmp_path / "etc" / "nova-orphans" / "nova-orphans.conf"
    conf.parent.mkdir(parents=True)
    conf.write_text("[agent]\ndryrun = true\n")
    done = run_shell("nova-orphans history --config-file /etc/nova-orphans/nova-orphans.conf",
                     tmp_path)  # fmt: skip
    assert done.returncode == 2
    assert done.stderr == expected.replace("/etc/", f"{tmp_path}/etc/") + "\n"
    validator = pathlib.Path(sys.executable).parent / "oslo-config-validator"
    line = guide.split("`oslo-config-validator ", 1)[1].split("`", 1)[0]
    done = run_shell(f"{validator} {line.replace('FILE', '/etc/nova-orphans/nova-orphans.conf')}",
                     tmp_path)  # fmt: skip
    assert done.returncode != 0 and "dryrun" in done.stdout + done.stderr


def test_the_configuration_example_loads_as_written(tmp_path):
    """The README's minimal configuration and the configuration guide's
    [DEFAULT]/[libvirt]/[nova]/[services] example pass the strict loader."""
    from nova_orphans import config

    etc = tmp_path / "etc"
    (etc / "nova").mkdir(parents=True)
    for name in ("nova.conf", "nova-compute.conf"):
        (etc / "nova" / name).write_text("[DEFAULT]\nhost = compute-17\n")
    examples = {
        "README": block_after("## A minimal configuration", "ini", README),
        "guide": block_after("## Logging", "ini", page("admin/configure.md")),
    }
    for name, example_text in examples.items():
        path = tmp_path / f"{name}.conf"
        path.write_text(example_text.replace("/etc/", f"{etc}/"))
        conf = config.load([str(path)])
        assert conf.nova.auth_type == "password" and conf.nova.username == "nova-orphans", name
        assert conf.nova_config_file == [f"{etc}/nova/nova.conf", f"{etc}/nova/nova-compute.conf"]
        assert config.host_settings(conf).host == "compute-17", name


def test_the_jq_example_reads_the_counts(tmp_path):
    jq = tools.tool("jq", "jq")
    line = next(x for x in page("reference/json.md").splitlines() if "| jq '" in x)
    query = line.split("| jq ", 1)[1].split("`", 1)[0]
    # NOTE: the demo prints the same document shape as (fleet) audit, with no cloud needed.
    done = run_shell(f"nova-orphans demo --format json | {jq} {query}", tmp_path)
    assert done.stdout.strip() == "0", done.stderr


def test_the_quarantine_jq_example_lists_the_restorable_entries(tmp_path):
    from tests.unit.cli.test_quarantine_cli import OLD, YOUNG, State

    jq = tools.tool("jq", "jq")
    text = page("reference/json.md")
    line = next(x for x in text.splitlines() if "quarantine list --format json | jq" in x)
    command = line.split("`")[1]
    state = State(tmp_path)
    state.entry(OLD, 2, journal=True)
    state.entry(YOUNG, 1, with_manifest=False, journal=True)
    (state.quarantine / YOUNG).glob("*").__next__().joinpath("files").rename(tmp_path / "gone")
    command = command.replace("--format json", f"--format json --config-file {state.config}")
    done = run_shell(command.replace("| jq ", f"| {jq} "), tmp_path)
    assert done.stdout == f"{OLD}\n", done.stderr


def test_nova_policy_example_writes_the_shipped_rules(tmp_path):
    (tmp_path / "etc" / "nova" / "policy.d").mkdir(parents=True)
    done = run_shell(
        example("nova-orphans nova-policy >", page("admin/least-privilege.md")), tmp_path
    )
    assert done.returncode == 0, done.stderr
    written = tmp_path / "etc" / "nova" / "policy.d" / "nova-orphans.yaml"
    assert written.read_text() == files.shipped(files.NOVA_POLICY)
