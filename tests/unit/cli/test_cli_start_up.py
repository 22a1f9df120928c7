"""A cold ``nova-orphans`` run imports only what its sub-command uses.

NOTE: start-up time and memory of a fresh CLI process on a compute host (a cron job,
the operator's tooling on every host) are mostly imports; these tests fail when the
command line goes back to importing every sub-command's modules, or a library
another sub-command needs. Each runs a fresh interpreter and reads its
``sys.modules`` after the command: behaviour, not timing.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys

import pytest

from nova_orphans import cli, exits
from nova_orphans.fakes import libvirt_node as worlds
from nova_orphans.fakes.nova import SimulatedNova
from tests import http_nova

#: Runs ``nova_orphans.cli.main(argv)`` in a fresh interpreter, then writes its exit code
#: and every module it imported to the file named first.
CHILD = """
import json, sys
from nova_orphans import cli
try:
    code = cli.main(sys.argv[2:])
except SystemExit as exc:  # --version and --help exit from argparse
    code = exc.code
with open(sys.argv[1], "w", encoding="utf-8") as out:
    json.dump({"code": code, "modules": sorted(sys.modules)}, out)
"""

#: What only some sub-commands need: Nova's client, the hypervisor, config and logging.
LIBRARIES = ("keystoneauth1", "requests", "openstack", "libvirt", "oslo_config", "oslo_log",
             "tenacity", "prometheus_client", "sqlite3")  # fmt: skip
#: The agent, its actions and metrics, the fleet view: never needed by ``audit``.
NOT_FOR_AUDIT = (
    "prometheus_client",
    "openstack",
    "nova_orphans.agent",
    "nova_orphans.act",
    "nova_orphans.fleet",
    "nova_orphans.record.metrics",
    "nova_orphans.cli.agent",
    "nova_orphans.cli.fleet",
    "nova_orphans.cli.journal",
    "nova_orphans.demo",
    "nova_orphans.fakes",
)
#: All of ours that parsing the command line needs.
PARSER_MODULES = {
    "nova_orphans",
    "nova_orphans.cli",
    "nova_orphans.cli.commands",
    "nova_orphans.cli.arguments",
    "nova_orphans.cli.common",
    "nova_orphans.cli.streams",
    "nova_orphans.exceptions",
    "nova_orphans.exits",
    "nova_orphans.version",
}
TOKEN = "start-up-admin-token"


def run_fresh(tmp_path: pathlib.Path, *argv: str) -> tuple[int, set[str]]:
    """Exit code and imported modules of ``nova-orphans ARGV`` in a fresh interpreter."""
    found = tmp_path / "modules.json"
    subprocess.run(
        [sys.executable, "-c", CHILD, str(found), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result = json.loads(found.read_text(encoding="utf-8"))
    return result["code"], set(result["modules"])


def loaded(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    """The ``packages`` (or modules of them) among ``modules``."""
    return sorted(p for p in packages if any(m == p or m.startswith(p + ".") for m in modules))


@pytest.mark.parametrize("argv", [["--version"], ["audit", "--help"], ["run", "--help"]])
def test_version_and_help_import_no_library_and_no_sub_command(tmp_path, argv):
    code, modules = run_fresh(tmp_path, *argv)
    assert code == 0
    assert loaded(modules, LIBRARIES) == []
    ours = {m for m in modules if m.startswith("nova_orphans")}
    assert ours == PARSER_MODULES


@pytest.fixture
def cloud():
    nova = SimulatedNova()
    nova.add_compute("cmp-1", **worlds.test_driver_node())
    nova.boot("cmp-1", name="kept")
    with http_nova.serve(nova, "unused-password", TOKEN) as served:
        yield served


def test_an_audit_imports_neither_the_agent_nor_the_fleet_nor_metrics(tmp_path, world, cloud):
    conf = tmp_path / "nova-orphans.conf"
    conf.write_text(
        f"[DEFAULT]\nhost = cmp-1\n[agent]\nstate_dir = {tmp_path / 'state'}\n"
        f"[nova]\ntimeout = 5\nauth_type = admin_token\nendpoint = {cloud.url}\ntoken = {TOKEN}\n"
    )
    code, modules = run_fresh(tmp_path, "audit", "--config-file", str(conf), "--libvirt-uri", world)
    # The audit really ran: it asked Nova, and found the world's guest Nova never knew.
    assert code == exits.FOUND
    assert TOKEN in cloud.tokens_seen
    assert {"nova_orphans.cli.audit", "libvirt", "keystoneauth1"} <= modules
    assert loaded(modules, NOT_FOR_AUDIT) == []


def leaf_parsers(parser: argparse.ArgumentParser):
    """Every sub-command's parser."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield parser
    for action in subs:
        for sub in action.choices.values():
            yield from leaf_parsers(sub)


def test_every_sub_command_names_a_handler_that_exists():
    leaves = list(leaf_parsers(cli.build_parser()))
    assert len(leaves) >= 11
    for parser in leaves:
        handler = cli.handler(parser.get_default("handler"))
        assert callable(handler), parser.prog
