"""Validate a JSON report against the schema the reader validates the hosts' reports against
(``fleet/report_schema.py``: the package's resource, docs/schema/report.schema.json's bytes)."""

from __future__ import annotations

import datetime
import functools
import json
import pathlib
from typing import Any

import jsonschema

from nova_orphans.fleet import report_schema as shipped

SCHEMA_PATH = pathlib.Path(__file__).resolve().parents[1] / "docs" / "schema" / "report.schema.json"


@functools.lru_cache(maxsize=1)
def validator() -> jsonschema.Draft202012Validator:
    # NOTE: the reader's own schema, and it is the repository's one copy.
    assert shipped.resource().read_bytes() == SCHEMA_PATH.read_bytes()
    schema = shipped.schema()
    assert schema == json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )


def valid(document: Any) -> Any:
    """``document`` if it matches the schema (and its counts tally its findings); else raise."""
    validator().validate(document)
    if "events" in document or "entries" in document:
        return document  # ``history`` and ``quarantine list``: no findings to tally
    # NOTE: format "date-time" is only checked when an RFC 3339 package is installed.
    datetime.datetime.fromisoformat(document["checked_at"])
    findings = document["findings"] if "host" in document else fleet_findings(document)
    tally = {kind: 0 for kind in document["counts"]}
    for finding in findings:
        tally[finding["kind"]] += 1
    assert document["counts"] == tally, (document["counts"], tally)
    leftovers(document.get("leftovers"))
    return document


def leftovers(section: Any) -> None:
    """A host report's leftovers: each count tallies its items; a kind not checked has a
    reason and no items (docs/design.md rule 21)."""
    if section is None:
        return
    for kind, count in section["counts"].items():
        items = [i for i in section["items"] if i["kind"] == kind]
        if count is None:
            assert section["not_checked"].get(kind) and not items, (kind, section)
        else:
            assert count == len(items) and kind not in section["not_checked"], (kind, section)


def fleet_findings(document: dict[str, Any]) -> list[dict[str, Any]]:
    """A fleet's findings (with ``--reports``: one split-brain per UUID, then the hosts')."""
    cross = [{"kind": "split-brain"} for _ in document.get("split_brain", [])]
    return cross + [f for host in document["hosts"] for f in host["findings"] or []]
