"""The hosts' reports are read schema-first (``fleet/report_schema.py``, docs/design.md §9):
the schema the package ships is the one copy of their format. A document the schema takes
is read (the reader adds no rule of its own but the host name and the time), a document it
refuses is refused with the schema's path, and the reader's enums are the schema's."""

from __future__ import annotations

import copy
import functools
import importlib.resources
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nova_orphans import cli, exits
from nova_orphans.classify.identity import State as IdentityState
from nova_orphans.classify.leftover import LeftoverKind
from nova_orphans.fleet import report_json, report_schema, reports
from nova_orphans.fleet.records import BadReport, PerHostReport
from nova_orphans.model import DomainState, Kind
from tests import report_schema as schema_test

Path = tuple[Any, ...]


@pytest.fixture(scope="module")
def demo() -> dict[str, Any]:
    """``demo --format json``: a report with every kind, dangers, usage and leftovers."""
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["demo", "--format", "json"]) == exits.SHARED_VOLUME
    return schema_test.valid(json.loads(out.getvalue()))


def test_the_reader_loads_the_packages_own_schema_the_repositorys_one_copy():
    shipped = importlib.resources.files("nova_orphans.data").joinpath("report.schema.json")
    assert report_schema.resource() == shipped
    assert shipped.read_bytes() == schema_test.SCHEMA_PATH.read_bytes()
    assert report_schema.schema() == json.loads(schema_test.SCHEMA_PATH.read_text())
    assert report_schema.readable_version() == 1


def test_the_schemas_kinds_and_states_are_the_models():
    """The reader turns the schema's words into the model's enums: the same words, or a valid
    report would fail in the reader (a second, hand-kept copy of the format)."""
    defs = report_schema.schema()["$defs"]
    assert defs["kind"]["enum"] == [k.value for k in Kind]
    assert defs["domain"]["properties"]["state"]["enum"] == [s.value for s in DomainState]
    assert defs["leftover"]["properties"]["kind"]["enum"] == [k.value for k in LeftoverKind]
    assert defs["leftovers"]["properties"]["counts"]["required"] == [k.value for k in LeftoverKind]
    assert defs["identity"]["properties"]["state"]["enum"] == [s.value for s in IdentityState]


def test_the_writers_report_is_read_whole(demo):
    parsed = reports.parse_document(demo, "compute-1.json")
    assert isinstance(parsed, PerHostReport)
    assert [(f.uuid, f.kind.value, f.brief) for f in parsed.findings] == [
        (f["uuid"], f["kind"], f["brief"]) for f in demo["findings"]
    ]
    assert [(d.uuid, d.state.value) for d in parsed.domains] == [
        (d["uuid"], d["state"]) for d in demo["domains"]
    ]
    assert parsed.leftovers is not None
    assert [(i.kind.value, i.subject) for i in parsed.leftovers.items] == [
        (i["kind"], i["subject"]) for i in demo["leftovers"]["items"]
    ]


# --- one copy of the format: what the schema takes is read, what it refuses is refused ---------


