"""The wheel carries the licence, the sample config, the systemd unit, the Nova policy, and the
alert rules, the dashboard and the report schema (linked from deploy/ and docs/schema/): the
schema the installed fleet reader validates the hosts' reports against."""

from __future__ import annotations

import email.parser
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import zipfile

import pytest

from tests import tools

ROOT = tools.ROOT
#: sha256 of the Apache License 2.0 as apache.org publishes it (LICENSE-2.0.txt).
APACHE_2_0_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"


def test_the_license_is_the_full_apache_2_0_text():
    text = (ROOT / "LICENSE").read_bytes()
    assert hashlib.sha256(text).hexdigest() == APACHE_2_0_SHA256
    assert b"Apache License\n                           Version 2.0, January 2004" in text


def repository_copy(destination: pathlib.Path) -> pathlib.Path:
    """The files git tracks (or would), copied: the build leaves the work tree alone."""
    for name in tools.repository_files():
        source = ROOT / name
        if source.is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            # NOTE: links stay links, as a checkout has them: the build must resolve them.
            shutil.copy2(source, destination / name, follow_symlinks=False)
    return destination


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """The wheel ``pip wheel .`` builds from a copy of the repository."""
    directory = tmp_path_factory.mktemp("wheel")
    source = repository_copy(directory / "src")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(directory), "."],
        cwd=source,
        check=True,
        capture_output=True,
        timeout=540,
    )
    (built,) = directory.glob("nova_orphans-*.whl")
    return built


def test_the_wheel_ships_license_sample_config_and_unit(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        dist_info = next(n.split("/")[0] for n in names if ".dist-info/" in n)
        metadata = email.parser.Parser().parsestr(archive.read(f"{dist_info}/METADATA").decode())
        shipped_license = archive.read(f"{dist_info}/licenses/LICENSE")
        for name in ("nova-orphans.conf.sample", "nova-orphans.service", "nova-policy.yaml"):
            assert (
                archive.read(f"nova_orphans/data/{name}")
                == (ROOT / "nova_orphans" / "data" / name).read_bytes()
            )
        for name, source in (
            ("nova-orphans.rules.yml", "deploy/prometheus/nova-orphans.rules.yml"),
            ("nova-orphans.json", "deploy/grafana/nova-orphans.json"),
            ("report.schema.json", "docs/schema/report.schema.json"),
        ):
            # NOTE: a regular file in the wheel, with the content of the repository's one copy.
            info = archive.getinfo(f"nova_orphans/data/{name}")
            assert (info.external_attr >> 28) != 0o12, name  # not a symbolic link
            assert archive.read(info) == (ROOT / source).read_bytes(), name
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata.get_all("License-File") == ["LICENSE"]
    assert "License" not in metadata  # the deprecated free-text field is gone
    assert shipped_license == (ROOT / "LICENSE").read_bytes()
    entry_points = zipfile.ZipFile(wheel).read(f"{dist_info}/entry_points.txt").decode()
    assert "nova-orphans = nova_orphans.cli:main" in entry_points


def installed(wheel: pathlib.Path, tmp_path: pathlib.Path) -> pathlib.Path:
    """``wheel`` installed alone (no dependencies) into a fresh directory, returned."""
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), wheel],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return site


def test_an_installed_wheel_prints_its_shipped_files(wheel, tmp_path):
    site = installed(wheel, tmp_path)
    # NOTE: the installed copy first on the path, the checkout nowhere: what a wheel user runs.
    program = (
        "import sys; sys.path.insert(0, sys.argv.pop(1)); import nova_orphans, nova_orphans.cli;"
        "print(nova_orphans.__file__, file=sys.stderr); sys.exit(nova_orphans.cli.main())"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", program, str(site), *argv],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    sample = run("sample-config")
    assert sample.returncode == 0, sample.stderr
    assert sample.stderr.startswith(str(site))
    assert (
        sample.stdout == (ROOT / "nova_orphans" / "data" / "nova-orphans.conf.sample").read_text()
    )
    policy = run("nova-policy")
    assert policy.returncode == 0, policy.stderr
    assert policy.stdout == (ROOT / "nova_orphans" / "data" / "nova-policy.yaml").read_text()
    for command, source in (
        ("alert-rules", "deploy/prometheus/nova-orphans.rules.yml"),
        ("grafana-dashboard", "deploy/grafana/nova-orphans.json"),
        ("report-schema", "docs/schema/report.schema.json"),
    ):
        printed = run(command)
        assert printed.returncode == 0, printed.stderr
        assert printed.stdout == (ROOT / source).read_text(), command
    unit = run("systemd-unit", "--executable", sys.executable)
    assert unit.returncode == 0, unit.stderr
    assert f"ExecStart={sys.executable} run --config-file" in unit.stdout


#: Run against the installed copy alone: which schema file the fleet's reader loads, its
#: bytes, and the reader's refusal of a report the schema refuses.
READER_PROGRAM = """
import hashlib, json, sys
sys.path.insert(0, sys.argv[1])
from nova_orphans.fleet import report_schema, reports
shipped = report_schema.resource()
bad = reports.parse_document({"schema_version": 1, "host": "cmp-1"}, "cmp-1.json")
print(json.dumps({"module": report_schema.__file__, "resource": str(shipped),
                  "sha256": hashlib.sha256(shipped.read_bytes()).hexdigest(),
                  "refused": bad.reason}))
"""


def test_the_reader_validates_against_the_schema_the_wheel_ships(wheel, tmp_path):
    """The schema is in the wheel, the repository's one copy byte for byte, and it is the
    resource the installed reader loads (never a checkout's docs/schema)."""
    schema = (ROOT / "docs" / "schema" / "report.schema.json").read_bytes()
    member = "nova_orphans/data/report.schema.json"
    with zipfile.ZipFile(wheel) as archive:
        assert member in archive.namelist()
        assert archive.read(member) == schema
    site = installed(wheel, tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-c", READER_PROGRAM, str(site)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    loaded = json.loads(done.stdout)
    assert loaded["module"] == str(site / "nova_orphans" / "fleet" / "report_schema.py")
    assert loaded["resource"] == str(site / member)
    assert not (site / member).is_symlink()
    assert loaded["sha256"] == hashlib.sha256(schema).hexdigest()
    assert loaded["refused"] == "report: 'tool_version' is a required property"
