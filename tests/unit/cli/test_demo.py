"""`nova-orphans demo` audits the embedded cloud through the real pipeline."""

from __future__ import annotations

import json

from nova_orphans import cli, demo, exits


def test_demo_reports_one_guest_of_each_kind_and_exits_5_for_its_shared_volume(capsys):
    assert cli.main(["demo", "--format", "json"]) == exits.SHARED_VOLUME
    document = json.loads(capsys.readouterr().out)
    assert document["host"] == demo.HOST
    found = {f["uuid"]: f["kind"] for f in document["findings"]}
    assert found == {uuid: kind.value for uuid, kind in demo.build().expected.items()}


def test_demo_table_names_every_finding(capsys):
    assert cli.main(["demo"]) == exits.SHARED_VOLUME
    table = capsys.readouterr().out
    for uuid in demo.build().expected:
        assert uuid in table
    summary = "1 deleted, 1 unknown, 1 misplaced, 1 lost, 1 foreign, 1 protected"
    assert summary in " ".join(table.split())


def test_demo_json_carries_what_nova_said(capsys):
    cli.main(["demo", "--format", "json"])
    by_kind = {f["kind"]: f for f in json.loads(capsys.readouterr().out)["findings"]}
    assert by_kind["deleted"]["deleted_at"] and by_kind["deleted"]["vm_state"] == "deleted"
    assert by_kind["misplaced"]["nova_host"] == demo.OTHER_HOST
    assert by_kind["unknown"]["nova_host"] is None
    assert by_kind["lost"]["domain_state"] is None


def test_demo_shows_what_each_orphan_costs_and_endangers(capsys):
    assert cli.main(["demo", "--wide"]) == exits.SHARED_VOLUME  # one line per danger
    lines = capsys.readouterr().out.splitlines()
    dangers = [line for line in lines if line.startswith("DANGER ")]
    assert dangers == [
        f"DANGER shared-volume {_uuid('db-old')} (instance-00000002): volume "
        f"{demo.SHARED_VOLUME} is attached to server 88888888-8888-4888-8888-888888888888 on "
        "compute-2 while this guest still holds it: two writers on one disk",
        f"DANGER address-conflict {_uuid('batch-7')} (instance-00000003): MAC fa:16:3e:00:00:03 "
        f"is port {demo.REUSED_PORT} (10.0.0.23) of server 88888888-8888-4888-8888-888888888888 "
        "on compute-2: the same address on the network twice",
    ]
    # The shared volume's guest is listed first, before the table's usual order.
    assert lines[1].startswith("deleted    " + _uuid("db-old"))
    assert any(
        line.startswith("memory: Placement counts 1.5 GiB of 3.5 GiB used") for line in lines
    )


def _uuid(name: str) -> str:
    return next(g.uuid for g in demo.GUESTS if g.name == name)
