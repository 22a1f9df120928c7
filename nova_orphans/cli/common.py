"""Pieces every sub-command shares: usage errors, the clock, one-line messages.

NOTE: imported by ``nova-orphans`` before it knows the sub-command, so it imports
no library: a cold run on a compute host pays only for what its sub-command uses.
"""

from __future__ import annotations

import datetime
import sys
from typing import TextIO

from nova_orphans import exits
from nova_orphans.exceptions import NovaOrphansError

#: The config file every command reads when none is named on the command line.
DEFAULT_CONFIG_FILE = "/etc/nova-orphans/nova-orphans.conf"


class UsageError(NovaOrphansError):
    """Bad command line: exit 2."""

    exit_code = exits.USAGE
    label = "usage error"


def now() -> datetime.datetime:
    """The wall clock, in UTC, to the second. The only clock the command line reads."""
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)


def say(text: str, stream: TextIO | None = None, end: str = "\n") -> None:
    """Print one line of text (stdout unless ``stream``), escaped (``table.escape``): it
    may name what Nova, a guest or another host's report chose (docs/design.md rule 20)."""
    from nova_orphans.render import table  # NOTE: here: the parser imports no module it can spare

    print(table.escape(text), file=stream or sys.stdout, end=end, flush=stream is sys.stderr)


def warn(message: str) -> None:
    """Print ``message`` as one warning line on stderr."""
    say(f"nova-orphans: warning: {message}", sys.stderr)


def fail(code: int, message: str) -> int:
    """Print ``message`` as one line on stderr (escaped, at most ``MAX_LINE`` characters)
    and return ``code``."""
    say(f"nova-orphans: {bounded(message)}", sys.stderr)
    return code


#: The most characters of an error line: a message quoting what it was given (a config
#: line of NUL bytes, a long value) says why in its first words, not in kilobytes.
MAX_LINE = 1000


def bounded(message: str, limit: int = MAX_LINE) -> str:
    """``message`` cut so that, escaped (``table.escape``), it fits in ``limit`` characters."""
    from nova_orphans.render import table

    escaped = table.escape(message)
    if len(escaped) <= limit:
        return escaped
    # NOTE: cut between the escapes of whole characters, never inside one ("\x0").
    kept, size = [], 0
    for char in message:
        shown = table.escape(char)
        if size + len(shown) > limit - 40:
            break
        kept.append(shown)
        size += len(shown)
    return f"{''.join(kept)}… ({len(escaped) - size} characters more)"
