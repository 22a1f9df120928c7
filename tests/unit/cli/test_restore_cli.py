"""``nova-orphans restore`` fails closed when Nova cannot be asked (docs/design.md rule 13):
exit 1, one ``refused: …`` line, nothing changed; ``--force`` restores, warns, and the
hold it puts the guest on says it was forced (rule 12)."""

from __future__ import annotations

import pathlib

import pytest

from nova_orphans import cli, exits
from nova_orphans.fakes import libvirt_node as worlds
from nova_orphans.record.journal import Journal, QuarantineEntry

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


@pytest.mark.parametrize("start", [["--start"], []], ids=["start", "define"])
def test_restore_is_refused_when_nova_cannot_be_asked(reaped, world, capsys, start):
    conf, path = reaped
    code = cli.main(["restore", "--config-file", conf, "--libvirt-uri", world, U, *start])
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == exits.ERROR
    assert len(lines) == 1 and lines[0].startswith("nova-orphans: refused: Nova could not be")
    assert "--force" in lines[0] and not out
    journal = Journal(str(path))
    assert [e.uuid for e in journal.quarantine()] == [U]
    assert journal.hold_events() == []


def test_force_restores_warns_and_journals_a_forced_hold(reaped, world, capsys):
    conf, path = reaped
    code = cli.main(["restore", "--config-file", conf, "--libvirt-uri", world, U, "--force"])
    out, err = capsys.readouterr()
    assert code == exits.OK, err
    (warning,) = err.strip().splitlines()
    assert warning.startswith("nova-orphans: warning: --force: Nova could not be asked")
    assert out.startswith(f"restored {U}: defined instance-00000007")
    assert f"`nova-orphans release {U}`" in out
    journal = Journal(str(path))
    assert journal.quarantine() == []
    (hold,) = journal.holds().values()
    assert hold.uuid == U and "forced: Nova could not be asked" in hold.reason
