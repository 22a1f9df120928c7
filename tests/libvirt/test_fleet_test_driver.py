"""The fleet audit over several libvirt test:/// worlds, one per host, and the simulated Nova."""

from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import threading
import time
from collections.abc import Sequence
from typing import NoReturn

import pytest

from nova_orphans import cli, config, exits
from nova_orphans.cli import commands
from nova_orphans.cli import fleet as fleet_cli
from nova_orphans.fakes import libvirt_node as worlds
from nova_orphans.fakes.nova import Fault, SimulatedNova
from nova_orphans.fleet.records import MergedFleet, Standing
from nova_orphans.fleet.scan import Scanner, libvirt_scan, scan_hosts
from nova_orphans.model import Domain, Kind
from nova_orphans.observe.errors import NovaError
from nova_orphans.render import fleet as render
from tests import report_schema

NOW = datetime.datetime(2024, 5, 1, 12, 0, tzinfo=datetime.timezone.utc)
SPLIT = "aaaaaaaa-0000-4000-8000-000000000001"
DELETED = "aaaaaaaa-0000-4000-8000-000000000002"
UNKNOWN = "aaaaaaaa-0000-4000-8000-000000000003"
MOVED = "aaaaaaaa-0000-4000-8000-000000000004"


def nova_domain(uuid: str, state: str = "running", devices: Sequence[str] = ()) -> str:
    return worlds.node_domain(
        uuid=uuid,
        name=f"instance-{uuid}",
        state=state,
        metadata=worlds.nova_metadata(),
        devices=devices,
    )


class Fleet:
    """Node files in one directory, named ``<host>.xml``, and the simulated Nova of the cloud."""

    def __init__(self, directory: pathlib.Path) -> None:
        self.directory = directory.resolve()
        self.nova = SimulatedNova()
        self.domains: dict[str, list[str]] = {}

    @property
    def template(self) -> str:
        return f"test://{self.directory}/{{host}}.xml"

    def managed(self, host: str, count: int) -> None:
        """``count`` servers Nova runs on ``host``, each with its running domain."""
        for _ in range(count):
            uuid = self.nova.boot(host)
            self.domains.setdefault(host, []).append(nova_domain(uuid))

    def write(self) -> None:
        for host, domains in self.domains.items():
            (self.directory / f"{host}.xml").write_text(worlds.node(domains), encoding="utf-8")

    def audit(
        self,
        hosts: Sequence[str] | None = None,
        *,
        concurrency: int = 4,
        timeout: float = 30.0,
        scanner: Scanner = libvirt_scan,
    ) -> MergedFleet:
        self.write()
        settings = fleet_cli.FleetSettings(
            tuple(hosts) if hosts else None, self.template, concurrency, timeout
        )
        return fleet_cli.run_audit(settings, self.nova, NOW, scanner, retry=lambda call: call())


def kinds(result: MergedFleet, host: str) -> list[tuple[Kind, str]]:
    host_report = next(h for h in result.hosts if h.host == host)
    assert host_report.trusted, host_report.error
    return [(f.kind, f.uuid) for f in host_report.findings]


def unreachable(result: MergedFleet) -> list[str]:
    return [h.host for h in result.hosts if h.standing is Standing.UNREACHABLE]


@pytest.fixture
def fleet(tmp_path: pathlib.Path) -> Fleet:
    """cmp-1 and cmp-2 with healthy guests; one server runs on both; cmp-1 has two orphans."""
    f = Fleet(tmp_path)
    f.managed("cmp-1", 3)
    f.managed("cmp-2", 3)
    f.nova.boot("cmp-1", "split", SPLIT)
    f.nova.boot("cmp-1", "old", DELETED)
    f.nova.boot("cmp-1", "gone", UNKNOWN)
    f.nova.local_delete(UNKNOWN, at=NOW - datetime.timedelta(days=30))
    f.nova.archive()
    f.nova.local_delete(DELETED, at=NOW - datetime.timedelta(days=1))
    f.domains["cmp-1"] += [
        nova_domain(SPLIT),
        nova_domain(
            DELETED,
            devices=[
                worlds.file_disk(f"/var/lib/nova/instances/{DELETED}/disk", "vda"),
                worlds.rbd_disk(f"volumes/volume-{DELETED[:8]}", "vdb"),
                worlds.bridge_interface("fa:16:3e:00:00:02", "tapaaaaaaaa-00"),
            ],
        ),
        nova_domain(UNKNOWN),
    ]
    f.domains["cmp-2"].append(nova_domain(SPLIT))
    return f


