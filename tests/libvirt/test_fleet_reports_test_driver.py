"""``fleet audit --reports``: reports written by the real ``audit --format json`` (and the
agent's ``report_file``) over ``test:///`` worlds, merged against the simulated Nova.

Every host is a Nova fake-driver node whose ``compute_id`` file proves the identity (the
test driver's libvirt has no hostname to compare), so its report is *verified*.
"""

from __future__ import annotations

import datetime
import io
import json
import os
import pathlib
from collections.abc import Sequence

import pytest

from nova_orphans import cli, exits
from nova_orphans.cli import agent as agent_cli
from nova_orphans.cli import audit as audit_cli
from nova_orphans.cli import common
from nova_orphans.cli import fleet as fleet_cli
from nova_orphans.fakes import libvirt_node as worlds
from nova_orphans.fakes.nova import Fault, SimulatedNova
from nova_orphans.fleet import reports
from nova_orphans.model import Kind
from tests import report_schema

SPLIT = "aaaaaaaa-0000-4000-8000-00000000000a"
HOSTS = ("cmp-1", "cmp-2", "cmp-3")


def domain(uuid: str, state: str = "running") -> str:
    return worlds.node_domain(
        uuid=uuid, name=f"instance-{uuid[-4:]}", state=state, metadata=worlds.nova_metadata()
    )


class Cloud:
    """The simulated Nova, one test:/// world and config per host, and a reports directory."""

    def __init__(self, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.tmp = tmp_path
        self.monkeypatch = monkeypatch
        self.nova = SimulatedNova()
        self.reports = tmp_path / "reports"
        self.reports.mkdir()
        self.now = common.now()
        for host in HOSTS:
            self.nova.add_compute(host, hypervisor_type="fake")
        for module in (audit_cli, fleet_cli, agent_cli):
            monkeypatch.setattr(module, "transport_from_conf", lambda conf: self.nova)

    def config(self, host: str, domains: Sequence[str], *, proven: bool = True) -> pathlib.Path:
        """``host``'s config: its libvirt world and (``proven``) its nova.conf + compute_id."""
        home = self.tmp / host
        home.mkdir(exist_ok=True)
        uri = worlds.write_node_file(home, domains)
        extra = ""
        if proven:
            (home / "nova.conf").write_text(f"[DEFAULT]\nhost = {host}\nstate_path = {home}\n")
            (home / "compute_id").write_text(self.nova.computes[host].node_uuid + "\n")
            extra = f"nova_config_file = {home / 'nova.conf'}\n"
        path = home / "nova-orphans.conf"
        path.write_text(
            f"[DEFAULT]\nhost = {host}\n{extra}[libvirt]\nconnection_uri = {uri}\n"
            f"[agent]\nstate_dir = {home / 'state'}\nreport_file = {self.reports / host}.json\n"
            "[nova]\nauth_type = admin_token\nendpoint = http://x\ntoken = t\n"
        )
        return path

    def audit(
        self, host: str, domains: Sequence[str], *, minutes_ago: float = 1, name: str = "",
        proven: bool = True,
    ) -> dict:  # fmt: skip
        """Run the real ``audit --format json`` as of ``minutes_ago``; store its report."""
        at = self.now - datetime.timedelta(minutes=minutes_ago)
        with self.monkeypatch.context() as patch:
            patch.setattr(common, "now", lambda: at)
            out = io.StringIO()
            patch.setattr("sys.stdout", out)
            argv = ["audit", "--format", "json", "--config-file", str(self.config(host, domains,
                    proven=proven))]  # fmt: skip
            assert cli.main(argv) in (exits.OK, exits.FOUND)
        (self.reports / (name or f"{host}.json")).write_text(out.getvalue())
        return json.loads(out.getvalue())

    def fleet(
        self, capsys: pytest.CaptureFixture[str], *extra: str, own_reports: bool = True
    ) -> tuple[int, dict, str]:
        """``fleet audit --format json EXTRA`` (plus ``--reports DIR`` unless EXTRA has one or
        ``own_reports`` is False): (exit code, document, stderr)."""
        self.nova.requests.clear()
        conf = self.tmp / "central.conf"
        conf.write_text("[nova]\nauth_type = admin_token\nendpoint = http://x\ntoken = t\n")
        capsys.readouterr()
        argv = ["fleet", "audit", "--config-file", str(conf), "--format", "json", *extra]
        if own_reports and "--reports" not in extra:
            argv += ["--reports", str(self.reports)]
        code = cli.main(argv)
        out, err = capsys.readouterr()
        # NOTE: every merged document is checked against docs/schema/report.schema.json.
        return code, report_schema.valid(json.loads(out)) if out else {}, err


@pytest.fixture
def cloud(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> Cloud:
    return Cloud(tmp_path, monkeypatch)


def healthy(cloud: Cloud, host: str, count: int = 2) -> list[str]:
    return [domain(cloud.nova.boot(host)) for _ in range(count)]


def by_host(document: dict) -> dict[str, dict]:
    return {h["host"]: h for h in document["hosts"]}


def one_line(err: str) -> str:
    (line,) = err.strip().splitlines()
    assert line.startswith("nova-orphans: ")
    return line


def enveloped(source: str, report: str) -> str:
    """One line of a stream on stdin: ``report`` in the envelope naming where it came from
    (as ``jq -c --arg source H '{source: $source, report: .}'`` writes it)."""
    return json.dumps({"source": source, "report": json.loads(report)}) + "\n"


def on_stdin(cloud: Cloud, capsys, monkeypatch, *documents: str) -> tuple[int, dict, str]:
    """``fleet audit --reports -`` over ``documents`` concatenated."""
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(documents)))
    return cloud.fleet(capsys, "--reports", "-")


