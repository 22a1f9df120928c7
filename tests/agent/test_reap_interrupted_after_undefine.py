"""docs/design.md §7 and rule 16: a reap interrupted after the undefine never leaves a "mere copy".

The disk fills up once the domain is undefined, so the manifest is never told "undefined"; the
journal is lost afterwards. The quarantine directory then holds the only definition of the guest:
``quarantine list`` must show it restorable and ``restore`` must bring it back (and the purge
treats it as the entry it is). A reap refused at the undefine, the domain still defined, leaves
a copy, as before.

The actuator is the real one, over libvirt's in-process ``test:///default`` (one state for
every connection of the process) and the real effects, wrapped only to fill the disk.
"""

from __future__ import annotations

import datetime
import pathlib

import libvirt
import pytest

from nova_orphans import cli, exits
from nova_orphans.act.actuator import Actuator
from nova_orphans.act.effects import EffectError
from nova_orphans.act.live import LiveEffects
from nova_orphans.act.quarantine import entries
from nova_orphans.act.quarantine import manifest as manifests
from nova_orphans.classify.guests import classify
from nova_orphans.decide.gate import SafetyVerdict
from nova_orphans.decide.plan import Decision, Plan
from nova_orphans.decide.policy import Action, Step
from nova_orphans.fakes import libvirt_node as worlds
from nova_orphans.model import Kind, NovaView
from nova_orphans.observe.hypervisor import LibvirtObserver
from nova_orphans.record.journal import Journal

HOST = "cmp-1"
URI = "test:///default"
FULL = "write the quarantine manifest: No space left on device"
#: The verdict of a cycle that proved identity, has no brake and holds the live lock.
CLEAR = SafetyVerdict(True, "a cleared cycle")


class DiskFullAfterUndefine:
    """The real effects, on a disk that is full from the moment the domain is undefined."""

    def __init__(self, effects: LiveEffects) -> None:
        self._effects = effects
        self.undefined = False

    def __getattr__(self, name: str) -> object:
        return getattr(self._effects, name)

    def undefine(self, uuid: str, directory: str) -> str:
        detail = self._effects.undefine(uuid, directory)
        self.undefined = True
        return detail

    def write_manifest(self, directory: str, manifest: manifests.Manifest) -> None:
        if self.undefined:
            raise EffectError(FULL)
        self._effects.write_manifest(directory, manifest)


class StartedBeforeUndefine:
    """The real effects, while someone starts the guest right before its undefine."""

    def __init__(self, effects: LiveEffects) -> None:
        self._effects = effects

    def __getattr__(self, name: str) -> object:
        return getattr(self._effects, name)

    def undefine(self, uuid: str, directory: str) -> str:
        with libvirt.open(URI) as conn:
            conn.lookupByUUIDString(uuid).create()
        return self._effects.undefine(uuid, directory)


class _Look:
    """The actuator's fresh look: libvirt as it is now, and a Nova with no record of the guest."""

    def __init__(self, observer: LibvirtObserver) -> None:
        self._observer = observer

    def domain(self, uuid):
        return self._observer.look_up(uuid)

    def nova(self, uuid):
        return NovaView(HOST, {}, {uuid: None})

    def dangers(self, finding):
        return ()