def test_one_guest_running_on_two_hosts_is_split_brain_and_listed_first(fleet: Fleet) -> None:
    """The merge's one split-brain rule (docs/design.md §9): each host keeps what its own
    audit makes of the copy (managed on Nova's host, misplaced on the other), and the UUID
    is split-brain across them, named first in the table."""
    result = fleet.audit()
    assert kinds(result, "cmp-1") == [(Kind.DELETED, DELETED), (Kind.UNKNOWN, UNKNOWN)]
    assert kinds(result, "cmp-2") == [(Kind.MISPLACED, SPLIT)]
    (split,) = result.split_brain
    assert (split.uuid, split.running_on) == (SPLIT, ("cmp-1", "cmp-2"))
    assert "Nova places it on cmp-1" in split.reason
    assert render.render_table(result).splitlines()[1].startswith("SPLIT-BRAIN")
    assert fleet_cli.exit_code(result) == exits.FOUND


def test_a_copy_nova_shows_migrating_between_the_two_hosts_is_not_split_brain(
    fleet: Fleet,
) -> None:
    """The migration excuse of the reports' merge holds for a scan too (one rule): the
    hosts are read one after another, so a live migration in progress between them is
    two copies seen at different instants."""
    fleet.nova.live_migrate(SPLIT, "cmp-2", finish=False)
    result = fleet.audit()
    assert result.split_brain == ()
    (moved,) = result.moved
    assert moved.uuid == SPLIT and "not split-brain" in moved.reason
    assert fleet_cli.exit_code(result) == exits.FOUND  # the deleted and unknown guests


def test_a_host_whose_libvirt_fails_is_unreachable_and_the_others_are_still_reported(
    fleet: Fleet,
) -> None:
    fleet.nova.add_compute("cmp-3")  # Nova knows it; no node file: libvirt cannot open it
    result = fleet.audit()
    down = next(h for h in result.hosts if h.host == "cmp-3")
    assert not down.trusted and down.findings == () and "cmp-3.xml" in (down.error or "")
    assert kinds(result, "cmp-2") == [(Kind.MISPLACED, SPLIT)]
    assert fleet_cli.exit_code(result) == exits.ERROR
    table = render.render_table(result, wide=True)
    (line,) = [line for line in table.splitlines() if line.startswith("== cmp-3 ")]
    assert line.endswith(": unreachable") and "note: libvirt unreachable" in table
    assert "1 unreachable (cmp-3)" in table.splitlines()[-1]
    record = report_schema.valid(json.loads(render.render_json(result)))
    host3 = next(h for h in record["hosts"] if h["host"] == "cmp-3")
    assert host3["status"] == "unreachable" and host3["findings"] is None
    assert record["summary"]["unreachable"] == ["cmp-3"]
    assert record["schema_version"] == 1 and record["tool_version"]
    # one split-brain across cmp-1 and cmp-2 (one per UUID, as from reports), deleted and
    # unknown on cmp-1, misplaced on cmp-2; unreachable cmp-3 counts none
    assert record["counts"] == dict.fromkeys(record["counts"], 0) | {
        "split-brain": 1,
        "deleted": 1,
        "unknown": 1,
        "misplaced": 1,
    }
    assert record["source"] == "scan" and record["split_brain"][0]["uuid"] == SPLIT


def test_a_host_nova_does_not_know_is_audited_and_said_to_be_unknown(fleet: Fleet) -> None:
    fleet.nova.boot("cmp-1", "moved", MOVED)
    fleet.domains["ghost-9"] = [nova_domain(MOVED, state="shut off")]
    result = fleet.audit(hosts=["cmp-2", "ghost-9"])
    ghost = next(h for h in result.hosts if h.host == "ghost-9")
    assert not ghost.known_to_nova
    assert kinds(result, "ghost-9") == [(Kind.MISPLACED, MOVED)]
    # Only cmp-2 of the split-brain pair was asked about: its copy is classified alone.
    assert kinds(result, "cmp-2") == [(Kind.MISPLACED, SPLIT)]
    assert "not a nova-compute host Nova knows" in render.render_table(result, wide=True)
    assert [h.host for h in result.hosts] == ["cmp-2", "ghost-9"]


