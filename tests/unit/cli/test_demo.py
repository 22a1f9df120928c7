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
        line.startswith("memory: Placement counts 3.0 GiB of 7.5 GiB used") for line in lines
    )


def _uuid(name: str) -> str:
    return next(g.uuid for g in demo.GUESTS if g.name == name)


def test_demo_tells_one_leftover_of_each_kind_with_its_command_and_one_held_with_why(capsys):
    """docs/design.md rule 22 as a newcomer sees it: three looks an hour apart, then each
    leftover of the left-behind server with its least destructive command, and the
    container's port told without one."""
    assert cli.main(["demo", "--format", "json"]) == exits.SHARED_VOLUME
    found = json.loads(capsys.readouterr().out)["leftovers"]
    assert found["not_checked"] == {}
    by_kind = {i["kind"]: i for i in found["items"]}
    assert sorted(by_kind) == sorted(
        ["stray-files", "stray-port", "stray-attachment", "stray-allocation", "foreign-port"]
    )
    told = [by_kind[k] for k in by_kind if k != "foreign-port"]
    assert all(i["server"] == demo.LEFT_BEHIND for i in told)
    assert all(i["command"] and i["held_by"] is None and i["seen"] == demo.LOOKS for i in told)
    assert by_kind["stray-port"]["command"] == f"openstack port unset --host {demo.LEFT_PORT}"
    assert by_kind["stray-files"]["command"].startswith("rm -r -- /")
    held = by_kind["foreign-port"]
    assert (held["subject"], held["command"], held["held_by"]) == (
        demo.CONTAINER_PORT,
        None,
        "owner",
    )
    assert "compute:kuryr" in held["reason"]


def test_demo_table_lists_each_command_on_its_own_line_and_the_held_one_s_reason(capsys):
    cli.main(["demo"])
    lines = capsys.readouterr().out.splitlines()
    assert f"    openstack port unset --host {demo.LEFT_PORT}" in lines
    assert "    no command (owner): not Nova's: never a command" in lines
