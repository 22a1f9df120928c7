"""The agent (``nova-orphans run --once``, ``history``, ``quarantine list``, ``restore``)
against a real Nova control plane and a real libvirtd running QEMU guests.

Every command is the real console script run as a subprocess with a config file written to
``tmp_path`` (journal and quarantine there too). The guards are kept small so a test takes
seconds, but each test shows them holding: a cycle inside ``grace_period`` or short of
``sightings_required`` does nothing, a stopped guest is reaped only after ``reap_delay``.
``interval`` is the smallest allowed (10 s): a cycle counts as a sighting only half an
interval after the previous one, so a test waits ``AgentCli.until_counted`` before a cycle
that must count (docs/design.md rule 15).

``qemu:///system`` is lvhost's libvirt: every agent here is lvhost's (an agent configured as
another host on it acts on nothing, see test_identity_against_real_nova.py). It is shared:
other tests may define guests there at any time, so each agent gets ``[agent] allow_uuids`` =
the UUIDs its test created — the guests that are expected to stay untouched are in that list
too, so only their classification protects them — and ``[DEFAULT] deny_uuids`` = every other
domain present when the test starts (they are reported as protected and never weigh on the
orphan-fraction brake). Every test removes the domains it defined.

The tests that need lvhost's compute down (real Nova guests deleted locally) are last in the
file: they share one module fixture that boots lvhost's servers and stops its compute once.
"""

from __future__ import annotations

import configparser
import dataclasses
import hashlib
import json
import os
import pathlib
import re
import shutil
import sqlite3
import stat
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import harness
import pytest

from nova_orphans import exits
from nova_orphans.fakes import libvirt_node as worlds

pytestmark = pytest.mark.nova

QEMU = harness.LIBVIRT_URI
INTERVAL = 10
#: Past half an interval after the previous cycle's start, with room for start-up jitter.
COUNTED_AFTER = INTERVAL / 2 + 1.5
# The tiny guests have no OS: a graceful shutdown never completes, the agent powers them off.
STOP_TIMEOUT = 2


def lvhost_instances_path() -> pathlib.Path:
    """``instances_path`` of lvhost's nova-compute, read from its config."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(harness.STATE / "etc" / "compute-lvhost.conf")
    return pathlib.Path(parser["DEFAULT"]["instances_path"])


# --------------------------------------------------------------------------- the CLI


FINDING_LINE = re.compile(
    r"finding uuid=(?P<uuid>\S+) kind=(?P<kind>\S+) action=(?P<action>\S+) "
    r"dry_run=(?P<dry_run>\S+) next=(?P<next>\S+) why=(?P<why>.*?) reason=(?P<reason>.*)$"
)
STEP_LINE = re.compile(
    r"step uuid=(?P<uuid>\S+) kind=(?P<kind>\S+) action=(?P<step>\S+) "
    r"dry_run=(?P<dry_run>\S+) outcome=(?P<outcome>\S+) detail=(?P<detail>.*)$"
)


def show(done: subprocess.CompletedProcess[str]) -> str:
    return f"exit {done.returncode}\nstdout: {done.stdout[-3000:]}\nstderr: {done.stderr[-4000:]}"


@dataclasses.dataclass
class Cycle:
    """One ``run --once``: its exit code and the decisions and steps it logged."""

    done: subprocess.CompletedProcess[str]

    def _lines(self, pattern: re.Pattern[str], uuid: str) -> list[dict[str, str]]:
        found = (pattern.search(line) for line in self.done.stderr.splitlines())
        return [m.groupdict() for m in found if m and m["uuid"] == uuid]

    def decision(self, uuid: str) -> dict[str, str] | None:
        """The finding line of ``uuid`` (None: no finding, Nova manages it)."""
        lines = self._lines(FINDING_LINE, uuid)
        assert len(lines) <= 1, lines
        return lines[0] if lines else None

    def steps(self, uuid: str) -> list[dict[str, str]]:
        return self._lines(STEP_LINE, uuid)


@dataclasses.dataclass
class AgentCli:
    """The console script with one config file, as an operator would run it on one host."""

    conf: pathlib.Path
    host: str
    quarantine_dir: pathlib.Path
    journal: pathlib.Path
    uri: str = QEMU
    #: ``time.monotonic()`` when the last cycle started.
    last_start: float = float("-inf")

    def until_counted(self, at_least: float = 0.0) -> None:
        """Sleep until ``at_least`` (monotonic) and until the next cycle counts as a sighting."""
        sleep_until(max(at_least, self.last_start + COUNTED_AFTER))

    def cycle(self, *extra: str, expect: int | tuple[int, ...]) -> Cycle:
        self.last_start = time.monotonic()
        done = harness.run_cli(
            "run",
            "--once",
            "--config-file",
            str(self.conf),
            "--host",
            self.host,
            "--libvirt-uri",
            self.uri,
            *extra,
            timeout=180,
        )
        assert done.returncode in (expect if isinstance(expect, tuple) else (expect,)), show(done)
        return Cycle(done)

    def history(self, uuid: str) -> list[dict[str, Any]]:
        """``history --uuid U --format json``: the steps with their outcomes, newest first."""
        return [e for e in self.events(uuid) if e["event"] == "step"]

    def events(self, uuid: str) -> list[dict[str, Any]]:
        """Every event of ``history --uuid U --format json``: steps, holds, releases."""
        done = harness.run_cli(
            "history", "--config-file", str(self.conf), "--uuid", uuid, "--format", "json"
        )
        assert done.returncode == exits.OK, show(done)
        return list(json.loads(done.stdout)["events"])

    def release(self, uuid: str) -> None:
        """``release UUID``: the agent may act on the guest again."""
        done = harness.run_cli("release", "--config-file", str(self.conf), uuid)
        assert done.returncode == exits.OK, show(done)
        assert done.stdout.startswith(f"released {uuid}"), show(done)

    def quarantine(self) -> list[dict[str, Any]]:
        """``quarantine list --format json``: the restorable entries."""
        done = harness.run_cli(
            "quarantine", "list", "--config-file", str(self.conf), "--format", "json"
        )
        assert done.returncode == exits.OK, show(done)
        return list(json.loads(done.stdout)["entries"])

    def quarantine_table(self) -> str:
        done = harness.run_cli("quarantine", "list", "--config-file", str(self.conf))
        assert done.returncode == exits.OK, show(done)
        return done.stdout

    def restore(self, uuid: str, *extra: str) -> subprocess.CompletedProcess[str]:
        return harness.run_cli(
            "restore",
            "--config-file",
            str(self.conf),
            "--host",
            self.host,
            "--libvirt-uri",
            self.uri,
            uuid,
            *extra,
        )

    def sightings(self) -> dict[str, int]:
        """The journal's consecutive-sightings counters (read-only look into its SQLite)."""
        db = sqlite3.connect(f"file:{self.journal}?mode=ro", uri=True)
        try:
            return dict(db.execute("SELECT uuid, consecutive FROM sightings").fetchall())
        finally:
            db.close()