@pytest.mark.parametrize("hosts", [2, 6])
def test_nova_is_asked_a_plain_listing_per_host_and_one_lookup_per_unexplained_uuid(
    tmp_path: pathlib.Path, hosts: int
) -> None:
    fleet = Fleet(tmp_path)
    for n in range(hosts):
        fleet.managed(f"cmp-{n}", 20)
    fleet.nova.boot("cmp-0", "old", DELETED)
    fleet.nova.local_delete(DELETED)
    fleet.domains["cmp-0"].append(nova_domain(DELETED))
    fleet.domains["cmp-1"].append(nova_domain(DELETED, state="shut off"))  # same UUID twice
    result = fleet.audit()
    assert kinds(result, "cmp-0") == kinds(result, "cmp-1") == [(Kind.DELETED, DELETED)]
    assert result.split_brain == () and [d.uuid for d in result.duplicates] == [DELETED]
    lookups = [p for p in fleet.nova.log if "uuid=" in p]
    assert len(lookups) == 1  # one lookup for both copies
    assert fleet.nova.requests["servers"] == hosts  # the plain listing of each host
    assert fleet.nova.requests["servers/detail"] == 1  # that lookup: no detail listing
    assert fleet.nova.requests["os-migrations"] == 2  # only the hosts with a domain to explain
    assert fleet.nova.requests["os-services"] == 2  # the hosts, then every cell at the end
    assert fleet.nova.request_count == result.nova_requests == hosts + 5


def test_each_hosts_listing_is_paged(tmp_path: pathlib.Path) -> None:
    fleet = Fleet(tmp_path)
    fleet.managed("cmp-0", 1_001)
    result = fleet.audit()
    assert kinds(result, "cmp-0") == []
    # 1,000 + 1 (Nova's max_limit), and the host filter probe
    assert fleet.nova.requests["servers"] == 3
    assert fleet.nova.requests["servers/detail"] == 0


def test_no_more_hosts_are_scanned_at_once_than_the_concurrency_allows(fleet: Fleet) -> None:
    for n in range(3, 10):
        fleet.managed(f"cmp-{n}", 2)
    lock, running, most = threading.Lock(), [0], [0]

    def counting_scan(uri: str) -> Sequence[Domain]:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        try:
            time.sleep(0.05)
            return libvirt_scan(uri)
        finally:
            with lock:
                running[0] -= 1

    result = fleet.audit(concurrency=3, scanner=counting_scan)
    assert len(result.hosts) == 9 and not unreachable(result)
    assert most[0] == 3


def test_a_scan_that_hangs_is_reported_as_timed_out_and_does_not_hold_the_others(
    fleet: Fleet,
) -> None:
    release = threading.Event()

    def hanging_on_cmp_2(uri: str) -> Sequence[Domain]:
        if uri.endswith("/cmp-2.xml"):
            release.wait(30)
        return libvirt_scan(uri)

    start = time.monotonic()
    try:
        result = fleet.audit(concurrency=1, timeout=0.3, scanner=hanging_on_cmp_2)
    finally:
        release.set()
    assert time.monotonic() - start < 5
    hung = next(h for h in result.hosts if h.host == "cmp-2")
    assert hung.standing is Standing.UNREACHABLE and "timed out" in (hung.error or "")
    # The guest also runs on cmp-2, which could not be read: cmp-1 is judged alone,
    # and Nova runs that guest on cmp-1.
    assert kinds(result, "cmp-1") == [(Kind.DELETED, DELETED), (Kind.UNKNOWN, UNKNOWN)]
    assert fleet_cli.exit_code(result) == exits.ERROR


def test_scan_results_keep_the_order_of_the_hosts_given(tmp_path: pathlib.Path) -> None:
    fleet = Fleet(tmp_path)
    for host in ("c", "a", "b"):
        fleet.managed(host, 1)
    fleet.write()
    scans = scan_hosts(["c", "a", "b"], fleet.template, concurrency=2, timeout=10)
    assert [s.host for s in scans] == ["c", "a", "b"] and all(s.reachable for s in scans)


def test_deleted_and_unknown_guests_show_their_remnants(fleet: Fleet) -> None:
    result = fleet.audit()
    table = render.render_table(result)
    words = " ".join(table.split())  # NOTE: the line is wrapped at the table's width
    assert f"remnants of {DELETED}: disk vdb: network rbd rbd:volumes/volume-{DELETED[:8]}" in words
    assert "interface tapaaaaaaaa-00" in table
    record = report_schema.valid(json.loads(render.render_json(result)))
    cmp1 = next(h for h in record["hosts"] if h["host"] == "cmp-1")
    by_uuid = {f["uuid"]: f for f in cmp1["findings"]}
    assert any("tapaaaaaaaa-00" in item for item in by_uuid[DELETED]["remnants"])
    # NOTE: "leftovers", the earlier name, still says the same (docs/reference/json.md).
    assert by_uuid[DELETED]["leftovers"] == by_uuid[DELETED]["remnants"]
    cmp2 = next(h for h in record["hosts"] if h["host"] == "cmp-2")
    assert [f["remnants"] for f in cmp2["findings"]] == [[]]  # misplaced: Nova cleans it


