"""The collection's filters (deploy/ansible/.../plugins/filter/nova_orphans.py), loaded as the
file Ansible loads: the agent's configuration rendered by a method that cannot be injected
(every token checked, the text read back by oslo.config), and the host names that may name a
file on the controller (the rule of nova_orphans/fleet/hostname.py).

tests/ansible/test_agent_role.py runs the same refusals through the role on real hosts.
"""

from __future__ import annotations

import importlib.util
import pathlib
import subprocess
import sys
from types import ModuleType
from typing import Any

import pytest
from oslo_config import cfg

from nova_orphans.fleet.hostname import NotAHostName, check_host_name
from tests import tools

PLUGIN = (
    tools.ROOT / "deploy" / "ansible" / "ansible_collections" / "nova_orphans" / "fleet"
    / "plugins" / "filter" / "nova_orphans.py"
)  # fmt: skip


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("nova_orphans_fleet_filters", PLUGIN)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


filters = _load()

GOOD: dict[str, Any] = {
    "DEFAULT": {"host": "cmp-1", "deny_name_patterns": ["infra-*", "keep-*"], "debug": False},
    "agent": {"action_deleted": "log", "grace_period": 7200, "report_file": "/var/lib/r.json"},
    "metrics": {"port": 9300, "textfile": "$$HOME/x.prom"},
}


def read_back(text: str, tmp_path: pathlib.Path) -> dict[str, dict[str, list[str]]]:
    """``text`` parsed by oslo.config's own INI parser (what the tool reads it with)."""
    path = tmp_path / "nova-orphans.conf"
    path.write_text(text)
    sections: dict[str, dict[str, list[str]]] = {}
    cfg.ConfigParser(str(path), sections).parse()
    return sections


def test_a_good_configuration_renders_and_reads_back_as_meant(tmp_path):
    assert filters.config_problems(GOOD) == []
    text = filters.to_ini(GOOD, "nova_orphans_config", "managed\nsecond line")
    assert text.startswith("# managed\n# second line\n\n[DEFAULT]\n")
    assert read_back(text, tmp_path) == {
        "DEFAULT": {"debug": ["false"], "deny_name_patterns": ["infra-*,keep-*"],
                    "host": ["cmp-1"]},
        "agent": {"action_deleted": ["log"], "grace_period": ["7200"],
                  "report_file": ["/var/lib/r.json"]},
        "metrics": {"port": ["9300"], "textfile": ["$$HOME/x.prom"]},
    }  # fmt: skip


INJECTIONS = [
    pytest.param(
        {"DEFAULT": {"deny_name_patterns": ["infra-*", "x\n[agent]\naction_deleted = reap"]}},
        "nova_orphans_config.DEFAULT.deny_name_patterns[1]: the list element holds a newline",
        id="newline in a list element",
    ),
    pytest.param(
        {"agent": {"grace_period = 1\naction_deleted": "reap"}},
        "nova_orphans_config.agent: option name 'grace_period = 1\\naction_deleted' is not "
        "[a-z_][a-z0-9_]*: it holds a newline",
        id="newline in an option name",
    ),
    pytest.param(
        {"agent]\naction_deleted = reap\n[agent": {"grace_period": 1}},
        "nova_orphans_config: section 'agent]\\naction_deleted = reap\\n[agent' is not one "
        "of the tool's",
        id="newline in a section",
    ),
    pytest.param(
        {"DEFAULT": {"host": "cmp-1\raction_deleted = reap"}},
        "nova_orphans_config.DEFAULT.host: the value holds a newline",
        id="carriage return in a value",
    ),
    pytest.param(
        {"DEFAULT": {"host": "cmp-1\x0baction_deleted = reap"}},
        "nova_orphans_config.DEFAULT.host: the value holds a control character (U+000B)",
        id="vertical tab in a value",
    ),
    pytest.param(
        {"DEFAULT": {"host": "cmp-1\u2028x"}},
        "nova_orphans_config.DEFAULT.host: the value holds a control character (U+2028)",
        id="line separator in a value",
    ),
    pytest.param(
        {"DEFAULT": {"deny_name_patterns": ["a\x00b"]}},
        "nova_orphans_config.DEFAULT.deny_name_patterns[0]: the list element holds a control "
        "character (U+0000)",
        id="NUL in a list element",
    ),
    pytest.param(
        {"DEFAULT": {"deny_name_patterns": ["infra-*,*"]}},
        "nova_orphans_config.DEFAULT.deny_name_patterns[0]: a list element holds a comma",
        id="comma in a list element",
    ),
    pytest.param(
        {"agent": {"Action_deleted": "reap"}},
        "nova_orphans_config.agent: option name 'Action_deleted' is not [a-z_][a-z0-9_]*",
        id="option name outside the pattern",
    ),
    pytest.param(
        {"agent ": {"grace_period": 1}},
        "nova_orphans_config: section 'agent ' is not one of the tool's",
        id="unknown section",
    ),
    pytest.param(
        {"agent": {"state_dir": {"a": "b"}}},
        "nova_orphans_config.agent.state_dir: a value is a string, a number, a boolean or a "
        "list, not dict",
        id="mapping as a value",
    ),
    pytest.param(
        {"agent": {"state_dir": [["a"]]}},
        "nova_orphans_config.agent.state_dir[0]: a list element is a string or a number, not list",
        id="list in a list",
    ),
]


