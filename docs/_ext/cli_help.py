"""The parser of ``nova-orphans``, its help texts made literal for the command-line reference.

sphinx-argparse reads every help string as reStructuredText; ours are plain text, as
``--help`` prints them (``every *.json in DIR`` would open an emphasis). So the reference
documents the product's own parser, ``nova_orphans.cli.build_parser``, with each help text's
markup characters escaped: what the page shows is what ``--help`` says.
"""

from __future__ import annotations

import argparse
import re

from nova_orphans.cli import build_parser as product_parser

#: Characters that start reStructuredText inline markup (and the escape itself).
_MARKUP = re.compile(r"([\\*`|_])")


def build_parser() -> argparse.ArgumentParser:
    """``nova-orphans``' parser, every help text escaped for reStructuredText."""
    parser = product_parser()
    _escape(parser)
    return parser


def _escape(parser: argparse.ArgumentParser) -> None:
    for action in parser._actions:
        if isinstance(action.help, str) and action.help != argparse.SUPPRESS:
            action.help = _MARKUP.sub(r"\\\1", action.help)
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                if isinstance(choice.help, str):
                    choice.help = _MARKUP.sub(r"\\\1", choice.help)
            for sub in action.choices.values():
                _escape(sub)
