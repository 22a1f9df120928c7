"""`nova-orphans demo` audits the embedded cloud through the real pipeline."""

from __future__ import annotations

import json

from nova_orphans import cli
from nova_orphans.demo import world


def test_demo_reports_one_guest_of_each_kind_and_exits_3(capsys):
    assert cli.main(["demo", "--format", "json"]) == cli.EXIT_FOUND
    document = json.loads(capsys.readouterr().out)
    assert document["host"] == world.HOST
    found = {f["uuid"]: f["kind"] for f in document["findings"]}
    assert found == {uuid: kind.value for uuid, kind in world.build().expected.items()}


def test_demo_table_names_every_finding(capsys):
    assert cli.main(["demo"]) == cli.EXIT_FOUND
    table = capsys.readouterr().out
    for uuid in world.build().expected:
        assert uuid in table
    summary = "1 deleted, 1 unknown, 1 misplaced, 1 lost, 1 foreign, 1 protected"
    assert summary in " ".join(table.split())


def test_demo_json_carries_what_nova_said(capsys):
    cli.main(["demo", "--format", "json"])
    by_kind = {f["kind"]: f for f in json.loads(capsys.readouterr().out)["findings"]}
    assert by_kind["deleted"]["deleted_at"] and by_kind["deleted"]["vm_state"] == "deleted"
    assert by_kind["misplaced"]["nova_host"] == world.OTHER_HOST
    assert by_kind["unknown"]["nova_host"] is None
    assert by_kind["lost"]["domain_state"] is None
