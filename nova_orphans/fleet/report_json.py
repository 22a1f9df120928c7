"""Strict JSON for the hosts' reports: what fails in one document is that document's alone.

NOTE: reports are hostile input (docs/design.md rule 20). Python's ``json`` takes what
RFC 8259 does not (``NaN``, ``Infinity``), reads ``1e999`` as infinity, raises
``ValueError`` on an integer of more than 4300 digits and ``RecursionError`` on a document
nested a few thousand deep (a few KiB, far under the size cap): each would otherwise end
the whole merge, or carry a number no host counts into it. Here each is a ``Refused``
document with its reason, and where the document ends is still known when it can be, so a
stream goes on with the next one.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

from nova_orphans.exceptions import NovaOrphansError

#: The most digits of an integer in a report: 2**64 - 1 has 20, and nothing libvirt or
#: Nova counts (bytes, vCPUs, seconds, guests) needs more.
MAX_INT_DIGITS = 20
#: The most characters of a refused number or value shown in its reason.
SHOWN = 40


class Refused(NovaOrphansError):
    """A document that is not read, and why; ``end``: where it ends in the text it was
    read from (None: it cannot be told). NOTE: never leaves the reader: it becomes that
    one report's ``BadReport``."""

    def __init__(self, reason: str, end: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.end = end


def shown(text: str, most: int = SHOWN) -> str:
    """``text`` as a reason quotes it: at most ``most`` characters, then how many more."""
    return text if len(text) <= most else f"{text[:most]}… ({len(text)} characters)"


class _Strict:
    """A decoder whose hooks note what RFC 8259 or a report has no room for, and go on
    (so the document's end is still found), in place of raising from inside ``json``."""

    def __init__(self) -> None:
        self.refused: list[str] = []
        self.decoder = json.JSONDecoder(
            parse_float=self._float, parse_int=self._int, parse_constant=self._constant
        )

    def _constant(self, name: str) -> None:
        self.refused.append(f"{name} is no JSON number")

    def _float(self, text: str) -> float | None:
        value = float(text)
        if math.isfinite(value):
            return value
        self.refused.append(f"the number {shown(text)} is out of range")
        return None

    def _int(self, text: str) -> int | None:
        if len(text.lstrip("-")) <= MAX_INT_DIGITS:
            return int(text)
        self.refused.append(f"an integer of {len(text.lstrip('-'))} digits (at most "
                            f"{MAX_INT_DIGITS})")  # fmt: skip
        return None


def decode(text: str) -> Any:
    """The one JSON document ``text`` is (blanks around it allowed, as ``json.loads``);
    raises ``json.JSONDecodeError`` (not JSON) or ``Refused``."""
    strict = _Strict()
    return _checked(strict, text, 0, lambda: (strict.decoder.decode(text), len(text)))[0]


def decode_at(text: str, position: int) -> tuple[Any, int]:
    """The JSON document starting at ``position`` of ``text`` and where it ends.

    Raises ``json.JSONDecodeError`` when the text is no JSON there (after garbage there is
    no telling where the next document starts), ``Refused`` for a document that is JSON
    but not one a report can be (with its end when it can be told).
    """
    strict = _Strict()
    return _checked(strict, text, position, lambda: strict.decoder.raw_decode(text, position))


def _checked(
    strict: _Strict, text: str, position: int, read: Callable[[], tuple[Any, int]]
) -> tuple[Any, int]:
    try:
        document, end = read()
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise Refused(
            "nested too deeply to be read (a report is a few levels deep)",
            end_of(text, position),
        ) from None
    except Exception as exc:  # NOTE: whatever else json raises is this document's alone
        raise Refused(f"not read ({failure(exc)})", end_of(text, position)) from None
    if strict.refused:
        raise Refused(f"not JSON a report can hold: {strict.refused[0]}", end)
    return document, end


def failure(exc: BaseException) -> str:
    """An exception in a few words: its type and (at most ``SHOWN`` characters of) its text."""
    return f"{type(exc).__name__}: {shown(str(exc))}" if str(exc) else type(exc).__name__


#: A JSON string (escapes included), a lone quote (a string that never ends) or a bracket.
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|["\[\]{}]', re.DOTALL)


def end_of(text: str, start: int) -> int | None:
    """Where the array or object starting at ``start`` ends (after its closing bracket),
    found without recursion; None when it does not start there or never ends.

    NOTE: only the brackets outside strings are counted: a document ``json`` cannot read
    for its depth is skipped whole, and the stream's next document is read after it.
    """
    if start >= len(text) or text[start] not in "[{":
        return None
    depth = 0
    for match in _TOKEN.finditer(text, start):
        token = match.group()
        if token[0] == '"':
            if len(token) == 1:
                return None
            continue
        depth += 1 if token in "[{" else -1
        if depth == 0:
            return match.end()
    return None