def write_agent(
    tmp_path: pathlib.Path,
    *,
    host: str,
    instances_path: pathlib.Path,
    mine: Iterable[str],
    name: str = "agent",
    **agent: object,
) -> AgentCli:
    """A config for ``host`` on qemu:///system; every action ``reap`` unless overridden.

    ``mine``: the UUIDs of the test (the allow list); every other domain now in
    qemu:///system goes to ``deny_uuids`` (see the module docstring).
    """
    mine = sorted(set(mine))
    others = sorted(all_domains() - set(mine))
    state = tmp_path / f"{name}-state"
    quarantine = tmp_path / f"{name}-quarantine"
    settings: dict[str, object] = {
        "action_deleted": "reap",
        "action_unknown": "reap",
        "action_misplaced": "reap",
        "grace_period": 0,
        "sightings_required": 1,
        "reap_delay": 0,
        "stop_timeout": STOP_TIMEOUT,
        "max_actions_per_cycle": 1,
        "interval": INTERVAL,
        "allow_uuids": ",".join(mine),
        "state_dir": state,
        "journal_path": state / "journal.sqlite",
        "quarantine_dir": quarantine,
        **agent,
    }
    conf = tmp_path / f"{name}.conf"
    conf.write_text(
        "[DEFAULT]\n"
        f"host = {host}\n"
        # NOTE: no nova_config_file: the node UUID pinned proves the identity (rule 10).
        f"compute_node_uuid = {harness.node_uuid(host)}\n"
        f"instances_path = {instances_path}\n"
        f"deny_uuids = {','.join(others)}\n"
        "[libvirt]\n"
        f"connection_uri = {QEMU}\n"
        "[nova]\n"
        "auth_type = admin_token\n"
        f"endpoint = {harness.NOVA_ENDPOINT}\n"
        f"token = {harness.ADMIN_TOKEN}\n"
        "timeout = 20\n"
        "[agent]\n" + "".join(f"{k} = {v}\n" for k, v in settings.items())
    )
    return AgentCli(conf, host, quarantine, state / "journal.sqlite")


# --------------------------------------------------------------------------- libvirt and files


def all_domains() -> set[str]:
    done = harness.virsh("list", "--all", "--uuid")
    assert done.returncode == 0, done.stderr
    return {line.strip() for line in done.stdout.splitlines() if line.strip()}


def is_persistent(uuid: str) -> bool:
    done = harness.virsh("dominfo", uuid)
    assert done.returncode == 0, done.stderr
    fields = dict(
        (k.strip(), v.strip()) for k, _, v in (ln.partition(":") for ln in done.stdout.splitlines())
    )
    return fields.get("Persistent") == "yes"


def raw_disk(path: pathlib.Path) -> str:
    return (
        "<disk type='file' device='disk'><driver name='qemu' type='raw'/>"
        f"<source file='{path}'/><target dev='vda' bus='virtio'/></disk>"
    )


def make_instance_dir(instances: pathlib.Path, uuid: str) -> pathlib.Path:
    """``<instances>/<uuid>/disk``: 256 KiB of random bytes, as a raw disk."""
    directory = instances / uuid
    directory.mkdir(parents=True)
    disk = directory / "disk"
    disk.write_bytes(os.urandom(256 * 1024))
    return disk


