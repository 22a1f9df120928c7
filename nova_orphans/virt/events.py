"""libvirt's event loop and the watch on a connection's domain events.

libvirt delivers a connection's events (and its keepalive and close notices) only
through an event loop registered before the connection is opened, and only while some
thread runs it: here, one daemon thread of this process.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

import libvirt

from nova_orphans.virt.connection import Connection

#: Every domain event this libvirt-python knows: any of them may follow a change of the XML.
_DOMAIN_EVENTS = tuple(
    sorted(
        getattr(libvirt, name)
        for name in dir(libvirt)
        if name.startswith("VIR_DOMAIN_EVENT_ID_") and name != "VIR_DOMAIN_EVENT_ID_LAST"
    )
)
#: Keepalive: a ping every 5 s, the connection closed after 3 unanswered ones.
_KEEPALIVE = (5, 3)
#: Seconds the event loop has to show it runs before it is taken for lost.
EVENT_LOOP_TIMEOUT = 2.0


class _EventLoop:
    """libvirt's default event loop, run by one daemon thread of this process.

    NOTE: ``generation`` counts the threads started: a watcher registered under
    another generation may have missed events while no thread ran the loop.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._registered = False
        self._thread: threading.Thread | None = None
        self.generation = 0

    def ensure_running(self) -> int:
        """Start the loop's thread unless it runs; return its generation."""
        with self._lock:
            if not self._registered:
                libvirt.virEventRegisterDefaultImpl()
                self._registered = True
            if self._thread is None or not self._thread.is_alive():
                self.generation += 1
                self._thread = threading.Thread(
                    target=self._run, name="libvirt-events", daemon=True
                )
                self._thread.start()
            return self.generation

    def answers(self, generation: int, timeout: float) -> bool:
        """Whether the loop of ``generation`` still runs and has dispatched every event
        libvirt had queued before this call (it ran two rounds within ``timeout``)."""
        thread = self._thread
        if generation != self.generation or thread is None or not thread.is_alive():
            return False
        rounds: list[int] = []
        done = threading.Event()

        def tick(timer: int, _opaque: object) -> None:
            rounds.append(timer)
            if len(rounds) == 2:
                libvirt.virEventRemoveTimeout(timer)
                done.set()

        # NOTE: a 0 ms timer fires once per round of the loop; libvirt dispatches the
        # events it queued in the round they were queued for, so by the second round
        # of this timer every event queued before it was handed to its callback.
        timer = libvirt.virEventAddTimeout(0, tick, None)
        if done.wait(timeout):
            return True
        with contextlib.suppress(libvirt.libvirtError):
            libvirt.virEventRemoveTimeout(timer)
        return False

    def _run(self) -> None:
        # NOTE: an error ends the thread; ``answers`` then says so, and the next
        # ``ensure_running`` starts another under a new generation.
        with contextlib.suppress(libvirt.libvirtError):
            while libvirt.virEventRunDefaultImpl() == 0:
                pass


_LOOP = _EventLoop()


def start_event_loop() -> int:
    """Run libvirt's event loop in a daemon thread (once per process; again when it
    ended); its generation. Call it before opening a connection to be watched."""
    return _LOOP.ensure_running()


def event_loop_answers(generation: int, timeout: float = EVENT_LOOP_TIMEOUT) -> bool:
    """Whether the event loop of ``generation`` runs, every event queued so far delivered."""
    return _LOOP.answers(generation, timeout)


def watch_domains(
    conn: Connection, changed: Callable[[str], None], closed: Callable[[str], None]
) -> list[int]:
    """Call ``changed(uuid)`` on any event of a domain of ``conn`` and ``closed(why)`` when
    the connection closes; returns the registrations for ``unwatch``. Raises libvirt's
    error when the driver cannot deliver one of them (nothing stays registered then);
    ``Host.watch`` raises it as ours.

    NOTE: keepalive makes a daemon that stopped answering close the connection, so
    that ``closed`` is told rather than every call hanging.
    """
    registered: list[int] = []

    def on_event(_conn: Connection, dom: libvirt.virDomain, *_details: object) -> None:
        changed(dom.UUIDString())

    def on_close(_conn: Connection, code: int, _opaque: object) -> None:
        closed(_CLOSE_REASONS.get(code, f"closed (reason {code})"))

    try:
        for event in _DOMAIN_EVENTS:
            registered.append(conn.domainEventRegisterAny(None, event, on_event, None))
        conn.registerCloseCallback(on_close, None)
    except libvirt.libvirtError:
        unwatch(conn, registered)
        raise
    with contextlib.suppress(libvirt.libvirtError):
        # NOTE: local drivers (the test driver) have no keepalive and need none.
        conn.setKeepAlive(*_KEEPALIVE)
    return registered


_CLOSE_REASONS = {
    libvirt.VIR_CONNECT_CLOSE_REASON_ERROR: "connection error",
    libvirt.VIR_CONNECT_CLOSE_REASON_EOF: "connection closed by libvirtd",
    libvirt.VIR_CONNECT_CLOSE_REASON_KEEPALIVE: "keepalive timeout",
    libvirt.VIR_CONNECT_CLOSE_REASON_CLIENT: "closed by this process",
}


def unwatch(conn: Connection, registered: list[int]) -> None:
    """Undo ``watch_domains``; errors (a connection already gone) are ignored."""
    for callback in registered:
        with contextlib.suppress(libvirt.libvirtError):
            conn.domainEventDeregisterAny(callback)
    with contextlib.suppress(libvirt.libvirtError):
        conn.unregisterCloseCallback()
