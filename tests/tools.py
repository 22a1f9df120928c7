"""External tools some tests need (systemd-analyze, promtool, jq): missing means skip, or fail
under NOVA_ORPHANS_REQUIRE_SERVICES=1 (scripts/setup.sh --test installs them); and the
repository's own files, as git lists them."""

from __future__ import annotations

import os
import pathlib
import shutil
import socket
import subprocess

import pytest
import tomllib

#: The repository's top directory.
ROOT = pathlib.Path(__file__).resolve().parents[1]


def tool(name: str, package: str) -> str:
    """The path of ``name``; skips (fails when services are required) if it is missing."""
    path = shutil.which(name, path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin"]))
    if path:
        return path
    message = f"{name} is missing (Debian package {package}; scripts/setup.sh --test)"
    if os.environ.get("NOVA_ORPHANS_REQUIRE_SERVICES") == "1":
        pytest.fail(message)
    pytest.skip(message)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (now)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def pyproject() -> dict:
    """The repository's pyproject.toml."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def repository_files() -> list[str]:
    """The files git tracks, or would (untracked but not ignored), relative to ``ROOT``."""
    return subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.splitlines()
