"""External tools some tests need (systemd-analyze, promtool): missing means skip, or fail
under NOVA_ORPHANS_REQUIRE_SERVICES=1 (scripts/setup.sh --test installs them)."""

from __future__ import annotations

import os
import shutil

import pytest


def tool(name: str, package: str) -> str:
    """The path of ``name``; skips (fails when services are required) if it is missing."""
    path = shutil.which(name, path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin"]))
    if path:
        return path
    message = f"{name} is missing (Debian package {package}; scripts/setup.sh --test)"
    if os.environ.get("NOVA_ORPHANS_REQUIRE_SERVICES") == "1":
        pytest.fail(message)
    pytest.skip(message)
