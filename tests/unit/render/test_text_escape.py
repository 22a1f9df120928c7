"""Every table and line of text shows control characters and bidi controls as escapes.

docs/design.md rule 20: names and reasons come from Nova, from a guest's domain XML and
from other hosts' reports; printed raw, an ESC/OSC sequence drives the operator's
terminal and U+202E reorders what is shown. JSON output keeps every string exactly.
"""

from __future__ import annotations

import json

import pytest

from nova_orphans import exits
from nova_orphans.cli import common
from nova_orphans.render import host as render_host
from nova_orphans.render import table

CONTROLS = {
    "ESC (an OSC title sequence)": ("\x1b]0;pwned\x07", "\\x1b]0;pwned\\x07"),
    "NUL": ("\x00", "\\x00"),
    "a newline": ("a\nb", "a\\x0ab"),
    "a carriage return": ("ok\rFAKE", "ok\\x0dFAKE"),
    "a tab": ("a\tb", "a\\x09b"),
    "DEL": ("\x7f", "\\x7f"),
    "C1 CSI": ("\x9b2J", "\\x9b2J"),
    "C1 NEL": ("\x85", "\\x85"),
    "right-to-left override": ("exe.\u202etxt", "exe.\\u202etxt"),
    "left-to-right embedding": ("\u202a", "\\u202a"),
    "pop directional formatting": ("\u202c", "\\u202c"),
    "first strong isolate": ("\u2068", "\\u2068"),
    "pop directional isolate": ("\u2069", "\\u2069"),
    "left-to-right mark": ("\u200e", "\\u200e"),
    "right-to-left mark": ("\u200f", "\\u200f"),
    "Arabic letter mark": ("\u061c", "\\u061c"),
}


@pytest.mark.parametrize(("raw", "shown"), CONTROLS.values(), ids=CONTROLS.keys())
def test_a_control_character_is_shown_as_its_escape(raw: str, shown: str) -> None:
    assert table.escape(raw) == shown
    assert table.escape(shown) == shown  # escaping twice changes nothing


def test_printable_text_is_left_alone() -> None:
    text = "instance-0000002a é ü 中文 \\x1b (already escaped) ✓"
    assert table.escape(text) == text


def test_tables_and_wrapped_text_escape_every_cell() -> None:
    columns = (table.Column("KIND", 11), table.Column("NAME", 20), table.Column("REASON"))
    rows = [("deleted", "i-\x1b[2J", "gone \u202eexe.txt")]
    for wide in (False, True):
        lines = table.render(columns, rows, wide) + table.fit("note: \x1b]8;;http://x\x07", wide)
        text = "\n".join(lines)
        assert not [c for c in text if c != "\n" and ord(c) < 0x20]
        assert "\u202e" not in text
        assert "i-\\x1b[2J" in text and "gone \\u202eexe.txt" in text
        assert "note: \\x1b]8;;http://x\\x07" in text


def test_a_cut_cell_is_escaped_before_it_is_cut() -> None:
    """The ellipsis never cuts an escape in two before its characters are counted."""
    assert table.cut("\x1b" * 3, 8) == "\\x1b\\x1…"


def test_error_and_warning_lines_are_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    assert common.fail(exits.ERROR, "host \x1b]0;X\x07 refused") == exits.ERROR
    common.warn("identity: \u202eevil")
    common.say("released \x9b")
    out, err = capsys.readouterr()
    assert err == "nova-orphans: host \\x1b]0;X\\x07 refused\nnova-orphans: warning: identity: "\
        "\\u202eevil\n"  # fmt: skip
    assert out == "released \\x9b\n"


def test_json_keeps_every_string_exactly() -> None:
    hostile = "i-\x1b]0;X\x07 \u202e \x9b"
    document = json.loads(render_host.versioned_json({"name": hostile}, []))
    assert document["name"] == hostile
