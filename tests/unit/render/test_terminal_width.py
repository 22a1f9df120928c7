"""Tables follow the terminal's width (``COLUMNS``, the terminal, else 100 columns): no line is
longer, no word is cut in two, and a long last cell several rows share is printed once."""

from __future__ import annotations

import pytest

from nova_orphans.render import table

COLUMNS = (table.Column("WHEN"), table.Column("UUID"), table.Column("DETAIL"))
UUIDS = [f"{n}1111111-2222-4333-8444-555555555555" for n in range(1, 5)]
LONG = (
    "refused: the guest's instance directory /var/lib/nova/instances/abc is on shared storage "
    "and allow_shared_storage_reap is off, so nothing was moved"
)


@pytest.mark.parametrize("columns", [80, 100, 132])
def test_no_line_is_longer_than_the_terminal_and_no_word_is_cut(monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", str(columns))
    rows = [("2026-11-01 12:00", UUIDS[0], LONG), ("2026-11-01 12:01", UUIDS[1], "stopped")]
    lines = table.render(COLUMNS, rows, wide=False)
    assert max(len(line) for line in lines) <= columns
    words = " ".join(lines).split()
    for word in LONG.split():
        assert word in words, word
    assert "…" not in " ".join(lines)


def test_a_long_reason_several_rows_share_is_printed_once(monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    rows = [("2026-11-01 12:00", u, LONG) for u in UUIDS[:3]] + [("2026-11-01", UUIDS[3], "ok")]
    text = "\n".join(table.render(COLUMNS, rows, wide=False))
    assert text.count("allow_shared_storage_reap") == 1
    assert text.count("see [1]") == 3
    assert "[1] refused: the guest's instance directory" in text


def test_without_a_terminal_or_columns_tables_fit_100(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    assert table.width() == table.WIDTH == 100
    monkeypatch.setenv("COLUMNS", "10")
    assert table.width() == table.MIN_WIDTH


def test_wide_tables_keep_every_cell_whole_on_one_line(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    rows = [("2026-11-01 12:00", u, LONG) for u in UUIDS[:2]]
    lines = table.render(COLUMNS, rows, wide=True)
    assert len(lines) == 3 and all(line.endswith("nothing was moved") for line in lines[1:])


@pytest.mark.parametrize("columns", [20, 24, 30])
def test_a_terminal_too_narrow_for_the_columns_gets_each_row_as_its_fields(monkeypatch, columns):
    """Down to 20 columns: each row's fields one per line, each after its column's title; no
    line longer than the terminal but for one word that is longer (a UUID is never cut)."""
    monkeypatch.setenv("COLUMNS", str(columns))
    rows = [("2026-11-01 12:00", UUIDS[0], LONG), ("2026-11-01 12:01", UUIDS[1], "stopped")]
    lines = table.render(COLUMNS, rows, wide=False)
    assert lines[0].startswith("WHEN 2026-11-01") and f"  UUID {UUIDS[0]}" in lines
    assert all(len(line) <= columns or len(line.split()) <= 2 for line in lines)
    words = " ".join(lines).split()
    assert all(word in words for word in LONG.split()) and UUIDS[1] in words
    assert "…" not in " ".join(lines)
