"""Only the report goes to standard output, under every logging setting oslo.log offers; a
setting this host cannot serve (use_journal without the systemd bindings) is one line, exit 2."""

from __future__ import annotations

import importlib.util
import json
import pathlib
import subprocess
import sys

import pytest

from nova_orphans import exits
from nova_orphans.cli import commands

ROOT = pathlib.Path(__file__).parents[3]

SETTINGS = {
    "use_syslog (no /dev/log here)": "use_syslog = true\n",
    "use_syslog and debug": "use_syslog = true\ndebug = true\n",
    "use_stderr = false": "use_stderr = false\n",
    "use_json": "use_json = true\ndebug = true\n",
    "log_dir": "log_dir = {tmp}/logs\n",
    "log_file": "log_file = {tmp}/logs/n.log\n",
    "log_config_append to stdout": "log_config_append = {tmp}/logging.conf\n",
    "debug": "debug = true\n",
}

#: A logging config (Python's fileConfig) that names standard output itself.
STDOUT_LOGGING = """[loggers]
keys = root
[handlers]
keys = out
[formatters]
keys = plain
[logger_root]
level = DEBUG
handlers = out
[handler_out]
class = StreamHandler
args = (sys.stdout,)
formatter = plain
[formatter_plain]
format = %(levelname)s %(message)s
"""


def nova_orphans(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nova_orphans.cli", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )


@pytest.mark.parametrize("setting", SETTINGS.values(), ids=SETTINGS.keys())
def test_the_json_report_is_alone_on_stdout_whatever_the_logging(tmp_path, setting):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logging.conf").write_text(STDOUT_LOGGING)
    conf = tmp_path / "nova-orphans.conf"
    conf.write_text(
        "[DEFAULT]\nhost = cmp-1\n" + setting.replace("{tmp}", str(tmp_path))
        + f"[agent]\nstate_dir = {tmp_path / 'state'}\n"
        "[nova]\nauth_type = admin_token\nendpoint = http://127.0.0.1:1/v2.1\ntoken = t\n"
    )  # fmt: skip
    # NOTE: demo reads no config; history does, and prints an empty JSON envelope.
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "journal.sqlite").touch()
    done = nova_orphans("history", "--config-file", str(conf), "--format", "json", "--debug")
    assert done.returncode == exits.OK, done.stderr
    assert json.loads(done.stdout)["events"] == []


@pytest.mark.skipif(
    importlib.util.find_spec("systemd") is not None, reason="the systemd bindings are installed"
)
def test_use_journal_without_the_systemd_bindings_says_what_to_install(tmp_path):
    conf = tmp_path / "nova-orphans.conf"
    conf.write_text("[DEFAULT]\nuse_journal = true\n")
    done = nova_orphans("history", "--config-file", str(conf))
    assert done.returncode == exits.USAGE
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert "use_journal = true needs the systemd Python bindings" in line
    assert "python3-systemd" in line and "systemd-python" in line


def every_parser() -> list[tuple[str, object]]:
    from nova_orphans import cli

    found, todo = [], [("nova-orphans", cli.build_parser())]
    while todo:
        name, parser = todo.pop()
        found.append((name, parser))
        for action in parser._actions:  # type: ignore[attr-defined]
            if isinstance(action, commands.Commands):
                todo += [(f"{name} {n}", p) for n, p in action.choices.items()]
    return found


@pytest.mark.parametrize(("name", "parser"), every_parser(), ids=lambda v: str(v)[:40])
def test_every_help_has_a_description_help_for_each_argument_and_the_exit_codes(name, parser):
    text = parser.format_help()  # type: ignore[attr-defined]
    assert "exit codes:" in text and "130" in text, name
    assert "``" not in text and ":ref:" not in text, name  # no reStructuredText
    if name != "nova-orphans":
        assert parser.description, name  # type: ignore[attr-defined]
    for action in parser._actions:  # type: ignore[attr-defined]
        assert action.help, f"{name}: {action.option_strings or action.dest} has no help"
