"""Session fixtures of the Ansible tests: one private sshd and one collection build and
install per test session, shared by tests/ansible and tests/e2e (``tests/conftest.py`` loads
this module as a plugin).

Missing tools fail the session under NOVA_ORPHANS_REQUIRE_SERVICES=1 (CI) and skip it
otherwise, as the e2e stack does.
"""

from __future__ import annotations

import os
import pathlib
import shutil
from collections.abc import Iterator

import pytest

from tests.ansible import loopback

REQUIRE_SERVICES = os.environ.get("NOVA_ORPHANS_REQUIRE_SERVICES") == "1"


def unavailable(message: str) -> None:
    """Fail under NOVA_ORPHANS_REQUIRE_SERVICES=1, skip otherwise."""
    if REQUIRE_SERVICES:
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def loopback_sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[loopback.Sshd]:
    """A private sshd on 127.0.0.1 that every inventory host alias is reached through."""
    missing = [t for t in ("ssh", "ssh-keygen") if shutil.which(t) is None]
    if missing or not loopback.SSHD.exists():
        unavailable(f"OpenSSH missing ({', '.join(missing) or loopback.SSHD}): "
                    "scripts/setup.sh --test installs it")  # fmt: skip
    with loopback.sshd(tmp_path_factory.mktemp("sshd")) as server:
        yield server


@pytest.fixture(scope="session")
def fleet_collection(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """The repository's collection, built and installed; returns the collections path."""
    if not (loopback.BIN / "ansible-galaxy").exists():
        unavailable(f"ansible-core missing in {loopback.BIN}: pip install -e '.[test]'")
    return loopback.build_and_install(tmp_path_factory.mktemp("collection"))