def report_of(cloud: Cloud, host: str) -> str:
    return (cloud.reports / f"{host}.json").read_text()


def test_the_real_audit_json_carries_what_the_merge_needs(cloud: Cloud) -> None:
    uuid = cloud.nova.boot("cmp-1")
    document = cloud.audit("cmp-1", [domain(uuid), domain(SPLIT, "paused")])
    assert document["host"] == "cmp-1" and document["checked_at"]
    assert document["identity"]["state"] == "verified", document["identity"]
    assert {(d["uuid"], d["state"]) for d in document["domains"]} == {
        (uuid, "running"),
        (SPLIT, "paused"),
    }


def test_a_clean_fleet_exits_0_after_one_nova_request(cloud: Cloud, capsys) -> None:
    for host in HOSTS:
        cloud.audit(host, healthy(cloud, host))
    code, document, err = cloud.fleet(capsys)
    assert code == exits.OK, err
    assert err == ""
    assert document["split_brain"] == [] and document["summary"]["trusted"] == 3
    assert document["summary"]["nova_requests"] == 1 == cloud.nova.request_count


def test_one_uuid_running_on_two_hosts_is_split_brain_after_three_requests(cloud, capsys):
    cloud.nova.boot("cmp-1", "split", SPLIT)
    cloud.audit("cmp-1", [*healthy(cloud, "cmp-1"), domain(SPLIT)])
    cloud.audit("cmp-2", [*healthy(cloud, "cmp-2"), domain(SPLIT)])
    cloud.audit("cmp-3", healthy(cloud, "cmp-3"))
    code, document, err = cloud.fleet(capsys)
    assert code == exits.FOUND, err
    (split,) = document["split_brain"]
    assert split["uuid"] == SPLIT and split["running_on"] == ["cmp-1", "cmp-2"]
    assert "Nova places it on cmp-1" in split["reason"]
    # The versioned shape every JSON output shares: the split-brain counted by kind.
    assert document["schema_version"] == 1 and document["tool_version"]
    assert document["counts"]["split-brain"] == 1
    assert set(document["counts"]) == {k.value for k in Kind}
    # services, then the candidate's record and its migrations.
    assert document["summary"]["nova_requests"] == 3 == cloud.nova.request_count


