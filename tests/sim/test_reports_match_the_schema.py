"""The writer's report over generated worlds: every report a cycle of a random history tells
(what ``audit --format json`` prints and the agent writes to its report file) matches the
schema the fleet's reader validates against, and the reader reads it back whole."""

from __future__ import annotations

import json
from typing import Any

import pytest

from nova_orphans.audit import HostAudit
from nova_orphans.fleet import reports
from nova_orphans.fleet.records import PerHostReport
from nova_orphans.render import host as render_host
from nova_orphans.sim import commands, trial
from tests import report_schema

SEED = 20240401
#: Histories of the seed; together their reports hold every kind, leftovers and dangers.
HISTORIES = range(12)


def checked(report: HostAudit) -> dict[str, Any]:
    document = report_schema.valid(json.loads(render_host.render_json(report)))
    parsed = reports.parse_document(document, f"{report.host}.json")
    assert isinstance(parsed, PerHostReport), parsed
    assert [(f.uuid, f.kind) for f in parsed.findings] == [
        (f.uuid, f.kind) for f in report.findings
    ]
    assert [(d.uuid, d.state) for d in parsed.domains] == [
        (d.uuid, d.state) for d in report.domains
    ]
    assert (parsed.leftovers is None) == (report.leftovers is None)
    return document


def test_every_report_of_generated_histories_matches_the_schema(monkeypatch: pytest.MonkeyPatch):
    seen: list[dict[str, Any]] = []
    told = commands.at_tell

    def at_tell(run: Any, report: HostAudit, brake: str | None) -> list[str]:
        seen.append(checked(report))
        return told(run, report, brake)

    monkeypatch.setattr(commands, "at_tell", at_tell)
    for index in HISTORIES:
        assert not trial.run_generated(SEED, index).failed, index
    kinds = {f["kind"] for document in seen for f in document["findings"]}
    assert len(seen) > 50 and {"deleted", "unknown", "misplaced", "lost"} <= kinds
    assert any(d["leftovers"] and d["leftovers"]["items"] for d in seen)
    assert any(f["dangers"] for d in seen for f in d["findings"])
