"""Every sub-command's arguments, and the handler that runs it.

Each sub-command names its handler as ``"module:function"``; ``nova-orphans`` imports
that module only once the command line chose it.

NOTE: the whole command line is parsed before any handler module is imported, so
this module imports no library and none of the handlers' modules: a cold
``nova-orphans audit`` on a compute host (a cron job, the operator's tooling on
every host) does not pay for the agent, the quarantine, Prometheus or the fleet
view, and ``--version`` or ``--help`` pay for nothing.
"""

from __future__ import annotations

import argparse
from typing import Any, NoReturn

from nova_orphans import exits
from nova_orphans.cli import arguments
from nova_orphans.cli.common import DEFAULT_CONFIG_FILE, UsageError

#: The handler modules, each imported only when one of its sub-commands runs.
AUDIT = "nova_orphans.cli.audit"
AGENT = "nova_orphans.cli.agent"
JOURNAL = "nova_orphans.cli.journal"
FLEET = "nova_orphans.cli.fleet"
FILES = "nova_orphans.cli.files"
CONFIGURE = "nova_orphans.cli.configure"


#: How every ``--help`` ends: the exit codes (``exits.meanings``).
HELP_EPILOG = "exit codes:\n" + "\n".join(
    f"  {code:<4} {meaning}" for code, meaning in exits.meanings().items()
)

#: The longest ``--limit``: more events than a terminal or a script reads at once.
MAX_LIMIT = 1_000_000
#: The most hosts ``fleet audit`` scans at once (as ``[fleet] concurrency``).
MAX_CONCURRENCY = 1024
#: The longest ``--timeout`` (seconds; as ``[fleet] timeout``).
MAX_TIMEOUT = 86400.0
#: The largest ``--max-age`` (seconds; as ``[fleet] report_max_age``).
MAX_AGE = 366 * 86400


class Parser(argparse.ArgumentParser):
    """argparse, but errors are one line and exit 2 through ``main``; ``--help`` ends with
    the exit codes, and each sub-command's description is its help line."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("epilog", HELP_EPILOG)
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)
        self.register("action", "parsers", Commands)

    def error(self, message: str) -> NoReturn:
        # One line, not argparse's usage dump: operators grep logs.
        raise UsageError(message)


class Commands(argparse._SubParsersAction):  # type: ignore[type-arg]
    """Sub-commands whose ``--help`` starts with their help line as a description."""

    def add_parser(self, name: str, **kwargs: Any) -> Any:
        text = kwargs.get("help")
        if text and "description" not in kwargs:
            kwargs["description"] = f"{text[:1].upper()}{text[1:]}."
        return super().add_parser(name, **kwargs)


def register(commands: Any) -> None:
    """Add every sub-command to the ``nova-orphans`` sub-parsers ``commands``."""
    for family in (register_audit, register_agent, register_journal, register_fleet,
                   register_files, register_check):  # fmt: skip
        family(commands)


def handles(parser: argparse.ArgumentParser, module: str, function: str) -> None:
    """``parser``'s sub-command runs ``module.function(args)``, imported when it runs."""
    parser.set_defaults(handler=f"{module}:{function}")


def add_debug(parser: argparse.ArgumentParser) -> None:
    """``--debug``: log at DEBUG level (oslo.log's ``[DEFAULT] debug``)."""
    parser.add_argument(
        "--debug",
        action="store_true",
        help="log at DEBUG level (as [DEFAULT] debug = true); secrets are never logged",
    )


def add_config(parser: argparse.ArgumentParser) -> None:
    """``--config-file`` and ``--config-dir`` (repeatable, as oslo's), ``--log-file`` and
    ``--debug``."""
    add_debug(parser)
    parser.add_argument(
        "--config-file",
        action="append",
        dest="config_files",
        metavar="FILE",
        help=f"config file, repeatable, later ones win (default {DEFAULT_CONFIG_FILE} "
        "if it exists)",
    )
    parser.add_argument(
        "--config-dir",
        action="append",
        dest="config_dirs",
        metavar="DIR",
        help="directory whose *.conf files are read in name order after the config files, "
        "repeatable (as oslo services' --config-dir)",
    )
    parser.add_argument(
        "--log-file",
        metavar="PATH",
        help="log to this file (as [DEFAULT] log_file); reports stay on standard output",
    )


