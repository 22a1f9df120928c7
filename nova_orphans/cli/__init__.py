"""The ``nova-orphans`` command line.

Exit codes: 0 nothing found, 3 orphans found, 1 libvirt or Nova failed,
2 usage or configuration error. Errors are one line on stderr.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import tempfile
from collections.abc import Sequence
from typing import NoReturn

from keystoneauth1 import exceptions as ks_exc
from oslo_config import cfg

from nova_orphans import conf as config
from nova_orphans import pipeline, report
from nova_orphans.observe.errors import ObserveError
from nova_orphans.observe.nova import NovaObserver

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_FOUND = 3


class UsageError(Exception):
    """Bad command line or configuration: exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # One line, not argparse's usage dump: operators grep logs.
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every sub-command."""
    parser = _Parser(prog="nova-orphans", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    audit = commands.add_parser("audit", help="report orphan guests on this host; changes nothing")
    audit.add_argument(
        "--config-file",
        action="append",
        dest="config_files",
        metavar="FILE",
        help=f"config file (default {config.DEFAULT_CONFIG_FILE} if it exists)",
    )
    audit.add_argument("--host", help="compute host name as Nova knows it")
    audit.add_argument("--libvirt-uri", help="libvirt connection URI of the host")
    _add_format(audit)
    demo = commands.add_parser("demo", help="audit an embedded simulated cloud (no setup needed)")
    _add_format(demo)
    return parser


def _add_format(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=("table", "json"), default="table")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    try:
        args = build_parser().parse_args(argv)
        if args.command == "demo":
            return _demo(args)
        return _audit(args)
    except UsageError as exc:
        return _fail(EXIT_USAGE, f"usage error: {exc}")
    except (cfg.Error, config.ConfigError, ks_exc.ClientException) as exc:
        return _fail(EXIT_USAGE, f"config error: {_one_line(exc)}")
    except ObserveError as exc:
        # NOTE: the message names libvirt or Nova, and why; nothing was changed.
        return _fail(EXIT_ERROR, f"error: {_one_line(exc)}")


def _audit(args: argparse.Namespace) -> int:
    from nova_orphans.observe.hypervisor import LibvirtObserver
    from nova_orphans.observe.nova_session import CredentialsMissing, transport_from_conf

    conf = config.load(_config_files(args.config_files))
    settings = config.host_settings(conf, host=args.host, libvirt_uri=args.libvirt_uri)
    try:
        transport = transport_from_conf(conf)
    except CredentialsMissing as exc:
        raise config.ConfigError(str(exc)) from exc
    with LibvirtObserver.open(settings.libvirt_uri) as hypervisor:
        result = pipeline.audit(
            hypervisor, NovaObserver(transport), settings.host, _now(), settings.deny
        )
    return _print(result, args.format)


def _demo(args: argparse.Namespace) -> int:
    from nova_orphans.demo import world
    from nova_orphans.observe.hypervisor import LibvirtObserver

    with tempfile.TemporaryDirectory(prefix="nova-orphans-demo-") as directory:
        demo = world.build(directory)
        with LibvirtObserver.open(demo.libvirt_uri) as hypervisor:
            # NOTE: the simulated cloud lives at a fixed moment, so "now" is its clock.
            nova = NovaObserver(demo.nova, retry=lambda call: call())
            result = pipeline.audit(hypervisor, nova, demo.host, demo.now)
    return _print(result, args.format)


def _config_files(given: list[str] | None) -> list[str]:
    if given:
        return given
    return [config.DEFAULT_CONFIG_FILE] if os.path.exists(config.DEFAULT_CONFIG_FILE) else []


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)


def _print(result: pipeline.AuditReport, fmt: str) -> int:
    print(report.render_json(result) if fmt == "json" else report.render_table(result))
    return EXIT_FOUND if result.has_orphans else EXIT_OK


def _fail(code: int, message: str) -> int:
    print(f"nova-orphans: {message}", file=sys.stderr)
    return code


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


if __name__ == "__main__":
    sys.exit(main())
