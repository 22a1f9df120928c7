"""Bad input gives one clear line on stderr, the documented exit code, and changes nothing.

docs/design.md rule 9.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

from nova_orphans import cli, exits
from nova_orphans.cli import audit as audit_cli
from nova_orphans.fakes.nova import SimulatedNova

NOVA_DOWN = "http://127.0.0.1:1/v2.1"


def write_conf(tmp_path: pathlib.Path, text: str) -> str:
    path = tmp_path / "nova-orphans.conf"
    path.write_text(text)
    return str(path)


def good_conf(tmp_path: pathlib.Path, endpoint: str = NOVA_DOWN, extra: str = "") -> str:
    return write_conf(
        tmp_path,
        "[DEFAULT]\nhost = cmp-1\n" + extra + "[nova]\nauth_type = admin_token\n"
        f"endpoint = {endpoint}\ntoken = admin:admin\ntimeout = 2\n",
    )


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line(err: str, *words: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("nova-orphans: ")
    for word in words:
        assert word in lines[0]


CONFIG_CASES = [
    ("a config file that is not INI", "this is [not\n= an ini file", "config error"),
    (
        "an option with a wrong value",
        "[nova]\nauth_type = admin_token\ntimeout = soon\n",
        "timeout",
    ),
    ("no Nova credentials at all", "[DEFAULT]\nhost = cmp-1\n", "auth_type"),
    ("an unknown keystoneauth plugin", "[nova]\nauth_type = magic\n", "magic"),
    (
        "a deny-listed UUID that is not one",
        "[DEFAULT]\ndeny_uuids = 1234\n"
        "[nova]\nauth_type = admin_token\nendpoint = http://x\ntoken = t\n",
        "not a UUID",
    ),
    (
        "a pinned compute node UUID that is not one",
        "[DEFAULT]\ncompute_node_uuid = cmp-1\n"
        "[nova]\nauth_type = admin_token\nendpoint = http://x\ntoken = t\n",
        "[DEFAULT] compute_node_uuid = cmp-1 is not valid: 'cmp-1' is not a UUID",
    ),
    (
        "an empty pinned compute node UUID",
        "[DEFAULT]\ncompute_node_uuid =\n"
        "[nova]\nauth_type = admin_token\nendpoint = http://x\ntoken = t\n",
        "compute_node_uuid",
    ),
    (
        "a nova.conf that does not exist",
        "[DEFAULT]\nnova_config_file = /nonexistent/nova.conf\n"
        "[nova]\nauth_type = admin_token\nendpoint = http://x\ntoken = t\n",
        "nova.conf",
    ),
]


@pytest.mark.parametrize(("text", "words"), [pytest.param(*c[1:], id=c[0]) for c in CONFIG_CASES])
def test_bad_config_exits_2_with_one_line(tmp_path, capsys, world, text, words):
    code, out, err = run(
        capsys, "audit", "--config-file", write_conf(tmp_path, text), "--libvirt-uri", world
    )
    assert code == exits.USAGE
    assert out == ""
    assert_one_line(err, words)


def test_a_missing_config_file_exits_2(capsys, world):
    code, _, err = run(
        capsys, "audit", "--config-file", "/nonexistent.conf", "--libvirt-uri", world
    )
    assert code == exits.USAGE
    assert_one_line(err, "/nonexistent.conf")


@pytest.mark.parametrize(
    "argv",
    [["frobnicate"], ["audit", "--format", "xml"], ["audit", "--no-such-flag"], []],
    ids=["unknown command", "unknown format", "unknown flag", "no command"],
)
def test_bad_command_line_exits_2(capsys, argv):
    code, _, err = run(capsys, *argv)
    assert code == exits.USAGE
    assert_one_line(err, "usage error")


def test_unreachable_libvirt_exits_1_naming_libvirt(tmp_path, capsys):
    code, out, err = run(
        capsys,
        "audit",
        "--config-file",
        good_conf(tmp_path),
        "--libvirt-uri",
        "qemu+tcp://127.0.0.1:1/system",
    )
    assert code == exits.ERROR
    assert out == ""
    assert_one_line(err, "libvirt", "qemu+tcp://127.0.0.1:1/system")


def test_unreachable_nova_exits_1_naming_nova(tmp_path, capsys, world):
    code, out, err = run(
        capsys, "audit", "--config-file", good_conf(tmp_path), "--libvirt-uri", world
    )
    assert code == exits.ERROR
    assert out == ""
    assert_one_line(err, "Nova", "127.0.0.1:1")


def test_a_cell_nova_cannot_reach_exits_1_naming_the_cell(tmp_path, capsys, world, monkeypatch):
    # docs/design.md rule 17: without the check every guest would be "unknown" (exit 3).
    nova = SimulatedNova()
    nova.add_compute("cmp-1")
    nova.down_cells.add("cell1")
    monkeypatch.setattr(audit_cli, "transport_from_conf", lambda conf: nova)
    code, out, err = run(
        capsys, "audit", "--config-file", good_conf(tmp_path), "--libvirt-uri", world
    )
    assert code == exits.ERROR
    assert out == ""
    assert_one_line(err, "Nova could not reach a cell", "'cmp-1'", "UNKNOWN")


def test_the_console_script_reports_errors_the_same_way(tmp_path, world):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "nova_orphans.cli",
            "audit",
            "--config-file",
            good_conf(tmp_path),
            "--libvirt-uri",
            "qemu+tcp://127.0.0.1:1/system",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == exits.ERROR
    assert_one_line(proc.stderr, "libvirt")


def test_a_missing_test_world_is_one_line_naming_the_file(tmp_path, capsys):
    missing = f"test://{tmp_path}/missing.xml"
    code, out, err = run(
        capsys, "audit", "--config-file", good_conf(tmp_path), "--libvirt-uri", missing
    )
    assert code == exits.ERROR
    assert out == ""
    assert_one_line(err, "libvirt", "missing.xml")
