"""Fixtures the command-line tests share."""

from __future__ import annotations

import pathlib
import socket
from collections.abc import Iterator

import pytest

from nova_orphans.fakes import libvirt_node as worlds
from nova_orphans.record.journal import Journal


@pytest.fixture
def site(tmp_path: pathlib.Path) -> pathlib.Path:
    """A host's files: our config directory, nova's, a state directory with a journal."""
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "nova-pybasedir.conf").write_text("[DEFAULT]\ninstances_path = $pybasedir/i\n")
    state = tmp_path / "state"
    (state / "quarantine").mkdir(parents=True, mode=0o700)
    Journal(str(state / "journal.sqlite")).close()
    worlds.write_node_file(
        tmp_path,
        [
            worlds.node_domain(
                uuid=worlds.random_uuid(), name="i-1", metadata=worlds.nova_metadata()
            )
        ],
    )
    return tmp_path


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A local port something else listens on."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        yield busy.getsockname()[1]