def test_a_live_migration_between_the_reports_is_not_split_brain(cloud, capsys):
    """cmp-1 reported before the guest moved to cmp-2, cmp-2 after: Nova's migration
    explains both running copies."""
    cloud.nova.boot("cmp-1", "moving", SPLIT)
    cloud.audit("cmp-1", [domain(SPLIT)], minutes_ago=10)
    cloud.nova.live_migrate(SPLIT, "cmp-2", at=cloud.now - datetime.timedelta(minutes=5))
    cloud.audit("cmp-2", [domain(SPLIT)], minutes_ago=1)
    cloud.audit("cmp-3", [])
    code, document, err = cloud.fleet(capsys)
    assert code == exits.OK, err
    assert document["split_brain"] == []
    (moved,) = document["moved_between_reports"]
    assert moved["uuid"] == SPLIT and "live-migration cmp-1->cmp-2 completed" in moved["reason"]


def test_a_paused_copy_in_flight_is_a_duplicate_not_split_brain(cloud, capsys):
    cloud.nova.boot("cmp-1", "moving", SPLIT)
    cloud.nova.live_migrate(SPLIT, "cmp-2", finish=False)
    cloud.audit("cmp-1", [domain(SPLIT)])
    cloud.audit("cmp-2", [domain(SPLIT, "paused")])
    cloud.audit("cmp-3", [])
    code, document, err = cloud.fleet(capsys)
    assert code == exits.OK, err
    assert document["split_brain"] == []
    assert [d["uuid"] for d in document["duplicates"]] == [SPLIT]


def test_a_stale_report_never_creates_split_brain_and_exits_1(cloud, capsys):
    cloud.nova.boot("cmp-1", "split", SPLIT)
    cloud.audit("cmp-1", [domain(SPLIT)])
    cloud.audit("cmp-2", [domain(SPLIT)], minutes_ago=120)
    cloud.audit("cmp-3", [])
    code, document, err = cloud.fleet(capsys, "--reports", str(cloud.reports), "--max-age", "3600")
    assert code == exits.ERROR
    assert "cmp-2 stale" in one_line(err)
    assert document["split_brain"] == []
    assert by_host(document)["cmp-2"]["status"] == "stale"
    assert by_host(document)["cmp-2"]["findings"] is None


def test_an_unproven_identity_is_reported_unreliable_not_merged(cloud, capsys):
    cloud.nova.boot("cmp-1", "split", SPLIT)
    cloud.audit("cmp-1", [domain(SPLIT)])
    cloud.audit("cmp-2", [domain(SPLIT)], proven=False)
    cloud.audit("cmp-3", [])
    code, document, err = cloud.fleet(capsys)
    assert code == exits.ERROR
    assert "cmp-2 unreliable" in one_line(err)
    assert document["split_brain"] == []
    assert "identity unproven" in by_host(document)["cmp-2"]["notes"][0]


def test_a_compute_host_without_a_report_is_missing_never_empty(cloud, capsys):
    cloud.audit("cmp-1", [])
    cloud.audit("cmp-2", [])
    code, document, err = cloud.fleet(capsys)
    assert code == exits.ERROR
    assert "cmp-3 missing" in one_line(err)
    assert by_host(document)["cmp-3"] | {"notes": None} == {
        "host": "cmp-3",
        "uri": None,
        "error": None,
        "status": "missing",
        "known_to_nova": True,
        "report": None,
        "notes": None,
        "findings": None,
        "leftovers": None,
    }


