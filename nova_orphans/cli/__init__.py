"""The ``nova-orphans`` command line.

Exit codes: 0 nothing found, 3 orphans found, 4 the agent acted, 1 libvirt or
Nova failed, 2 usage or configuration error. Errors are one line on stderr.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from keystoneauth1 import exceptions as ks_exc
from oslo_config import cfg

from nova_orphans import conf as config
from nova_orphans.act.effects import EffectError
from nova_orphans.cli import agent, audit, common, files, fleet, journal
from nova_orphans.cli.common import (  # noqa: F401
    EXIT_ERROR,
    EXIT_FOUND,
    EXIT_OK,
    EXIT_SHARED_VOLUME,
    EXIT_USAGE,
)
from nova_orphans.observe.errors import ObserveError
from nova_orphans.record.journal import JournalError, QuarantineBusy
from nova_orphans.version import tool_version

LOG = logging.getLogger(__name__)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every sub-command."""
    parser = common.Parser(prog="nova-orphans", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"%(prog)s {tool_version()}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=common.Parser)
    for module in (audit, agent, journal, fleet, files):
        module.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    try:
        args = build_parser().parse_args(argv)
        code: int = args.handler(args)
        return code
    except common.UsageError as exc:
        return common.fail(EXIT_USAGE, f"usage error: {exc}")
    except (cfg.Error, config.ConfigError, ks_exc.ClientException) as exc:
        return common.fail(EXIT_USAGE, f"config error: {common.one_line(exc)}")
    except QuarantineBusy as exc:
        return common.fail(EXIT_ERROR, f"error: {common.one_line(exc)}")
    except JournalError as exc:
        # NOTE: the journal's path is configuration; an agent that cannot record stops.
        return common.fail(EXIT_USAGE, f"journal error: {common.one_line(exc)}")
    except (ObserveError, EffectError) as exc:
        # NOTE: the message names libvirt or Nova, and why.
        return common.fail(EXIT_ERROR, f"error: {common.one_line(exc)}")
    except Exception as exc:
        # NOTE: never a traceback on the operator's terminal (docs/design.md rule 9);
        # it goes to the log at DEBUG, for a bug report.
        LOG.debug("unexpected error", exc_info=True)
        return common.fail(
            EXIT_ERROR, f"unexpected error: {type(exc).__name__}: {common.one_line(exc)}"
        )


if __name__ == "__main__":
    sys.exit(main())
