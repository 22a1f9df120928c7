"""nova-orphans with least-privilege credentials, against the stack's real Keystone and Nova.

The stack's Keystone has the user ``nova-orphans`` whose only role is ``nova-orphans-reader``
(the commands of the operator guide's "Least-privilege credentials" page,
docs/admin/least-privilege.md, made by ``keystone_setup.py``), and
nova-api enforces the policy file nova-orphans ships (``nova-orphans nova-policy``). The tests
prove that the audit does its whole job with exactly that, through password and
application-credential auth, and finds what an admin's audit finds; that with any one rule of
the file taken away it fails closed: exit 1 and one stderr line naming the missing rule (the
audit), or the step skipped with the rule named (the agent's re-verification); and that the
role can change nothing.

A rule is taken away by a file in nova-api's policy directory, which oslo.policy reads again
when the directory changes; the file is removed after each test.
"""

from __future__ import annotations

import configparser
import json
import pathlib
import re
import subprocess
import uuid as uuidlib
from collections.abc import Callable, Iterator
from typing import Any

import harness
import pytest
import yaml

from nova_orphans import exits
from nova_orphans.fakes import libvirt_node as worlds
from tests import report_schema

pytestmark = pytest.mark.nova

POLICY_FILE = harness.REPO / "nova_orphans" / "data" / "nova-policy.yaml"
#: The copy of the shipped file nova-api enforces (taken when the stack started).
STACK_POLICY_FILE = harness.STATE / "etc" / "nova-policy.yaml"
GUIDE = harness.REPO / "docs" / "admin" / "least-privilege.md"
ROLE_RULE = "rule:nova_orphans_reader"
#: Rules that only the agent's re-verification before a step needs (GET /servers/{id} and
#: its in-progress migrations); an audit needs every other rule of the file.
REVERIFY_RULES = ("os_compute_api:servers:show", "os_compute_api:servers:migrations:index")
#: Nova blanks the hosts of in-progress live migrations without this rule; the stack's fake
#: driver finishes a live migration in about a second, so no test can catch one in progress
#: (tests/unit/observe/test_nova_observer.py covers the answer Nova gives then).
UNOBSERVABLE_RULES = ("os_compute_api:servers:migrations:index:host",)
#: What a finding says that comes from Nova and libvirt alone (the dangers also ask Cinder and
#: Neutron, which the admin token's audit finds in no catalog).
NOVA_FIELDS = (
    "kind", "reason", "name", "display_name", "project_id", "user_id", "flavor", "nova_host",
    "nova_status", "vm_state", "task_state", "deleted_at", "domain_state",
)  # fmt: skip


def shipped_rules() -> dict[str, str]:
    """The policy file's rules, but for the alias of the role."""
    rules = yaml.safe_load(POLICY_FILE.read_text())
    return {k: v for k, v in rules.items() if k != "nova_orphans_reader"}


