"""Pieces every sub-command shares: usage errors, the clock, one-line errors.

NOTE: imported by ``nova-orphans`` before it knows the sub-command, so it imports
no library: a cold run on a compute host pays only for what its sub-command uses.
"""

from __future__ import annotations

import datetime
import sys

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


def one_line(exc: BaseException) -> str:
    """An exception's message folded onto one line."""
    return " ".join(str(exc).split())


def fail(code: int, message: str) -> int:
    """Print ``message`` as one line on stderr and return ``code``."""
    print(f"nova-orphans: {message}", file=sys.stderr)
    return code