def digest(directory: pathlib.Path) -> dict[str, str]:
    """sha256 of every file under ``directory`` by relative path.

    ``console.log`` is left out: QEMU truncates and writes it whenever the guest starts.
    """
    return {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and not p.name.startswith("console.log")
    }


def mode(path: pathlib.Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def qemu_guests(tmp_path: pathlib.Path) -> Iterator[Callable[..., str]]:
    """Define and start persistent TCG guests in qemu:///system; all removed afterwards."""
    made: list[str] = []

    def define(uuid: str, role: str, *, nova: bool = True, disk: pathlib.Path | None = None) -> str:
        name = f"e2e-agent-{role}-{uuid[:8]}"
        meta = worlds.nova_metadata(name=name, flavor="e2e-tiny") if nova else None
        xml = worlds.qemu_domain(
            uuid=uuid, name=name, metadata=meta, devices=[raw_disk(disk)] if disk else []
        )
        path = tmp_path / f"{name}.xml"
        path.write_text(xml)
        made.append(uuid)
        done = harness.virsh("define", str(path))
        assert done.returncode == 0, done.stderr
        done = harness.virsh("start", uuid)
        assert done.returncode == 0, done.stderr
        assert harness.domain_state(uuid) == "running"
        return uuid

    yield define
    for uuid in made:
        harness.remove_domain(uuid)
    assert not [u for u in made if harness.domain_state(u) is not None]


class Servers:
    """Servers a test boots; force-deleted (task_state cleared first) afterwards."""

    def __init__(self, nova: harness.Nova) -> None:
        self.nova = nova
        self.created: list[str] = []

    def boot(self, *hosts: str) -> list[str]:
        """Boot one server per host, all at once; return their UUIDs once ACTIVE."""
        uuids = [self.nova.boot(h, wait=False)["id"] for h in hosts]
        self.created += uuids
        for uuid in uuids:
            self.nova.wait_status(uuid, "ACTIVE", timeout=240)
        return uuids

    def cleanup(self) -> None:
        for uuid in self.created:
            self.nova.destroy(uuid)


@pytest.fixture
def servers(nova_stack: harness.Nova) -> Iterator[Servers]:
    made = Servers(nova_stack)
    try:
        yield made
    finally:
        made.cleanup()


def assert_untouched(agent: AgentCli, *uuids: str) -> None:
    for uuid in uuids:
        assert harness.domain_state(uuid) == "running", uuid
        assert is_persistent(uuid), uuid
        assert agent.history(uuid) == [], uuid


def assert_done(history: list[dict[str, Any]], *expected: tuple[str, str]) -> None:
    """``history`` (newest first) is exactly ``expected`` (step, kind), each intent with
    its outcome ``done``, live."""
    got = [(h["step"], h["kind"]) for h in history]
    assert got == list(expected), history
    for h in history:
        assert h["outcome"] == "done", h
        assert h["finished_at"] and h["started_at"], h
        assert h["dry_run"] is False, h


def sleep_until(deadline: float) -> None:
    time.sleep(max(0.0, deadline - time.monotonic()))


# --------------------------------------------------------------------------- seed case 2


def lvhost_node() -> str:
    """The ``hypervisor_hostname`` of lvhost's compute node (what its libvirt reports)."""
    nodes = harness.Nova().get("/os-hypervisors/detail")["hypervisors"]
    (node,) = [n["hypervisor_hostname"] for n in nodes if n["service"]["host"] == "lvhost"]
    return str(node)


def record_live_migration_from_lvhost(nova: harness.Nova, uuid: str) -> None:
    """Make Nova record ``uuid`` as live-migrated lvhost -> host2, completed.

    NOTE: a live migration from a libvirt compute to a fake-driver one cannot run for real.
    The server (on host1) is live-migrated to host2 for real, then its migration record names
    lvhost (and lvhost's node) as the source: the record Nova keeps after a real live
    migration lvhost -> host2 whose source clean-up failed.
    """
    nova.live_migrate(uuid, "host2")
    node = lvhost_node()
    assert all(c.isalnum() or c in "-._" for c in node + uuid), (node, uuid)
    harness.cell_sql(
        f"UPDATE migrations SET source_compute='lvhost', source_node='{node}' "
        f"WHERE instance_uuid='{uuid}' AND source_compute='host1'"
    )


def test_live_migration_source_duplicate_is_stopped_then_undefined_its_files_untouched_while_foreign_soft_deleted_busy_and_managed_guests_keep_running(  # noqa: E501
    nova_stack: harness.Nova,
    nova_orphans_cli: str,
    servers: Servers,
    qemu_guests: Callable[..., str],
    tmp_path: pathlib.Path,
) -> None:
    """On lvhost, the source copy of a server live-migrated lvhost -> host2 was left running:
    with every action ``reap`` it is stopped after the grace period, then undefined after
    reap_delay, its instance files left where they are and only its XML in quarantine. A
    foreign domain, a SOFT_DELETED server's guest, a guest whose server is in the middle of a
    task and a managed guest are never acted on."""
    nova = nova_stack
    managed, soft, migrated, busy = servers.boot("lvhost", "lvhost", "host1", "host2")
    record_live_migration_from_lvhost(nova, migrated)
    nova.soft_delete(soft)  # lvhost's nova-compute powers its guest off
    harness.set_task_state(busy, "migrating")
    foreign = worlds.random_uuid()

    # The premises, as Nova states them.
    assert nova.server(migrated)["OS-EXT-SRV-ATTR:host"] == "host2"
    assert any(
        m["source_compute"] == "lvhost" and m["status"] == "completed"
        for m in nova.migrations(instance_uuid=migrated)
    )
    assert nova.server(soft)["status"] == "SOFT_DELETED"
    assert nova.server(busy)["OS-EXT-STS:task_state"] == "migrating"

    instances = tmp_path / "instances"
    disks = {u: make_instance_dir(instances, u) for u in (migrated, busy)}
    before = {u: digest(instances / u) for u in disks}
    for uuid, role in ((migrated, "migrated"), (busy, "busy")):
        qemu_guests(uuid, role, disk=disks[uuid])
    qemu_guests(foreign, "operator-test", nova=False)
    running = (managed, busy, foreign)

    grace, reap_delay = 6, 3
    agent = write_agent(
        tmp_path,
        host="lvhost",
        instances_path=instances,
        mine=[migrated, soft, *running],
        grace_period=grace,
        sightings_required=2,
        reap_delay=reap_delay,
    )
    try:
        first = time.monotonic()
        for _ in range(2):  # 1st and 2nd sighting: still inside the grace period
            cycle = agent.cycle(expect=exits.FOUND)
            d = cycle.decision(migrated)
            assert d and d["kind"] == "misplaced" and d["next"] == "none", cycle.done.stderr
            assert "live-migration source" in d["reason"], d
            assert d["why"].startswith("inside grace_period"), d
            assert harness.domain_state(migrated) == "running"
        assert agent.history(migrated) == []

        # What protects the others is their classification, cycle after cycle.
        assert cycle.decision(managed) is None, cycle.decision(managed)
        d = cycle.decision(foreign)
        assert d and d["kind"] == "foreign" and d["next"] == "none", d
        for uuid, word in ((soft, "SOFT_DELETED"), (busy, "migrating")):
            d = cycle.decision(uuid)
            assert d and d["kind"] == "protected" and word in d["reason"], d
            assert d["next"] == "none", d

        agent.until_counted(first + grace + 2)
        cycle = agent.cycle(expect=exits.ACTED)
        (step,) = cycle.steps(migrated)
        assert (step["step"], step["outcome"], step["dry_run"]) == ("stop", "done", "False"), step
        assert harness.domain_state(migrated) == "shut off"
        assert is_persistent(migrated)  # stopped, still defined
        stopped = time.monotonic()

        cycle = agent.cycle(expect=exits.FOUND)
        d = cycle.decision(migrated)
        assert d and d["next"] == "none" and "reap_delay" in d["why"], d
        assert harness.domain_state(migrated) == "shut off"

        agent.until_counted(stopped + reap_delay + 1)
        cycle = agent.cycle(expect=exits.ACTED)
        (step,) = cycle.steps(migrated)
        assert (step["step"], step["outcome"]) == ("reap", "done"), step
        assert "files left in place" in step["detail"], step
        assert harness.domain_state(migrated) is None  # undefined

        # Its files are where they were, byte for byte; the quarantine holds the XML and
        # its manifest (and a link to any base image its disk needs), not the files.
        assert digest(instances / migrated) == before[migrated]
        (entry,) = [e for e in agent.quarantine() if e["uuid"] == migrated]
        assert entry["kind"] == "misplaced" and entry["files_moved"] is False, entry
        assert entry["restorable"] is True, entry
        saved = pathlib.Path(entry["path"])
        held = {p.name for p in saved.iterdir()}
        assert {"domain.xml", "manifest.json"} <= held <= {"domain.xml", "manifest.json", "backing"}
        assert f"<uuid>{migrated}</uuid>" in (saved / "domain.xml").read_text()
        for path in (agent.quarantine_dir, saved.parent, saved):
            assert mode(path) == 0o700, path
        assert_done(agent.history(migrated), ("reap", "misplaced"), ("stop", "misplaced"))

        # Nothing left to do for this guest; the others are as they were. Foreign and
        # protected are no orphans (exit 0); others' lvhost servers may be lost here (exit 3).
        cycle = agent.cycle(expect=(exits.OK, exits.FOUND))
        assert cycle.decision(migrated) is None
        assert cycle.steps(migrated) == []
        assert_untouched(agent, *running)
        assert is_persistent(soft) and agent.history(soft) == []
        assert digest(instances / busy) == before[busy]
        assert nova.server(managed)["status"] == "ACTIVE"
        assert nova.server(soft)["status"] == "SOFT_DELETED"
        assert nova.server(migrated)["status"] == "ACTIVE"
    finally:
        harness.set_task_state(busy, None)


# --------------------------------------------------------------------------- fail closed


def test_nova_api_stopped_mid_run_fails_the_cycle_closed_and_the_next_cycle_proceeds(
    nova_stack: harness.Nova,
    nova_orphans_cli: str,
    servers: Servers,
    qemu_guests: Callable[..., str],
    tmp_path: pathlib.Path,
) -> None:
    """After a first sighting nova-api goes away: the cycle that would have acted exits 1
    with one stderr line naming Nova, touches nothing and journals nothing; with Nova back
    the next cycle carries on from the sighting and stops the guest (action ``stop``)."""
    nova = nova_stack
    (keeper,) = servers.boot("lvhost")
    ghost = worlds.random_uuid()  # Nova metadata, but Nova never heard of it: unknown
    qemu_guests(ghost, "ghost")
    agent = write_agent(
        tmp_path,
        host="lvhost",
        instances_path=tmp_path / "instances",
        mine=[keeper, ghost],
        action_unknown="stop",
        sightings_required=2,
    )

    cycle = agent.cycle(expect=exits.FOUND)
    d = cycle.decision(ghost)
    assert d and d["kind"] == "unknown" and d["why"] == "seen 1 of 2 cycles", d
    assert agent.sightings()[ghost] == 1

    down = harness.stack_cmd("svc-stop", "nova-api", timeout=120)
    assert down.returncode == 0, down.stderr
    try:
        failed = agent.cycle(expect=exits.ERROR)
        lines = harness.stderr_lines(failed.done.stderr)
        assert len(lines) == 1, failed.done.stderr
        assert "nova" in lines[0].lower(), lines[0]
        assert not failed.done.stdout.strip(), failed.done.stdout
        assert harness.domain_state(ghost) == "running"
        assert agent.history(ghost) == []
        assert agent.sightings()[ghost] == 1  # the failed cycle recorded nothing
    finally:
        up = harness.stack_cmd("svc-start", "nova-api", timeout=300)
    assert up.returncode == 0, up.stderr
    deadline = time.monotonic() + 60
    while True:
        try:
            nova.get("/servers?limit=1")
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)

    agent.until_counted()
    cycle = agent.cycle(expect=exits.ACTED)
    (step,) = cycle.steps(ghost)
    assert (step["step"], step["outcome"]) == ("stop", "done"), step
    assert harness.domain_state(ghost) == "shut off"
    assert is_persistent(ghost)
    assert_done(agent.history(ghost), ("stop", "unknown"))

    cycle = agent.cycle(expect=exits.FOUND)  # action stop: it stays stopped and defined
    d = cycle.decision(ghost)
    assert d and d["why"] == "stopped; stays defined (action stop)", d
    assert harness.domain_state(ghost) == "shut off"
    assert len(agent.history(ghost)) == 1
    assert_untouched(agent, keeper)