def test_two_reports_of_one_host_the_newest_wins_and_it_is_said(cloud, capsys, monkeypatch):
    """An older, stale report of a host is set aside (a current one that disagreed would
    make the host unreliable: see the conflicting reports below). A directory holds one
    file per host (``H.json``); two reports of one host come on stdin, both from it."""
    cloud.nova.boot("cmp-1", "split", SPLIT)
    cloud.audit("cmp-1", [domain(SPLIT)])
    old = json.dumps(cloud.audit("cmp-2", [domain(SPLIT)], minutes_ago=40))
    new = json.dumps(cloud.audit("cmp-2", [], minutes_ago=2))
    cloud.audit("cmp-3", [])
    stream = [enveloped(h, report_of(cloud, h)) for h in ("cmp-1", "cmp-3")]
    code, document, err = on_stdin(cloud, capsys, monkeypatch, *stream,
                                   enveloped("cmp-2", old), enveloped("cmp-2", new))  # fmt: skip
    assert code == exits.OK, err
    assert document["split_brain"] == []  # the older report's copy is not counted
    cmp2 = by_host(document)["cmp-2"]
    assert cmp2["report"]["source"] == "stdin #4 from cmp-2"
    assert "set aside: stdin #3 from cmp-2" in cmp2["notes"][0]


def test_reports_on_stdin_in_their_envelopes_merge_like_a_directory(cloud, capsys, monkeypatch):
    cloud.nova.boot("cmp-1", "split", SPLIT)
    cloud.audit("cmp-1", [domain(SPLIT)])
    cloud.audit("cmp-2", [domain(SPLIT)])
    cloud.audit("cmp-3", [])
    stream = [enveloped(h, report_of(cloud, h)) for h in HOSTS]
    code, document, err = on_stdin(cloud, capsys, monkeypatch, *stream)
    assert code == exits.FOUND, err
    assert [s["uuid"] for s in document["split_brain"]] == [SPLIT]
    assert {h["report"]["source"] for h in document["hosts"]} == {
        "stdin #1 from cmp-1",
        "stdin #2 from cmp-2",
        "stdin #3 from cmp-3",
    }


def test_a_report_alone_on_stdin_says_not_whose_it_is_and_is_not_merged(cloud, capsys, monkeypatch):
    """A bare report on stdin (no envelope) names its host only inside, which any host can
    write of any other: it is bad, its host missing (exit 1), and no split-brain comes of it."""
    cloud.nova.boot("cmp-1", "split", SPLIT)
    cloud.audit("cmp-1", [domain(SPLIT)])
    cloud.audit("cmp-2", [domain(SPLIT)])
    cloud.audit("cmp-3", [])
    bare = report_of(cloud, "cmp-2")
    stream = [enveloped("cmp-1", report_of(cloud, "cmp-1")), bare,
              enveloped("cmp-3", report_of(cloud, "cmp-3"))]  # fmt: skip
    code, document, err = on_stdin(cloud, capsys, monkeypatch, *stream)
    assert code == exits.ERROR
    line = one_line(err)
    assert "cmp-2 missing" in line
    assert "stdin #2 unreadable (no report in its envelope: on standard input each report" in line
    assert document["split_brain"] == []
    assert by_host(document)["cmp-2"]["status"] == "missing"


BAD_FILES = {
    "a file that is not JSON is unreadable, never a host without domains": (
        "junk.json",
        "<html>502 Bad Gateway</html>",
        "junk.json unreadable (not JSON",
    ),
    "a JSON list is not a report": ("list.json", "[1, 2]", "not a report: a JSON list"),
    "another schema version is refused": (
        "future.json",
        '{"schema_version": 99, "host": "cmp-9"}',
        "schema_version 99: this nova-orphans reads 1",
    ),
    "a fleet report is not one host's report": (
        "fleet.json",
        '{"hosts": [], "summary": {}}',
        "a fleet report, not one host's report",
    ),
}


