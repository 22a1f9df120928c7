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
    """Print ``message`` as one line on stderr (escaped) and return ``code``."""
    say(f"nova-orphans: {message}", sys.stderr)
    return code
