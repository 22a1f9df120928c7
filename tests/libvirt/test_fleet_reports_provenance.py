"""``fleet audit --reports``: a report counts only for the host its source says, and what
fails in one report fails that report alone (docs/design.md §9, rule 20).

The fleet: a guest running on cmp-1 (where Nova has it) and on cmp-2 is real split-brain;
cmp-3's report is the hostile or broken one. Whatever cmp-3's report holds, cmp-1's and
cmp-2's split-brain is still told, cmp-3 is not merged, and the fleet exits 1 with one line.
"""

from __future__ import annotations

import json

import pytest

from nova_orphans import exits
from nova_orphans.fleet import reports
from tests.libvirt.test_fleet_reports_test_driver import (
    SPLIT,
    Cloud,
    by_host,
    cloud,
    domain,
    enveloped,
    healthy,
    on_stdin,
    one_line,
    report_of,
)

__all__ = ["cloud"]  # the fixture this module uses

#: A healthy server of cmp-1, Nova's and running there only.
HEALTHY = "bbbbbbbb-0000-4000-8000-00000000000b"


def split_brain_on_1_and_2(cloud: Cloud) -> None:
    """SPLIT runs on cmp-1 and cmp-2 (Nova places it on cmp-1); cmp-3's report is clean."""
    cloud.nova.boot("cmp-1", "split", SPLIT)
    cloud.audit("cmp-1", [*healthy(cloud, "cmp-1"), domain(SPLIT)])
    cloud.audit("cmp-2", [*healthy(cloud, "cmp-2"), domain(SPLIT)])
    cloud.audit("cmp-3", healthy(cloud, "cmp-3"))


def the_split_brain_is_told(document: dict) -> None:
    (split,) = document["split_brain"]
    assert split["uuid"] == SPLIT and split["running_on"] == ["cmp-1", "cmp-2"]
    assert by_host(document)["cmp-1"]["status"] == by_host(document)["cmp-2"]["status"]
    assert by_host(document)["cmp-2"]["status"] == "trusted"


# --- provenance ---------------------------------------------------------------------------------


def forged_by_cmp_3(cloud: Cloud) -> str:
    """cmp-3 (taken over) writes a report saying it is cmp-2, that cmp-1's healthy server
    runs there too, and that its identity is verified; cmp-2 itself is unreachable (no
    report). Returns the forged report; cmp-1's real one is in the directory."""
    cloud.nova.boot("cmp-1", "healthy", HEALTHY)
    cloud.audit("cmp-1", [*healthy(cloud, "cmp-1"), domain(HEALTHY)])
    forged = json.dumps(cloud.audit("cmp-2", [domain(HEALTHY)]))
    (cloud.reports / "cmp-2.json").unlink()
    return forged


def test_a_file_naming_another_host_inside_is_neither_hosts_report(cloud, capsys):
    """The bug: cmp-3.json (Ansible named it after the host it fetched it from) said it was
    cmp-2's, and was merged as cmp-2's trusted report while cmp-2 was unreachable: a
    SPLIT-BRAIN of cmp-1's healthy server. Now the file is bad, listed with why; cmp-2 and
    cmp-3 are missing; no split-brain; exit 1."""
    forged = forged_by_cmp_3(cloud)
    (cloud.reports / "cmp-3.json").write_text(forged)
    code, document, err = cloud.fleet(capsys)
    assert code == exits.ERROR, err
    assert document["split_brain"] == []
    line = one_line(err)
    assert "cmp-2 missing; cmp-3 missing;" in line
    assert ("cmp-3.json unreadable (names host 'cmp-2' inside, but its file name says cmp-3: "
            "a report counts only for the host its source says; not merged)") in line  # fmt: skip
    (bad,) = document["unreadable"]
    assert bad["source"] == "cmp-3.json" and "names host 'cmp-2' inside" in bad["reason"]
    statuses = {h["host"]: h["status"] for h in document["hosts"]}
    assert statuses == {"cmp-1": "trusted", "cmp-2": "missing", "cmp-3": "missing"}


def test_an_envelope_from_one_host_holding_anothers_report_is_neither_hosts(
    cloud, capsys, monkeypatch
):
    """On stdin the envelope's source is the host it came from: cmp-3's output saying it is
    cmp-2 is bad, cmp-2 and cmp-3 missing, no split-brain; exit 1."""
    forged = forged_by_cmp_3(cloud)
    stream = [enveloped("cmp-1", report_of(cloud, "cmp-1")), enveloped("cmp-3", forged)]
    code, document, err = on_stdin(cloud, capsys, monkeypatch, *stream)
    assert code == exits.ERROR, err
    assert document["split_brain"] == []
    assert ("stdin #2 from cmp-3 unreadable (names host 'cmp-2' inside, but its envelope's "
            "source says cmp-3") in one_line(err)  # fmt: skip
    assert by_host(document)["cmp-2"]["status"] == by_host(document)["cmp-3"]["status"]
    assert by_host(document)["cmp-3"]["status"] == "missing"


