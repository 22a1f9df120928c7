"""Fixtures the unit tests of several stages share."""

from __future__ import annotations

import pathlib

import pytest

from nova_orphans.fakes import libvirt_node as worlds
from nova_orphans.record.entries import QuarantineEntry
from nova_orphans.record.journal import Journal

#: The reaped guest of ``reaped``, and its quarantine time stamp.
U = "11111111-2222-4333-8444-555555555555"
STAMP = "20261101T120000Z"


@pytest.fixture
def reaped(tmp_path: pathlib.Path) -> tuple[str, pathlib.Path]:
    """A config (Nova unreachable) and a journal holding one quarantine entry."""
    state = tmp_path / "state"
    directory = state / "quarantine" / U / STAMP
    directory.mkdir(parents=True)
    meta = worlds.nova_metadata()
    (directory / "domain.xml").write_text(
        worlds.node_domain(uuid=U, name="instance-00000007", metadata=meta)
    )
    journal = Journal(str(state / "journal.sqlite"))
    journal.add_quarantine(QuarantineEntry(U, STAMP, "misplaced", str(directory), False, []))
    journal.close()
    conf = tmp_path / "c.conf"
    conf.write_text(
        f"[DEFAULT]\nhost = cmp-1\n[agent]\nstate_dir = {state}\n"
        "[nova]\nauth_type = admin_token\nendpoint = http://127.0.0.1:1/v2.1\ntoken = t\n"
    )
    return str(conf), state / "journal.sqlite"
