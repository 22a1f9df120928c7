"""Ansible against hosts on this machine: a private sshd on loopback, inventories, runs.

The sshd is the machine's OpenSSH server (``scripts/setup.sh --test`` installs it) run by
the test as a child on a free high port of 127.0.0.1, with its own host key, its own
``authorized_keys`` holding a key made for the run, and a ``known_hosts`` the client checks
the host key against. Every inventory host is an alias (``host-a``…) of 127.0.0.1 reached
through it: Ansible's real ``ssh`` connection plugin, one connection per host.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pathlib
import re
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]
COLLECTION_SOURCE = REPO / "deploy" / "ansible" / "ansible_collections" / "nova_orphans" / "fleet"
SSHD = pathlib.Path("/usr/sbin/sshd")
#: Ansible's command-line tools, beside the interpreter running the tests (the `test` extra).
BIN = pathlib.Path(sys.executable).parent


def free_port() -> int:
    """A TCP port of 127.0.0.1 nothing listens on (now)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclasses.dataclass(frozen=True)
class Sshd:
    """A running private sshd and the client files that reach it."""

    port: int
    key: pathlib.Path
    known_hosts: pathlib.Path

    def host_vars(self, port: int | None = None) -> dict[str, Any]:
        """The connection variables of an inventory host behind this sshd (``port``: another
        port, e.g. one nothing listens on: an unreachable host)."""
        return {
            "ansible_host": "127.0.0.1",
            "ansible_port": port or self.port,
            "ansible_user": "root",
            "ansible_connection": "ssh",
            "ansible_ssh_private_key_file": str(self.key),
            "ansible_ssh_common_args": f"-o UserKnownHostsFile={self.known_hosts} "
            "-o StrictHostKeyChecking=yes -o HostKeyAlias=nova-orphans-test "
            "-o ConnectTimeout=5",
            "ansible_python_interpreter": "/usr/bin/python3",
        }


def _keygen(path: pathlib.Path) -> str:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
        check=True,
        capture_output=True,
    )
    return path.with_suffix(".pub").read_text().strip()


@contextlib.contextmanager
def sshd(directory: pathlib.Path) -> Iterator[Sshd]:
    """Start a private sshd in ``directory``; stop it (and only it) at the end."""
    if not SSHD.exists():
        raise FileNotFoundError(f"{SSHD} missing: scripts/setup.sh --test installs openssh-server")
    directory.mkdir(parents=True, exist_ok=True)
    host_key = directory / "host_key"
    host_public = _keygen(host_key)
    client_public = _keygen(directory / "client_key")
    (directory / "authorized_keys").write_text(client_public + "\n")
    known = directory / "known_hosts"
    known.write_text(f"nova-orphans-test {host_public}\n")
    port = free_port()
    config = directory / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {host_key}\n"
        f"AuthorizedKeysFile {directory / 'authorized_keys'}\nPidFile {directory / 'sshd.pid'}\n"
        "PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
        # NOTE: an audit of 50 inventory hosts opens up to `forks` connections at once.
        "MaxStartups 200:30:400\nMaxSessions 200\nLogLevel ERROR\n"
        "Subsystem sftp internal-sftp\n"
    )
    # NOTE: sshd refuses to start without its privilege separation directory.
    pathlib.Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    log = (directory / "sshd.log").open("w")
    server = subprocess.Popen(
        [str(SSHD), "-D", "-e", "-f", str(config)], stdout=log, stderr=subprocess.STDOUT
    )
    try:
        _wait_listening(port, server, directory / "sshd.log")
        yield Sshd(port, directory / "client_key", known)
    finally:
        server.terminate()
        server.wait(timeout=10)
        log.close()


def _wait_listening(port: int, server: subprocess.Popen[bytes], log: pathlib.Path) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"sshd exited {server.returncode}: {log.read_text()[-500:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"sshd did not listen on 127.0.0.1:{port}")


