# Copyright nova-orphans developers
# Licensed under the Apache License, Version 2.0 (https://www.apache.org/licenses/LICENSE-2.0).
"""Filters of the collection: the agent's configuration rendered by a method that cannot be
injected, and the host names that become file names on the controller.

NOTE: the configuration comes from inventory variables, the output paths from inventory names:
both are the operator's input, but a value written into an INI file or a path is code there.
A newline in any token (a section, an option name, a value, one element of a list) would write
another option (``action_deleted = reap``); a comma in a list element another element; ``..``
or ``/`` in a host name a file outside the run directory. So every token is checked before
anything is rendered, and the rendered text is parsed back and compared with what was meant.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

try:
    from ansible.errors import AnsibleFilterError
except ImportError:  # NOTE: the project's unit tests load this file without Ansible too.

    class AnsibleFilterError(Exception):  # type: ignore[no-redef]
        """Ansible's, where Ansible is not installed."""


#: The tool's option groups (``nova-orphans sample-config``; the unit tests hold the two equal,
#: and ``nova-orphans check-config`` refuses any other group as the file is written).
SECTIONS = frozenset(
    {"DEFAULT", "agent", "fleet", "leftovers", "libvirt", "metrics", "nova", "services"}
)
KEY = re.compile(r"[a-z_][a-z0-9_]*\Z", re.ASCII)
#: One label of an RFC 1123 host name, as nova_orphans/fleet/hostname.py has it (an inner
#: underscore allowed): letters, digits, inner hyphens or underscores, 1 to 63 of them.
_LABEL = re.compile(r"(?![-_])[A-Za-z0-9_-]{1,63}(?<![-_])\Z", re.ASCII)
HOST_NAME_MAX = 253


def _bad_character(text: str) -> str:
    """What makes ``text`` unfit for one line of an INI file, or ''."""
    for char in text:
        if char in "\r\n":
            return "a newline"
        if unicodedata.category(char) in ("Cc", "Zl", "Zp"):
            return f"a control character (U+{ord(char):04X})"
    return ""


def value_problems(value: Any, where: str) -> list[str]:
    """Why ``value`` (the variable or option named ``where``) cannot be one option's value: a
    string, number or boolean on one line, or a list of them without commas."""
    if isinstance(value, (int, float)):  # a boolean too
        return []
    if isinstance(value, str):
        bad = _bad_character(value)
        return [f"{where}: the value holds {bad}"] if bad else []
    if isinstance(value, Sequence):
        problems = []
        for i, element in enumerate(value):
            at = f"{where}[{i}]"
            if isinstance(element, (int, float)):
                continue
            if not isinstance(element, str):
                kind = type(element).__name__
                problems.append(f"{at}: a list element is a string or a number, not {kind}")
            elif bad := _bad_character(element):
                problems.append(f"{at}: the list element holds {bad}")
            elif "," in element:
                problems.append(f"{at}: a list element holds a comma (it would be read as two)")
        return problems
    kind = type(value).__name__
    return [f"{where}: a value is a string, a number, a boolean or a list, not {kind}"]


def option_problems(options: Any, where: str) -> list[str]:
    """Why ``options`` ({option: value}, named ``where``) cannot be written as options."""
    if not isinstance(options, Mapping):
        return [f"{where}: a mapping of options, not {type(options).__name__}"]
    problems = []
    for key, value in options.items():
        if not isinstance(key, str) or not KEY.match(key):
            bad = _bad_character(key) if isinstance(key, str) else ""
            holds = f": it holds {bad}" if bad else ""
            problems.append(f"{where}: option name {key!r} is not [a-z_][a-z0-9_]*{holds}")
            continue
        problems.extend(value_problems(value, f"{where}.{key}"))
    return problems


def config_problems(config: Any, variable: str = "nova_orphans_config") -> list[str]:
    """Why ``config`` ({section: {option: value}}, the variable named ``variable``) cannot be
    written as the tool's configuration: one line per bad token, naming the variable."""
    if not isinstance(config, Mapping):
        return [f"{variable}: a mapping of sections, not {type(config).__name__}"]
    problems = []
    for section, options in config.items():
        shown = repr(section)
        if not isinstance(section, str) or section not in SECTIONS:
            bad = _bad_character(section) if isinstance(section, str) else ""
            known = ", ".join(sorted(SECTIONS))
            holds = f": it holds {bad}" if bad else ""
            problems.append(f"{variable}: section {shown} is not one of the tool's: {known}{holds}")
            continue
        problems.extend(option_problems(options, f"{variable}.{section}"))
    return problems


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    return ",".join(_text(element) for element in value)


def parse_ini(text: str) -> dict[str, dict[str, list[str]]]:
    """The sections and options of ``text`` as an INI reader sees them line by line (comments
    and blank lines skipped; ``key = value``, the value stripped; each option's values in
    order: more than one is an option written twice)."""
    parsed: dict[str, dict[str, list[str]]] = {}
    section: dict[str, list[str]] | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", ";")):
            continue
        if stripped.startswith("[") and stripped.endswith("]"):
            section = parsed.setdefault(stripped[1:-1], {})
            continue
        key, sep, value = stripped.partition("=")
        if section is None or not sep:
            raise AnsibleFilterError(f"the rendered configuration has a stray line: {line!r}")
        section.setdefault(key.strip(), []).append(value.strip())
    return parsed


def to_ini(config: Any, variable: str = "nova_orphans_config", header: str = "") -> str:
    """``config`` as the tool's INI file, sections and options sorted; refuses (one
    AnsibleFilterError naming the variable) any token that would write something else, and
    any text that does not read back as exactly ``config``."""
    problems = config_problems(config, variable)
    if problems:
        raise AnsibleFilterError("; ".join(problems))
    lines = [f"# {line}" for line in header.splitlines()]
    for section in sorted(config):
        lines += ["", f"[{section}]"]
        lines += [f"{key} = {_text(config[section][key])}" for key in sorted(config[section])]
    text = "\n".join(lines) + "\n"
    meant = {s: {k: [_text(v).strip()] for k, v in o.items()} for s, o in config.items() if o}
    read = {s: o for s, o in parse_ini(text).items() if o}
    if read != meant:
        raise AnsibleFilterError(f"{variable}: the rendered configuration does not read back "
                                 "as the variables say")  # fmt: skip
    return text


def host_name_problem(name: Any, variable: str = "inventory_hostname") -> str:
    """Why ``name`` cannot name a host's file (not an RFC 1123 host name), or ''."""
    if (isinstance(name, str) and len(name) <= HOST_NAME_MAX
            and all(_LABEL.match(label) for label in name.split("."))):  # fmt: skip
        return ""
    return (f"{variable} {name!r} is not a host name (RFC 1123: dot-separated labels of "
            "letters, digits and inner hyphens or underscores, at most 253 characters); "
            "no file is named after it")  # fmt: skip


class FilterModule:
    """nova_orphans.fleet's filters."""

    def filters(self) -> dict[str, Any]:
        return {
            "config_problems": config_problems,
            "option_problems": option_problems,
            "value_problems": value_problems,
            "to_ini": to_ini,
            "host_name_problem": host_name_problem,
        }