# --------------------------------------------------------------------------- SOFT_DELETED


def test_server_soft_deleted_then_restored_around_the_cycles_is_never_touched(
    nova_stack: harness.Nova,
    nova_orphans_cli: str,
    servers: Servers,
    qemu_guests: Callable[..., str],
    tmp_path: pathlib.Path,
) -> None:
    """With every action ``reap`` and no grace, no sightings and no reap delay to hide
    behind: a guest whose server is soft-deleted, then restored, is protected while
    SOFT_DELETED and Nova's again after the restore — never stopped nor undefined by the
    agent (lvhost's nova-compute itself powers it off while SOFT_DELETED and on again)."""
    nova = nova_stack
    keeper, target = servers.boot("lvhost", "lvhost")
    agent = write_agent(
        tmp_path, host="lvhost", instances_path=tmp_path / "instances", mine=[keeper, target]
    )
    expect = (exits.OK, exits.FOUND)  # others' lvhost servers may be lost here: exit 3

    def cycle() -> Cycle:
        result = agent.cycle(expect=expect)
        assert result.steps(target) == [] and result.steps(keeper) == []
        assert is_persistent(target)
        assert agent.history(target) == []
        return result

    assert cycle().decision(target) is None
    nova.soft_delete(target)
    for _ in range(2):
        d = cycle().decision(target)
        assert d and d["kind"] == "protected" and "SOFT_DELETED" in d["reason"], d
        assert d["next"] == "none", d
    nova.restore(target)
    for _ in range(2):
        c = cycle()
        assert c.decision(target) is None, c.decision(target)
    assert_untouched(agent, target, keeper)
    assert nova.server(target)["status"] == "ACTIVE"


