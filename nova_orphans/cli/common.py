"""Pieces every sub-command shares: the parser class, common options, config loading."""

from __future__ import annotations

import argparse
import datetime
import os
import sys
from typing import NoReturn

from oslo_config import cfg

from nova_orphans import conf as config
from nova_orphans import exits

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_FOUND, EXIT_ACTED = (
    exits.OK,
    exits.ERROR,
    exits.USAGE,
    exits.FOUND,
    exits.ACTED,
)


class UsageError(Exception):
    """Bad command line: exit 2."""


class Parser(argparse.ArgumentParser):
    """argparse, but errors are one line and exit 2 through ``main``."""

    def error(self, message: str) -> NoReturn:
        # One line, not argparse's usage dump: operators grep logs.
        raise UsageError(message)


def add_config(parser: argparse.ArgumentParser) -> None:
    """``--config-file`` (repeatable)."""
    parser.add_argument(
        "--config-file",
        action="append",
        dest="config_files",
        metavar="FILE",
        help=f"config file (default {config.DEFAULT_CONFIG_FILE} if it exists)",
    )


def add_host(parser: argparse.ArgumentParser) -> None:
    """``--host`` and ``--libvirt-uri`` overrides."""
    parser.add_argument("--host", help="compute host name as Nova knows it")
    parser.add_argument("--libvirt-uri", help="libvirt connection URI of the host")


def add_format(parser: argparse.ArgumentParser) -> None:
    """``--format table|json``."""
    parser.add_argument("--format", choices=("table", "json"), default="table")


def load_conf(args: argparse.Namespace) -> cfg.ConfigOpts:
    """Load the config files named on the command line, or the default one if it exists."""
    files = args.config_files or (
        [config.DEFAULT_CONFIG_FILE] if os.path.exists(config.DEFAULT_CONFIG_FILE) else []
    )
    return config.load(files)


def now() -> datetime.datetime:
    """The wall clock, in UTC, to the second. The only clock the command line reads."""
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)


def one_line(exc: BaseException) -> str:
    """An exception's message folded onto one line."""
    return " ".join(str(exc).split())


def fail(code: int, message: str) -> int:
    """Print ``message`` as one line on stderr and return ``code``."""
    print(f"nova-orphans: {message}", file=sys.stderr)
    return code
