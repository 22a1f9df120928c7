"""Set a sub-command up: load its configuration strictly and start oslo.log from it."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys

from oslo_config import cfg
from oslo_log import log as oslo_log

from nova_orphans import config, exits
from nova_orphans.cli import common, streams
from nova_orphans.cli.common import DEFAULT_CONFIG_FILE
from nova_orphans.exceptions import one_line
from nova_orphans.render import table
from nova_orphans.version import tool_version

LOG = logging.getLogger(__name__)


def load_conf(args: argparse.Namespace, agent: bool = False) -> cfg.ConfigOpts:
    """Load the config files named on the command line (or the default one if it exists),
    then set up logging from it (``agent``: the agent's, whose work is logging)."""
    conf = config.load(*config_sources(args))
    setup_logging(conf, args, agent)
    return conf


def config_sources(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """The config files and directories the command line names (the default file if none)."""
    files = args.config_files or (
        [DEFAULT_CONFIG_FILE] if os.path.exists(DEFAULT_CONFIG_FILE) else []
    )
    return files, getattr(args, "config_dirs", None) or []


def check_config(args: argparse.Namespace) -> int:
    """``check-config``: load the config files strictly, as ``run`` and ``audit`` do, build
    Nova's transport from them as they do (credentials present), and name the files;
    connects to nothing. A bad file is one line and exit 2 (``ConfigError``).

    NOTE: a deployment tool checks a new file with it before putting the file in place
    (Ansible's ``validate``), so the agent never starts on a file it would refuse: a file
    without Nova credentials (an empty one) is refused here as ``audit`` and ``run`` refuse it.
    """
    if not args.config_files and not os.path.exists(DEFAULT_CONFIG_FILE):
        raise common.UsageError(f"no config file: {DEFAULT_CONFIG_FILE} does not exist")
    conf = load_conf(args)
    from nova_orphans.observe.nova.session import transport_from_conf  # NOTE: keystoneauth

    # NOTE: in the order audit and run check them: the libvirt URI, then Nova's transport.
    config.host_settings(conf, check_uri=True)
    transport_from_conf(conf)
    _quarantine_can_be_made(conf)
    common.say(f"configuration valid: {', '.join(conf.config_file)}")
    return exits.OK


def _quarantine_can_be_made(conf: cfg.ConfigOpts) -> None:
    """The quarantine directory ``run`` makes as it starts is not under a file (checked as
    ``run`` checks it, making nothing)."""
    require_no_file_above(config.state_paths(conf).quarantine, "quarantine directory")


def require_no_file_above(path: str, what: str) -> None:
    """``ConfigError`` when an existing parent of the directory ``path`` is no directory:
    it can never be made there."""
    existing = os.path.dirname(path)
    while existing and not os.path.lexists(existing) and existing != os.path.dirname(existing):
        existing = os.path.dirname(existing)
    if existing and os.path.lexists(existing) and not os.path.isdir(existing):
        raise config.ConfigError(f"{what} {path}: {existing} is not a directory")


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
    log_file = getattr(args, "log_file", None)
    if log_file:
        conf.set_override("log_file", log_file)
    if not (conf.log_file or conf.log_config_append or conf.use_journal or conf.use_syslog):
        conf.set_override("use_stderr", True)
    if conf.use_journal and not journal_bindings():
        raise config.ConfigError(
            "[DEFAULT] use_journal = true needs the systemd Python bindings, which this "
            f"Python ({sys.executable}) cannot import: install them (Debian/Ubuntu: "
            "python3-systemd for the system Python; in a venv: pip install systemd-python, "
            "which builds against libsystemd-dev), or log with use_syslog or log_file"
        )
    try:
        oslo_log.setup(conf, "nova-orphans", version=tool_version())
    except OSError as exc:
        what = "--log-file" if log_file else "[DEFAULT] log_file"
        raise config.ConfigError(
            f"{what} {exc.filename or conf.log_file}: {exc.strerror or exc}"
        ) from exc
    except oslo_log.LogConfigError as exc:
        raise config.ConfigError(f"[DEFAULT] log_config_append: {one_line(exc)}") from exc
    keep_stdout_for_reports()
    escape_log_messages()
    streams.guard_log_handlers()
    LOG.debug("nova-orphans %s, config files: %s", tool_version(), conf.config_file or "none")
    if not agent and not conf.debug:
        for handler in logging.getLogger().handlers:
            if getattr(handler, "stream", None) is sys.stderr:
                handler.setLevel(logging.WARNING)
                handler.addFilter(_ours_or_errors)


def journal_bindings() -> bool:
    """Whether oslo.log's journal handler can run here (it needs ``systemd.journal``)."""
    try:
        importlib.import_module("systemd.journal")
    except ImportError:
        return False
    return True


def keep_stdout_for_reports() -> None:
    """Every log handler writing to standard output writes to standard error instead.

    NOTE: standard output carries the reports and their JSON, whatever the logging
    setup: oslo.log falls back to a stdout handler when neither a log file, stderr nor
    the journal is configured (``use_syslog = true`` alone, e.g. on a host without
    /dev/log), and a ``log_config_append`` file may name ``ext://sys.stdout``.
    """
    for handler in _handlers():
        if isinstance(handler, logging.StreamHandler) and handler.stream is sys.stdout:
            handler.setStream(sys.stderr)


def _handlers() -> list[logging.Handler]:
    """The handlers of the root logger and of every other logger, once each."""
    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    found: dict[int, logging.Handler] = {}
    for logger in loggers:
        for handler in getattr(logger, "handlers", ()):
            found.setdefault(id(handler), handler)
    return list(found.values())


class EscapedMessage(logging.Filter):
    """Shows the control and bidi characters of a record's message as escapes
    (``table.escape``), whatever handler writes it.

    NOTE: docs/design.md rule 20: a log line names what Nova, a guest or another host's
    report chose; raw, an ESC sequence drives the terminal that tails the log, a newline
    forges a log line and U+202E reorders one. The JSON on stdout is not logged: it stays exact.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):
            return True  # NOTE: a record whose arguments do not fit: the handler reports it
        escaped = table.escape(message)
        if escaped != message:
            record.msg, record.args = escaped, ()
        return True


def escape_log_messages() -> None:
    """Give every handler logging has (oslo.log's, or those of ``log_config_append``) the
    ``EscapedMessage`` filter, once."""
    for handler in _handlers():
        if not any(isinstance(f, EscapedMessage) for f in handler.filters):
            handler.addFilter(EscapedMessage())


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
