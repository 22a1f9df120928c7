"""Fixtures shared by the command-line tests."""

from __future__ import annotations

import pathlib

import pytest

from tests import worlds


@pytest.fixture
def world(tmp_path: pathlib.Path) -> str:
    """A libvirt test:/// world holding one guest with Nova metadata; returns its URI."""
    domain = worlds.node_domain(
        uuid=worlds.random_uuid(), name="instance-00000001", metadata=worlds.nova_metadata()
    )
    return worlds.write_world(tmp_path, [domain])
