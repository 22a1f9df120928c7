"""Nova's deployment quirks against a real Nova (docs/design.md rule 17).

``[api] max_limit`` below the page size: the stack runs a second nova-api on the same databases
whose ``max_limit`` is 2 (``harness.NOVA_LIMITED_ENDPOINT``); every listing comes back two items
a page, with a next link, and the audit follows the links to the findings of the default API.
A down cell: cell2 (compute host3) has its own MariaDB instance, which a test stops and always
starts again (``harness.cell2_database_down``).
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import harness
import pytest

from nova_orphans import exits
from nova_orphans.fakes import libvirt_node as worlds

pytestmark = pytest.mark.nova


def nova_domain(uuid: str, name: str) -> str:
    """A running test-driver domain with the metadata Nova writes for its guests."""
    return worlds.node_domain(
        uuid=uuid, name=name, metadata=worlds.nova_metadata(name=name, flavor="e2e-tiny")
    )


@pytest.fixture
def crowded_host1(nova_stack: harness.Nova) -> Any:
    """Five servers booted on host1 (more than two pages at max_limit 2); removed afterwards."""
    nova = nova_stack
    created = [nova.boot("host1", wait=False)["id"] for _ in range(5)]
    try:
        yield [nova.wait_status(uuid, "ACTIVE") for uuid in created]
    finally:
        for uuid in created:
            nova.destroy(uuid)


def audit_findings(conf: pathlib.Path, uri: str, host: str = "host1") -> dict[str, dict[str, Any]]:
    done = harness.run_audit(conf, host, uri)
    assert done.returncode == exits.FOUND, (done.returncode, done.stdout[-2000:], done.stderr)
    return {f["uuid"]: f for f in json.loads(done.stdout)["findings"]}


def test_a_max_limit_of_2_gives_the_findings_of_the_default(
    nova_stack: harness.Nova,
    nova_orphans_cli: str,
    crowded_host1: list[dict[str, Any]],
    tmp_path: pathlib.Path,
) -> None:
    nova = nova_stack
    managed, migrated, deleted, lost, last = (s["id"] for s in crowded_host1)
    nova.live_migrate(migrated, "host2")  # its domain stays in host1's world: misplaced
    nova.force_delete(deleted)  # its domain stays too: deleted
    unknown = worlds.random_uuid()  # Nova metadata, but Nova never heard of it
    uri = worlds.write_node_file(
        tmp_path,
        [
            nova_domain(managed, "instance-managed"),
            nova_domain(last, "instance-last"),
            nova_domain(migrated, "instance-migrated"),
            nova_domain(deleted, "instance-deleted"),
            nova_domain(unknown, "instance-unknown"),
        ],
        name="host1.xml",
    )

    # The premise: that nova-api clamps limit=1000 to 2 and links the next page.
    limited = harness.Nova(endpoint=harness.NOVA_LIMITED_ENDPOINT)
    page = limited.get("/servers/detail?all_tenants=1&host=host1&limit=1000")
    assert len(page["servers"]) == 2
    assert [link["rel"] for link in page["servers_links"]] == ["next"]

    default_conf = harness.write_cli_config(tmp_path / "default.conf", host="host1")
    limited_conf = harness.write_cli_config(
        tmp_path / "limited.conf", host="host1", endpoint=harness.NOVA_LIMITED_ENDPOINT
    )
    by_default = audit_findings(default_conf, uri)
    by_limited = audit_findings(limited_conf, uri)

    assert by_limited == by_default
    kinds = {uuid: f["kind"] for uuid, f in by_limited.items()}
    assert kinds[migrated] == "misplaced"
    assert kinds[deleted] == "deleted"
    assert kinds[unknown] == "unknown"
    assert kinds[lost] == "lost"
    assert managed not in kinds and last not in kinds


# --------------------------------------------------------------------------- a down cell


@pytest.fixture
def cell2_server(nova_stack: harness.Nova) -> Any:
    """A server on host3, the compute host of cell2; removed afterwards."""
    server = nova_stack.boot(harness.CELL2_HOST)
    try:
        yield server
    finally:
        nova_stack.destroy(server["id"])


def assert_one_line_naming_the_cell(done: Any) -> None:
    assert done.returncode == exits.ERROR, (done.returncode, done.stdout[-2000:], done.stderr)
    lines = harness.stderr_lines(done.stderr)
    assert len(lines) == 1, done.stderr
    assert "Nova could not reach a cell" in lines[0], lines[0]
    assert harness.CELL2_HOST in lines[0] or "partial" in lines[0], lines[0]
    assert not done.stdout.strip(), done.stdout


def test_a_cell_whose_database_is_down_fails_the_audit_and_the_agent_closed(
    nova_stack: harness.Nova,
    nova_orphans_cli: str,
    cell2_server: dict[str, Any],
    tmp_path: pathlib.Path,
) -> None:
    """docs/design.md rule 17: Nova's listings silently skip a cell whose database is down;
    the audit of that cell's host exits 1 naming the cell problem (it would otherwise call the
    host's guests ``unknown``), and the agent's cycle acts on nothing."""
    nova = nova_stack
    host = harness.CELL2_HOST
    uuid = cell2_server["id"]
    purged = worlds.random_uuid()  # Nova metadata, no record: unknown, to be reaped
    uri = worlds.write_node_file(
        tmp_path,
        [nova_domain(uuid, "instance-cell2"), nova_domain(purged, "instance-purged")],
        name=f"{host}.xml",
    )
    world = pathlib.Path(uri.removeprefix("test://"))
    conf = harness.write_cli_config(tmp_path / "audit.conf", host=host, libvirt_uri=uri)
    state = tmp_path / "state"
    agent_conf = harness.write_cli_config(
        tmp_path / "agent.conf",
        host=host,
        libvirt_uri=uri,
        extra="[agent]\naction_unknown = reap\ngrace_period = 0\nsightings_required = 1\n"
        f"state_dir = {state}\njournal_path = {state}/journal.sqlite\n"
        f"quarantine_dir = {tmp_path}/quarantine\n",
    )

    # With cell2 up: the server is Nova's, the purged guest is unknown.
    found = audit_findings(conf, uri, host=host)
    assert uuid not in found and found[purged]["kind"] == "unknown"

    before = world.read_bytes()
    with harness.cell2_database_down():
        # The premise: Nova 2.69+ marks host3 UNKNOWN and lists nothing of cell2.
        (service,) = nova.get(f"/os-services?binary=nova-compute&host={host}")["services"]
        assert service["status"] == "UNKNOWN", service
        assert nova.servers(host=host) == []

        assert_one_line_naming_the_cell(harness.run_audit(conf, host, uri))
        cycle = harness.run_cli(
            "run", "--once", "--config-file", str(agent_conf), "--libvirt-uri", uri
        )
        assert_one_line_naming_the_cell(cycle)
        assert world.read_bytes() == before
        assert not (tmp_path / "quarantine").exists() or not any(
            (tmp_path / "quarantine").iterdir()
        )

    # cell2 back: the audit is whole again.
    found = audit_findings(conf, uri, host=host)
    assert uuid not in found and found[purged]["kind"] == "unknown"
