"""Helpers the end-to-end tests use to drive the real Nova stack started by ``stack.sh``.

Everything talks to the stack the way an operator would: the compute API through a
keystoneauth session (``admin_token`` auth: token ``admin:admin``, which the stack's auth
filter turns into an admin of project ``admin``; or real Keystone credentials, see
``keystone_info``), ``nova-manage`` for archiving, and the cell database only where the API
cannot do it (setting a task_state by hand).
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import subprocess
import time
import uuid as uuidlib
from collections.abc import Iterator, Sequence
from typing import Any

from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint
from keystoneauth1.identity import v3 as ks_v3

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[2]
STACK_DIR = pathlib.Path(os.environ.get("STACK_DIR", REPO / ".stack"))
STATE = pathlib.Path(os.environ.get("STACK_STATE", STACK_DIR / "state"))
STACK_SH = HERE / "stack.sh"
NOVA_VENV = STACK_DIR / "nova-venv"

NOVA_ENDPOINT = "http://127.0.0.1:8774/v2.1"
#: A second nova-api on the same databases, with ``[api] max_limit = 2``.
NOVA_LIMITED_ENDPOINT = "http://127.0.0.1:8785/v2.1"
ADMIN_TOKEN = "admin:admin"
KEYSTONE_URL = "http://127.0.0.1:5000/v3"
#: nova-api's policy directory: a file there overrides the policy file's rules (oslo.policy
#: reads it again when the directory changes).
NOVA_POLICY_DIR = STATE / "etc" / "nova-policy.d"
# 2.53+: services by UUID and forced_down through PUT /os-services/{id}.
MICROVERSION = "2.96"
LIBVIRT_URI = "qemu:///system"
COMPUTE_HOSTS = ("host1", "host2", "lvhost")
#: The compute host of cell2, whose database is its own MariaDB instance (``mariadb-cell2``).
CELL2_HOST = "host3"


class StackError(Exception):
    """The stack did something the harness did not expect."""


# --------------------------------------------------------------------------- the stack itself


def stack_cmd(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run ``stack.sh ARGS`` and return the finished process (never raises on exit code)."""
    return subprocess.run(
        ["bash", str(STACK_SH), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def stack_is_up() -> bool:
    """``stack.sh status`` says every service is running and nova-api answers."""
    try:
        return stack_cmd("status", timeout=30).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def stack_info() -> dict[str, Any]:
    """IDs the bootstrap created: ``image_id``, ``flavor_id``."""
    return json.loads((STATE / "stack.json").read_text())


def keystone_info() -> dict[str, Any]:
    """What ``keystone_setup.py`` created: ``auth_url``, ``admin`` and ``reader`` (the
    least-privilege user of nova-orphans: ``username``, ``password``, ``project_name``,
    ``user_id``, ``project_id``, ``role``)."""
    return json.loads((STATE / "keystone.json").read_text())


def keystone_session(username: str, password: str, project_name: str) -> ks_session.Session:
    """A keystoneauth session with password auth against the stack's Keystone."""
    auth = ks_v3.Password(
        auth_url=KEYSTONE_URL,
        username=username,
        password=password,
        project_name=project_name,
        user_domain_name="Default",
        project_domain_name="Default",
    )
    return ks_session.Session(auth=auth, timeout=60)


def service_call(
    session: ks_session.Session,
    service_type: str,
    method: str,
    path: str,
    body: Any = None,
    ok: tuple[int, ...] = (200,),
    **headers: str,
) -> Any:
    """A request to the catalog's public endpoint of ``service_type``; its status is in ``ok``."""
    resp = session.request(
        path,
        method,
        json=body,
        headers=headers,
        endpoint_filter={"service_type": service_type, "interface": "public"},
        raise_exc=False,
    )
    assert resp.status_code in ok, (method, path, resp.status_code, resp.text[:500])
    return resp.json() if resp.content else None


def wait_for(what: str, probe: Any, timeout: float = 120) -> Any:
    """``probe()``'s first true answer, asked every half second for up to ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if got := probe():
            return got
        time.sleep(0.5)
    raise AssertionError(f"{what} not within {timeout}s")


def stop_compute(host: str) -> None:
    """Stop the nova-compute process of ``host`` (by its recorded PID)."""
    done = stack_cmd("svc-stop", f"compute-{host}", timeout=60)
    if done.returncode != 0:
        raise StackError(f"svc-stop compute-{host}: {done.stderr.strip()}")


def start_compute(host: str) -> None:
    """Start ``host``'s nova-compute again; returns once it consumes its queue and reports."""
    done = stack_cmd("svc-start", f"compute-{host}", timeout=180)
    if done.returncode != 0:
        raise StackError(f"svc-start compute-{host}: {done.stderr.strip()}")


@contextlib.contextmanager
def cell2_database_down() -> Iterator[None]:
    """Stop cell2's MariaDB instance; on exit start it again and wait for host3 to report."""
    done = stack_cmd("svc-stop", "mariadb-cell2", timeout=60)
    if done.returncode != 0:
        raise StackError(f"svc-stop mariadb-cell2: {done.stderr.strip()}")
    try:
        yield
    finally:
        up = stack_cmd("svc-start", "mariadb-cell2", timeout=120)
        if up.returncode != 0:
            raise StackError(f"svc-start mariadb-cell2: {up.stderr.strip()}")
        deadline = time.monotonic() + 90
        while stack_cmd("compute-ready", CELL2_HOST, timeout=30).returncode != 0:
            if time.monotonic() > deadline:
                raise StackError(f"{CELL2_HOST} does not report again after cell2 came back")
            time.sleep(1)


# --------------------------------------------------------------------------- the compute API


class Nova:
    """A thin admin client for the compute API of the stack."""

    def __init__(
        self,
        token: str = ADMIN_TOKEN,
        endpoint: str = NOVA_ENDPOINT,
        microversion: str = MICROVERSION,
    ) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.microversion = microversion
        self.session = ks_session.Session(
            auth=token_endpoint.Token(self.endpoint, token), timeout=60
        )

    # -- raw

    def request(
        self, method: str, path: str, *, json_body: Any = None, ok: Sequence[int] = (200,)
    ) -> Any:
        headers = {"OpenStack-API-Version": f"compute {self.microversion}"}
        resp = self.session.request(
            self.endpoint + path,
            method,
            json=json_body,
            headers=headers,
            raise_exc=False,
            connect_retries=2,
        )
        if resp.status_code not in ok:
            raise StackError(f"{method} {path} -> {resp.status_code}: {resp.text[:500]}")
        if not resp.content:
            return None
        try:
            return resp.json()
        except ValueError:
            return resp.text

    def get(self, path: str, ok: Sequence[int] = (200,)) -> Any:
        return self.request("GET", path, ok=ok)

    # -- servers

    def server(self, uuid: str) -> dict[str, Any] | None:
        """``GET /servers/{uuid}``; None on 404."""
        resp = self.session.get(
            f"{self.endpoint}/servers/{uuid}",
            headers={"OpenStack-API-Version": f"compute {self.microversion}"},
            raise_exc=False,
        )
        if resp.status_code == 404:
            return None
        if resp.status_code != 200:
            raise StackError(f"GET /servers/{uuid} -> {resp.status_code}: {resp.text[:300]}")
        return resp.json()["server"]

    def servers(self, **params: Any) -> list[dict[str, Any]]:
        """``GET /servers/detail?all_tenants=1&...`` (one page, limit 1000)."""
        query = {"all_tenants": "1", "limit": "1000", **{k: str(v) for k, v in params.items()}}
        qs = "&".join(f"{k}={v}" for k, v in query.items())
        return self.get(f"/servers/detail?{qs}")["servers"]

    def find_server(self, uuid: str, **params: Any) -> dict[str, Any] | None:
        """The listing entry for ``uuid`` (deleted rows too with ``deleted=1``) or None."""
        for srv in self.servers(uuid=uuid, **params):
            if srv["id"] == uuid:
                return srv
        return None

    def boot(
        self,
        host: str,
        name: str | None = None,
        *,
        wait: bool = True,
        timeout: float = 90,
        networks: Any = "none",
    ) -> dict[str, Any]:
        """Boot a server on ``host`` (``availability_zone nova:HOST``), network-less unless
        ``networks`` says otherwise (e.g. ``[{"uuid": stack_info()["network_id"]}]``: a port
        on the stack's Neutron network ``e2e-net``)."""
        info = stack_info()
        body = {
            "server": {
                "name": name or f"e2e-{host}-{uuidlib.uuid4().hex[:8]}",
                "imageRef": info["image_id"],
                "flavorRef": info["flavor_id"],
                "networks": networks,
                "availability_zone": f"nova:{host}",
            }
        }
        srv = self.request("POST", "/servers", json_body=body, ok=(202,))["server"]
        if not wait:
            return srv
        return self.wait_status(srv["id"], "ACTIVE", timeout=timeout)

    def wait_status(self, uuid: str, status: str, timeout: float = 90) -> dict[str, Any]:
        """Poll until the server has ``status`` and no task_state; ERROR fails fast."""
        deadline = time.monotonic() + timeout
        srv: dict[str, Any] | None = None
        while time.monotonic() < deadline:
            srv = self.server(uuid)
            if srv is not None:
                if srv["status"] == status and not srv.get("OS-EXT-STS:task_state"):
                    return srv
                if srv["status"] == "ERROR" and status != "ERROR":
                    raise StackError(f"server {uuid} went ERROR: {srv.get('fault')}")
            time.sleep(0.3)
        raise StackError(f"server {uuid} not {status} within {timeout}s: {srv}")

    def wait_gone(self, uuid: str, timeout: float = 60) -> None:
        """Poll until ``GET /servers/{uuid}`` is 404."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.server(uuid) is None:
                return
            time.sleep(0.3)
        raise StackError(f"server {uuid} still there after {timeout}s")

    def delete(self, uuid: str, *, wait: bool = True) -> None:
        """``DELETE /servers/{uuid}``; with ``wait`` until the API answers 404.

        The stack runs nova-api with ``reclaim_instance_interval > 0``, so with the compute up
        this is a soft delete (the server goes SOFT_DELETED, not away): use ``soft_delete`` or
        ``destroy`` then. With the compute down (see ``compute_down``) it is a local delete.
        """
        self.request("DELETE", f"/servers/{uuid}", ok=(204,))
        if wait:
            self.wait_gone(uuid)

    def soft_delete(self, uuid: str) -> dict[str, Any]:
        """Delete with ``reclaim_instance_interval > 0``: the server goes SOFT_DELETED."""
        self.request("DELETE", f"/servers/{uuid}", ok=(204,))
        return self.wait_status(uuid, "SOFT_DELETED")

    def restore(self, uuid: str) -> dict[str, Any]:
        """``restore`` a SOFT_DELETED server; waits until ACTIVE."""
        self.action(uuid, {"restore": None})
        return self.wait_status(uuid, "ACTIVE")

    def force_delete(self, uuid: str) -> None:
        """``forceDelete`` a SOFT_DELETED server; waits until it is gone."""
        self.action(uuid, {"forceDelete": None})
        self.wait_gone(uuid)

    def destroy(self, uuid: str) -> None:
        """Cleanup: make the server gone whatever its state (``forceDelete``; no-op if 404)."""
        srv = self.server(uuid)
        if srv is None:
            return
        if srv.get("OS-EXT-STS:task_state"):
            set_task_state(uuid, None)
        self.force_delete(uuid)

    def action(self, uuid: str, body: dict[str, Any]) -> Any:
        return self.request("POST", f"/servers/{uuid}/action", json_body=body, ok=(202, 200))

    def live_migrate(self, uuid: str, host: str, timeout: float = 90) -> dict[str, Any]:
        """``os-migrateLive`` to ``host``; returns once the server's host flipped AND the
        migration record says completed (the host flips first)."""
        self.action(uuid, {"os-migrateLive": {"host": host, "block_migration": "auto"}})
        deadline = time.monotonic() + timeout
        srv: dict[str, Any] | None = None
        migs: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            srv = self.server(uuid)
            migs = self.migrations(instance_uuid=uuid)
            done = [m for m in migs if m["status"] == "completed" and m["dest_compute"] == host]
            if (
                srv is not None
                and srv["OS-EXT-SRV-ATTR:host"] == host
                and not srv.get("OS-EXT-STS:task_state")
                and done
            ):
                return srv
            if srv is not None and srv["status"] == "ERROR":
                raise StackError(f"live migration of {uuid} failed: {srv.get('fault')}")
            time.sleep(0.3)
        raise StackError(f"live migration of {uuid} not completed: {srv} {migs}")

    def migrations(self, **params: Any) -> list[dict[str, Any]]:
        qs = "&".join(f"{k}={v}" for k, v in params.items())
        return self.get(f"/os-migrations?{qs}")["migrations"]

    # -- services

    def service(self, host: str, binary: str = "nova-compute") -> dict[str, Any]:
        found = self.get(f"/os-services?host={host}&binary={binary}")["services"]
        if len(found) != 1:
            raise StackError(f"expected one {binary} on {host}, got {found}")
        return found[0]

    def force_down(self, host: str, down: bool = True) -> dict[str, Any]:
        """``PUT /os-services/{id} {"forced_down": down}`` (2.53+)."""
        svc = self.service(host)
        return self.request("PUT", f"/os-services/{svc['id']}", json_body={"forced_down": down})[
            "service"
        ]

    def wait_service_state(self, host: str, state: str, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        svc: dict[str, Any] = {}
        while time.monotonic() < deadline:
            svc = self.service(host)
            if svc["state"] == state:
                return
            time.sleep(0.5)
        raise StackError(f"compute {host} not {state} within {timeout}s: {svc}")


@contextlib.contextmanager
def compute_down(nova: Nova, host: str) -> Iterator[None]:
    """Stop ``host``'s nova-compute and force its service down; undo both on exit.

    Inside, a ``DELETE`` of a server on ``host`` is a "local delete": the API marks the row
    deleted and the guest keeps running.
    """
    stop_compute(host)
    try:
        nova.force_down(host, True)
        yield
    finally:
        try:
            nova.force_down(host, False)
        finally:
            start_compute(host)
        # NOTE: until the API counts the compute up again, a delete would still be
        # a local delete and leave the guest and its files behind.
        nova.wait_service_state(host, "up")


# --------------------------------------------------------------------------- nova-manage / DB


def nova_manage(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            str(NOVA_VENV / "bin" / "nova-manage"),
            "--config-file",
            str(STATE / "etc" / "nova.conf"),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def archive_deleted_rows() -> int:
    """``nova-manage db archive_deleted_rows --until-complete --all-cells --purge``.

    Returns the exit code: 1 means rows were archived, 0 that there was nothing to archive.
    """
    done = nova_manage("db", "archive_deleted_rows", "--until-complete", "--all-cells", "--purge")
    if done.returncode not in (0, 1):
        raise StackError(f"archive_deleted_rows rc={done.returncode}: {done.stderr[-2000:]}")
    return done.returncode


def cell_sql(statement: str, database: str = "nova") -> str:
    """Run SQL in a stack database (``nova`` is cell1) through the MariaDB socket."""
    done = subprocess.run(
        [
            "mariadb",
            "--no-defaults",
            f"--socket={STATE / 'mysql.sock'}",
            "-uroot",
            "-N",
            "-B",
            database,
            "-e",
            statement,
        ],
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )
    if done.returncode != 0:
        raise StackError(f"SQL failed: {done.stderr.strip()}")
    return done.stdout


def set_task_state(uuid: str, task_state: str | None) -> None:
    """Set an instance's task_state directly in the cell1 DB (what a stuck operation leaves)."""
    if not all(c.isalnum() or c == "-" for c in uuid):
        raise ValueError(uuid)
    value = "NULL" if task_state is None else "'" + task_state.replace("'", "") + "'"
    cell_sql(f"UPDATE instances SET task_state={value} WHERE uuid='{uuid}'")


# --------------------------------------------------------------------------- libvirt (virsh)


def virsh(
    *args: str, uri: str = LIBVIRT_URI, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["virsh", "-c", uri, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def domain_state(uuid: str, uri: str = LIBVIRT_URI) -> str | None:
    """``virsh domstate UUID`` or None when there is no such domain."""
    done = virsh("domstate", uuid, uri=uri)
    return done.stdout.strip() if done.returncode == 0 else None


def remove_domain(uuid: str, uri: str = LIBVIRT_URI) -> None:
    """Destroy and undefine a guest of a real libvirt (cleanup after a test)."""
    virsh("destroy", uuid, uri=uri)
    virsh("undefine", uuid, "--nvram", uri=uri)
    if domain_state(uuid, uri) is not None:
        virsh("undefine", uuid, uri=uri)


# --------------------------------------------------------------------------- the CLI under test

CLI = pathlib.Path(os.environ.get("NOVA_ORPHANS_CLI", REPO / ".venv" / "bin" / "nova-orphans"))


def node_uuid(host: str) -> str:
    """The node UUID ``host``'s nova-compute wrote in its state_path (its ``compute_id``)."""
    return (STATE / host / "compute_id").read_text().strip()


def write_cli_config(
    path: pathlib.Path,
    *,
    host: str,
    libvirt_uri: str = LIBVIRT_URI,
    token: str = ADMIN_TOKEN,
    endpoint: str = NOVA_ENDPOINT,
    extra: str = "",
    auth: dict[str, str] | None = None,
) -> pathlib.Path:
    """An oslo.config file for ``nova-orphans`` pointed at the stack.

    ``auth``: keystoneauth options for ``[nova]`` (Keystone finds Nova in its catalog) instead
    of the ``admin_token`` auth with ``token`` and ``endpoint``.
    """
    nova = (
        "".join(f"{k} = {v}\n" for k, v in auth.items())
        if auth is not None
        else f"auth_type = admin_token\nendpoint = {endpoint}\ntoken = {token}\n"
    )
    path.write_text(
        "[DEFAULT]\n"
        f"host = {host}\n"
        "[libvirt]\n"
        f"connection_uri = {libvirt_uri}\n"
        "[nova]\n"
        f"{nova}"
        "timeout = 20\n"
        f"{extra}"
    )
    return path


def run_audit(
    config_file: pathlib.Path, host: str, libvirt_uri: str, *extra: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``nova-orphans audit --config-file F --host H --libvirt-uri URI --format json``."""
    return subprocess.run(
        [
            str(CLI),
            "audit",
            "--config-file",
            str(config_file),
            "--host",
            host,
            "--libvirt-uri",
            libvirt_uri,
            "--format",
            "json",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def stderr_lines(stderr: str) -> list[str]:
    """stderr's lines, less the agent's start and stop lines (logged as OpenStack services
    log theirs): what a command said besides them."""
    return [
        line
        for line in stderr.strip().splitlines()
        if " starting (" not in line and "nova-orphans stopped " not in line
    ]


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``nova-orphans ARGS`` as a subprocess."""
    return subprocess.run(
        [str(CLI), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def findings_by_uuid(done: subprocess.CompletedProcess[str]) -> dict[str, dict[str, Any]]:
    """Parse the JSON report of an audit into ``{uuid: finding}``."""
    report = json.loads(done.stdout)
    return {f["uuid"]: f for f in report["findings"]}