@pytest.mark.parametrize(
    ("name", "host", "words"),
    [
        (
            "cmp 3.json",
            "cmp-3",
            "cmp 3.json unreadable (not named HOST.json ('cmp 3' is no "
            "host name): whose report it is cannot be told; not read)",
        ),
        (
            "cmp-3.json",
            "cmp-3/system?x",
            "cmp-3.json unreadable (names host 'cmp-3/system?x', which is no host name)",
        ),
    ],
    ids=["a file named after no host", "a report naming no host name"],
)
def test_the_host_of_the_file_name_and_inside_must_be_host_names(cloud, capsys, name, host, words):
    split_brain_on_1_and_2(cloud)
    real = json.loads(report_of(cloud, "cmp-3"))
    (cloud.reports / "cmp-3.json").unlink()
    (cloud.reports / name).write_text(json.dumps(real | {"host": host}))
    code, document, err = cloud.fleet(capsys)
    assert code == exits.ERROR, err
    assert words in one_line(err)
    assert by_host(document)["cmp-3"]["status"] == "missing"
    assert host not in by_host(document) or host == "cmp-3"
    the_split_brain_is_told(document)


# --- one report's failure is that report's alone -----------------------------------------------


CANNOT = "not JSON a report can hold:"


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def with_usage(cloud: Cloud, number: str) -> str:
    """cmp-3's real report, one finding of it using ``number`` bytes of memory (raw JSON)."""
    document = json.loads(report_of(cloud, "cmp-3"))
    document["findings"] = [{"uuid": HEALTHY, "name": "i", "kind": "deleted", "reason": "r",
                             "usage": {"memory_bytes": "@NUMBER@"}}]  # fmt: skip
    return json.dumps(document).replace('"@NUMBER@"', number)


#: What cmp-3.json holds, and the reason it is refused.
BROKEN = {
    "a nesting bomb far under the size cap": (
        lambda _: nested(200_000),
        "nested too deeply to be read (a report is a few levels deep)",
    ),
    "NaN": (lambda c: with_usage(c, "NaN"), f"{CANNOT} NaN is no JSON number"),
    "-Infinity": (
        lambda c: with_usage(c, "-Infinity"),
        f"{CANNOT} -Infinity is no JSON number",
    ),
    "1e999": (
        lambda c: with_usage(c, "1e999"),
        f"{CANNOT} the number 1e999 is out of range",
    ),
    "a 10,000-digit integer": (
        lambda c: with_usage(c, "9" * 10_000),
        f"{CANNOT} an integer of 10000 digits (at most 20)",
    ),
}


@pytest.mark.parametrize(("make", "reason"), BROKEN.values(), ids=BROKEN.keys())
def test_a_report_json_cannot_read_fails_alone_and_the_split_brain_is_told(
    cloud, capsys, make, reason
):
    """The bug: a 400 KB nesting bomb ended the whole merge with "unexpected error"
    (RecursionError), and 1e999 or a 10,000-digit integer did too (OverflowError,
    ValueError); NaN was merged as no number. Now that file is bad and the others merged."""
    split_brain_on_1_and_2(cloud)
    text = make(cloud)
    assert len(text) < reports.REPORT_MAX_BYTES
    (cloud.reports / "cmp-3.json").write_text(text)
    code, document, err = cloud.fleet(capsys)
    assert code == exits.ERROR, err
    assert f"cmp-3 missing; cmp-3.json unreadable ({reason})" in one_line(err)
    assert document["unreadable"] == [{"source": "cmp-3.json", "reason": reason}]
    the_split_brain_is_told(document)


def test_a_nesting_bomb_on_stdin_fails_alone_and_the_next_report_is_read(
    cloud, capsys, monkeypatch
):
    """On stdin the bomb is skipped whole (its end found without recursion): the report
    after it is read, and the split-brain is told."""
    split_brain_on_1_and_2(cloud)
    stream = [enveloped("cmp-1", report_of(cloud, "cmp-1")), nested(200_000),
              enveloped("cmp-2", report_of(cloud, "cmp-2"))]  # fmt: skip
    code, document, err = on_stdin(cloud, capsys, monkeypatch, *stream)
    assert code == exits.ERROR, err
    assert "cmp-3 missing; stdin #2 unreadable (nested too deeply to be read" in one_line(err)
    the_split_brain_is_told(document)


def test_any_exception_reading_one_report_fails_that_report_alone(cloud, capsys, monkeypatch):
    """Whatever raises while one report is read (here an error put in the reader for
    cmp-3.json) makes that report bad, with its type and text; the merge completes."""
    split_brain_on_1_and_2(cloud)
    real = reports.parse_document

    def failing(document, source):  # type: ignore[no-untyped-def]
        if source.startswith("cmp-3") or source.endswith("from cmp-3"):
            raise RuntimeError("injected")
        return real(document, source)

    monkeypatch.setattr(reports, "parse_document", failing)
    code, document, err = cloud.fleet(capsys)
    assert code == exits.ERROR, err
    assert "cmp-3 missing; cmp-3.json unreadable (could not be read (RuntimeError: injected))" in (
        one_line(err)
    )
    the_split_brain_is_told(document)
    stream = [enveloped(h, report_of(cloud, h)) for h in ("cmp-1", "cmp-3", "cmp-2")]
    code, document, err = on_stdin(cloud, capsys, monkeypatch, *stream)
    assert code == exits.ERROR, err
    assert "stdin #2 unreadable (could not be read (RuntimeError: injected))" in one_line(err)
    the_split_brain_is_told(document)