# --------------------------------------------------------------------------- restore


def test_restore_start_of_a_reaped_duplicate_whose_server_nova_runs_elsewhere_is_refused_and_forced_restore_is_held(  # noqa: E501
    nova_stack: harness.Nova,
    nova_orphans_cli: str,
    servers: Servers,
    qemu_guests: Callable[..., str],
    tmp_path: pathlib.Path,
) -> None:
    """docs/design.md rules 13 and 12. The source copy of a server live-migrated lvhost ->
    host2 (left running on lvhost's real libvirt) is stopped and undefined by the agent.
    ``restore --start`` asks Nova first: Nova runs that server on host2, so it is refused:
    exit 1, one ``refused:`` line naming host2, the domain neither defined nor started,
    the journal unchanged. ``--start --force`` restores and starts it, puts it on hold
    (``history`` and ``audit`` show the hold, forced), and the agent leaves it running
    until ``release``."""
    nova = nova_stack
    keeper, migrated = servers.boot("lvhost", "host1")
    record_live_migration_from_lvhost(nova, migrated)
    assert nova.server(migrated)["OS-EXT-SRV-ATTR:host"] == "host2"
    qemu_guests(migrated, "migrated")
    # NOTE: qemu:///system is shared: a domain another session defines mid-test would
    # otherwise make the orphan-fraction brake hold this test's last cycle.
    agent = write_agent(
        tmp_path,
        host="lvhost",
        instances_path=tmp_path / "instances",
        mine=[keeper, migrated],
        brake_min_orphans=10,
    )
    expect = (exits.ACTED,)
    (step,) = agent.cycle(expect=expect).steps(migrated)
    assert (step["step"], step["outcome"]) == ("stop", "done"), step
    (step,) = agent.cycle(expect=expect).steps(migrated)
    assert (step["step"], step["outcome"]) == ("reap", "done"), step
    assert harness.domain_state(migrated) is None
    (entry,) = [e for e in agent.quarantine() if e["uuid"] == migrated]
    assert entry["kind"] == "misplaced", entry
    journal_before = (agent.quarantine(), agent.events(migrated))

    refused = agent.restore(migrated, "--start")
    assert refused.returncode == exits.ERROR, show(refused)
    (line,) = refused.stderr.strip().splitlines()
    assert line.startswith(
        f"nova-orphans: refused: Nova runs server {migrated} on host host2 (status ACTIVE)"
    ), line
    assert "--force" in line and not refused.stdout, show(refused)
    assert harness.domain_state(migrated) is None  # neither defined nor started
    assert (agent.quarantine(), agent.events(migrated)) == journal_before

    forced = agent.restore(migrated, "--start", "--force")
    assert forced.returncode == exits.OK, show(forced)
    (warning,) = forced.stderr.strip().splitlines()
    assert warning.startswith("nova-orphans: warning: --force: Nova runs server"), warning
    assert f"`nova-orphans release {migrated}`" in forced.stdout, show(forced)
    assert harness.domain_state(migrated) == "running"
    assert is_persistent(migrated)
    # The restore is journaled as a step too (after the hold, written before the define).
    hold = next(e for e in agent.events(migrated) if e["event"] == "hold")
    assert hold["reason"].startswith("restored from quarantine and started"), hold
    assert "forced: Nova runs server" in hold["reason"] and "host2" in hold["reason"], hold

    audited = harness.run_audit(agent.conf, "lvhost", QEMU)
    assert audited.returncode == exits.FOUND, show(audited)
    finding = harness.findings_by_uuid(audited)[migrated]
    assert finding["kind"] == "misplaced", finding  # still classified
    assert finding["hold"]["reason"] == hold["reason"], finding

    for _ in range(2):  # on hold: the agent leaves the running duplicate alone
        cycle = agent.cycle(expect=exits.FOUND)
        d = cycle.decision(migrated)
        assert d and d["kind"] == "misplaced" and d["why"].startswith("on hold: restored"), d
        assert cycle.steps(migrated) == []
        assert harness.domain_state(migrated) == "running"
    # The stop, the reap and the operator's restore; nothing since.
    assert [s["step"] for s in agent.history(migrated)] == ["restore", "reap", "stop"]

    agent.release(migrated)
    (step,) = agent.cycle(expect=exits.ACTED).steps(migrated)  # a fresh finding again
    assert (step["step"], step["outcome"]) == ("stop", "done"), step
    events = agent.events(migrated)
    assert [e["event"] for e in events[:2]] == ["step", "release"], events
    assert sorted(e.get("step") or e["event"] for e in events[2:]) == [
        "hold", "reap", "restore", "stop",
    ], events  # fmt: skip
    assert_untouched(agent, keeper)


