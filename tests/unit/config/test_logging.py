"""Logging is oslo.log's, as in every OpenStack service; reports keep stdout to themselves."""

from __future__ import annotations

import argparse
import json

from nova_orphans import cli, exits
from nova_orphans.cli import agent as cli_agent
from nova_orphans.fakes import libvirt_node as worlds
from nova_orphans.fakes.nova import SimulatedNova


def leaf_parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """Every sub-command's parser, with its words."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
    for action in subs:
        for name, sub in action.choices.items():
            yield from leaf_parsers(sub, (*path, name))


def test_every_sub_command_takes_debug():
    leaves = dict(leaf_parsers(cli.build_parser()))
    assert len(leaves) >= 11
    for path, parser in leaves.items():
        assert "--debug" in parser._option_string_actions, " ".join(path)


def test_debug_logs_go_to_stderr_and_the_json_report_stays_alone_on_stdout(capsys):
    code = cli.main(["demo", "--debug", "--format", "json"])
    out, err = capsys.readouterr()
    assert code == exits.SHARED_VOLUME
    assert json.loads(out)["findings"]
    assert " DEBUG nova_orphans.cli.configure [-] nova-orphans " in err


def test_without_debug_a_command_keeps_stderr_quiet(capsys):
    assert cli.main(["demo"]) == exits.SHARED_VOLUME
    assert capsys.readouterr().err == ""


def test_with_a_log_file_the_agent_logs_there_and_not_on_stderr(tmp_path, capsys, world):
    conf = tmp_path / "c.conf"
    log = tmp_path / "nova-orphans.log"
    conf.write_text(
        f"[DEFAULT]\nhost = cmp-1\nlog_file = {log}\n[agent]\nstate_dir = {tmp_path / 's'}\n"
        "[nova]\nauth_type = admin_token\nendpoint = http://127.0.0.1:1/v2.1\ntoken = t\n"
        "timeout = 1\n"
    )
    code = cli.main(["run", "--once", "--config-file", str(conf), "--libvirt-uri", world])
    out, err = capsys.readouterr()
    assert code == exits.ERROR
    assert (out, err) == ("", "")
    assert "ERROR nova_orphans.agent [-] cycle aborted, nothing was done: Nova unreachable" in (
        log.read_text()
    )


def test_an_unexpected_error_is_one_line_never_a_traceback(capsys, monkeypatch):
    def broken(_args):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr("nova_orphans.cli.audit.run_demo", broken)
    code = cli.main(["demo"])
    err = capsys.readouterr().err
    assert code == exits.ERROR
    assert err.strip() == "nova-orphans: unexpected error: ZeroDivisionError: division by zero"


HOSTILE = "\x1b]0;pwned\x07\u202e"


def test_a_name_nova_chose_reaches_the_log_escaped(tmp_path, capsys, monkeypatch):
    """docs/design.md rule 20: through the logging ``run`` sets up, a Nova answer's ESC
    sequence and U+202E are shown as escapes in the log, never written raw."""
    uuid = worlds.random_uuid()
    domain = worlds.node_domain(uuid=uuid, name="instance-1", metadata=worlds.nova_metadata())
    world = worlds.write_node_file(tmp_path, [domain])
    nova = SimulatedNova()
    nova.add_compute("cmp-1", **worlds.test_driver_node())
    nova.boot(f"cmp-2{HOSTILE}", name=f"web{HOSTILE}", uuid=uuid)
    monkeypatch.setattr(cli_agent, "transport_from_conf", lambda conf: nova)
    conf = tmp_path / "c.conf"
    log = tmp_path / "nova-orphans.log"
    conf.write_text(
        f"[DEFAULT]\nhost = cmp-1\nlog_file = {log}\n[agent]\nstate_dir = {tmp_path / 's'}\n"
        "[nova]\nauth_type = admin_token\nendpoint = http://127.0.0.1:1/v2.1\ntoken = t\n"
    )
    code = cli.main(["run", "--once", "--config-file", str(conf), "--libvirt-uri", world])
    assert code == exits.FOUND, capsys.readouterr().err
    text = log.read_text()
    assert "kind=misplaced" in text
    assert "cmp-2\\x1b]0;pwned\\x07\\u202e" in text
    assert "\x1b" not in text and "\u202e" not in text and "\x07" not in text
