"""Tables and text for a terminal: every command's table has a header and, unless ``--wide``,
fits ``WIDTH`` columns (long cells are cut with an ellipsis, free text is wrapped)."""

from __future__ import annotations

import dataclasses
import textwrap
from collections.abc import Sequence

#: The terminal width every table fits by default.
WIDTH = 100
#: What a cut cell ends with.
ELLIPSIS = "…"
GAP = "  "


@dataclasses.dataclass(frozen=True)
class Column:
    """A column: its header and, unless ``--wide``, the most characters a cell keeps."""

    title: str
    narrow: int | None = None


def cut(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters; a longer one ends with an ellipsis."""
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
    table = [[c.title for c in columns], *[list(r) for r in rows]]
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
    lines indented by ``more``); a word longer than a line is cut, never left to overflow."""
    if wide:
        return [indent + text]
    return textwrap.wrap(
        text,
        WIDTH,
        initial_indent=indent,
        subsequent_indent=indent + more,
        break_on_hyphens=False,
    ) or [indent]