# --------------------------------------------------------------------------- leftovers


def test_reap_lists_no_leftover_for_a_disk_inside_the_guests_own_instance_directory(
    nova_stack: harness.Nova,
    nova_orphans_cli: str,
    servers: Servers,
    qemu_guests: Callable[..., str],
    tmp_path: pathlib.Path,
) -> None:
    """An unknown guest whose disk is ``<instances_path>/<uuid>/disk``: the reap moves that
    directory to quarantine, so nothing is left for the operator to clean up."""
    (keeper,) = servers.boot("lvhost")
    ghost = worlds.random_uuid()
    instances = tmp_path / "instances"
    disk = make_instance_dir(instances, ghost)
    before = digest(instances / ghost)
    qemu_guests(ghost, "ghost", disk=disk)
    agent = write_agent(tmp_path, host="lvhost", instances_path=instances, mine=[keeper, ghost])

    agent.cycle(expect=exits.ACTED)  # stop
    cycle = agent.cycle(expect=exits.ACTED)  # reap
    (step,) = cycle.steps(ghost)
    assert (step["step"], step["outcome"]) == ("reap", "done"), step
    assert not (instances / ghost).exists()
    (entry,) = [e for e in agent.quarantine() if e["uuid"] == ghost]
    assert entry["files_moved"] is True, entry
    assert digest(pathlib.Path(entry["path"]) / "files") == before
    assert entry["leftovers"] == [], entry
    assert "left for the operator" not in step["detail"], step["detail"]


# --------------------------------------------------------------------------- seed case 1


@dataclasses.dataclass
class LvhostWorld:
    """Real Nova guests on lvhost (libvirt driver), its compute stopped and forced down."""

    keeper: str
    victims: list[str]
    instances: pathlib.Path


