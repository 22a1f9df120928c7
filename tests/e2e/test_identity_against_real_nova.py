"""docs/design.md rule 10 against a real Nova and a real libvirtd: the tool acts only on the
libvirt Nova calls its host.

lvhost is a real libvirt compute on ``qemu:///system`` (Nova's node ``hypervisor_hostname`` is
what that libvirt's ``getHostname()`` says, type QEMU, its ``compute_id`` under its
state_path); host1 and host2 run Nova's fake driver. Each test boots a real guest on lvhost
and points the real console script at it through a wrong config, as an operator would:

- a config copied from another compute (host1's nova.conf, whose libvirt URI is also
  ``qemu:///system``), or ``--host host1`` typed on lvhost;
- lvhost's own config whose libvirt URI is another libvirt holding copies of its guests;
- lvhost's own config, which passes with every check listed;
- a compute_id that names another node (a wrong cloud's, or a stale one): a mismatch;
- no nova_config_file and no compute_id reachable, no pinned node UUID: hostname and type
  agree, which proves nothing (another cloud has the same names), so nothing is done.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import uuid as uuidlib
from collections.abc import Iterator

import harness
import pytest
from prometheus_client.parser import text_string_to_metric_families

from nova_orphans import exits
from nova_orphans.fakes import libvirt_node as worlds

pytestmark = pytest.mark.nova

COMPUTE_CONF = harness.STATE / "etc" / "compute-{host}.conf"
#: lvhost's nova-compute state_path: its compute_id names lvhost's node.
LVHOST_STATE = harness.STATE / "lvhost"


def lvhost_node() -> str:
    """The node UUID lvhost's nova-compute wrote (nova/virt/node.py)."""
    return str(uuidlib.UUID((LVHOST_STATE / "compute_id").read_text().strip()))


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
    uri = worlds.write_node_file(
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
        "node-uuid": "skipped",
    }, identity
    details = {c["check"]: c["detail"] for c in identity["checks"]}
    assert details["compute-id"] == (
        f"{LVHOST_STATE / 'compute_id'} holds Nova's node {lvhost_node()}"
    )
    assert lvhost_guest not in {f["uuid"] for f in report["findings"]}
    # NOTE: a dry run set in the config exports metrics (``run --dry-run`` does not: it
    # runs beside the live agent, whose metrics are its own).
    config.write_text(config.read_text().replace("[agent]\n", "[agent]\ndry_run = true\n"))
    done = run_once(config)
    assert done.returncode in (exits.OK, exits.FOUND), done.stderr
    assert metrics(tmp_path)[("nova_orphans_identity_verified", ())] == 1


@pytest.fixture
def unknown_guest(tmp_path: pathlib.Path) -> Iterator[str]:
    """A running QEMU guest on lvhost's libvirt with Nova metadata and a UUID Nova never had
    (as this host's guest looks through a wrong cloud's Nova): ``unknown``."""
    uuid = str(uuidlib.uuid4())
    name = f"e2e-identity-{uuid[:8]}"
    xml = tmp_path / f"{name}.xml"
    xml.write_text(
        worlds.qemu_domain(uuid=uuid, name=name, metadata=worlds.nova_metadata(name=name))
    )
    try:
        assert harness.virsh("define", str(xml)).returncode == 0
        assert harness.virsh("start", uuid).returncode == 0
        assert harness.domain_state(uuid) == "running"
        yield uuid
    finally:
        harness.remove_domain(uuid)
    assert harness.domain_state(uuid) is None


def write_bare_config(tmp_path: pathlib.Path, extra: str = "") -> pathlib.Path:
    """Our config on lvhost without nova_config_file (it is optional): host, libvirt URI and
    instances path written out; every action at once."""
    config = write_config(tmp_path, "lvhost", extra=extra)
    lines = config.read_text().splitlines(keepends=True)
    config.write_text(
        "".join(line for line in lines if not line.startswith("nova_config_file"))
        .replace(
            "[DEFAULT]\n",
            f"[DEFAULT]\nhost = lvhost\ninstances_path = {LVHOST_STATE / 'instances'}\n",
        )
        .replace("[nova]\n", "[libvirt]\nconnection_uri = qemu:///system\n[nova]\n")
    )
    return config