class Host:
    """A state directory, an instances path and a config naming them, over ``test:///default``."""

    def __init__(self, tmp_path: pathlib.Path) -> None:
        self.state = tmp_path / "state"
        self.journal_path = self.state / "journal.sqlite"
        self.quarantine = self.state / "quarantine"
        self.instances = tmp_path / "instances"
        self.instances.mkdir()
        self.config = tmp_path / "nova-orphans.conf"
        self.config.write_text(
            f"[DEFAULT]\nhost = {HOST}\ninstances_path = {self.instances}\n"
            f"[libvirt]\nconnection_uri = {URI}\n[agent]\nstate_dir = {self.state}\n"
        )
        self.conn = libvirt.open(URI)
        self.uuid = worlds.random_uuid()

    def define(self, running: bool = False) -> None:
        dom = self.conn.defineXML(
            f"<domain type='test'><name>{worlds.instance_name()}</name><uuid>{self.uuid}</uuid>"
            f"<metadata>{worlds.nova_metadata()}</metadata>"
            "<memory unit='KiB'>32768</memory><os><type>hvm</type></os></domain>"
        )
        if running:
            dom.create()

    def defined(self) -> bool:
        try:
            self.conn.lookupByUUIDString(self.uuid)
        except libvirt.libvirtError:
            return False
        return True

    def reap(self, wrap=lambda effects: effects, days_ago: float = 2):
        """One reap of the guest by the real actuator; its outcome."""
        when = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=days_ago)
        effects = LiveEffects(URI, str(self.instances), str(self.quarantine))
        journal = Journal(str(self.journal_path))
        try:
            with LibvirtObserver.open(URI) as observer:
                view = NovaView(HOST, {}, {self.uuid: None})
                (finding,) = classify([observer.look_up(self.uuid)], view)
                assert finding.kind is Kind.UNKNOWN
                actuator = Actuator(
                    wrap(effects), _Look(observer), journal, lambda: when, dry_run=False,
                    verdict=CLEAR, instances_path=str(self.instances),
                )  # fmt: skip
                decision = Decision(finding, Action.REAP, Step.REAP, "reap_delay passed")
                (outcome,) = actuator.execute(Plan([decision]))
        finally:
            journal.close()
            effects.close()
        return outcome

    def lose_the_journal(self) -> None:
        for path in self.state.glob("journal.sqlite*"):
            path.unlink()

    def run(self, *argv: str) -> int:
        return cli.main([*argv, "--config-file", str(self.config)])

    def close(self) -> None:
        if self.defined():
            dom = self.conn.lookupByUUIDString(self.uuid)
            if dom.isActive():
                dom.destroy()
            dom.undefine()
        self.conn.close()


@pytest.fixture
def host(tmp_path, monkeypatch):
    # NOTE: restore asks Nova first (docs/design.md rule 13): this one has no record of it.
    from nova_orphans.cli import journal as cli_journal
    from nova_orphans.fakes.nova import SimulatedNova

    nova = SimulatedNova()
    # NOTE: and proves this libvirt is its node of the host (docs/design.md rule 10).
    nova.add_compute(HOST, **worlds.test_driver_node())
    worlds.write_compute_id(nova.computes[HOST].node_uuid)
    monkeypatch.setattr(cli_journal, "transport_from_conf", lambda conf: nova)
    made = Host(tmp_path)
    yield made
    made.close()


def test_a_reap_cut_short_by_a_full_disk_after_the_undefine_stays_restorable_without_journal(
    host, capsys
):
    host.define()
    outcome = host.reap(DiskFullAfterUndefine)
    assert (outcome.outcome, outcome.detail) == ("failed", FULL)
    assert not host.defined()  # the quarantine holds the only definition left
    (directory,) = (host.quarantine / host.uuid).iterdir()
    host.lose_the_journal()

    # The retention purge sees the entry as the reap it is; not yet old enough, it stays.
    assert host.run("purge", "--older-than", "7") == exits.OK
    assert directory.is_dir()
    capsys.readouterr()
    assert host.run("quarantine", "list") == exits.OK
    (line,) = [line for line in capsys.readouterr().out.splitlines() if host.uuid in line]
    assert f"{host.uuid}  yes " in line, line
    journal = Journal(str(host.journal_path))
    try:
        (entry,) = entries.entries(journal, str(host.quarantine))
        assert (entry.uuid, entry.path) == (host.uuid, str(directory))
    finally:
        journal.close()
    assert host.run("restore", host.uuid) == exits.OK
    assert capsys.readouterr().out.startswith(f"restored {host.uuid}: defined instance-")
    assert host.defined()


def test_a_reap_refused_at_the_undefine_leaves_a_copy_that_is_no_quarantine_entry(host, capsys):
    host.define()
    outcome = host.reap(StartedBeforeUndefine)  # never undefined while it runs
    assert outcome.outcome == "failed" and "running; stop it first" in outcome.detail
    assert host.defined()
    (directory,) = (host.quarantine / host.uuid).iterdir()
    saved = manifests.read(str(directory))
    assert not saved.undefined and not saved.undefining
    for journal_lost in (False, True):
        if journal_lost:
            host.lose_the_journal()
        capsys.readouterr()
        assert host.run("quarantine", "list") == exits.OK
        assert host.uuid not in capsys.readouterr().out