@pytest.fixture(scope="module")
def lvhost_world(nova_stack: harness.Nova) -> Iterator[LvhostWorld]:
    """A keeper and two victims booted on lvhost, then lvhost's compute down.

    The keeper stays Nova's: without a live server on the host the agent's brake ("Nova
    reports no servers here") would keep every cycle report-only. Each test deletes its own
    victim (a local delete) when it needs to.
    """
    nova = nova_stack
    instances = lvhost_instances_path()
    booted: list[str] = []
    try:
        booted += [nova.boot("lvhost", wait=False)["id"] for _ in range(3)]
        for uuid in booted:
            nova.wait_status(uuid, "ACTIVE", timeout=300)
            assert harness.domain_state(uuid) == "running"
            assert (instances / uuid / "disk").is_file()
        with harness.compute_down(nova, "lvhost"):
            try:
                yield LvhostWorld(booted[0], booted[1:], instances)
            finally:
                # Before lvhost's compute comes back: a deleted server's guest and files are
                # the test's to remove.
                for uuid in booted[1:]:
                    if nova.server(uuid) is None:
                        harness.remove_domain(uuid)
                        shutil.rmtree(instances / uuid, ignore_errors=True)
    finally:
        # Right after its restart the API may still count lvhost's compute as down, and a
        # delete then is local again: wait until it is up, so Nova removes guest and files.
        nova.wait_service_state("lvhost", "up")
        for uuid in booted:
            nova.destroy(uuid)
            harness.remove_domain(uuid)
        left = [u for u in booted if (instances / u).exists()]
        assert not left, f"Nova left instance directories in {instances}: {left}"


def local_delete(nova: harness.Nova, uuid: str) -> None:
    nova.delete(uuid)  # compute down: the API deletes the row, the guest keeps running
    deleted = nova.find_server(uuid, deleted="1")
    assert deleted is not None and deleted["status"] == "DELETED", deleted
    assert harness.domain_state(uuid) == "running"


def test_locally_deleted_real_guest_is_stopped_after_grace_then_reaped_restorable_and_again_once_archived(  # noqa: E501
    nova_stack: harness.Nova,
    nova_orphans_cli: str,
    lvhost_world: LvhostWorld,
    tmp_path: pathlib.Path,
) -> None:
    """Seed case 1 for real: a server on lvhost deleted while its compute is down keeps its
    QEMU guest. With ``action_deleted = reap`` the agent does nothing inside the grace period
    (counted from Nova's deletion) nor before the third sighting, then stops the guest
    (defined, shut off), then after reap_delay reaps it: undefined, XML and instance
    directory in a 0700 quarantine. ``restore --start`` brings it back byte for byte and
    running. Once ``archive_deleted_rows`` removed the row the same guest is ``unknown`` and
    goes the same way, its grace now counted from the first sighting."""
    nova = nova_stack
    w = lvhost_world
    victim = w.victims[0]
    home = w.instances / victim
    before = digest(home)
    assert "disk" in before, before
    grace, reap_delay = 10, 4
    agent = write_agent(
        tmp_path,
        host="lvhost",
        instances_path=w.instances,
        mine=[w.keeper, victim],
        grace_period=grace,
        sightings_required=3,
        reap_delay=reap_delay,
    )
    try:
        # Exit 3 is possible: other tests' lvhost servers without a guest are "lost".
        cycle = agent.cycle(expect=(exits.OK, exits.FOUND))  # before the delete: Nova's guest
        assert cycle.decision(victim) is None

        local_delete(nova, victim)
        deleted = time.monotonic()

        def stop_then_reap(kind: str, grace_from: float) -> dict[str, Any]:
            earlier = len(agent.history(victim))
            cycle = agent.cycle(expect=exits.FOUND)
            d = cycle.decision(victim)
            assert d and d["kind"] == kind and d["why"].startswith("inside grace_period"), d
            # NOTE: an unknown guest's grace runs from the agent's first sighting, which a
            # loaded machine may take seconds to reach: counted from the cycle's end at least.
            agent.until_counted(max(grace_from, time.monotonic()) + grace + 2)
            cycle = agent.cycle(expect=exits.FOUND)
            d = cycle.decision(victim)
            assert d and d["why"] == "seen 2 of 3 cycles", d
            assert harness.domain_state(victim) == "running"
            assert len(agent.history(victim)) == earlier

            agent.until_counted()
            cycle = agent.cycle(expect=exits.ACTED)
            (step,) = cycle.steps(victim)
            assert (step["step"], step["outcome"]) == ("stop", "done"), step
            stopped = time.monotonic()
            assert harness.domain_state(victim) == "shut off"
            assert is_persistent(victim)
            assert digest(home) == before  # stopped in place, disk untouched

            cycle = agent.cycle(expect=exits.FOUND)
            d = cycle.decision(victim)
            assert d and "reap_delay" in d["why"], d
            agent.until_counted(stopped + reap_delay + 1)
            cycle = agent.cycle(expect=exits.ACTED)
            (step,) = cycle.steps(victim)
            assert (step["step"], step["outcome"]) == ("reap", "done"), step
            assert harness.domain_state(victim) is None
            assert not home.exists()
            (entry,) = [e for e in agent.quarantine() if e["uuid"] == victim]
            assert entry["kind"] == kind and entry["files_moved"] is True, entry
            saved = pathlib.Path(entry["path"])
            assert saved.parent == agent.quarantine_dir / victim
            for path in (agent.quarantine_dir, saved.parent, saved):
                assert mode(path) == 0o700, path
            assert f"<uuid>{victim}</uuid>" in (saved / "domain.xml").read_text()
            assert digest(saved / "files") == before
            assert victim in agent.quarantine_table()
            return entry

        # Cycles 1-5: deleted.
        stop_then_reap("deleted", deleted)
        assert_done(agent.history(victim), ("reap", "deleted"), ("stop", "deleted"))
        gone = agent.cycle(expect=(exits.OK, exits.FOUND))
        assert gone.decision(victim) is None  # undefined: nothing to see

        restored = agent.restore(victim, "--start")
        assert restored.returncode == exits.OK, show(restored)
        assert restored.stdout.startswith(f"restored {victim}"), restored.stdout
        assert not restored.stderr, restored.stderr  # Nova has only a deleted row: no warning
        assert harness.domain_state(victim) == "running"
        assert is_persistent(victim)
        assert digest(home) == before
        assert [e for e in agent.quarantine() if e["uuid"] == victim] == []
        # The operator's decision wins: the restore (journaled as a step) put it on hold.
        latest = agent.events(victim)[:2]
        assert {e["event"] for e in latest} == {"hold", "step"}, latest
        assert [e.get("step") for e in latest if e["event"] == "step"] == ["restore"], latest
        agent.release(victim)

        # Archived: Nova has no record at all any more.
        assert harness.archive_deleted_rows() == 1
        assert nova.find_server(victim, deleted="1") is None
        stop_then_reap("unknown", time.monotonic())
        assert_done(
            agent.history(victim),
            ("reap", "unknown"),
            ("stop", "unknown"),
            ("restore", "deleted"),  # the operator's restore is journaled like every step
            ("reap", "deleted"),
            ("stop", "deleted"),
        )
        assert_untouched(agent, w.keeper)
    finally:
        harness.remove_domain(victim)


