"""The ``nova-orphans`` command line.

Exit codes: 0 nothing found, 3 orphans found, 4 the agent acted, 5 a shared volume in
danger, 1 libvirt or Nova failed, 2 usage or configuration error, 130 interrupted.
Errors are one line on stderr, whatever state the standard streams are in (``streams``).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

from nova_orphans import exits
from nova_orphans.cli import commands, common, streams
from nova_orphans.version import tool_version

#: What runs a sub-command: its parsed arguments in, the exit code out.
Handler = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every sub-command."""
    parser = commands.Parser(
        prog="nova-orphans",
        description="Find libvirt guests Nova no longer manages on a compute host, tell what "
        "kind each is, and act on them only as configured.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {tool_version()}")
    commands.register(
        parser.add_subparsers(
            dest="command", required=True, parser_class=commands.Parser, help="the sub-command"
        )
    )
    return parser


def handler(spec: str) -> Handler:
    """The function a sub-command names as ``"module:function"``, its module imported now."""
    module, _, function = spec.partition(":")
    found: Handler = getattr(importlib.import_module(module), function)
    return found


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    with streams.standard():
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    try:
        try:
            args = build_parser().parse_args(argv)
        except SystemExit:  # NOTE: --help and --version: printed, or one line if they cannot be
            streams.flush()
            raise
        code = handler(args.handler)(args)
        streams.flush()
        return code
    except common.UsageError as exc:
        return common.fail(exits.USAGE, f"usage error: {exc}")
    except streams.StreamError as exc:
        # NOTE: standard output closed, full, or its reader gone (``| head``): one line on
        # stderr, if it is open; never on standard output, whose JSON stays JSON.
        return common.fail(exits.ERROR, f"error: {exc}")
    except KeyboardInterrupt:
        # NOTE: Ctrl-C: one line, the shell's 130, no traceback (oslo.log's excepthook
        # would log one). A step under way was journaled as an intent first: the agent's
        # next start reconciles it (docs/design.md).
        return common.fail(exits.INTERRUPTED, "interrupted")
    except Exception as exc:
        # NOTE: the libraries' exception classes are imported only when one was raised:
        # a sub-command that needs neither Nova nor oslo.config does not load them.
        from nova_orphans.cli import failures

        return failures.explain(exc)


if __name__ == "__main__":
    sys.exit(main())