def add_host(parser: argparse.ArgumentParser) -> None:
    """``--host`` and ``--libvirt-uri`` overrides."""
    parser.add_argument(
        "--host", help="compute host name as Nova knows it (default: [DEFAULT] host)"
    )
    parser.add_argument(
        "--libvirt-uri",
        metavar="URI",
        help="libvirt connection URI of the host (default: [libvirt] connection_uri)",
    )


def add_format(parser: argparse.ArgumentParser) -> None:
    """``--format table|json`` and ``--wide``."""
    parser.add_argument(
        "--format",
        choices=("table", "json"),
        default="table",
        help="table for people (default), or JSON for scripts",
    )
    parser.add_argument(
        "--wide",
        action="store_true",
        help="tables with every column and the whole reason (default: they fit 100 columns)",
    )


def add_leftovers(parser: argparse.ArgumentParser) -> None:
    """``--leftovers``: list each leftover (files, port, attachment, allocation)."""
    parser.add_argument(
        "--leftovers",
        action="store_true",
        help="list every leftover with its removal command (default: one line per kind; "
        "--wide lists them too)",
    )


def register_audit(commands: Any) -> None:
    """``audit`` and ``demo``: observe and classify one host; change nothing."""
    audit = commands.add_parser("audit", help="report orphan guests on this host; changes nothing")
    add_config(audit)
    add_host(audit)
    add_format(audit)
    add_leftovers(audit)
    handles(audit, AUDIT, "run_audit")
    demo = commands.add_parser("demo", help="audit an embedded simulated cloud (no setup needed)")
    add_debug(demo)
    add_format(demo)
    add_leftovers(demo)
    handles(demo, AUDIT, "run_demo")


def register_agent(commands: Any) -> None:
    """``run``: the periodic agent (or one cycle with ``--once``)."""
    run = commands.add_parser("run", help="the agent: find orphans and act as configured")
    add_config(run)
    add_host(run)
    run.add_argument("--once", action="store_true", help="one cycle, then exit (0/3/4/1)")
    run.add_argument(
        "--dry-run",
        action="store_true",
        help="decide and journal (in the dry runs' own journal), change nothing, export no "
        "metrics (overrides the config)",
    )
    handles(run, AGENT, "run_agent")


def register_journal(commands: Any) -> None:
    """``history``, ``quarantine list``, ``restore``, ``release`` and ``purge``."""
    history = commands.add_parser("history", help="what the agent did, newest first")
    add_config(history)
    history.add_argument("--uuid", type=arguments.uuid, help="only this guest's events")
    history.add_argument(
        "--limit",
        type=arguments.positive(int, MAX_LIMIT),
        default=100,
        metavar="N",
        help=f"the newest N events (default 100, at most {MAX_LIMIT})",
    )
    add_format(history)
    handles(history, JOURNAL, "show_history")

    quarantine_cmd = commands.add_parser("quarantine", help="reaped guests kept for restore")
    sub = quarantine_cmd.add_subparsers(
        dest="quarantine_command", required=True, parser_class=Parser, help="what to do"
    )
    listing = sub.add_parser("list", help="list quarantined guests")
    add_config(listing)
    add_format(listing)
    handles(listing, JOURNAL, "list_quarantine")

    restore = commands.add_parser("restore", help="bring a reaped guest back from quarantine")
    add_config(restore)
    add_host(restore)
    restore.add_argument(
        "uuid", type=arguments.uuid, metavar="UUID", help="the reaped guest's UUID"
    )
    restore.add_argument("--start", action="store_true", help="start the guest once defined")
    restore.add_argument(
        "--force",
        action="store_true",
        help="restore (and start) even when Nova runs the server or cannot be asked",
    )
    handles(restore, JOURNAL, "restore_guest")

    release = commands.add_parser(
        "release", help="let the agent act on a guest on hold again (as a fresh finding)"
    )
    add_config(release)
    release.add_argument("uuid", type=arguments.uuid, metavar="UUID", help="the held guest's UUID")
    handles(release, JOURNAL, "release_guest")

    purge = commands.add_parser("purge", help="delete old quarantine entries for good")
    add_config(purge)
    purge.add_argument(
        "--older-than",
        type=arguments.days,
        required=True,
        metavar="DAYS",
        help="purge entries reaped at least DAYS days ago (a number, e.g. 30 or 0.5)",
    )
    purge.add_argument(
        "--dry-run", action="store_true", help="say what would be purged, delete nothing"
    )
    purge.add_argument(
        "--yes",
        action="store_true",
        help="do not ask for confirmation (asked only when standard input is a terminal)",
    )
    handles(purge, JOURNAL, "purge_quarantine")