def test_a_compute_id_naming_another_node_is_a_mismatch_and_nothing_is_done(
    nova_stack: harness.Nova,
    nova_orphans_cli: str,
    lvhost_guest: str,
    unknown_guest: str,
    tmp_path: pathlib.Path,
) -> None:
    """lvhost's nova.conf whose state_path holds a compute_id of another node (what a
    wrong cloud's same-named compute looks like from here): hostname and type agree, the
    compute_id refutes the view; audit exits 1 with one line, the agent acts on nothing."""
    state = tmp_path / "nova-state"
    state.mkdir()
    other = str(uuidlib.uuid4())
    (state / "compute_id").write_text(other + "\n")
    nova_conf = tmp_path / "etc" / "nova.conf"
    nova_conf.parent.mkdir()
    lvhost_conf = pathlib.Path(str(COMPUTE_CONF).format(host="lvhost")).read_text()
    assert f"state_path = {LVHOST_STATE}\n" in lvhost_conf
    nova_conf.write_text(
        lvhost_conf.replace(f"state_path = {LVHOST_STATE}\n", f"state_path = {state}\n")
    )
    config = write_config(tmp_path, "lvhost")
    config.write_text(
        config.read_text().replace(
            f"nova_config_file = {str(COMPUTE_CONF).format(host='lvhost')}",
            f"nova_config_file = {nova_conf}",
        )
    )
    line = one_error_line(harness.run_cli("audit", "--config-file", str(config)))
    assert "Nova's host 'lvhost' is node " in line and "(QEMU); libvirt qemu:///system" in line
    assert f"compute-id: {state / 'compute_id'} holds node UUID {other}" in line
    assert f"Nova's node of 'lvhost' is {lvhost_node()}" in line
    done = run_once(config)
    assert done.returncode == exits.ERROR, done.stderr
    assert "IDENTITY: cycle aborted, nothing was done: identity mismatch" in done.stderr
    assert harness.domain_state(unknown_guest) == "running"
    assert harness.domain_state(lvhost_guest) == "running"
    assert metrics(tmp_path)[("nova_orphans_identity_verified", ())] == 0
    assert history(config, unknown_guest) == []


def test_no_compute_id_reachable_and_no_pin_is_unproven_and_the_agent_acts_on_nothing(
    nova_stack: harness.Nova,
    nova_orphans_cli: str,
    lvhost_guest: str,
    unknown_guest: str,
    tmp_path: pathlib.Path,
) -> None:
    """The reproduction of a wrong cloud with a same-named compute: nova_config_file unset,
    no compute_id where nova-compute keeps one by default, no compute_node_uuid. Hostname
    and type agree; the view is unproven: audit warns in one line and still reports, the
    agent told to stop unknown guests at once stops nothing, says why and exports 0. Then,
    with lvhost's node UUID pinned, the same agent acts: the identity was the only brake."""
    from nova_orphans.config import nova_compute

    defaults = nova_compute.NOVA_STATE_DIRS_DEFAULT
    present = [d for d in defaults if (pathlib.Path(d) / "compute_id").exists()]
    assert not present, f"this machine has a compute_id of its own in {present}"
    config = write_bare_config(tmp_path)
    config.write_text(config.read_text().replace("action_unknown = reap", "action_unknown = stop"))
    done = harness.run_cli("audit", "--config-file", str(config), "--format", "json")
    assert done.returncode == exits.FOUND, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("nova-orphans: warning: identity not proven: Nova's host 'lvhost'")
    assert "no compute_id or compute_node_uuid tied them (passed: hostname, type (names" in line
    report = json.loads(done.stdout)
    assert report["identity"]["state"] == "unproven"
    assert {f["uuid"]: f["kind"] for f in report["findings"]}[unknown_guest] == "unknown"

    for _ in range(2):
        done = run_once(config)
        assert done.returncode == exits.FOUND, done.stderr
        assert "IDENTITY: nothing will be done this cycle: identity not proven" in done.stderr
        assert harness.domain_state(unknown_guest) == "running"
        assert metrics(tmp_path)[("nova_orphans_identity_verified", ())] == 0
    assert history(config, unknown_guest) == []
    assert harness.domain_state(lvhost_guest) == "running"

    config.write_text(
        config.read_text().replace(
            "[DEFAULT]\n", f"[DEFAULT]\ncompute_node_uuid = {lvhost_node()}\n"
        )
    )
    done = run_once(config)
    assert done.returncode == 4, done.stderr
    assert "identity verified: " in done.stderr and "node-uuid" in done.stderr
    assert harness.domain_state(unknown_guest) == "shut off"
    assert harness.domain_state(lvhost_guest) == "running"
    assert metrics(tmp_path)[("nova_orphans_identity_verified", ())] == 1
