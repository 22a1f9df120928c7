"""Pieces every sub-command shares: the parser class, common options, config loading."""

from __future__ import annotations

import argparse
import datetime
import logging
import os
import sys
from typing import NoReturn

from oslo_config import cfg
from oslo_log import log as oslo_log

from nova_orphans import conf as config
from nova_orphans import exits
from nova_orphans.version import tool_version

LOG = logging.getLogger(__name__)

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_FOUND, EXIT_ACTED, EXIT_SHARED_VOLUME = (
    exits.OK,
    exits.ERROR,
    exits.USAGE,
    exits.FOUND,
    exits.ACTED,
    exits.SHARED_VOLUME,
)


class UsageError(Exception):
    """Bad command line: exit 2."""


class Parser(argparse.ArgumentParser):
    """argparse, but errors are one line and exit 2 through ``main``."""

    def error(self, message: str) -> NoReturn:
        # One line, not argparse's usage dump: operators grep logs.
        raise UsageError(message)


def add_debug(parser: argparse.ArgumentParser) -> None:
    """``--debug``: log at DEBUG level (oslo.log's ``[DEFAULT] debug``)."""
    parser.add_argument(
        "--debug",
        action="store_true",
        help="log at DEBUG level (as [DEFAULT] debug = true); secrets are never logged",
    )


def add_config(parser: argparse.ArgumentParser) -> None:
    """``--config-file`` (repeatable) and ``--debug``."""
    add_debug(parser)
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
    """``--format table|json`` and ``--wide``."""
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.add_argument(
        "--wide",
        action="store_true",
        help="tables with every column and the whole reason (default: they fit 100 columns)",
    )


def load_conf(args: argparse.Namespace, agent: bool = False) -> cfg.ConfigOpts:
    """Load the config files named on the command line (or the default one if it exists),
    then set up logging from it (``agent``: the agent's, whose work is logging)."""
    files = args.config_files or (
        [config.DEFAULT_CONFIG_FILE] if os.path.exists(config.DEFAULT_CONFIG_FILE) else []
    )
    conf = config.load(files)
    setup_logging(conf, args, agent)
    return conf


def setup_logging(conf: cfg.ConfigOpts, args: argparse.Namespace, agent: bool = False) -> None:
    """oslo.log from ``conf`` and ``--debug``, as every OpenStack service sets it up.

    The agent logs at INFO; the other commands print their result and show only
    warnings on stderr unless ``--debug`` (a log file still gets everything).

    NOTE: with no log destination configured, oslo.log would log to stdout, where
    the reports and JSON go: the tool logs to stderr instead. A log file or
    directory that cannot be opened is a config error (one line, exit 2).
    """
    if getattr(args, "debug", False):
        conf.set_override("debug", True)
    if not (conf.log_file or conf.log_config_append or conf.use_journal or conf.use_syslog):
        conf.set_override("use_stderr", True)
    try:
        oslo_log.setup(conf, "nova-orphans", version=tool_version())
    except OSError as exc:
        raise config.ConfigError(
            f"[DEFAULT] log_file {exc.filename or conf.log_file}: {exc.strerror or exc}"
        ) from exc
    except oslo_log.LogConfigError as exc:
        raise config.ConfigError(f"[DEFAULT] log_config_append: {one_line(exc)}") from exc
    LOG.debug("nova-orphans %s, config files: %s", tool_version(), conf.config_file or "none")
    if not agent and not conf.debug:
        for handler in logging.getLogger().handlers:
            if getattr(handler, "stream", None) is sys.stderr:
                handler.setLevel(logging.WARNING)
                handler.addFilter(_ours_or_errors)


def _ours_or_errors(record: logging.LogRecord) -> bool:
    """On a command's stderr: our warnings, and only errors from the libraries.

    NOTE: e.g. keystoneauth warns before the failure we report anyway, in one line.
    """
    return record.name.startswith("nova_orphans") or record.levelno >= logging.ERROR


def logging_conf() -> cfg.ConfigOpts:
    """oslo.log's options alone, at their defaults: for commands that read no config."""
    conf = cfg.ConfigOpts()
    oslo_log.register_options(conf)
    conf(args=[], default_config_files=[], default_config_dirs=[])
    return conf


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
