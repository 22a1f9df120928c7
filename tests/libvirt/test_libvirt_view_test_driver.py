"""The agent's libvirt view, brought up to date between cycles, equals a full read.

On libvirt's ``test:///default`` driver (one world shared by every connection of this
process): random histories define, redefine, undefine, start, stop, pause, resume,
rename and re-tag domains between cycles, and each cycle the view lists exactly what a
full read on a fresh connection lists, reading the XML of only what changed. A lost
event loop, a failed read, a closed connection and a fresh look that disagrees each
make the next cycle a full read.
"""

from __future__ import annotations

import argparse
import pathlib
import random
import time
import uuid as uuidlib
from collections.abc import Callable, Iterator

import libvirt
import pytest

from nova_orphans import virt
from nova_orphans.cli import agent as cli_agent
from nova_orphans.cli import configure
from nova_orphans.fakes import libvirt_node as worlds
from nova_orphans.observe import errors, hypervisor
from nova_orphans.observe.domain_xml import NOVA_NS_1_1
from nova_orphans.observe.libvirt_view import LibvirtView
from nova_orphans.record.metrics import Metrics
from tests.libvirt.domains import admin_connection

URI = "test:///default"
PREFIX = "view-"


@pytest.fixture
def admin() -> Iterator[libvirt.virConnect]:
    """A read-write connection to the shared default world; our domains removed after."""
    with admin_connection(URI, PREFIX) as conn:
        yield conn


@pytest.fixture
def view() -> Iterator[LibvirtView]:
    watched = LibvirtView(URI, libvirt_full_look_every=1000)
    yield watched
    watched.close()


def full_read() -> tuple:
    """What a full read on a fresh connection lists."""
    with hypervisor.LibvirtObserver.open(URI) as observer:
        return observer.look()


def cycle(view: LibvirtView) -> tuple:
    with view.session() as session:
        return session.look()


def read_in_full(view: LibvirtView) -> str:
    """Run a cycle, check it listed what a full read lists and read in full; say why."""
    assert cycle(view) == full_read()
    assert view.last_read is not None and view.last_read.full
    return str(view.last_read.why)


def definition_xml(uuid: str, name: str, server: str, disk: str) -> str:
    """A test-driver guest with Nova's metadata and one file disk."""
    return (
        f"<domain type='test'><name>{name}</name><uuid>{uuid}</uuid>"
        f"<metadata>{worlds.nova_metadata(name=server)}</metadata>"
        "<memory unit='MiB'>64</memory><vcpu>1</vcpu><os><type>hvm</type></os>"
        f"<devices>{worlds.file_disk(disk)}</devices></domain>"
    )


def nova_element(server: str) -> str:
    """The body of a ``<nova:instance>`` as ``setMetadata`` takes it (no prefix)."""
    return worlds.nova_metadata(name=server).replace("nova:", "").replace(":nova=", "=")


class History:
    """Random changes to our domains of the default world; which domains each touched."""

    def __init__(self, conn: libvirt.virConnect, rng: random.Random) -> None:
        self.conn, self.rng, self.serial = conn, rng, 0

    def ours(self) -> list[libvirt.virDomain]:
        return [d for d in self.conn.listAllDomains(0) if d.name().startswith(PREFIX)]

    def step(self) -> str | None:
        """Apply one random change; the UUID it touched (None: nothing applied)."""
        doms = self.ours()
        if not doms or self.rng.random() < 0.25:
            return self._define_new()
        dom = self.rng.choice(doms)
        active, persistent = bool(dom.isActive()), bool(dom.isPersistent())
        moves: list[Callable[[], None]] = [lambda: self._retag(dom), lambda: self._redefine(dom)]
        if active:
            moves += [dom.destroy, lambda: self._pause_or_resume(dom)]
        if not active and persistent:
            moves += [dom.create, dom.undefine, lambda: self._rename(dom)]
        uuid = dom.UUIDString()
        if not persistent:
            moves = [dom.destroy, lambda: self._retag(dom)]
        self.rng.choice(moves)()
        return uuid

    def _define_new(self) -> str:
        self.serial += 1
        uuid, name = str(uuidlib.uuid4()), f"{PREFIX}{self.serial}"
        xml = definition_xml(uuid, name, f"server-{self.serial}", f"/nova/{uuid}/disk")
        if self.rng.random() < 0.2:
            self.conn.createXML(xml, 0)  # transient: gone once it stops
        else:
            self.conn.defineXML(xml)
        return uuid

    def _retag(self, dom: libvirt.virDomain) -> None:
        self.serial += 1
        flags = libvirt.VIR_DOMAIN_AFFECT_LIVE if dom.isActive() else 0
        dom.setMetadata(
            libvirt.VIR_DOMAIN_METADATA_ELEMENT,
            nova_element(f"renamed-server-{self.serial}"),
            "nova",
            NOVA_NS_1_1,
            flags,
        )

    def _redefine(self, dom: libvirt.virDomain) -> None:
        self.serial += 1
        uuid = dom.UUIDString()
        self.conn.defineXML(
            definition_xml(uuid, dom.name(), f"s-{self.serial}", f"/nova/{self.serial}/disk")
        )

    def _pause_or_resume(self, dom: libvirt.virDomain) -> None:
        if dom.state()[0] == libvirt.VIR_DOMAIN_PAUSED:
            dom.resume()
        else:
            dom.suspend()

    def _rename(self, dom: libvirt.virDomain) -> None:
        self.serial += 1
        dom.rename(f"{PREFIX}r{self.serial}", 0)