def test_when_nova_fails_the_fleet_audit_concludes_nothing(fleet: Fleet) -> None:
    fleet.nova.inject(Fault.SERVER_ERROR, path="/servers?all_tenants=1&host=cmp-2")
    with pytest.raises(NovaError):
        fleet.audit()


def test_a_healthy_fleet_exits_zero_with_a_summary_line(tmp_path: pathlib.Path) -> None:
    fleet = Fleet(tmp_path)
    fleet.managed("cmp-1", 2)
    fleet.managed("cmp-2", 2)
    result = fleet.audit()
    assert fleet_cli.exit_code(result) == exits.OK
    # the hosts, a plain listing of each, the host filter probe, every cell
    assert render.render_table(result).splitlines()[-1] == (
        f"fleet at {NOW.isoformat()}: 2 hosts, 2 audited; no findings; 5 Nova requests"
    )


class RaisingParser(argparse.ArgumentParser):
    """Like the command line's parser: a bad argument raises instead of exiting."""

    def error(self, message: str) -> NoReturn:
        raise ValueError(message)


def parser() -> argparse.ArgumentParser:
    root = RaisingParser(prog="nova-orphans")
    commands.register_fleet(
        root.add_subparsers(dest="command", required=True, parser_class=RaisingParser)
    )
    return root


def test_the_command_line_reads_hosts_template_concurrency_and_timeout() -> None:
    args = parser().parse_args(
        ["fleet", "audit", "--hosts", "a, b,a", "--uri-template", "test:///x/{host}.xml",
         "--concurrency", "5", "--timeout", "2.5", "--format", "json"]
    )  # fmt: skip
    assert cli.handler(args.handler) is fleet_cli.handle_audit
    conf = config.load([])
    settings = fleet_cli.settings_from(conf, args)
    assert settings.hosts == ("a", "b")
    assert (settings.uri_template, settings.concurrency, settings.timeout) == (
        "test:///x/{host}.xml", 5, 2.5,
    )  # fmt: skip


@pytest.mark.parametrize(
    "argv",
    [
        ["--concurrency", "0"],
        ["--timeout", "-1"],
        ["--hosts", ","],
        ["--concurrency", "x"],
        ["--hosts", "cmp-1,cmp-2/system?command=id"],
    ],
    ids=[
        "zero concurrency",
        "negative timeout",
        "no host names",
        "concurrency not a number",
        "a host that is no host name (docs/design.md rule 20)",
    ],
)
def test_bad_command_line_values_are_refused(argv: list[str]) -> None:
    with pytest.raises(ValueError, match="argument --"):
        parser().parse_args(["fleet", "audit", *argv])


#: Service host names Nova may list that are no host names: each would rewrite the URI.
HOSTILE_HOSTS = (
    "evil/system?command=touch /tmp/pwned&x=",
    "root@evil",
    "evil:2222",
    "cmp-\x1b]0;X\x07",
    "cmp-\u202e9",
)


def test_a_service_host_that_is_no_host_name_gets_no_uri_and_is_unreachable(
    tmp_path: pathlib.Path,
) -> None:
    """docs/design.md rule 20: the URIs were built from Nova's service host names by plain
    substitution, so a "host" carrying ``/system?command=…`` made the central host run a
    program through ``qemu+ssh``. A name that is no RFC 1123 host name gets no URI: it is
    reported unreachable (exit 1), the other hosts are still scanned, and the table shows
    the name's control characters as escapes."""
    fleet = Fleet(tmp_path)
    fleet.managed("cmp-1", 1)
    for host in HOSTILE_HOSTS:
        fleet.nova.add_compute(host)
    opened: list[str] = []

    def scanner(uri: str) -> Sequence[Domain]:
        opened.append(uri)
        return libvirt_scan(f"test://{fleet.directory}/cmp-1.xml") if "cmp-1" in uri else ()

    fleet.write()
    settings = fleet_cli.FleetSettings(None, "qemu+ssh://{host}/system", 4, 30.0)
    result = fleet_cli.run_audit(settings, fleet.nova, NOW, scanner, retry=lambda call: call())
    assert opened == ["qemu+ssh://cmp-1/system"]
    assert sorted(unreachable(result)) == sorted(HOSTILE_HOSTS)
    assert all("is not a host name" in (h.error or "") for h in result.incomplete)
    assert fleet_cli.exit_code(result) == exits.ERROR
    text = render.render_table(result, wide=True)
    assert "\x1b" not in text and "\u202e" not in text
    assert "cmp-\\x1b]0;X\\x07" in text and "cmp-\\u202e9" in text


