"""Every JSON report has one versioned shape, described by docs/schema/report.schema.json: the
schema the fleet's reader validates the hosts' reports against (``fleet/report_schema.py``)."""

from __future__ import annotations

import copy
import datetime
import importlib.metadata
import json
import pathlib

import jsonschema
import pytest

from nova_orphans import cli, exits
from nova_orphans.cli import agent as agent_cli
from nova_orphans.cli import audit as audit_cli
from nova_orphans.fakes import libvirt_node as worlds
from nova_orphans.fakes.nova import SimulatedNova
from nova_orphans.fleet import reports
from nova_orphans.fleet.records import PerHostReport
from nova_orphans.render import host as render_host
from tests import report_schema

NOW = datetime.datetime(2024, 5, 1, 12, 0, tzinfo=datetime.timezone.utc)


def demo_document(capsys: pytest.CaptureFixture[str]) -> dict:
    assert cli.main(["demo", "--format", "json"]) == exits.SHARED_VOLUME
    return json.loads(capsys.readouterr().out)


def test_the_schema_is_a_valid_draft_2020_12_schema():
    schema = json.loads(report_schema.SCHEMA_PATH.read_text())
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)


def test_demo_json_matches_the_schema_with_versions_and_counts(capsys):
    document = report_schema.valid(demo_document(capsys))
    assert document["schema_version"] == render_host.SCHEMA_VERSION == 1
    assert document["tool_version"] == importlib.metadata.version("nova-orphans")
    assert document["counts"] == {
        "split-brain": 0,
        "deleted": 1,
        "unknown": 1,
        "misplaced": 1,
        "lost": 1,
        "foreign": 1,
        "protected": 1,
    }


def test_audit_json_matches_the_schema(capsys, monkeypatch, tmp_path: pathlib.Path):
    nova = SimulatedNova()
    # The node Nova knows for cmp-1 is the test:/// driver's ("vm", TEST), and this
    # machine's compute_id names it: identity proven.
    worlds.write_compute_id(nova.add_compute("cmp-1", node="vm", hypervisor_type="TEST").node_uuid)
    managed = nova.boot("cmp-1", "managed")
    gone = nova.boot("cmp-1", "gone")
    nova.local_delete(gone, at=NOW)
    domains = [
        worlds.node_domain(uuid=u, name=f"instance-{u}", metadata=worlds.nova_metadata())
        for u in (managed, gone)
    ]
    uri = worlds.write_node_file(tmp_path, domains)
    conf = tmp_path / "nova-orphans.conf"
    conf.write_text("[nova]\nauth_type = admin_token\nendpoint = http://x\ntoken = t\n")
    monkeypatch.setattr(audit_cli, "transport_from_conf", lambda conf: nova)
    argv = ["audit", "--config-file", str(conf), "--host", "cmp-1", "--libvirt-uri", uri]
    assert cli.main([*argv, "--format", "json"]) == exits.FOUND
    document = report_schema.valid(json.loads(capsys.readouterr().out))
    assert document["host"] == "cmp-1"
    assert document["identity"]["state"] == "verified"
    assert [(f["uuid"], f["kind"]) for f in document["findings"]] == [(gone, "deleted")]
    assert document["counts"]["deleted"] == 1 and sum(document["counts"].values()) == 1
    parsed = reports.parse_document(document, "cmp-1.json")  # the fleet's reader takes it whole
    assert isinstance(parsed, PerHostReport) and [f.uuid for f in parsed.findings] == [gone]


@pytest.mark.parametrize(
    "break_it",
    [
        pytest.param(lambda d: d.pop("schema_version"), id="no schema_version"),
        pytest.param(lambda d: d.update(schema_version=2), id="another schema_version"),
        pytest.param(lambda d: d.pop("tool_version"), id="no tool_version"),
        pytest.param(lambda d: d["counts"].pop("lost"), id="a kind missing from counts"),
        pytest.param(lambda d: d["findings"][0].update(kind="stray"), id="an unknown kind"),
        pytest.param(lambda d: d["findings"][0].pop("reason"), id="a finding without reason"),
        pytest.param(lambda d: d.update(extra=1), id="an undocumented field"),
        pytest.param(lambda d: d["findings"][0].update(leftovers=[]), id="fleet field in audit"),
    ],
)
def test_the_schema_rejects_a_document_that_breaks_it(capsys, break_it):
    document = demo_document(capsys)
    report_schema.valid(document)
    broken = copy.deepcopy(document)
    break_it(broken)
    with pytest.raises(jsonschema.ValidationError):
        report_schema.valid(broken)


def test_counts_that_do_not_tally_the_findings_are_caught(capsys):
    document = demo_document(capsys)
    document["counts"]["deleted"] = 2
    with pytest.raises(AssertionError):
        report_schema.valid(document)


def test_version_flag_prints_the_installed_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == (
        f"nova-orphans {importlib.metadata.version('nova-orphans')}"
    )


def test_the_agent_report_file_matches_the_schema_and_is_read_back(monkeypatch, tmp_path):
    """``[agent] report_file``: what ``fleet audit --reports`` merges is held to the schema
    its reader validates against, and the reader takes it whole."""
    nova = SimulatedNova()
    worlds.write_compute_id(nova.add_compute("cmp-1", node="vm", hypervisor_type="TEST").node_uuid)
    gone = nova.boot("cmp-1", "gone")
    nova.local_delete(gone, at=NOW)
    domains = [worlds.node_domain(uuid=u, name=f"instance-{u}", metadata=worlds.nova_metadata())
               for u in (nova.boot("cmp-1", "managed"), gone)]  # fmt: skip
    uri = worlds.write_node_file(tmp_path, domains)
    report_file = tmp_path / "reports" / "cmp-1.json"
    report_file.parent.mkdir()
    conf = tmp_path / "nova-orphans.conf"
    conf.write_text(
        f"[DEFAULT]\nhost = cmp-1\n[libvirt]\nconnection_uri = {uri}\n"
        f"[agent]\nstate_dir = {tmp_path / 'state'}\nreport_file = {report_file}\n"
        "[nova]\nauth_type = admin_token\nendpoint = http://x\ntoken = t\n"
    )
    monkeypatch.setattr(agent_cli, "transport_from_conf", lambda conf: nova)
    assert cli.main(["run", "--once", "--config-file", str(conf)]) == exits.FOUND
    document = report_schema.valid(json.loads(report_file.read_text()))
    assert [(f["uuid"], f["kind"]) for f in document["findings"]] == [(gone, "deleted")]
    (parsed,) = reports.read_directory(str(report_file.parent))
    assert isinstance(parsed, PerHostReport) and parsed.identity == "verified"
    assert [(f.uuid, f.kind.value) for f in parsed.findings] == [(gone, "deleted")]
