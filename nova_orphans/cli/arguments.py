"""The types of the command line's arguments: each value checked as it is parsed.

NOTE: like ``commands.py`` this imports no library and none of the handlers' modules at
the top (start-up time): a check that needs the product imports it when it runs.
"""

from __future__ import annotations

import argparse
import math
import uuid as uuidlib
from collections.abc import Callable


def uuid(value: str) -> str:
    """A guest's UUID, in Nova's form."""
    try:
        return str(uuidlib.UUID(value))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a UUID") from None


def days(value: str) -> float:
    """A number of days a quarantine entry may be kept."""
    # NOTE: imported here, not at the top: only ``purge`` pays for the pure core.
    from nova_orphans.decide.policy import MAX_RETENTION_DAYS

    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of days") from None
    if not 0 <= number <= MAX_RETENTION_DAYS:  # NOTE: also refuses nan and inf
        raise argparse.ArgumentTypeError(
            f"--older-than must be between 0 and {MAX_RETENTION_DAYS} days"
        )
    return number


def host_list(value: str) -> tuple[str, ...]:
    """Comma-separated host names (RFC 1123, ``check_host_name``), each once, in their order."""
    hosts = tuple(dict.fromkeys(h.strip() for h in value.split(",") if h.strip()))
    if not hosts:
        raise argparse.ArgumentTypeError("no host names given")
    # NOTE: imported here: the parser imports none of the handlers' modules (start-up time).
    from nova_orphans.fleet.hostname import NotAHostName, check_host_name

    for host in hosts:
        try:
            check_host_name(host)
        except NotAHostName as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return hosts


def positive(kind: Callable[[str], float], maximum: float) -> Callable[[str], float]:
    """A finite number of ``kind`` greater than 0 and at most ``maximum``."""

    def parse(value: str) -> float:
        try:
            number = kind(value)
        except (ValueError, OverflowError) as exc:
            what = "a whole number" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"{value[:40]!r} is not {what}") from exc
        # NOTE: "nan" and "inf" parse as floats; neither is a count or a timeout.
        if not math.isfinite(number):
            raise argparse.ArgumentTypeError(f"{value!r} is not a finite number")
        if number <= 0:
            raise argparse.ArgumentTypeError(f"{value!r} must be greater than 0")
        if number > maximum:
            raise argparse.ArgumentTypeError(f"{value[:40]!r} must be at most {maximum:.0f}")
        return number

    parse.__name__ = kind.__name__
    return parse


def uri_template(value: str) -> str:
    """A libvirt URI template whose one placeholder is ``{host}`` (``check_uri_template``)."""
    # NOTE: imported here: the parser imports none of the handlers' modules (start-up time).
    from nova_orphans.fleet.hostname import BadURITemplate, check_uri_template

    try:
        return check_uri_template(value)
    except BadURITemplate as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
