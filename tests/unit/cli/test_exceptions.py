"""One family of errors: every error the tool raises is a ``NovaOrphansError``, its exit code
is a name of ``exits`` and the command line maps it by ``exit_code``; no other exit-code names."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import pytest
from oslo_config import cfg

import nova_orphans
from nova_orphans import exits
from nova_orphans.cli import failures
from nova_orphans.config import ConfigError
from nova_orphans.exceptions import NovaOrphansError
from nova_orphans.observe.errors import NovaUnreachable
from nova_orphans.record.journal import JournalLocked, QuarantineBusy
from tests import tools

#: Not the product: the fakes' errors stand for another service's, the simulation's crash
#: must escape every ``except Exception``.
NOT_PRODUCT = ("nova_orphans.fakes", "nova_orphans.sim")
KNOWN_CODES = {v for k, v in vars(exits).items() if k.isupper()}


def product_errors() -> list[type[BaseException]]:
    """Every exception class defined in a product module of the package."""
    found = []
    for info in pkgutil.walk_packages(nova_orphans.__path__, "nova_orphans."):
        if info.name.startswith(NOT_PRODUCT) or info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, BaseException) and value.__module__ == info.name:
                found.append(value)
    return found


def test_every_error_the_tool_defines_is_one_family_with_a_known_exit_code():
    errors = product_errors()
    assert len(errors) > 15  # the walk found the package's errors
    outside = [e.__qualname__ for e in errors if not issubclass(e, NovaOrphansError)]
    assert outside == []
    assert {e.__qualname__: e.exit_code for e in errors if e.exit_code not in KNOWN_CODES} == {}


@pytest.mark.parametrize(
    ("error", "code", "line"),
    [
        (ConfigError("bad option"), exits.USAGE, "config error: bad option"),
        (JournalLocked("held by pid 7"), exits.USAGE, "journal error: held by pid 7"),
        (QuarantineBusy("purge under way"), exits.ERROR, "error: purge under way"),
        (
            NovaUnreachable(endpoint="http://nova", reason="timed out"),
            exits.ERROR,
            "error: Nova unreachable at http://nova: timed out",
        ),
        (
            cfg.RequiredOptError("host"),
            exits.USAGE,
            "config error: value required for option host in group [DEFAULT]",
        ),
        (RuntimeError("boom\nagain"), exits.ERROR, "unexpected error: RuntimeError: boom again"),
    ],
)
def test_a_failed_command_exits_with_its_errors_exit_code_in_one_line(error, code, line, capsys):
    assert failures.explain(error) == code
    assert capsys.readouterr().err == f"nova-orphans: {line}\n"


def test_an_error_words_its_message_from_msg_fmt_or_keeps_its_own():
    class Refused(NovaOrphansError):
        msg_fmt = "refused %(uuid)s: %(reason)s"

    worded = Refused(uuid="u1", reason="on hold")
    assert (str(worded), worded.kwargs) == (
        "refused u1: on hold",
        {"uuid": "u1", "reason": "on hold"},
    )
    assert str(Refused("as said")) == "as said"
    assert str(NovaOrphansError()) == NovaOrphansError.msg_fmt


def test_exit_codes_have_no_other_names_than_those_of_exits():
    other = re.compile(r"\bEXIT_[A-Z]+")
    sources = [
        name
        for name in tools.repository_files()
        if name.endswith((".py", ".sh")) and (tools.ROOT / name).is_file()
    ]
    named = [name for name in sources if other.search((tools.ROOT / name).read_text("utf-8"))]
    assert named == []
