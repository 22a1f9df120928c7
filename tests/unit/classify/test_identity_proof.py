"""docs/design.md rule 10 through the command line: names are no proof; a node UUID is.

This machine's compute is read through libvirt's test driver (Nova's node of ``cmp-1``
has the hostname and type it reports), and Nova is a simulated one whose node of
``cmp-1`` has a UUID of its own. What proves the two are one is nova-compute's
``compute_id`` — found where nova-compute keeps it even without ``nova_config_file`` —
or the node UUID the operator pinned (``[DEFAULT] compute_node_uuid``).
"""

from __future__ import annotations

import json
import pathlib
import uuid as uuidlib

import pytest

from nova_orphans import cli, exits
from nova_orphans.cli import agent as agent_cli
from nova_orphans.cli import audit as audit_cli
from nova_orphans.config import nova_compute
from nova_orphans.fakes import libvirt_node as worlds
from nova_orphans.fakes.nova import SimulatedNova

HOST = "cmp-1"


class Host:
    """cmp-1: a managed guest and one Nova deleted (an orphan), in a test:/// world."""

    def __init__(self, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.nova = SimulatedNova()
        self.node = self.nova.add_compute(HOST, **worlds.test_driver_node()).node_uuid
        managed = self.nova.boot(HOST, "managed")
        self.orphan = self.nova.boot(HOST, "orphan")
        self.nova.local_delete(self.orphan)
        self.uri = worlds.write_node_file(
            tmp_path,
            [
                worlds.node_domain(uuid=u, name=f"instance-{u}", metadata=worlds.nova_metadata())
                for u in (managed, self.orphan)
            ],
        )
        self.tmp_path = tmp_path
        monkeypatch.setattr(audit_cli, "transport_from_conf", lambda conf: self.nova)
        monkeypatch.setattr(agent_cli, "transport_from_conf", lambda conf: self.nova)

    def config(self, default: str = "", agent: str = "") -> str:
        path = self.tmp_path / "nova-orphans.conf"
        path.write_text(
            f"[DEFAULT]\nhost = {HOST}\n{default}"
            "[nova]\nauth_type = admin_token\nendpoint = http://x\ntoken = t\n"
            f"[agent]\nstate_dir = {self.tmp_path / 'state'}\n{agent}"
        )
        return str(path)

    def audit(self, capsys, config_file: str) -> tuple[int, dict, str]:
        code = cli.main(
            ["audit", "--config-file", config_file, "--libvirt-uri", self.uri, "--format", "json"]
        )
        captured = capsys.readouterr()
        return code, json.loads(captured.out), captured.err


@pytest.fixture
def host(tmp_path, monkeypatch) -> Host:
    return Host(tmp_path, monkeypatch)


def checks(document: dict) -> dict[str, str]:
    return {c["check"]: c["outcome"] for c in document["identity"]["checks"]}


def test_same_names_without_a_node_uuid_are_unproven_audit_warns_and_still_reports(host, capsys):
    code, document, err = host.audit(capsys, host.config())
    assert code == exits.FOUND
    assert document["identity"]["state"] == "unproven"
    assert checks(document)["hostname"] == checks(document)["type"] == "passed"
    (line,) = err.strip().splitlines()
    assert line.startswith("nova-orphans: warning: identity not proven: ")
    assert "no compute_id or compute_node_uuid tied them" in line
    assert [f["uuid"] for f in document["findings"]] == [host.orphan]


def test_a_compute_id_in_the_packages_state_path_proves_it_without_nova_config_file(
    host, capsys, nova_state_dirs
):
    (nova_state_dirs / "compute_id").write_text(host.node + "\n")
    code, document, err = host.audit(capsys, host.config())
    assert (code, err) == (exits.FOUND, "")
    assert document["identity"]["state"] == "verified"
    assert checks(document)["compute-id"] == "passed"


def test_a_compute_id_in_kollas_nova_compute_volume_proves_it(host, capsys, tmp_path, monkeypatch):
    """kolla-ansible's nova_compute named volume, mounted on /var/lib/nova in its
    container: on the host, under Docker's (or Podman's) volumes directory."""
    root = tmp_path / "root"
    volume = root / "var/lib/docker/volumes/nova_compute/_data"
    volume.mkdir(parents=True)
    (volume / "compute_id").write_text(host.node)
    monkeypatch.setattr(
        nova_compute,
        "NOVA_STATE_DIRS",
        tuple(str(root / d.lstrip("/")) for d in nova_compute.NOVA_STATE_DIRS_DEFAULT),
    )
    code, document, err = host.audit(capsys, host.config())
    assert (code, err) == (exits.FOUND, "")
    assert document["identity"]["state"] == "verified"
    assert f"{volume}/compute_id holds Nova's node" in json.dumps(document["identity"])


def test_copies_that_disagree_leave_it_unproven_naming_both(host, capsys, nova_state_dirs):
    etc = host.tmp_path / "etc-nova"
    etc.mkdir()
    (etc / "nova.conf").write_text(f"[DEFAULT]\nhost = {HOST}\n")
    (etc / "compute_id").write_text(str(uuidlib.uuid4()))
    (nova_state_dirs / "compute_id").write_text(host.node)
    code, document, err = host.audit(
        capsys, host.config(f"nova_config_file = {etc / 'nova.conf'}\n")
    )
    assert code == exits.FOUND
    assert document["identity"]["state"] == "unproven"
    assert checks(document)["compute-id"] == "inconclusive"
    assert "compute_id files disagree" in err and str(etc / "compute_id") in err


def test_a_pinned_node_uuid_proves_it_or_refutes_it(host, capsys):
    code, document, err = host.audit(capsys, host.config(f"compute_node_uuid = {host.node}\n"))
    assert (code, err) == (exits.FOUND, "")
    assert checks(document)["node-uuid"] == "passed"

    other = str(uuidlib.uuid4())
    code = cli.main(
        ["audit", "--config-file", host.config(f"compute_node_uuid = {other}\n"),
         "--libvirt-uri", host.uri]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert (code, captured.out) == (exits.ERROR, "")
    (line,) = captured.err.strip().splitlines()
    assert line.startswith("nova-orphans: error: identity mismatch: ")
    assert f"node-uuid: compute_node_uuid is node UUID {other}" in line


def test_run_once_without_a_proof_acts_on_nothing_and_says_why(host, capsys, monkeypatch):
    """The agent told to stop deleted guests at once: unproven, it stops nothing, logs why
    and exports identity_verified 0."""
    from nova_orphans.act.recording import RecordingEffects

    live: list[RecordingEffects] = []

    class LiveSpy(RecordingEffects):
        def __init__(self, uri: str, instances_path: str, quarantine: str, *_: object) -> None:
            super().__init__(uri, instances_path, quarantine)
            live.append(self)

    monkeypatch.setattr(agent_cli, "LiveEffects", LiveSpy)
    textfile = host.tmp_path / "metrics.prom"
    config_file = host.config(
        agent="action_deleted = stop\ngrace_period = 0\nsightings_required = 1\n"
        f"[metrics]\ntextfile = {textfile}\n"
    )
    argv = ["run", "--once", "--config-file", config_file, "--libvirt-uri", host.uri]
    code = cli.main(argv)
    err = capsys.readouterr().err
    assert code == exits.FOUND, err
    assert [c for e in live for c in e.calls] == []
    assert "IDENTITY: nothing will be done this cycle: identity not proven" in err
    assert "nova_orphans_identity_verified 0.0" in textfile.read_text()

    worlds.write_compute_id(host.node)
    assert cli.main(argv) == 4, capsys.readouterr().err
    assert [args[0] for e in live for name, args in e.calls if name == "stop"] == [host.orphan]
