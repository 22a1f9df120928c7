"""Tables and text for a terminal: every command's table has a header and, unless ``--wide``,
fits ``WIDTH`` columns (long cells are cut with an ellipsis, free text is wrapped).

Every cell and every line of text is passed through ``escape`` here, at the rendering
boundary: names, reasons and host names come from Nova, from a guest's domain XML or from
another host's report, and may carry terminal escapes or bidi overrides (docs/design.md
rule 20). JSON output is never escaped (``json.dumps`` already escapes control characters).
"""

from __future__ import annotations

import dataclasses
import textwrap
from collections.abc import Sequence

#: The terminal width every table fits by default.
WIDTH = 100
#: What a cut cell ends with.
ELLIPSIS = "…"
GAP = "  "

#: Unicode's bidirectional controls: embeddings and overrides (U+202A to U+202E), isolates
#: (U+2066 to U+2069), the left-to-right and right-to-left marks and the Arabic letter mark.
BIDI_CONTROLS = (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C)
#: C0 controls, DEL, C1 controls and the bidi controls, each to its visible escape.
_ESCAPES = {
    code: f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"
    for code in (*range(0x00, 0x20), *range(0x7F, 0xA0), *BIDI_CONTROLS)
}


def escape(text: str) -> str:
    """``text`` with every control character (C0, DEL, C1) and bidi control shown as a
    visible escape (``\\x1b``, ``\\u202e``), so that it can neither drive the terminal
    nor reorder what is shown.

    NOTE: a backslash is kept as it is: the escape of an escaped text is the same
    text, so a cell passed through twice does not change.
    """
    return text.translate(_ESCAPES)


@dataclasses.dataclass(frozen=True)
class Column:
    """A column: its header and, unless ``--wide``, the most characters a cell keeps."""

    title: str
    narrow: int | None = None


def cut(text: str, width: int) -> str:
    """``text`` (escaped) in at most ``width`` characters; a longer one ends with an ellipsis."""
    text = escape(text)
    if len(text) <= width:
        return text
    return text[: max(width - len(ELLIPSIS), 0)] + ELLIPSIS


def render(
    columns: Sequence[Column], rows: Sequence[Sequence[str]], wide: bool, indent: str = ""
) -> list[str]:
    """The header and the rows, aligned; the last column is free text.

    Unless ``wide``, each cell is cut to its column's ``narrow`` width and the last
    column to what is left of ``WIDTH``, so no line is longer than ``WIDTH``.
    """
    table = [[c.title for c in columns], *[[escape(cell) for cell in r] for r in rows]]
    if not wide:
        for row in table:
            for i, column in enumerate(columns[:-1]):
                if column.narrow is not None:
                    row[i] = cut(row[i], column.narrow)
    widths = [max(len(row[i]) for row in table) for i in range(len(columns) - 1)]
    lines = []
    for row in table:
        head = GAP.join(cell.ljust(w) for cell, w in zip(row[:-1], widths, strict=True))
        last = row[-1]
        if not wide:
            last = cut(last, WIDTH - len(indent) - len(head) - len(GAP))
        lines.append(f"{indent}{head}{GAP}{last}".rstrip())
    return lines


def fit(text: str, wide: bool, indent: str = "", more: str = "    ") -> list[str]:
    """Free text as lines: as is when ``wide``, else wrapped at ``WIDTH`` (continued
    lines indented by ``more``); a word longer than a line is cut, never left to overflow.
    The text is escaped first (``escape``)."""
    text = escape(text)
    if wide:
        return [indent + text]
    return textwrap.wrap(
        text,
        WIDTH,
        initial_indent=indent,
        subsequent_indent=indent + more,
        break_on_hyphens=False,
    ) or [indent]
