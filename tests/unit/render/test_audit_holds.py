"""``audit`` shows which findings are on hold (docs/design.md rule 12): it reads the agent's
journal read-only when there is one, never creates it, and still classifies held guests."""

from __future__ import annotations

import datetime
import json
import pathlib
import sqlite3

from nova_orphans import config
from nova_orphans.audit import HostAudit, read_holds
from nova_orphans.classify.identity import State, Verdict
from nova_orphans.decide.holds import Hold
from nova_orphans.model import Domain, DomainState, Finding, Kind, NovaMetadata
from nova_orphans.record.journal import Journal
from nova_orphans.render import host as render_host

NOW = datetime.datetime(2026, 11, 1, 12, 0, tzinfo=datetime.timezone.utc)
U = "11111111-2222-3333-4444-555555555555"


def load(tmp_path: pathlib.Path, journal: pathlib.Path):
    path = tmp_path / "c.conf"
    path.write_text(f"[DEFAULT]\nhost = cmp-1\n[agent]\njournal_path = {journal}\n")
    return config.load([str(path)])


def holds(conf):
    """What ``audit`` reads: the holds in the journal its config names."""
    return read_holds(config.state_paths(conf).journal)


def test_audit_never_creates_a_journal(tmp_path):
    journal = tmp_path / "state" / "journal.sqlite"
    assert holds(load(tmp_path, journal)) == {}
    assert not (tmp_path / "state").exists()


def test_audit_reads_the_holds_without_writing_the_journal(tmp_path):
    path = tmp_path / "journal.sqlite"
    journal = Journal(str(path))
    hold = journal.hold(U, "restored from quarantine", NOW)
    journal.hold("22222222-2222-3333-4444-555555555555", "released soon", NOW)
    journal.release("22222222-2222-3333-4444-555555555555", NOW)
    journal.close()
    before = path.read_bytes()
    assert holds(load(tmp_path, path)) == {U: hold}
    assert path.read_bytes() == before


def test_a_journal_of_an_older_version_has_nothing_on_hold(tmp_path):
    path = tmp_path / "journal.sqlite"
    sqlite3.connect(path).execute("CREATE TABLE intents (id INTEGER)").connection.close()
    assert holds(load(tmp_path, path)) == {}


def held_report() -> tuple[HostAudit, str]:
    domain = Domain(U, "instance-1", DomainState.RUNNING, True, False, NovaMetadata("ns"))
    finding = Finding(U, "instance-1", Kind.DELETED, "Nova deleted the server", domain, None)
    hold = Hold(U, NOW, "started by someone else after the agent stopped it at T")
    verified = Verdict("cmp-1", State.VERIFIED, (), "libvirt is cmp-1")
    return HostAudit("cmp-1", NOW, [finding], verified, holds={U: hold}), hold.reason


def test_a_held_finding_is_still_classified_and_shows_its_hold():
    result, reason = held_report()
    row = render_host.render_table(result, wide=True).splitlines()[1]
    assert row.startswith("deleted") and U in row
    assert row.endswith(f"Nova deleted the server; on hold since {NOW.isoformat()} ({reason})")
    narrow = render_host.render_table(result).splitlines()[1]
    assert narrow.startswith("deleted") and U in narrow
    assert narrow.endswith("ON HOLD; Nova deleted the server")
    (record,) = json.loads(render_host.render_json(result))["findings"]
    assert record["kind"] == "deleted"
    assert record["hold"] == {"since": NOW.isoformat(), "reason": reason}
    assert result.has_orphans  # exit 3 as before: a held orphan is still an orphan