@pytest.mark.parametrize("seed", range(6))
def test_every_cycle_of_a_random_history_lists_what_a_full_read_lists(
    admin: libvirt.virConnect, view: LibvirtView, seed: int
) -> None:
    rng = random.Random(seed)
    history = History(admin, rng)
    before = {history.step() for _ in range(8)}
    read_in_full(view)
    for _ in range(25):
        touched = {history.step() for _ in range(rng.randrange(0, 4))}
        assert cycle(view) == full_read()
        read = view.last_read
        assert read is not None and not read.full
        # It costs what changed: only the domains touched since the last cycle are read
        # (NOTE: or in the cycle before, when libvirt's event came after that cycle read).
        assert read.definitions_read <= touched | before
        before = touched


def test_a_quiet_cycle_reads_no_xml(admin: libvirt.virConnect, view: LibvirtView) -> None:
    history = History(admin, random.Random(1))
    for _ in range(20):
        history.step()
    cycle(view)
    # NOTE: events come in order: once a later change's event has come and been read,
    # no event of those changes is still on its way to make the quiet cycle read XML.
    later = history._define_new()
    wait_until(lambda: later in view._changed)
    cycle(view)
    listed = cycle(view)
    assert view.last_read is not None
    assert (view.last_read.full, view.last_read.definitions_read) == (False, frozenset())
    assert listed == full_read()


def test_every_libvirt_full_look_every_cycles_looks_in_full(admin: libvirt.virConnect) -> None:
    History(admin, random.Random(2)).step()
    view = LibvirtView(URI, libvirt_full_look_every=3)
    try:
        fulls = []
        for _ in range(7):
            cycle(view)
            assert view.last_read is not None
            fulls.append(view.last_read.full)
    finally:
        view.close()
    assert fulls == [True, False, False, True, False, False, True]


def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_lost_event_loop_makes_the_next_cycle_a_full_read(
    admin: libvirt.virConnect, view: LibvirtView, monkeypatch: pytest.MonkeyPatch
) -> None:
    history = History(admin, random.Random(3))
    for _ in range(5):
        history.step()
    cycle(view)
    cycle(view)
    loop = virt._LOOP._thread
    assert loop is not None
    # The loop's thread ends at its next round, as it would on an error of libvirt's.
    monkeypatch.setattr(libvirt, "virEventRunDefaultImpl", lambda: -1)
    libvirt.virEventAddTimeout(0, lambda timer, _: libvirt.virEventRemoveTimeout(timer), None)
    wait_until(lambda: not loop.is_alive())
    monkeypatch.undo()
    # Changes made while no loop runs reach no callback.
    for _ in range(3):
        history.step()
    with view.session() as session:
        listed = session.look()
        read = session.last_read
    assert read is not None and read.full and "event loop" in str(read.why)
    assert listed == full_read()
    # The session started the loop again: the next cycle is brought up to date by events.
    assert virt._LOOP._thread is not loop and virt._LOOP._thread.is_alive()
    history.step()
    assert cycle(view) == full_read()
    assert view.last_read is not None and not view.last_read.full


def test_a_loop_that_stops_answering_within_a_cycle_makes_its_read_full(
    admin: libvirt.virConnect, view: LibvirtView, monkeypatch: pytest.MonkeyPatch
) -> None:
    History(admin, random.Random(4)).step()
    cycle(view)
    with view.session() as session:
        # The loop stops answering after the session was opened, before the listing.
        monkeypatch.setattr(virt, "event_loop_answers", lambda generation, timeout=0: False)
        assert session.look() == full_read()
    assert view.last_read is not None and view.last_read.full
    assert view.last_read.why == "libvirt's event loop stopped answering"


