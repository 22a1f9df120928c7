"""Reading the hosts' reports (``fleet/reports.py``, ``fleet/report_json.py``): a report is
its source's host's only, and what fails in one report fails it alone (docs/design.md §9)."""

from __future__ import annotations

import io
import json
import pathlib

import pytest

from nova_orphans.fleet import report_json, reports
from nova_orphans.fleet.records import BadReport, PerHostReport
from nova_orphans.model import Kind

#: The least a host's report holds by the schema (docs/schema/report.schema.json).
REPORT = {
    "schema_version": 1,
    "tool_version": "0.1.0",
    "host": "cmp-1",
    "checked_at": "2026-01-01T00:00:00+00:00",
    "domains": [],
    "findings": [],
    "counts": {kind.value: 0 for kind in Kind},
}


def of(host: str, **fields: object) -> dict:
    return REPORT | {"host": host, **fields}


def in_directory(tmp_path: pathlib.Path, files: dict[str, str]) -> dict[str, object]:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return {p.source: p for p in reports.read_directory(str(tmp_path))}


def streamed(*documents: str) -> list[reports.Parsed]:
    return reports.read_stream(io.StringIO("\n".join(documents)))


def envelope(source: object, report: object) -> str:
    return json.dumps({"source": source, "report": report})


def reasons(parsed: list[reports.Parsed]) -> list[str]:
    return [p.reason if isinstance(p, BadReport) else f"report of {p.host}" for p in parsed]


def test_a_file_is_the_report_of_the_host_its_name_says(tmp_path):
    read = in_directory(tmp_path, {"cmp-1.json": json.dumps(of("cmp-1")),
                                   "cmp-2.json": json.dumps(of("cmp-1"))})  # fmt: skip
    assert isinstance(read["cmp-1.json"], PerHostReport) and read["cmp-1.json"].host == "cmp-1"
    bad = read["cmp-2.json"]
    assert isinstance(bad, BadReport) and bad.host is None  # cmp-2 is missing, cmp-1 told nothing
    assert bad.reason == ("names host 'cmp-1' inside, but its file name says cmp-2: a report "
                          "counts only for the host its source says; not merged")  # fmt: skip


def test_a_bad_report_of_the_host_its_name_says_is_that_hosts_and_of_another_no_ones(tmp_path):
    read = in_directory(tmp_path, {"cmp-1.json": json.dumps(of("cmp-1", domains=7)),
                                   "cmp-2.json": json.dumps(of("cmp-1", domains=7))})  # fmt: skip
    assert read["cmp-1.json"] == BadReport("cmp-1.json", "domains: 7 is not of type array", "cmp-1")
    assert isinstance(read["cmp-2.json"], BadReport) and read["cmp-2.json"].host is None
    assert "names host 'cmp-1' inside" in read["cmp-2.json"].reason


@pytest.mark.parametrize("name", ["cmp 1.json", "cmp-1..json", "-cmp.json", f"{'a' * 64}.json"])
def test_a_file_named_after_no_host_name_is_not_read(tmp_path, name):
    (bad,) = in_directory(tmp_path, {name: json.dumps(of(name[: -len(".json")]))}).values()
    assert isinstance(bad, BadReport) and bad.host is None
    assert "not named HOST.json" in bad.reason and "is no host name" in bad.reason


@pytest.mark.parametrize(
    "host", ["cmp-1/system?command=x", "root@cmp-1", "cmp-1:22", "../x", "x" * 300]
)
def test_a_report_naming_no_host_name_is_bad(host):
    bad = reports.parse_document(of(host), "cmp-1.json")
    assert isinstance(bad, BadReport) and bad.host is None
    assert "which is no host name" in bad.reason and len(bad.reason) < 120


def test_on_stdin_a_report_counts_only_in_its_envelope_from_its_host():
    parsed = streamed(
        envelope("cmp-1", of("cmp-1")),
        json.dumps(of("cmp-2")),
        envelope("cmp-3", of("cmp-2")),
        envelope("cmp 4", of("cmp 4")),
        json.dumps({"source": "cmp-5", "report": of("cmp-5"), "also": 1}),
        envelope(["cmp-6"], of("cmp-6")),
    )
    assert reasons(parsed) == [
        "report of cmp-1",
        'no report in its envelope: on standard input each report comes as {"source": HOST, '
        '"report": REPORT}, HOST the host it was fetched from (a report alone cannot say whose '
        "it is)",
        "names host 'cmp-2' inside, but its envelope's source says cmp-3: a report counts only "
        "for the host its source says; not merged",
        "source 'cmp 4' is no host name: not read",
        reasons(parsed)[1],
        "source ['cmp-6'] is no host name: not read",
    ]
    assert [p.source for p in parsed] == ["stdin #1 from cmp-1", *(f"stdin #{n}" for n in (2,)),
                                          "stdin #3 from cmp-3", "stdin #4", "stdin #5",
                                          "stdin #6"]  # fmt: skip
    assert all(p.host in (None, "cmp-1") for p in parsed)