@pytest.mark.parametrize(("name", "text", "words"), BAD_FILES.values(), ids=BAD_FILES.keys())
def test_a_bad_report_file_is_named_and_exits_1(cloud, capsys, name, text, words):
    for host in HOSTS:
        cloud.audit(host, [])
    (cloud.reports / name).write_text(text)
    code, document, err = cloud.fleet(capsys)
    assert code == exits.ERROR
    assert words in one_line(err)
    assert [u["source"] for u in document["unreadable"]] == [name]
    assert document["summary"]["trusted"] == 3


def test_a_report_lacking_the_domains_is_its_host_unreadable(cloud, capsys):
    for host in HOSTS:
        cloud.audit(host, [])
    old = json.loads((cloud.reports / "cmp-2.json").read_text())
    del old["domains"]
    (cloud.reports / "cmp-2.json").write_text(json.dumps(old))
    code, document, err = cloud.fleet(capsys)
    assert code == exits.ERROR
    assert "cmp-2 unreadable" in one_line(err)
    assert "report: 'domains' is a required property" in by_host(document)["cmp-2"]["notes"][1]


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--reports", "{empty}"], "no *.json report in"),
        (["--reports", "{missing}"], "No such file or directory"),
        (
            ["--reports", "{empty}", "--uri-template", "qemu+ssh://{{host}}/system"],
            "--uri-template: not with",
        ),
        (["--max-age", "60"], "--max-age applies only with --reports"),
        (["--reports", "{empty}", "--max-age", "0"], "must be greater than 0"),
    ],
    ids=["an empty directory", "no such directory", "a scan option", "max-age alone", "max-age 0"],
)
def test_usage_errors_exit_2_with_one_line_and_ask_nova_nothing(cloud, capsys, argv, words):
    empty = cloud.tmp / "empty"
    empty.mkdir()
    argv = [a.format(empty=empty, missing=cloud.tmp / "nope") for a in argv]
    code, document, err = cloud.fleet(capsys, *argv, own_reports=False)
    assert code == exits.USAGE
    assert words in one_line(err)
    assert document == {} and cloud.nova.request_count == 0


def test_the_agent_writes_its_report_for_the_fleet_after_a_cycle(cloud, capsys):
    """``[agent] report_file``: the agent's own report is merged like audit's; a dry run
    on the command line writes none."""
    config = cloud.config("cmp-1", [*healthy(cloud, "cmp-1"), domain(SPLIT)])
    written = cloud.reports / "cmp-1.json"
    assert cli.main(["run", "--once", "--dry-run", "--config-file", str(config)]) == exits.FOUND
    assert not written.exists()
    assert cli.main(["run", "--once", "--config-file", str(config)]) == exits.FOUND
    report = json.loads(written.read_text())
    assert report["identity"]["state"] == "verified"
    assert SPLIT in {d["uuid"] for d in report["domains"]}
    assert not list(cloud.reports.glob("*.tmp"))
    cloud.audit("cmp-2", [domain(SPLIT)])
    cloud.audit("cmp-3", [])
    code, document, err = cloud.fleet(capsys)
    assert code == exits.FOUND, err
    assert [s["running_on"] for s in document["split_brain"]] == [["cmp-1", "cmp-2"]]


def test_nova_failing_is_one_line_exit_1_and_nothing_concluded(cloud, capsys):
    for host in HOSTS:
        cloud.audit(host, [])
    cloud.nova.inject(Fault.SERVER_ERROR, times=10, path="/os-services")
    code, document, err = cloud.fleet(capsys)
    assert code == exits.ERROR
    assert document == {}
    assert "os-services" in one_line(err)