def register_fleet(commands: Any) -> None:
    """``fleet audit``: many compute hosts at once."""
    fleet = commands.add_parser("fleet", help="audit many compute hosts at once")
    verbs = fleet.add_subparsers(
        dest="fleet_command", required=True, parser_class=type(fleet), help="what to do"
    )
    audit = verbs.add_parser("audit", help="report orphan guests on every host; changes nothing")
    add_config(audit)
    audit.add_argument(
        "--hosts",
        type=arguments.host_list,
        help="comma-separated compute hosts (default: every nova-compute host Nova lists)",
    )
    audit.add_argument(
        "--uri-template",
        type=arguments.uri_template,
        metavar="TEMPLATE",
        help="libvirt URI with {host}, e.g. qemu+tls://{host}/system "
        "(default [fleet] uri_template)",
    )
    audit.add_argument(
        "--concurrency",
        type=arguments.positive(int, MAX_CONCURRENCY),
        metavar="N",
        help=f"hosts scanned at once (default [fleet] concurrency, at most {MAX_CONCURRENCY})",
    )
    audit.add_argument(
        "--timeout",
        type=arguments.positive(float, MAX_TIMEOUT),
        metavar="SECONDS",
        help="seconds one host's scan may take (default [fleet] timeout)",
    )
    audit.add_argument(
        "--reports",
        metavar="DIR",
        help="merge the hosts' own reports (every *.json in DIR, or JSON documents on "
        "stdin with '-') instead of opening each host's libvirt",
    )
    audit.add_argument(
        "--max-age",
        type=arguments.positive(int, MAX_AGE),
        metavar="SECONDS",
        help="with --reports: seconds after which a report is stale "
        "(default [fleet] report_max_age)",
    )
    add_format(audit)
    audit.add_argument(
        "--json-file",
        metavar="PATH",
        help="also write the JSON document to PATH (whatever --format prints)",
    )
    audit.add_argument(
        "--metrics-textfile",
        metavar="PATH",
        help="also write the result as Prometheus metrics for node-exporter's textfile collector",
    )
    handles(audit, FLEET, "handle_audit")


def register_files(commands: Any) -> None:
    """``sample-config``, ``systemd-unit``, ``nova-policy``, ``alert-rules``,
    ``grafana-dashboard`` and ``report-schema``: the files the package ships."""
    sample = commands.add_parser(
        "sample-config", help="print the sample configuration (every option, with its help)"
    )
    add_debug(sample)
    handles(sample, FILES, "print_shipped")
    unit = commands.add_parser(
        "systemd-unit", help="print the systemd unit, ExecStart naming this installation"
    )
    add_debug(unit)
    unit.add_argument(
        "--executable",
        metavar="PATH",
        help="absolute path of the nova-orphans script to run (default: this one)",
    )
    handles(unit, FILES, "print_systemd_unit")
    policy = commands.add_parser(
        "nova-policy",
        help="print the Nova policy rules for least-privilege credentials "
        "(role nova-orphans-reader; for nova-api's policy.d)",
    )
    add_debug(policy)
    handles(policy, FILES, "print_shipped")
    rules = commands.add_parser(
        "alert-rules", help="print the Prometheus alert rules (for rule_files: in prometheus.yml)"
    )
    add_debug(rules)
    rules.add_argument(
        "--runbook-base",
        metavar="URL",
        help="where the documentation is published: each alert's runbook_url becomes "
        "absolute under it (default: relative to the documentation's root)",
    )
    handles(rules, FILES, "print_alert_rules")
    dashboard = commands.add_parser(
        "grafana-dashboard", help="print the Grafana dashboard (JSON, to import)"
    )
    add_debug(dashboard)
    handles(dashboard, FILES, "print_shipped")
    schema = commands.add_parser(
        "report-schema", help="print the JSON schema of 'audit --format json' and the report file"
    )
    add_debug(schema)
    handles(schema, FILES, "print_shipped")


def register_check(commands: Any) -> None:
    """``check-config``: load the configuration as every command does, and say so."""
    check = commands.add_parser(
        "check-config",
        help="check the configuration strictly, as every command loads it; connects to nothing",
    )
    add_config(check)
    handles(check, CONFIGURE, "check_config")