def test_a_service_host_name_cannot_point_the_test_driver_at_another_file(
    tmp_path: pathlib.Path,
) -> None:
    """docs/design.md rule 20: ``test://DIR/{host}.xml`` with the host ``../outside/cmp-9``
    read a world outside DIR; the name is refused before any URI is built."""
    fleet = Fleet(tmp_path / "worlds")
    fleet.directory.mkdir()
    fleet.managed("cmp-1", 1)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "cmp-9.xml").write_text(worlds.node([nova_domain(UNKNOWN)]), encoding="utf-8")
    fleet.nova.add_compute("../outside/cmp-9")
    result = fleet.audit()
    (refused,) = result.incomplete
    assert refused.host == "../outside/cmp-9" and refused.uri == ""
    assert "is not a host name" in (refused.error or "")
    assert kinds(result, "cmp-1") == []


def test_a_template_without_host_is_a_config_error(tmp_path: pathlib.Path) -> None:
    """In the config file; on the command line the parser refuses it (the bad-input tour)."""
    path = tmp_path / "nova-orphans.conf"
    path.write_text("[fleet]\nuri_template = qemu:///system\n")
    with pytest.raises(config.ConfigError, match="host"):
        fleet_cli.settings_from(config.load([str(path)]), parser().parse_args(["fleet", "audit"]))


def test_hosts_are_ranked_by_the_memory_their_untracked_guests_hold(tmp_path: pathlib.Path):
    f = Fleet(tmp_path)
    for host, orphans in (("cmp-1", 1), ("cmp-2", 3), ("cmp-3", 0)):
        f.managed(host, 1)
        for n in range(orphans):
            uuid = f.nova.boot(host, f"gone-{host}-{n}")
            f.nova.local_delete(uuid, at=NOW)
            f.domains[host].append(nova_domain(uuid))
    result = f.audit()
    document = report_schema.valid(json.loads(render.render_json(result)))
    by_host = document["summary"]["untracked_by_host"]
    # Each test:/// guest holds 32 MiB and 1 vCPU (its XML); the host with most first.
    assert [(h["host"], h["guests"], h["vcpus"], h["memory_bytes"]) for h in by_host] == [
        ("cmp-2", 3, 3, 3 * 32 * 1024**2),
        ("cmp-1", 1, 1, 32 * 1024**2),
        ("cmp-3", 0, 0, 0),
    ]
    assert document["summary"]["untracked"]["memory_bytes"] == 4 * 32 * 1024**2
    table = render.render_table(result).splitlines()
    ranked = [line.split(":")[0].strip() for line in table if line.startswith("  cmp-")]
    assert ranked == ["cmp-2", "cmp-1"]


def test_a_hosts_listing_starts_when_its_scan_ends_while_other_scans_go_on(fleet: Fleet) -> None:
    """cmp-2's scan ends only once Nova was asked for cmp-1's plain listing (the scans and
    the listings overlap), and no listing of cmp-2 is asked before its own scan ended."""
    listed = threading.Event()
    cmp1 = "/servers?all_tenants=1&host=cmp-1"
    fleet.nova.fault_hook = lambda path: listed.set() if path.startswith(cmp1) else None
    asked_when_scanned: list[int] = []

    def scanner(uri: str) -> Sequence[Domain]:
        if "cmp-2" in uri:
            assert listed.wait(10), "cmp-1's listing was not asked while cmp-2 was scanned"
            asked_when_scanned.append(len(fleet.nova.log))
        return libvirt_scan(uri)

    result = fleet.audit(scanner=scanner)
    assert not unreachable(result)
    assert kinds(result, "cmp-2") == [(Kind.MISPLACED, SPLIT)]
    before_scan_end = fleet.nova.log[: asked_when_scanned[0]]
    assert not any("host=cmp-2" in p for p in before_scan_end)
    assert sum(p.startswith("/servers?all_tenants=1&host=cmp-2") for p in fleet.nova.log) == 1