def test_a_closed_connection_is_opened_again_and_read_in_full(
    admin: libvirt.virConnect, view: LibvirtView
) -> None:
    History(admin, random.Random(5)).step()
    cycle(view)
    cycle(view)
    # libvirt tells the view its connection closed (libvirtd restarted, keepalive lost).
    view._on_close("connection closed by libvirtd")
    history = History(admin, random.Random(6))
    history.step()
    assert "connection closed by libvirtd" in read_in_full(view)


def test_a_failed_read_drops_the_connection_and_the_next_cycle_reads_in_full(
    admin: libvirt.virConnect, view: LibvirtView
) -> None:
    History(admin, random.Random(7)).step()
    cycle(view)
    observer = view._observer
    assert observer is not None

    def broken(known: object) -> list:
        raise errors.HypervisorError(uri=URI, reason="boom")

    observer.look_reusing = broken  # type: ignore[method-assign]
    with pytest.raises(errors.HypervisorError), view.session() as session:
        session.look()
    assert view._observer is None  # dropped: the next cycle connects again
    read_in_full(view)


def a_lost_retag(admin: libvirt.virConnect, view: LibvirtView, seed: int) -> str:
    """A new domain, read by the view, then re-tagged with libvirt's event about that lost:
    a change the view cannot see (its marker stays the same). Its UUID."""
    history = History(admin, random.Random(seed))
    uuid = history._define_new()
    cycle(view)
    history._retag(admin.lookupByUUIDString(uuid))
    # NOTE: libvirt delivers events in order, so once the event of a later change (a new
    # domain) has come, every event about ``uuid`` has come too, late ones of earlier
    # changes included; only then is dropping them a loss no later event undoes.
    later = history._define_new()
    wait_until(lambda: later in view._changed)
    with view._lock:
        view._changed.discard(uuid)
    return uuid


def test_a_fresh_look_that_disagrees_makes_the_next_cycle_a_full_read(
    admin: libvirt.virConnect, view: LibvirtView
) -> None:
    uuid = a_lost_retag(admin, view, seed=8)
    stale = cycle(view)
    assert stale != full_read()
    with view.session() as session:
        fresh = session.look_up(uuid)
    assert fresh is not None and fresh in full_read()
    assert "disagreed" in read_in_full(view)


def test_re_verification_is_a_fresh_read_never_the_view(
    admin: libvirt.virConnect, view: LibvirtView
) -> None:
    uuid = a_lost_retag(admin, view, seed=9)
    with view.session() as session:
        (kept,) = [d for d in session.look() if d.uuid == uuid]
        fresh = session.look_up(uuid)
    (truth,) = [d for d in full_read() if d.uuid == uuid]
    assert fresh == truth and kept != truth


def test_the_configured_cadence_reaches_the_agents_view_and_closes_with_it(
    tmp_path: pathlib.Path,
) -> None:
    conf = tmp_path / "agent.conf"
    conf.write_text(
        "[DEFAULT]\nhost = cmp-1\n[nova]\nauth_type = admin_token\n"
        "endpoint = http://127.0.0.1:1/v2.1\ntoken = t\n"
        f"[agent]\nlibvirt_full_look_every = 4\nstate_dir = {tmp_path}/state\n"
    )
    args = argparse.Namespace(config_files=[str(conf)], host=None, libvirt_uri=URI, dry_run=False)
    agent = cli_agent.build_agent(configure.load_conf(args), args, Metrics())
    view = agent.libvirt_view
    try:
        assert view is not None and view._full_every == 4
        fulls = []
        for _ in range(5):
            with agent.open_hypervisor() as session:
                session.look()
            assert view.last_read is not None
            fulls.append(view.last_read.full)
            agent._count_looks()
        assert fulls == [True, False, False, False, True]
        looks = {
            read: agent.metrics.registry.get_sample_value(
                "nova_orphans_looks_total", {"source": "libvirt", "read": read}
            )
            for read in ("full", "changes")
        }
        assert looks == {"full": 2, "changes": 3}
    finally:
        agent.close()
    assert view._observer is None  # its connection closed with the agent


def test_a_connection_without_domain_events_reads_in_full_every_cycle(
    admin: libvirt.virConnect, view: LibvirtView, monkeypatch: pytest.MonkeyPatch
) -> None:
    History(admin, random.Random(10)).step()

    def refused(conn: object, changed: object, closed: object) -> list[int]:
        raise libvirt.libvirtError("this function is not supported by the connection driver")

    monkeypatch.setattr(virt, "watch_domains", refused)
    whys = [read_in_full(view) for _ in range(3)]
    assert "no domain events" in str(whys[1]) and whys[1] == whys[2]