def test_the_hosts_reports_are_ranked_by_untracked_memory(cloud, capsys):
    """Each report carries its findings' usage; the merge sums them per trusted host."""
    for host, orphans in (("cmp-1", 1), ("cmp-2", 2), ("cmp-3", 0)):
        gone = [cloud.nova.boot(host) for _ in range(orphans)]
        for uuid in gone:
            cloud.nova.local_delete(uuid, at=cloud.nova.clock)
        cloud.audit(host, [*healthy(cloud, host), *(domain(u) for u in gone)])
    _, document, err = cloud.fleet(capsys)
    assert err == ""
    # Each test:/// guest holds 32 MiB and 1 vCPU (its XML) and no file-backed disk.
    ranked = [
        (h["host"], h["guests"], h["memory_bytes"])
        for h in document["summary"]["untracked_by_host"]
    ]
    assert ranked == [("cmp-2", 2, 64 * 1024**2), ("cmp-1", 1, 32 * 1024**2), ("cmp-3", 0, 0)]
    assert document["summary"]["untracked"]["vcpus"] == 3
    table = fleet_table(cloud, capsys)
    assert [line.split(":")[0].strip() for line in table if line.startswith("  cmp-")] == [
        "cmp-2",
        "cmp-1",
    ]


def snapshot(directory: pathlib.Path) -> dict[str, bytes]:
    """Every file of ``directory`` and its bytes (the fleet audit changes none)."""
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def orphan_on_cmp_1(cloud: Cloud) -> str:
    """cmp-1's real report holds a ``deleted`` orphan; cmp-2 and cmp-3 are clean."""
    gone = cloud.nova.boot("cmp-1")
    cloud.nova.local_delete(gone, at=cloud.nova.clock)
    cloud.audit("cmp-1", [*healthy(cloud, "cmp-1"), domain(gone)], minutes_ago=5)
    for host in ("cmp-2", "cmp-3"):
        cloud.audit(host, healthy(cloud, host))
    return gone


def forge(cloud: Cloud, of: str, name: str = "", *, minutes_ahead: float, **fields) -> str:
    """A copy of host ``of``'s real report, dated ``minutes_ahead`` of now, saying
    ``fields``; written to the file ``name`` when one is given."""
    document = json.loads(report_of(cloud, of))
    at = cloud.now + datetime.timedelta(minutes=minutes_ahead)
    document |= {"checked_at": at.isoformat(), **fields}
    if name:
        (cloud.reports / name).write_text(json.dumps(document))
    return json.dumps(document)


def every_report_and(cloud: Cloud, source: str, forged: str) -> list[str]:
    """Every host's real report in its envelope on stdin, then ``forged`` from ``source``."""
    return [*(enveloped(h, report_of(cloud, h)) for h in HOSTS), enveloped(source, forged)]


def test_a_report_dated_ahead_cannot_hide_a_hosts_real_orphan(cloud, capsys, monkeypatch):
    """docs/design.md rule 20: a report of cmp-1 dated 25 minutes ahead (inside the max
    age) saying cmp-1 holds nothing was taken as its newest: exit 0, the real ``deleted``
    orphan hidden. It is unreliable: exit 1, one line naming it, nothing changed. (On stdin:
    cmp-1 itself wrote both; a directory holds only one ``cmp-1.json``.)"""
    orphan_on_cmp_1(cloud)
    forged = forge(cloud, "cmp-1", minutes_ahead=25, findings=[], domains=[])
    before = snapshot(cloud.reports)
    stream = every_report_and(cloud, "cmp-1", forged)
    code, document, err = on_stdin(cloud, capsys, monkeypatch, *stream)
    assert code == exits.ERROR
    line = one_line(err)
    assert "cmp-1 unreliable (stdin #4 from cmp-1 is dated" in line
    assert "s ahead of this host's clock (more than the 60 s allowed" in line
    assert by_host(document)["cmp-1"]["status"] == "unreliable"
    assert snapshot(cloud.reports) == before


def test_two_current_reports_of_one_host_that_disagree_are_flagged_not_merged(
    cloud, capsys, monkeypatch
):
    """docs/design.md rule 20: a report dated just now saying cmp-1 holds nothing
    disagrees with cmp-1's own report within the max age: neither is merged (exit 1)."""
    orphan_on_cmp_1(cloud)
    forged = forge(cloud, "cmp-1", minutes_ahead=0, findings=[], domains=[])
    stream = every_report_and(cloud, "cmp-1", forged)
    code, document, err = on_stdin(cloud, capsys, monkeypatch, *stream)
    assert code == exits.ERROR
    assert "cmp-1 unreliable (2 reports of this host within the max age disagree" in (one_line(err))
    assert by_host(document)["cmp-1"]["findings"] is None


