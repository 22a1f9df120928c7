"""docs/design.md rule 10 against a real Nova and a real libvirtd: the tool acts only on the
libvirt Nova calls its host.

lvhost is a real libvirt compute on ``qemu:///system`` (Nova's node ``hypervisor_hostname`` is
what that libvirt's ``getHostname()`` says, type QEMU, its ``compute_id`` under its
state_path); host1 and host2 run Nova's fake driver. Each test boots a real guest on lvhost
and points the real console script at it through a wrong config, as an operator would:

- a config copied from another compute (host1's nova.conf, whose libvirt URI is also
  ``qemu:///system``), or ``--host host1`` typed on lvhost;
- lvhost's own config whose libvirt URI is another libvirt holding copies of its guests;
- lvhost's own config, which passes with every check listed.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
from collections.abc import Iterator

import harness
import pytest
from prometheus_client.parser import text_string_to_metric_families

from nova_orphans import exits
from nova_orphans.fakes import libvirt_node as worlds

pytestmark = pytest.mark.nova

COMPUTE_CONF = harness.STATE / "etc" / "compute-{host}.conf"


@pytest.fixture
def lvhost_guest(nova_stack: harness.Nova) -> Iterator[str]:
    """A healthy server on lvhost; its QEMU guest runs in qemu:///system."""
    uuid = nova_stack.boot("lvhost", timeout=300)["id"]
    try:
        assert harness.domain_state(uuid) == "running"
        yield uuid
    finally:
        nova_stack.destroy(uuid)


def write_config(tmp_path: pathlib.Path, nova_conf_of: str, extra: str = "") -> pathlib.Path:
    """Our config on a compute: nova_config_file = that compute's nova.conf, Nova's API,
    every action reap at the first sighting, journal, quarantine and metrics under tmp."""
    path = tmp_path / f"{nova_conf_of}.conf"
    path.write_text(
        "[DEFAULT]\n"
        f"nova_config_file = {str(COMPUTE_CONF).format(host=nova_conf_of)}\n"
        f"{extra}"
        "[nova]\n"
        "auth_type = admin_token\n"
        f"endpoint = {harness.NOVA_ENDPOINT}\n"
        f"token = {harness.ADMIN_TOKEN}\n"
        "timeout = 20\n"
        "[agent]\n"
        "action_deleted = reap\n"
        "action_unknown = reap\n"
        "action_misplaced = reap\n"
        "grace_period = 0\n"
        "sightings_required = 1\n"
        "reap_delay = 0\n"
        "stop_timeout = 2\n"
        "brake_min_orphans = 100\n"
        f"state_dir = {tmp_path / 'state'}\n"
        "[metrics]\n"
        f"textfile = {tmp_path / 'metrics.prom'}\n"
    )
    return path


def one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == exits.ERROR, (done.returncode, done.stdout, done.stderr)
    assert not done.stdout.strip(), done.stdout
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("nova-orphans: error: identity mismatch: "), line
    return line