def nova_defaults() -> dict[str, str]:
    """Nova's own default check string of each of its policy rules (from the stack's Nova)."""
    code = (
        "import json, nova.policies\n"
        "print(json.dumps({r.name: r.check_str for r in nova.policies.list_rules()}))\n"
    )
    done = subprocess.run(
        [str(harness.NOVA_VENV / "bin" / "python"), "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout)


def guide_section() -> str:
    """The operator guide's "Least-privilege credentials" page."""
    return GUIDE.read_text()


def guide_blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", guide_section(), re.S)


# --------------------------------------------------------------------------- credentials


@pytest.fixture(scope="module")
def keystone(nova_stack: harness.Nova) -> dict[str, Any]:
    return harness.keystone_info()


@pytest.fixture(scope="module")
def admin_session(keystone: dict[str, Any]) -> Any:
    admin = keystone["admin"]
    return harness.keystone_session(admin["username"], admin["password"], admin["project_name"])


def password_auth(keystone: dict[str, Any]) -> dict[str, str]:
    """``[nova]`` options: the least-privilege user, password auth, Nova from the catalog."""
    reader = keystone["reader"]
    return {
        "auth_type": "password",
        "auth_url": keystone["auth_url"],
        "username": reader["username"],
        "password": reader["password"],
        "project_name": reader["project_name"],
        "user_domain_name": "Default",
        "project_domain_name": "Default",
        "region_name": keystone["region"],
    }


@pytest.fixture(scope="module")
def app_credential_auth(keystone: dict[str, Any]) -> Iterator[dict[str, str]]:
    """The guide's ``[nova]`` example for an application credential, filled in with one the
    least-privilege user made for itself with its one role (the guide's
    ``openstack application credential create --role nova-orphans-reader nova-orphans``)."""
    reader = keystone["reader"]
    (command,) = [
        line for line in guide_section().splitlines() if "application credential create" in line
    ]
    assert f"--role {reader['role']} " in command, command
    session = harness.keystone_session(
        reader["username"], reader["password"], reader["project_name"]
    )
    url = f"{harness.KEYSTONE_URL}/users/{reader['user_id']}/application_credentials"
    body = {
        "application_credential": {
            "name": f"e2e-nova-orphans-{uuidlib.uuid4().hex[:8]}",
            "roles": [{"name": reader["role"]}],
        }
    }
    made = session.post(url, json=body).json()["application_credential"]
    (example,) = [b for b in guide_blocks("ini") if "v3applicationcredential" in b]
    parser = configparser.ConfigParser()
    parser.read_string(example)
    filled = {
        "auth_url": keystone["auth_url"],
        "application_credential_id": made["id"],
        "application_credential_secret": made["secret"],
        "region_name": keystone["region"],
    }
    options = dict(parser["nova"])
    assert set(options) == {"auth_type", *filled}, options
    try:
        yield {**options, **filled}
    finally:
        session.delete(f"{url}/{made['id']}")


def test_the_reader_user_holds_the_guide_s_one_role_and_nothing_else(
    keystone: dict[str, Any], admin_session: Any
) -> None:
    """Keystone has what the guide's commands make: the role, the user in domain Default,
    and that role on project ``service`` as the user's only role assignment."""
    reader = keystone["reader"]
    section = guide_section()
    assert f"openstack role create {reader['role']}\n" in section
    assert f"openstack user create --domain Default --password-prompt {reader['username']}\n" in (
        section
    )
    grant = f"openstack role add --project {reader['project_name']} --user {reader['username']}"
    assert f"{grant} {reader['role']}\n" in section
    user = admin_session.get(f"{harness.KEYSTONE_URL}/users/{reader['user_id']}").json()["user"]
    assert (user["name"], user["domain_id"]) == (reader["username"], "default")
    query = f"user.id={reader['user_id']}&include_names=1"
    found = admin_session.get(f"{harness.KEYSTONE_URL}/role_assignments?{query}").json()
    held = [(a["role"]["name"], a["scope"]["project"]["name"]) for a in found["role_assignments"]]
    assert held == [(reader["role"], reader["project_name"])]


def test_the_stack_enforces_what_nova_orphans_nova_policy_prints(nova_stack: harness.Nova) -> None:
    """nova-api reads the rules ``nova-orphans nova-policy`` prints (the shipped file); each
    rule names a real Nova policy and keeps Nova's default for everyone else, adding only
    the role."""
    conf = configparser.ConfigParser(interpolation=None, strict=False)
    conf.read(harness.STATE / "etc" / "nova.conf")
    assert pathlib.Path(conf["oslo_policy"]["policy_file"]).samefile(STACK_POLICY_FILE)
    printed = harness.run_cli("nova-policy")
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout == POLICY_FILE.read_text()
    enforced = STACK_POLICY_FILE.read_text()
    assert enforced == printed.stdout, "the stack enforces another file: restart it"
    assert "nova-orphans nova-policy > /etc/nova/policy.d/nova-orphans.yaml" in guide_section()
    rules = yaml.safe_load(printed.stdout)
    assert rules["nova_orphans_reader"] == "role:nova-orphans-reader"
    defaults = nova_defaults()
    for name, check in shipped_rules().items():
        assert name in defaults, name
        assert check == f"{defaults[name]} or {ROLE_RULE}", name


# --------------------------------------------------------------------------- the scene


@pytest.fixture(scope="module")
def scene(nova_stack: harness.Nova, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """host2 as a ``test:///`` world: ``moved`` (booted on host1, live-migrated to host2:
    managed, with a migration record touching host2), ``elsewhere`` (a copy of a server Nova
    runs on host1: misplaced) and ``stranger`` (no Nova record: unknown)."""
    nova = nova_stack
    moved = nova.boot("host1")["id"]
    elsewhere = nova.boot("host1")["id"]
    try:
        nova.live_migrate(moved, "host2")
        stranger = worlds.random_uuid()
        domains = [
            worlds.node_domain(
                uuid=u, name=f"instance-{i:08x}", metadata=worlds.nova_metadata(name=f"e2e-{i}")
            )
            for i, u in enumerate([moved, elsewhere, stranger])
        ]
        uri = worlds.write_node_file(tmp_path_factory.mktemp("least-privilege"), domains)
        yield {"moved": moved, "elsewhere": elsewhere, "stranger": stranger, "uri": uri}
    finally:
        nova.destroy(moved)
        nova.destroy(elsewhere)


@pytest.fixture(scope="module")
def own_server(nova_stack: harness.Nova, keystone: dict[str, Any]) -> Iterator[str]:
    """A server on host1 in the least-privilege user's own project (``service``)."""
    project = keystone["reader"]["project_id"]
    uuid = harness.Nova(token=f"admin:{project}").boot("host1")["id"]
    try:
        yield uuid
    finally:
        nova_stack.destroy(uuid)


def audit_host2(
    tmp_path: pathlib.Path, scene: dict[str, Any], auth: dict[str, str] | None
) -> subprocess.CompletedProcess[str]:
    """``audit`` of host2 with ``auth`` (None: the stack's admin token)."""
    conf = harness.write_cli_config(
        tmp_path / "audit.conf", host="host2", libvirt_uri=scene["uri"], auth=auth
    )
    return harness.run_audit(conf, "host2", scene["uri"])


def nova_findings(done: subprocess.CompletedProcess[str]) -> dict[str, dict[str, Any]]:
    """Each finding's Nova and libvirt fields, by UUID, from a valid JSON report."""
    assert done.returncode == exits.FOUND, (done.returncode, done.stderr[-2000:])
    report = report_schema.valid(json.loads(done.stdout))
    return {f["uuid"]: {k: f.get(k) for k in NOVA_FIELDS} for f in report["findings"]}


@pytest.fixture(scope="module")
def admin_findings(
    scene: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, dict[str, Any]]:
    """What the audit of host2 finds with the admin token."""
    found = nova_findings(audit_host2(tmp_path_factory.mktemp("admin-audit"), scene, None))
    assert scene["moved"] not in found
    assert found[scene["elsewhere"]]["kind"] == "misplaced"
    assert found[scene["elsewhere"]]["nova_host"] == "host1"
    assert found[scene["stranger"]]["kind"] == "unknown"
    return found


# --------------------------------------------------------------------------- with the role


def test_password_auth_with_only_the_reader_role_finds_what_the_admin_finds(
    keystone: dict[str, Any],
    scene: dict[str, Any],
    admin_findings: dict[str, dict[str, Any]],
    nova_orphans_cli: str,
    tmp_path: pathlib.Path,
) -> None:
    found = nova_findings(audit_host2(tmp_path, scene, password_auth(keystone)))
    assert found == admin_findings


def test_application_credential_auth_with_only_the_reader_role_finds_what_the_admin_finds(
    app_credential_auth: dict[str, str],
    scene: dict[str, Any],
    admin_findings: dict[str, dict[str, Any]],
    nova_orphans_cli: str,
    tmp_path: pathlib.Path,
) -> None:
    found = nova_findings(audit_host2(tmp_path, scene, app_credential_auth))
    assert found == admin_findings


def test_the_reader_role_changes_nothing(
    keystone: dict[str, Any], own_server: str, nova_stack: harness.Nova
) -> None:
    """The role reads what the tool reads and can change nothing, not even in its own
    project: deleting or stopping a server, forcing a service down and reading other admin
    APIs are all refused with 403."""
    reader = keystone["reader"]
    session = harness.keystone_session(
        reader["username"], reader["password"], reader["project_name"]
    )
    headers = {"OpenStack-API-Version": f"compute {harness.MICROVERSION}"}

    def status(method: str, path: str, body: Any = None) -> int:
        resp = session.request(
            harness.NOVA_ENDPOINT + path, method, json=body, headers=headers, raise_exc=False
        )
        return int(resp.status_code)

    assert status("GET", f"/servers/{own_server}") == 200
    assert status("DELETE", f"/servers/{own_server}") == 403
    assert status("POST", f"/servers/{own_server}/action", {"os-stop": None}) == 403
    service = nova_stack.service("host2")
    assert status("PUT", f"/os-services/{service['id']}", {"forced_down": True}) == 403
    assert status("GET", "/os-aggregates") == 403
    assert status("GET", "/os-hypervisors/detail") == 200
    assert nova_stack.service("host2")["forced_down"] is False
    server = nova_stack.server(own_server)
    assert server is not None and server["status"] == "ACTIVE", server


# --------------------------------------------------------------------------- with one rule less


@pytest.fixture
def without_rule() -> Iterator[Callable[[str], None]]:
    """Take one rule of the shipped file away: Nova's default for it again, without the role."""
    path = harness.NOVA_POLICY_DIR / "e2e-without-one-rule.yaml"
    defaults = nova_defaults()

    def take_away(rule: str) -> None:
        path.write_text(yaml.safe_dump({rule: defaults[rule]}))

    try:
        yield take_away
    finally:
        path.unlink(missing_ok=True)


AUDIT_RULES = sorted(set(shipped_rules()) - set(REVERIFY_RULES) - set(UNOBSERVABLE_RULES))


@pytest.mark.parametrize("rule", AUDIT_RULES)
def test_audit_without_one_rule_fails_closed_naming_it(
    keystone: dict[str, Any],
    scene: dict[str, Any],
    nova_orphans_cli: str,
    without_rule: Callable[[str], None],
    tmp_path: pathlib.Path,
    rule: str,
) -> None:
    without_rule(rule)
    done = audit_host2(tmp_path, scene, password_auth(keystone))
    assert done.returncode == exits.ERROR, (done.returncode, done.stdout[-1000:], done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("nova-orphans: "), lines[0]
    assert rule in lines[0], lines[0]
    assert not done.stdout.strip()


def test_the_audit_rules_and_the_re_verification_rules_are_the_whole_file() -> None:
    assert set(AUDIT_RULES) | set(REVERIFY_RULES) | set(UNOBSERVABLE_RULES) == set(shipped_rules())


# --------------------------------------------------------------------------- the agent


def running_qemu_copy(uuid: str, tmp_path: pathlib.Path) -> None:
    """Define and start a tiny persistent QEMU guest with ``uuid`` on lvhost (qemu:///system);
    the agent never stops a transient one."""
    name = f"e2e-least-privilege-{uuid[:8]}"
    xml = worlds.qemu_domain(uuid=uuid, name=name, metadata=worlds.nova_metadata(name=name))
    path = tmp_path / f"{name}.xml"
    path.write_text(xml)
    for command in (("define", str(path)), ("start", uuid)):
        done = harness.virsh(*command)
        assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def lvhost_keeper(nova_stack: harness.Nova) -> Iterator[str]:
    """A server Nova runs on lvhost: without one, the agent's brake holds every cycle there
    ("Nova reports no servers on this host while libvirt holds guests with Nova metadata")."""
    uuid = nova_stack.boot("lvhost", timeout=240)["id"]
    try:
        yield uuid
    finally:
        nova_stack.destroy(uuid)


@pytest.fixture
def misplaced_copy(tmp_path: pathlib.Path, lvhost_keeper: str) -> Iterator[Callable[[str], str]]:
    """Running QEMU guests on lvhost with the UUIDs of servers Nova runs on host1:
    misplaced copies the agent may stop (removed after the test)."""
    made: list[str] = []

    def make(uuid: str) -> str:
        made.append(uuid)
        running_qemu_copy(uuid, tmp_path)
        return uuid

    try:
        yield make
    finally:
        for uuid in made:
            harness.remove_domain(uuid)


def all_qemu_domains() -> set[str]:
    done = harness.virsh("list", "--all", "--uuid")
    assert done.returncode == 0, done.stderr
    return {line.strip() for line in done.stdout.splitlines() if line.strip()}


def dry_run_step(keystone: dict[str, Any], uuid: str, tmp_path: pathlib.Path) -> str:
    """A ``run --once --dry-run`` as lvhost's agent with the reader's password, allowed to
    stop ``uuid`` alone: its one step line for ``uuid``. The guest keeps running."""
    others = sorted(all_qemu_domains() - {uuid})
    state = tmp_path / "agent-state"
    auth = "".join(f"{k} = {v}\n" for k, v in password_auth(keystone).items())
    conf = tmp_path / "agent.conf"
    conf.write_text(
        "[DEFAULT]\n"
        "host = lvhost\n"
        # NOTE: no nova_config_file: the node UUID pinned proves the identity (rule 10).
        f"compute_node_uuid = {harness.node_uuid('lvhost')}\n"
        f"instances_path = {tmp_path / 'instances'}\n"
        f"deny_uuids = {','.join(others)}\n"
        "[libvirt]\n"
        f"connection_uri = {harness.LIBVIRT_URI}\n"
        "[nova]\n"
        f"{auth}"
        "timeout = 20\n"
        "[agent]\n"
        "action_misplaced = stop\n"
        "grace_period = 0\n"
        "sightings_required = 1\n"
        f"allow_uuids = {uuid}\n"
        f"state_dir = {state}\n"
        f"journal_path = {state / 'journal.sqlite'}\n"
        f"quarantine_dir = {tmp_path / 'quarantine'}\n"
    )
    done = harness.run_cli(
        "run", "--once", "--dry-run", "--config-file", str(conf), "--host", "lvhost",
        "--libvirt-uri", harness.LIBVIRT_URI,
    )  # fmt: skip
    steps = [ln for ln in done.stderr.splitlines() if f"step uuid={uuid}" in ln]
    assert len(steps) == 1, (done.returncode, done.stderr[-3000:])
    assert harness.domain_state(uuid) == "running"
    return steps[0]


@pytest.mark.parametrize("rule", [None, *REVERIFY_RULES])
def test_agent_without_a_re_verification_rule_skips_the_step_naming_it(
    keystone: dict[str, Any],
    own_server: str,
    misplaced_copy: Callable[[str], str],
    nova_orphans_cli: str,
    without_rule: Callable[[str], None],
    tmp_path: pathlib.Path,
    rule: str | None,
) -> None:
    """The agent re-verifies a misplaced copy of a server of the user's own project before
    stopping it. With every rule of the role it goes ahead (dry run); with a re-verification
    rule taken away the fresh look fails, the step is skipped and the rule named."""
    uuid = misplaced_copy(own_server)
    if rule is not None:
        without_rule(rule)
    step = dry_run_step(keystone, uuid, tmp_path)
    assert "kind=misplaced action=stop" in step, step
    if rule is None:
        assert "dry_run=True outcome=done" in step, step
    else:
        assert "outcome=skipped detail=re-verification: fresh look failed" in step, step
        assert rule in step and "HTTP 403" in step, step


def test_agent_skips_the_step_on_another_project_s_server_with_the_role(
    keystone: dict[str, Any],
    scene: dict[str, Any],
    misplaced_copy: Callable[[str], str],
    nova_orphans_cli: str,
    tmp_path: pathlib.Path,
) -> None:
    """The guide's known limit, failing closed: Nova answers ``GET /servers/{id}`` of another
    project's server only to admins (404 to the role), so the re-verification's two answers
    disagree and the step is skipped."""
    uuid = misplaced_copy(scene["elsewhere"])
    step = dry_run_step(keystone, uuid, tmp_path)
    assert "kind=misplaced action=stop" in step, step
    assert "outcome=skipped detail=re-verification: fresh look failed" in step, step
    assert "the server listing and GET /servers/{id} disagree" in step, step
