"""``nova-orphans restore`` fails closed when Nova cannot be asked (docs/design.md rule 13):
exit 1, one ``refused: …`` line, nothing changed; ``--force`` restores, warns, and the
hold it puts the guest on says it was forced (rule 12)."""

from __future__ import annotations

import pytest

from nova_orphans import cli, exits
from nova_orphans.record.journal import Journal
from tests.unit.conftest import U


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