def metrics(tmp_path: pathlib.Path) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = (tmp_path / "metrics.prom").read_text()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def run_once(config: pathlib.Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return harness.run_cli("run", "--once", "--config-file", str(config), *extra, timeout=180)


def history(config: pathlib.Path, uuid: str) -> list[object]:
    done = harness.run_cli(
        "history", "--config-file", str(config), "--uuid", uuid, "--format", "json"
    )
    assert done.returncode == exits.OK, done.stderr
    return list(json.loads(done.stdout)["events"])


def test_host1s_copied_config_on_lvhosts_libvirt_is_refused_and_its_guest_keeps_running(
    nova_stack: harness.Nova, nova_orphans_cli: str, lvhost_guest: str, tmp_path: pathlib.Path
) -> None:
    """host1's nova.conf (host = host1, connection_uri = qemu:///system) used on lvhost's
    libvirt: lvhost's healthy guest would look misplaced. audit exits 1 with one line naming
    both identities; the agent, told to reap misplaced guests at once, acts on nothing,
    cycle after cycle, says so at ERROR and in its metrics."""
    config = write_config(tmp_path, "host1")
    line = one_error_line(harness.run_cli("audit", "--config-file", str(config)))
    assert "Nova's host 'host1' is node 'host1' (fake) but libvirt qemu:///system is " in line
    assert "(QEMU), which Nova knows as the node of host 'lvhost'" in line

    for _ in range(2):
        done = run_once(config)
        assert done.returncode == exits.ERROR, done.stderr
        assert (
            "ERROR nova_orphans.agent [-] IDENTITY: cycle aborted, nothing was done: identity "
            in (done.stderr)
        )
        assert "finding uuid=" not in done.stderr
        assert harness.domain_state(lvhost_guest) == "running"
        found = metrics(tmp_path)
        assert found[("nova_orphans_identity_verified", ())] == 0
        assert found[("nova_orphans_cycles_aborted_total", (("reason", "identity"),))] == 1
    assert history(config, lvhost_guest) == []
    assert nova_stack.server(lvhost_guest)["status"] == "ACTIVE"


def test_host1_typed_on_lvhost_is_refused_by_libvirt_and_compute_id(
    nova_stack: harness.Nova, nova_orphans_cli: str, lvhost_guest: str, tmp_path: pathlib.Path
) -> None:
    """lvhost's own config with ``--host host1`` on the command line: libvirt is lvhost's
    node and lvhost's compute_id names lvhost's node, not host1's."""
    config = write_config(tmp_path, "lvhost")
    line = one_error_line(harness.run_cli("audit", "--config-file", str(config), "--host", "host1"))
    assert "Nova's host 'host1' is node 'host1' (fake) but libvirt qemu:///system" in line
    assert "libvirt-owner" in line and "compute-id: " in line
    done = run_once(config, "--host", "host1")
    assert done.returncode == exits.ERROR
    assert harness.domain_state(lvhost_guest) == "running"


def test_lvhosts_config_pointing_at_another_libvirt_is_refused(
    nova_stack: harness.Nova, nova_orphans_cli: str, lvhost_guest: str, tmp_path: pathlib.Path
) -> None:
    """lvhost's config whose libvirt URI is another libvirt (a test:/// world holding a copy
    of lvhost's guest and a guest of host1's): its type is not the QEMU of lvhost's node."""
    uri = worlds.write_world(
        tmp_path,
        [
            worlds.node_domain(
                uuid=lvhost_guest, name="instance-copy", metadata=worlds.nova_metadata()
            ),
            worlds.node_domain(
                uuid=worlds.random_uuid(), name="other", metadata=worlds.nova_metadata()
            ),
        ],
    )
    config = write_config(tmp_path, "lvhost", extra=f"[libvirt]\nconnection_uri = {uri}\n")
    line = one_error_line(harness.run_cli("audit", "--config-file", str(config)))
    assert "Nova's host 'lvhost' is node " in line and "(QEMU) but libvirt test://" in line
    assert "(TEST)" in line and "failed: type" in line
    assert run_once(config).returncode == exits.ERROR
    assert harness.domain_state(lvhost_guest) == "running"


def test_lvhosts_own_config_is_verified_by_hostname_type_and_compute_id(
    nova_stack: harness.Nova, nova_orphans_cli: str, lvhost_guest: str, tmp_path: pathlib.Path
) -> None:
    """nova_config_file = lvhost's nova.conf alone: the audit proves the identity with every
    check, lists them, and counts lvhost's guest as Nova's; the agent's metric says 1."""
    config = write_config(tmp_path, "lvhost")
    done = harness.run_cli("audit", "--config-file", str(config), "--format", "json")
    assert done.returncode in (exits.OK, exits.FOUND), done.stderr
    assert done.stderr == ""
    report = json.loads(done.stdout)
    identity = report["identity"]
    assert identity["state"] == "verified", identity
    outcomes = {c["check"]: c["outcome"] for c in identity["checks"]}
    assert outcomes == {
        "nova-node": "passed",
        "libvirt-owner": "passed",
        "hostname": "passed",
        "type": "passed",
        "compute-id": "passed",
    }, identity
    assert lvhost_guest not in {f["uuid"] for f in report["findings"]}
    # NOTE: a dry run set in the config exports metrics (``run --dry-run`` does not: it
    # runs beside the live agent, whose metrics are its own).
    config.write_text(config.read_text().replace("[agent]\n", "[agent]\ndry_run = true\n"))
    done = run_once(config)
    assert done.returncode in (exits.OK, exits.FOUND), done.stderr
    assert metrics(tmp_path)[("nova_orphans_identity_verified", ())] == 1