def build_and_install(directory: pathlib.Path) -> pathlib.Path:
    """``ansible-galaxy collection build`` the repository's collection, then ``install`` the
    tarball into ``directory``; returns that collections path."""
    build = directory / "build"
    subprocess.run(
        [str(BIN / "ansible-galaxy"), "collection", "build", str(COLLECTION_SOURCE),
         "--output-path", str(build)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    (tarball,) = build.glob("nova_orphans-fleet-*.tar.gz")
    installed = directory / "collections"
    subprocess.run(
        [str(BIN / "ansible-galaxy"), "collection", "install", str(tarball),
         "-p", str(installed)],
        check=True, capture_output=True, text=True, env=ansible_env(directory, installed),
    )  # fmt: skip
    return installed


def ansible_env(home: pathlib.Path, collections: pathlib.Path) -> dict[str, str]:
    """The environment of an Ansible run: the installed collection only, plain output, this
    run's own temporary and control-socket directories."""
    env = dict(os.environ)
    env.update(
        ANSIBLE_COLLECTIONS_PATH=str(collections),
        ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false",
        ANSIBLE_LOCAL_TEMP=str(home / "ansible-tmp"),
        ANSIBLE_SSH_CONTROL_PATH_DIR=str(home / "cp"),
        ANSIBLE_HOST_KEY_CHECKING="true",
        # NOTE: one ssh round trip per task instead of three (docs: "forks and pipelining").
        ANSIBLE_PIPELINING="true",
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_RETRY_FILES_ENABLED="false",
        ANSIBLE_STDOUT_CALLBACK="default",
        ANSIBLE_CALLBACK_RESULT_FORMAT="yaml",
        ANSIBLE_DEPRECATION_WARNINGS="false",
        PATH=f"{BIN}:{env.get('PATH', '/usr/bin:/bin')}",
    )
    return env


def write_inventory(
    path: pathlib.Path, groups: Mapping[str, Mapping[str, dict[str, Any]]]
) -> pathlib.Path:
    """A YAML inventory: group -> host -> host variables."""
    inventory = {"all": {"children": {g: {"hosts": dict(h)} for g, h in groups.items()}}}
    path.write_text(yaml.safe_dump(inventory, sort_keys=True))
    return path


def playbook(
    name: str,
    inventory: pathlib.Path,
    home: pathlib.Path,
    collections: pathlib.Path,
    extra_vars: Mapping[str, Any] | None = None,
    args: Sequence[str] = (),
    timeout: float = 600,
) -> subprocess.CompletedProcess[str]:
    """``ansible-playbook nova_orphans.fleet.NAME`` (the installed collection's playbook)."""
    home.mkdir(parents=True, exist_ok=True)
    argv = [str(BIN / "ansible-playbook"), "-i", str(inventory), f"nova_orphans.fleet.{name}"]
    if extra_vars:
        extra = home / f"extra-{name}-{time.monotonic_ns()}.yml"
        extra.write_text(yaml.safe_dump(dict(extra_vars)))
        argv += ["-e", f"@{extra}"]
    return subprocess.run(
        [*argv, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=ansible_env(home, collections),
        stdin=subprocess.DEVNULL,
        cwd=home,
    )


def recap(output: str) -> dict[str, dict[str, int]]:
    """PLAY RECAP's counters per host: ``{host: {"ok": 3, "changed": 0, …}}``."""
    found: dict[str, dict[str, int]] = {}
    lines = output.splitlines()
    start = max(i for i, line in enumerate(lines) if line.startswith("PLAY RECAP"))
    for line in lines[start + 1 :]:
        host, sep, counters = line.partition(" : ")
        if not sep:
            continue
        found[host.strip()] = {k: int(v) for k, v in (pair.split("=") for pair in counters.split())}
    return found


def failures(output: str) -> dict[str, str]:
    """Each failed host's message: the ``msg`` of ``fatal: [HOST]: FAILED! => …`` (the result
    as YAML, up to the next task or host)."""
    found = {}
    for match in re.finditer(r"^fatal: \[([^\]]+)\]: FAILED! => (.*?)(?=^\S)", output, re.M | re.S):
        block = textwrap.dedent(match.group(2).strip("\n"))
        try:
            result = yaml.safe_load(block)
        except yaml.YAMLError:
            result = None
        found[match.group(1)] = (
            str(result["msg"]) if isinstance(result, dict) and "msg" in result
            else " ".join(block.split())
        )  # fmt: skip
    return found


def tool_command() -> list[str]:
    """``nova-orphans`` as this checkout's code, run on an inventory host: the command line
    reaches the host through ssh, which carries no environment of the test's."""
    return ["env", f"PYTHONPATH={REPO}", sys.executable, "-m", "nova_orphans.cli"]