def walk(value: Any, path: Path = ()) -> Iterator[Path]:
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from walk(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from walk(item, (*path, index))


def fields(document: dict[str, Any]) -> list[Path]:
    """One path per field of the format the document holds: the first of each ``findings[*].x``."""
    seen: set[Path] = set()
    found = []
    for path in walk(document):
        shape = tuple("*" if isinstance(p, int) else p for p in path)
        if path and shape not in seen:
            seen.add(shape)
            found.append(path)
    return found


def at(document: Any, path: Path) -> Any:
    for part in path:
        document = document[part]
    return document


def wrong(value: Any) -> Any:
    """A value of another JSON type."""
    if isinstance(value, bool) or value is None:
        return "x"
    if isinstance(value, (int, float)):
        return "7"
    if isinstance(value, str):
        return 7
    return [] if isinstance(value, dict) else {}


def mutated(document: dict[str, Any], path: Path, how: str) -> dict[str, Any]:
    changed = copy.deepcopy(document)
    parent, last = at(changed, path[:-1]), path[-1]
    if how == "delete":
        del parent[last]
    else:
        parent[last] = wrong(parent[last])
    return changed


#: The fields the reader holds to a rule of its own, and how its refusal starts.
SEMANTIC = {"host": "names host ", "checked_at": "checked_at "}


@functools.cache
def host_report() -> Any:
    """The tests' validator of a host's report (``tests/report_schema``, not the reader's)."""
    return schema_test.validator().evolve(schema=report_schema.schema()["$defs"]["host_report"])


def judged(document: dict[str, Any], path: Path) -> reports.Parsed:
    """The reader accepts ``document`` exactly when the schema does, and refuses it naming
    the schema's path: ``path`` or a field around it."""
    valid = host_report().is_valid(document)
    parsed = reports.parse_document(document, "compute-1.json")
    if valid:
        if isinstance(parsed, BadReport):  # only the rules a schema cannot say
            assert parsed.reason.startswith(SEMANTIC[path[0]]), (path, parsed)
        return parsed
    assert isinstance(parsed, BadReport), path
    named = {f"{report_schema.where(path[:n])}: " for n in range(len(path) + 1)}
    if path[0] == "schema_version":
        named.add("schema_version ")  # "schema_version 99: this nova-orphans reads 1"
    assert any(parsed.reason.startswith(p) for p in named), (path, parsed.reason)
    assert "\n" not in parsed.reason and len(parsed.reason) <= report_schema.REASON_MOST + 30
    return parsed


def test_each_field_deleted_or_of_another_type_is_read_exactly_as_the_schema_says(demo):
    """Every field of the demo's report (one of each list's items): deleted, then of another
    type. An optional field the reader insisted on, or a check the schema does not make,
    would break the equivalence."""
    paths = fields(demo)
    optional = []
    for path in paths:
        for how in ("delete", "wrong"):
            parsed = judged(mutated(demo, path, how), path)
            if how == "delete" and isinstance(parsed, PerHostReport):
                optional.append(report_schema.where(path))
    # What the reader reads when present and does without (older reports have none of these).
    for field in ("identity", "leftovers", "findings[0].brief", "findings[0].usage"):
        assert field in optional


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_random_damage_is_refused_with_the_schemas_path(demo, data):
    paths = [p for p in fields(demo) if p]
    path = data.draw(st.sampled_from(paths))
    damage = data.draw(st.sampled_from(["x" * 5000, -1, 1.5, True, None, "", "\x1b]0;X\x07", []]))
    document = copy.deepcopy(demo)
    at(document, path[:-1])[path[-1]] = damage
    judged(document, path)


def test_the_reason_names_the_path_and_quotes_little_of_the_report(demo):
    def refused(path: Path, value: Any) -> str:
        document = copy.deepcopy(demo)
        at(document, path[:-1])[path[-1]] = value
        parsed = reports.parse_document(document, "compute-1.json")
        assert isinstance(parsed, BadReport) and parsed.host == "compute-1"
        return parsed.reason

    assert refused(("findings", 3, "uuid"), "x") == "findings[3].uuid: 'x' is no UUID"
    assert refused(("findings", 1, "usage"), "x") == (
        "findings[1].usage: 'x' is not of type null or object"
    )
    assert refused(("domains", 0, "state"), "zombie").startswith(
        "domains[0].state: 'zombie' is not one of 'no state', 'running'"
    )
    files = next(i for i, x in enumerate(demo["leftovers"]["items"]) if x["kind"] == "stray-files")
    path = ("leftovers", "items", files, "subject")
    assert refused(path, "$(reboot)") == (
        f"leftovers.items[{files}].subject: '$(reboot)' is no instance directory"
    )
    newline = at(demo, path) + "\n"
    assert refused(path, newline).endswith("is no instance directory")
    port = next(i for i, x in enumerate(demo["leftovers"]["items"]) if x["kind"] == "stray-port")
    assert refused(("leftovers", "items", port, "subject"), "P" * 1000) == (
        f"leftovers.items[{port}].subject: {report_json.shown(repr('P' * 1000))} is no "
        "canonical UUID"
    )
    long_key = refused(("findings", 0, "\x1b" * 5000), 1)
    assert long_key.startswith("findings[0]: ") and len(long_key) < 250 and "\x1b" not in long_key


@pytest.mark.parametrize(
    ("document", "reason"),
    [
        ([1, 2], "not a report: a JSON list"),
        ({"schema_version": 99, "host": "cmp-9"}, "schema_version 99: this nova-orphans reads 1"),
        ({"hosts": [], "summary": {}}, "a fleet report, not one host's report"),
        ({"schema_version": 1, "host": "cmp-9"}, "report: 'tool_version' is a required property"),
    ],
)
def test_a_document_the_schema_refuses_whole_is_worded_for_what_it_is(document, reason):
    parsed = reports.parse_document(document, "cmp-9.json")
    assert parsed == BadReport("cmp-9.json", reason, "cmp-9" if "tool_version" in reason else None)


def test_the_rules_a_schema_cannot_say_are_the_readers(demo):
    """The host name and the time: valid for the schema, refused by the reader."""
    bad_host = demo | {"host": "cmp-1/system?x"}
    assert reports.parse_document(bad_host, "cmp-1.json") == BadReport(
        "cmp-1.json", "names host 'cmp-1/system?x', which is no host name"
    )
    yesterday = demo | {"checked_at": "yesterday"}
    assert reports.parse_document(yesterday, "compute-1.json") == BadReport(
        "compute-1.json",
        "checked_at 'yesterday' is not an ISO 8601 time with its zone",
        "compute-1",
    )