def test_a_second_file_naming_a_host_is_not_that_hosts_report(cloud, capsys):
    """A file beside ``cmp-1.json`` saying it is cmp-1's (``cmp-1-forged.json``, its
    ``host`` cmp-1) is no report of cmp-1: a file counts only for the host its name says.
    It is listed bad; cmp-1's own report is merged and its orphan told; exit 1."""
    gone = orphan_on_cmp_1(cloud)
    forge(cloud, "cmp-1", "cmp-1-forged.json", minutes_ahead=0, findings=[], domains=[])
    code, document, err = cloud.fleet(capsys)
    assert code == exits.ERROR
    assert ("cmp-1-forged.json unreadable (names host 'cmp-1' inside, but its file name says "
            "cmp-1-forged") in one_line(err)  # fmt: skip
    assert [f["uuid"] for f in by_host(document)["cmp-1"]["findings"]] == [gone]
    assert by_host(document)["cmp-1"]["status"] == "trusted"


def test_a_report_for_a_host_nova_does_not_know_is_flagged_not_merged(cloud, capsys):
    """docs/design.md rule 20: a report naming cmp-9, which runs no nova-compute service
    Nova knows, was merged as trusted (its copy could pair with a real host's into a
    split-brain). It is unreliable: exit 1."""
    cloud.nova.boot("cmp-1", "split", SPLIT)
    cloud.audit("cmp-1", [domain(SPLIT)])
    cloud.audit("cmp-2", [])
    cloud.audit("cmp-3", [])
    forge(cloud, "cmp-1", "cmp-9.json", minutes_ahead=0, host="cmp-9")
    code, document, err = cloud.fleet(capsys)
    assert code == exits.ERROR
    assert "cmp-9 unreliable (no nova-compute service of Nova runs on this host" in (one_line(err))
    assert document["split_brain"] == []
    cmp9 = by_host(document)["cmp-9"]
    assert (cmp9["status"], cmp9["known_to_nova"]) == ("unreliable", False)


def test_a_report_larger_than_the_cap_is_not_read(cloud, capsys):
    """docs/design.md rule 20: a report file is read up to ``REPORT_MAX_BYTES``; a bigger
    one (here a real report padded with blanks) is unreadable, with one line, exit 1."""
    for host in HOSTS:
        cloud.audit(host, [])
    path = cloud.reports / "cmp-2.json"
    path.write_text(path.read_text() + " " * reports.REPORT_MAX_BYTES)
    before = snapshot(cloud.reports)
    code, document, err = cloud.fleet(capsys)
    assert code == exits.ERROR
    assert f"cmp-2.json unreadable (larger than {reports.REPORT_MAX_BYTES} bytes" in (one_line(err))
    assert [u["source"] for u in document["unreadable"]] == ["cmp-2.json"]
    assert by_host(document)["cmp-2"]["status"] == "missing"
    assert snapshot(cloud.reports) == before


def test_a_fifo_or_device_among_the_reports_is_never_read(cloud, capsys):
    """A report path that is no regular file (a FIFO named like a report, a link to a
    device) is never opened for reading: the audit neither blocks nor reads without end."""
    for host in HOSTS:
        cloud.audit(host, [])
    os.mkfifo(cloud.reports / "fifo.json")
    (cloud.reports / "zero.json").symlink_to("/dev/zero")
    code, document, err = cloud.fleet(capsys)
    assert code == exits.OK, err
    assert document["summary"]["trusted"] == 3