REFUSED = {
    "NaN": ("NaN", "NaN is no JSON number"),
    "Infinity": ("Infinity", "Infinity is no JSON number"),
    "-Infinity": ("-Infinity", "-Infinity is no JSON number"),
    "1e999": ("1e999", "the number 1e999 is out of range"),
    "-1e999": ("-1e999", "the number -1e999 is out of range"),
    "21 digits": ("1" * 21, "an integer of 21 digits (at most 20)"),
    "10,000 digits": ("9" * 10_000, "an integer of 10000 digits (at most 20)"),
    "a long number shown short": (
        "1" * 100 + "e999",
        f"the number {'1' * 40}… (104 characters) is out of range",
    ),
}


@pytest.mark.parametrize(("number", "reason"), REFUSED.values(), ids=REFUSED.keys())
def test_a_number_no_report_holds_refuses_the_report_in_a_file_and_on_stdin(
    tmp_path, number, reason
):
    text = json.dumps(of("cmp-1", extra={"deep": ["@"]})).replace('"@"', number)
    (bad,) = in_directory(tmp_path, {"cmp-1.json": text}).values()
    assert bad == BadReport("cmp-1.json", f"not JSON a report can hold: {reason}")
    parsed = streamed(envelope("cmp-1", of("cmp-1"))[:-1] + f', "x": {number}}}',
                      envelope("cmp-2", of("cmp-2")))  # fmt: skip
    assert reasons(parsed) == [f"not JSON a report can hold: {reason}", "report of cmp-2"]


def test_numbers_a_report_holds_are_read():
    document = report_json.decode('{"a": 18446744073709551615, "b": -1.5e300, "c": 0.0}')
    assert document == {"a": 2**64 - 1, "b": -1.5e300, "c": 0.0}


def test_a_nesting_bomb_is_refused_in_a_file_and_skipped_whole_on_stdin(tmp_path):
    bomb = "[" * 100_000 + "]" * 100_000
    (bad,) = in_directory(tmp_path, {"cmp-1.json": bomb}).values()
    assert bad == BadReport("cmp-1.json", "nested too deeply to be read (a report is a few "
                                          "levels deep)")  # fmt: skip
    tricky = '{"a": "]]]}}} \\" [[", "b": ' + "[" * 100_000 + "]" * 100_000 + "}"
    parsed = streamed(bomb, tricky, envelope("cmp-2", of("cmp-2")), "[" * 100_000)
    assert reasons(parsed) == [
        bad.reason,
        bad.reason,
        "report of cmp-2",
        f"{bad.reason}; where it ends cannot be told: rest ignored",
    ]


@pytest.mark.parametrize(
    ("text", "end"),
    [
        ("[]", 2),
        ('{"a": [1, {"b": "}]"}]} tail', 23),
        ('["\\\\", "\\"]"] x', 13),
        ("[[", None),
        ('["never ends', None),
        ("1", None),
    ],
)
def test_the_end_of_a_document_is_found_without_recursion(text, end):
    assert report_json.end_of(text, 0) == end
    if end is not None:
        assert json.JSONDecoder().raw_decode(text)[1] == end


def test_whatever_raises_reading_one_report_fails_that_report_alone(tmp_path, monkeypatch):
    real = reports.parse_document

    def failing(document, source):  # type: ignore[no-untyped-def]
        if "cmp-2" in source:
            raise MemoryError
        if "cmp-3" in source:
            raise KeyError("x" * 500)
        return real(document, source)

    monkeypatch.setattr(reports, "parse_document", failing)
    files = {f"{h}.json": json.dumps(of(h)) for h in ("cmp-1", "cmp-2", "cmp-3")}
    read = in_directory(tmp_path, files)
    assert reasons(list(read.values())) == [
        "report of cmp-1",
        "could not be read (MemoryError)",
        f"could not be read (KeyError: '{'x' * 39}… (502 characters))",
    ]
    assert [p.host for p in read.values()] == ["cmp-1", None, None]
    parsed = streamed(*(envelope(h, of(h)) for h in ("cmp-2", "cmp-1", "cmp-3")))
    assert reasons(parsed) == [
        "could not be read (MemoryError)",
        "report of cmp-1",
        reasons(list(read.values()))[2],
    ]