def test_dry_run_changes_nothing_and_decides_exactly_what_the_live_run_then_does(
    nova_stack: harness.Nova,
    nova_orphans_cli: str,
    lvhost_world: LvhostWorld,
    tmp_path: pathlib.Path,
) -> None:
    """On the seed-case-1 world (no grace, one sighting, no reap delay), each live cycle is
    preceded by a ``run --once --dry-run`` (which keeps its own journal): the dry run exits 3,
    journals its intents as dry_run, changes nothing in libvirt or on disk, and logs the very
    decision the live cycle right after it logs and carries out (stop, then reap); ``history``
    shows both."""
    nova = nova_stack
    w = lvhost_world
    victim = w.victims[1]
    home = w.instances / victim
    before = digest(home)
    agent = write_agent(
        tmp_path, host="lvhost", instances_path=w.instances, mine=[w.keeper, victim]
    )
    try:
        local_delete(nova, victim)
        decided: dict[bool, list[tuple[str, ...]]] = {True: [], False: []}

        def remember(cycle: Cycle, dry: bool) -> dict[str, str]:
            d = cycle.decision(victim)
            assert d and d["dry_run"] == str(dry), d
            decided[dry].append((d["kind"], d["action"], d["next"], d["why"], d["reason"]))
            (step,) = cycle.steps(victim)
            assert step["dry_run"] == str(dry) and step["outcome"] == "done", step
            assert step["step"] == d["next"], (step, d)
            return step

        # Stop.
        step = remember(agent.cycle("--dry-run", expect=exits.FOUND), dry=True)
        assert step["detail"].startswith("would stop"), step
        assert harness.domain_state(victim) == "running"
        assert digest(home) == before
        remember(agent.cycle(expect=exits.ACTED), dry=False)
        assert harness.domain_state(victim) == "shut off"

        # Reap.
        step = remember(agent.cycle("--dry-run", expect=exits.FOUND), dry=True)
        assert "would undefine" in step["detail"], step
        assert harness.domain_state(victim) == "shut off"
        assert is_persistent(victim)
        assert digest(home) == before
        assert not (agent.quarantine_dir / victim).exists()
        assert agent.quarantine() == []
        remember(agent.cycle(expect=exits.ACTED), dry=False)
        assert harness.domain_state(victim) is None
        assert not home.exists()

        assert decided[True] == decided[False], decided
        assert [d[2] for d in decided[False]] == ["stop", "reap"]
        history = agent.history(victim)
        steps = [(h["step"], h["kind"], h["dry_run"], h["outcome"]) for h in history]
        assert steps == [
            ("reap", "deleted", False, "done"),
            ("reap", "deleted", True, "done"),
            ("stop", "deleted", False, "done"),
            ("stop", "deleted", True, "done"),
        ], history
        (entry,) = [e for e in agent.quarantine() if e["uuid"] == victim]
        assert digest(pathlib.Path(entry["path"]) / "files") == before
    finally:
        harness.remove_domain(victim)