def forge_finding(cloud: Cloud) -> list[dict]:
    """The findings of a real report of a host (cmp-9, Nova knows it not) holding one orphan:
    a finding with every field the schema requires, to forge from."""
    gone = cloud.nova.boot("cmp-1")
    cloud.nova.local_delete(gone, at=cloud.nova.clock)
    findings: list[dict] = cloud.audit("cmp-1", [domain(gone)], name="cmp-9.json")["findings"]
    (cloud.reports / "cmp-9.json").unlink()
    return findings


def test_control_characters_of_a_report_are_escaped_in_the_table_exact_in_json(cloud, capsys):
    """docs/design.md rule 20: a report's names and reasons are shown, never played: an
    OSC sequence and a bidi override in a finding print as visible escapes in the table;
    the JSON keeps them exactly (``json.dumps`` escapes them)."""
    for host in HOSTS:
        cloud.audit(host, [])
    (real,) = forge_finding(cloud)
    hostile = real | {
        "uuid": SPLIT,
        "name": "i-\x1b]0;X\x07",
        "kind": "deleted",
        "reason": "gone \u202etxt.exe\x9b",
        "brief": "gone \u202etxt.exe\x9b",
    }
    forge(cloud, "cmp-2", "cmp-2.json", minutes_ahead=0, findings=[hostile])
    code, document, _ = cloud.fleet(capsys)
    assert code == exits.FOUND
    (finding,) = by_host(document)["cmp-2"]["findings"]
    assert (finding["name"], finding["reason"]) == (hostile["name"], hostile["reason"])
    text = "\n".join(fleet_table(cloud, capsys))
    assert "i-\\x1b]0;X\\x07" in text and "gone \\u202etxt.exe\\x9b" in text
    assert not [c for c in text if c != "\n" and (ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0)]
    assert "\u202e" not in text


def fleet_table(cloud: Cloud, capsys) -> list[str]:
    conf = cloud.tmp / "central.conf"
    argv = ["fleet", "audit", "--config-file", str(conf), "--reports", str(cloud.reports)]
    capsys.readouterr()
    cli.main(argv)
    return capsys.readouterr().out.splitlines()


def test_json_file_keeps_the_merged_document_of_a_table_run(cloud, capsys, tmp_path):
    """``--format table --json-file F``: the table on stdout, and in F the very document
    ``--format json`` prints, from the same one merge (a playbook prints the one, keeps the
    other)."""
    cloud.nova.boot("cmp-1", "split", SPLIT)
    cloud.audit("cmp-1", [domain(SPLIT)])
    cloud.audit("cmp-2", [domain(SPLIT)])
    cloud.audit("cmp-3", [])
    kept = tmp_path / "merged.json"
    cloud.nova.requests.clear()
    conf = str(cloud.tmp / "central.conf")
    (cloud.tmp / "central.conf").write_text(
        "[nova]\nauth_type = admin_token\nendpoint = http://x\ntoken = t\n"
    )
    argv = ["fleet", "audit", "--config-file", conf, "--reports", str(cloud.reports),
            "--json-file", str(kept)]  # fmt: skip
    code = cli.main(argv)
    out, err = capsys.readouterr()
    assert code == exits.FOUND, err
    assert "split-brain" in out and not out.lstrip().startswith("{")
    document = report_schema.valid(json.loads(kept.read_text()))
    assert [s["uuid"] for s in document["split_brain"]] == [SPLIT]
    assert cloud.nova.request_count == document["summary"]["nova_requests"]
    assert not (tmp_path / "merged.json.partial").exists()


def test_json_file_in_no_directory_is_a_usage_error_before_nova_is_asked(cloud, capsys):
    cloud.audit("cmp-1", [])
    cloud.nova.requests.clear()
    code, document, err = cloud.fleet(capsys, "--json-file", str(cloud.tmp / "no" / "f.json"))
    assert code == exits.USAGE
    assert "--json-file" in one_line(err) and document == {}
    assert cloud.nova.request_count == 0
