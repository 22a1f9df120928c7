"""Tables and text for a terminal: every command's table has a header and, unless ``--wide``,
fits the terminal's width (``width``: ``COLUMNS``, the terminal, else ``WIDTH``): narrow cells
are cut with an ellipsis, the last column and free text are wrapped at word boundaries, and a
long last cell that several rows share is printed once, as a note under the table.

Every cell and every line of text is passed through ``escape`` here, at the rendering
boundary: names, reasons and host names come from Nova, from a guest's domain XML or from
another host's report, and may carry terminal escapes or bidi overrides (docs/design.md
rule 20). JSON output is never escaped (``json.dumps`` already escapes control characters).
"""

from __future__ import annotations

import dataclasses
import os
import sys
import textwrap
from collections.abc import Sequence

#: The width every table fits when the output is no terminal and ``COLUMNS`` says nothing.
WIDTH = 100
#: The narrowest width followed: below it, lines are laid out for this many columns.
MIN_WIDTH = 20
#: The fewest columns the last cell of a row keeps beside the others: with less room, each
#: row is laid out as its fields, one per line, each with its column's title.
MIN_ROOM = 16
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


def width() -> int:
    """The columns a table fits: ``COLUMNS`` when set (as ``shutil.get_terminal_size``
    reads it), else the terminal's standard output is, else ``WIDTH``; at least
    ``MIN_WIDTH``."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return max(int(columns), MIN_WIDTH)
    try:
        if sys.stdout.isatty():
            return max(os.get_terminal_size(sys.stdout.fileno()).columns, MIN_WIDTH)
    except (OSError, ValueError, AttributeError):
        pass
    return WIDTH


def render(
    columns: Sequence[Column], rows: Sequence[Sequence[str]], wide: bool, indent: str = ""
) -> list[str]:
    """The header and the rows, aligned; the last column is free text.

    Unless ``wide``, each cell is cut to its column's ``narrow`` width and the last column
    wrapped at word boundaries into what is left of ``width()``, so no line is longer; a
    last cell too long for its line that several rows share is printed once, as a note
    (``[1] ...``) under the table, and those rows say ``see [1]``.
    """
    table = [[c.title for c in columns], *[[escape(cell) for cell in r] for r in rows]]
    if not wide:
        for row in table:
            for i, column in enumerate(columns[:-1]):
                if column.narrow is not None:
                    row[i] = cut(row[i], column.narrow)
    widths = [max(len(row[i]) for row in table) for i in range(len(columns) - 1)]
    heads = [GAP.join(cell.ljust(w) for cell, w in zip(row[:-1], widths, strict=True))
             for row in table]  # fmt: skip
    if wide:
        return [f"{indent}{h}{GAP}{row[-1]}".rstrip() for h, row in zip(heads, table, strict=True)]
    room = width() - len(indent) - len(heads[0]) - len(GAP)
    if room < MIN_ROOM:
        return _stacked(columns, table[1:], indent)
    notes = _notes([row[-1] for row in table[1:]], room)
    lines = []
    for head, row in zip(heads, table, strict=True):
        last = row[-1] if row is table[0] else _noted(row[-1], notes)
        lines += _wrapped_row(f"{indent}{head}{GAP}", last, room)
    for text, number in notes.items():
        lines += fit(f"[{number}] {text}", False, indent)
    return lines


def _stacked(columns: Sequence[Column], rows: list[list[str]], indent: str) -> list[str]:
    """Each row as its fields, one per line under the first, each after its column's title:
    how a table reads on a terminal too narrow for its columns side by side.

    NOTE: a UUID or a path is never cut there: a field's words wrap, each whole.
    """
    lines: list[str] = []
    for row in rows:
        for i, (column, cell) in enumerate(zip(columns, row, strict=True)):
            lead = indent if i == 0 else indent + "  "
            lines += _wrapped_field(f"{lead}{column.title} ", cell)
    return lines


def _wrapped_field(head: str, cell: str) -> list[str]:
    """``head`` then ``cell``'s words, wrapped at ``width()``; a word longer than a line on a
    line of its own (never cut: a UUID is copied from here)."""
    room = width() - len(head)
    if len(cell) <= room:
        return [f"{head}{cell}".rstrip()]
    parts = textwrap.wrap(cell, max(room, 1), break_long_words=False, break_on_hyphens=False)
    more = " " * len(head)
    return [f"{head}{parts[0]}".rstrip(), *(more + part for part in parts[1:])] if parts else [head]


def _notes(cells: list[str], room: int) -> dict[str, int]:
    """The long last cells (too long for ``room`` and for ``MIN_WIDTH``) that more than one
    row shares, numbered; a short one is wrapped in place."""
    counts: dict[str, int] = {}
    for cell in cells:
        if len(cell) > max(room, MIN_WIDTH):
            counts[cell] = counts.get(cell, 0) + 1
    shared = [cell for cell in dict.fromkeys(cells) if counts.get(cell, 0) > 1]
    return {cell: number for number, cell in enumerate(shared, 1)}


def _noted(cell: str, notes: dict[str, int]) -> str:
    return f"see [{notes[cell]}]" if cell in notes else cell


def _wrapped_row(head: str, last: str, room: int) -> list[str]:
    """``head`` and ``last``, the last wrapped into ``room`` columns under itself; with no
    room to speak of, on lines of their own below the head."""
    if len(last) <= room:
        return [f"{head}{last}".rstrip()]
    if room < MIN_WIDTH // 2 or any(len(word) > room for word in last.split()):
        # NOTE: a UUID or a path is never broken in two: the text gets lines of its own.
        return [head.rstrip(), *fit(last, False, "    ", more="")]
    parts = textwrap.wrap(last, room, break_on_hyphens=False) or [""]
    return [f"{head}{parts[0]}".rstrip(), *(" " * len(head) + part for part in parts[1:])]


def fit(text: str, wide: bool, indent: str = "", more: str = "    ") -> list[str]:
    """Free text as lines: as is when ``wide``, else wrapped at ``WIDTH`` (continued
    lines indented by ``more``); a word longer than a line is cut, never left to overflow.
    The text is escaped first (``escape``)."""
    text = escape(text)
    if wide:
        return [indent + text]
    return textwrap.wrap(
        text,
        width(),
        initial_indent=indent,
        subsequent_indent=indent + more,
        break_on_hyphens=False,
    ) or [indent]