@pytest.mark.parametrize(("config", "message"), INJECTIONS)
def test_a_token_that_would_write_something_else_is_refused_naming_the_variable(config, message):
    problems = filters.config_problems(config, "nova_orphans_config")
    assert len(problems) == 1 and problems[0].startswith(message), problems
    with pytest.raises(filters.AnsibleFilterError) as refused:
        filters.to_ini(config, "nova_orphans_config")
    assert message in str(refused.value)


def test_the_named_variables_are_checked_under_their_own_names():
    assert filters.option_problems({"deleted": "log\nreap"}, "nova_orphans_actions") == [
        "nova_orphans_actions.deleted: the value holds a newline"
    ]
    assert filters.value_problems("/var/lib/x\n", "nova_orphans_report_file") == [
        "nova_orphans_report_file: the value holds a newline"
    ]
    assert filters.value_problems("/var/lib/x", "nova_orphans_report_file") == []


def test_text_that_does_not_read_back_as_meant_is_refused(monkeypatch):
    """The second line of defence: the rendered text parsed back and compared (here with a
    renderer that lets a newline through)."""
    with pytest.raises(filters.AnsibleFilterError, match="stray line"):
        filters.parse_ini("[agent]\nno equals sign\n")
    monkeypatch.setattr(filters, "_text", lambda value: f"{value}\nstate_dir = b")
    with pytest.raises(filters.AnsibleFilterError, match="v: the rendered configuration does"):
        filters.to_ini({"agent": {"state_dir": "a"}}, "v")


def test_a_header_stays_comments_whatever_it_holds(tmp_path):
    text = filters.to_ini({"agent": {"state_dir": "a"}}, "v", "x\n[agent]\rstate_dir = b\x0b")
    assert read_back(text, tmp_path) == {"agent": {"state_dir": ["a"]}}


def test_the_known_sections_are_the_tools_option_groups():
    sample = subprocess.run(
        [sys.executable, "-m", "nova_orphans.cli", "sample-config"],
        capture_output=True, text=True, check=True, cwd=tools.ROOT,
    ).stdout  # fmt: skip
    groups = {line[1:-1] for line in sample.splitlines() if line.startswith("[")}
    assert groups == filters.SECTIONS


@pytest.mark.parametrize(
    "name",
    ["cmp-1", "cmp_01", "cmp-1.example.org", "a", "1.2.3.4", "x" * 63, "..", ".", "../x",
     "a/b", "../../escape", "", "-a", "a-", "_a", "a..b", "x" * 64, "a b", "a\nb", "ä",
     ".".join(["x" * 63] * 4), "host:22", "a@b"],
)  # fmt: skip
def test_a_host_name_is_checked_as_the_tool_checks_it(name):
    try:
        check_host_name(name)
        tool_accepts = True
    except NotAHostName:
        tool_accepts = False
    problem = filters.host_name_problem(name, "the inventory name")
    assert (problem == "") is tool_accepts, problem
    if problem:
        assert problem.startswith(f"the inventory name {name!r} is not a host name (RFC 1123")


def test_the_filters_are_registered_under_their_names():
    assert set(filters.FilterModule().filters()) == {
        "config_problems", "option_problems", "value_problems", "to_ini", "host_name_problem",
    }  # fmt: skip
