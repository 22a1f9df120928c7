"""The shapes of input the tool accepts, each checked in one place: a UUID, a host name in a
command, a time, and the units. Pure.

NOTE: docs/design.md rule 20: bytes others control (Nova's, Cinder's and Neutron's answers,
a guest's metadata, a file name, another host's report) are held to these shapes before
they name anything; ``fullmatch`` everywhere, so a trailing newline is no UUID.
"""

from __future__ import annotations

import datetime
import re
from typing import Any

from oslo_utils import timeutils

#: A canonical (lower-case) UUID: the only text from a service or a file name that ever
#: goes into a printed command or a path.
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.ASCII)
#: A host name as a command line may carry it: letters, digits, dot, dash, underscore.
_PLAIN_HOST = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,252})", re.ASCII)
#: An ISO 8601 time that names its zone.
_ZONED = re.compile(r"(?:Z|[+-]\d\d(?::?\d\d)?)\Z", re.ASCII)

GIB = 1024**3
MIB = 1024**2


def is_uuid(value: Any) -> bool:
    """Whether ``value`` is a canonical UUID (text, lower case, nothing around it)."""
    return isinstance(value, str) and UUID.fullmatch(value) is not None


def plain_host(host: str | None) -> str | None:
    """``host`` when it is safe in a command line (a plain host name), else None."""
    return host if host and _PLAIN_HOST.fullmatch(host) and ".." not in host else None


def parse_time(value: Any, *, zone_required: bool = False) -> datetime.datetime:
    """An ISO 8601 time as an aware datetime (UTC when it names no zone, unless
    ``zone_required``); ``ValueError`` for anything else."""
    text = str(value)
    if zone_required and not _ZONED.search(text):
        raise ValueError(f"{text[:64]!r} names no time zone")
    try:
        parsed = timeutils.parse_isotime(text)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{text[:64]!r} is not an ISO 8601 time") from exc
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.timezone.utc)
