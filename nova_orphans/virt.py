"""The libvirt seam: the one module of the product that speaks libvirt-python.

Everything libvirt-specific the observer and the effects need lives here: opening a
connection (read-only or read-write), what libvirt's error codes mean to us, its
state and job codes in our words, and the domain verbs that take libvirt's flags
(the undefine that gives up the flags a driver rejects among them). Plain calls on
a connection or a domain (``name()``, ``shutdown()``, ``defineXML(xml)``) are made
where they are used; every libvirt failure is an ``Error``.
"""

from __future__ import annotations

import contextlib
import functools
import operator
import os
import threading
import urllib.parse
from collections.abc import Callable
from typing import Any, TypeAlias

import libvirt

from nova_orphans import exits, model
from nova_orphans.exceptions import NovaOrphansError, one_line

#: What every libvirt call raises.
Error: TypeAlias = libvirt.libvirtError
Connection: TypeAlias = libvirt.virConnect
Domain: TypeAlias = libvirt.virDomain

_STATES = {
    libvirt.VIR_DOMAIN_NOSTATE: model.DomainState.NOSTATE,
    libvirt.VIR_DOMAIN_RUNNING: model.DomainState.RUNNING,
    libvirt.VIR_DOMAIN_BLOCKED: model.DomainState.BLOCKED,
    libvirt.VIR_DOMAIN_PAUSED: model.DomainState.PAUSED,
    libvirt.VIR_DOMAIN_SHUTDOWN: model.DomainState.SHUTDOWN,
    libvirt.VIR_DOMAIN_SHUTOFF: model.DomainState.SHUTOFF,
    libvirt.VIR_DOMAIN_CRASHED: model.DomainState.CRASHED,
    libvirt.VIR_DOMAIN_PMSUSPENDED: model.DomainState.PMSUSPENDED,
}
# (state, reason) pairs that by themselves mean a migration is under way,
# e.g. the paused incoming copy on the destination or a post-copy phase.
_MIGRATING = frozenset(
    {
        (libvirt.VIR_DOMAIN_PAUSED, libvirt.VIR_DOMAIN_PAUSED_MIGRATION),
        (libvirt.VIR_DOMAIN_PAUSED, libvirt.VIR_DOMAIN_PAUSED_POSTCOPY),
        (libvirt.VIR_DOMAIN_PAUSED, libvirt.VIR_DOMAIN_PAUSED_POSTCOPY_FAILED),
        (libvirt.VIR_DOMAIN_RUNNING, libvirt.VIR_DOMAIN_RUNNING_POSTCOPY),
        (libvirt.VIR_DOMAIN_RUNNING, libvirt.VIR_DOMAIN_RUNNING_POSTCOPY_FAILED),
    }
)
_INACTIVE_STATES = (
    libvirt.VIR_DOMAIN_SHUTOFF,
    libvirt.VIR_DOMAIN_CRASHED,
    libvirt.VIR_DOMAIN_NOSTATE,
)
_JOB_RUNNING = (libvirt.VIR_DOMAIN_JOB_BOUNDED, libvirt.VIR_DOMAIN_JOB_UNBOUNDED)
#: The scan's one bulk call asks for the state and what each domain consumes.
#: NOTE: without VIR_CONNECT_GET_ALL_DOMAINS_STATS_ENFORCE_STATS a driver answers
#: what it supports (the test driver: the state alone); the rest comes from the XML.
SCAN_STATS = (
    libvirt.VIR_DOMAIN_STATS_STATE
    | libvirt.VIR_DOMAIN_STATS_CPU_TOTAL
    | libvirt.VIR_DOMAIN_STATS_BALLOON
    | libvirt.VIR_DOMAIN_STATS_VCPU
    | libvirt.VIR_DOMAIN_STATS_BLOCK
)
_XML_FLAGS = libvirt.VIR_DOMAIN_XML_INACTIVE | libvirt.VIR_DOMAIN_XML_SECURE
# Undefine flags in the order they are given up when the driver rejects them.
_UNDEFINE_FLAGS = (
    ("managed-save", "VIR_DOMAIN_UNDEFINE_MANAGED_SAVE"),
    ("snapshots-metadata", "VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA"),
    ("checkpoints-metadata", "VIR_DOMAIN_UNDEFINE_CHECKPOINTS_METADATA"),
    ("keep-nvram", "VIR_DOMAIN_UNDEFINE_KEEP_NVRAM"),
    ("keep-tpm", "VIR_DOMAIN_UNDEFINE_KEEP_TPM"),
)
# Error codes with which a driver rejects a flag it does not know or support.
_FLAG_REJECTED = frozenset(
    getattr(libvirt, name)
    for name in ("VIR_ERR_INVALID_ARG", "VIR_ERR_NO_SUPPORT", "VIR_ERR_ARGUMENT_UNSUPPORTED")
    if hasattr(libvirt, name)
)


class Unreachable(NovaOrphansError):
    """No connection to libvirt at ``uri``; ``reason`` says why, in one line."""

    msg_fmt = "libvirt unreachable at %(uri)s: %(reason)s"
    exit_code = exits.ERROR

    @property
    def reason(self) -> str:
        """Why the connection failed."""
        return str(self.kwargs["reason"])


# --- connection -------------------------------------------------------------------------


def open_connection(uri: str, *, read_only: bool) -> Connection:
    """A connection to ``uri``, read-only or read-write; ``Unreachable`` when that fails."""
    libvirt.registerErrorHandler(ignore_errors, None)
    _require_test_world(uri)
    try:
        conn = libvirt.openReadOnly(uri) if read_only else libvirt.open(uri)
    except libvirt.libvirtError as err:
        raise Unreachable(uri=uri, reason=reason(err)) from err
    if conn is None:  # very old bindings return None instead of raising
        raise Unreachable(uri=uri, reason="connection failed")
    return conn


def close(conn: Connection) -> None:
    """Close ``conn``; errors while closing are irrelevant and ignored."""
    with contextlib.suppress(libvirt.libvirtError):
        conn.close()


def _require_test_world(uri: str) -> None:
    """Refuse a ``test:///<file>`` URI whose file is missing.

    NOTE: the test driver would parse it with libxml2, which prints its own
    warning to stderr; the operator gets our one line instead.
    """
    parsed = urllib.parse.urlsplit(uri)
    if (
        parsed.scheme == "test"
        and parsed.path not in ("", "/default")
        and not os.path.isfile(parsed.path)
    ):
        raise Unreachable(uri=uri, reason=f"no such file {parsed.path}")


def ignore_errors(_ctx: object, _err: object) -> None:
    """Keep libvirt from printing every error to stderr; we report them ourselves."""


# --- error reasons ----------------------------------------------------------------------


def reason(err: Error) -> str:
    """libvirt's message on one line."""
    return one_line(err.get_error_message() or err)


def is_gone(err: Error) -> bool:
    """True when the error says the domain does not exist (any more)."""
    return bool(err.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN)


def is_unsupported(err: Error) -> bool:
    """True when the driver does not support the call at all (the test driver's job info)."""
    return bool(err.get_error_code() == libvirt.VIR_ERR_NO_SUPPORT)


def is_invalid_now(err: Error) -> bool:
    """True when libvirt refuses the call in the domain's present state."""
    return bool(err.get_error_code() == libvirt.VIR_ERR_OPERATION_INVALID)


def rejects_flag(err: Error) -> bool:
    """True when the driver rejects a flag it does not know or support."""
    return err.get_error_code() in _FLAG_REJECTED


# --- state and what a scan reads ----------------------------------------------------------


def domain_state(state: int) -> model.DomainState:
    """libvirt's state code in our words (an unknown code is NOSTATE)."""
    return _STATES.get(state, model.DomainState.NOSTATE)


def is_inactive(state: int) -> bool:
    """Whether a domain in ``state`` holds no running guest (shut off, crashed, no state)."""
    return state in _INACTIVE_STATES


def is_active(dom: Domain) -> bool:
    """Whether the domain runs now (a fresh ``state()`` call)."""
    return not is_inactive(dom.state()[0])


def is_migrating(state: int, reason_code: int) -> bool:
    """Whether the state and its reason by themselves mean a migration is under way."""
    return (state, reason_code) in _MIGRATING


def job_running(dom: Domain) -> bool:
    """Whether a job (a migration, a save) runs on the domain; raises ``Error``."""
    return dom.jobInfo()[0] in _JOB_RUNNING


def state_of(record: dict[str, int]) -> tuple[int, int]:
    """The (state, reason) codes of one bulk stats record."""
    return record.get("state.state", libvirt.VIR_DOMAIN_NOSTATE), record.get("state.reason", 0)


def all_domain_stats(conn: Connection) -> list[tuple[Domain, dict[str, Any]]]:
    """Every domain with its scan stats record: the scan's one bulk call."""
    return list(conn.getAllDomainStats(SCAN_STATS, 0))


def domain_stats(conn: Connection, dom: Domain) -> dict[str, Any] | None:
    """One domain's scan stats record, or None when the driver answers none."""
    stats = conn.domainListGetStats([dom], SCAN_STATS, 0)
    return stats[0][1] if stats else None


def transient_uuids(conn: Connection) -> set[str]:
    """The UUIDs of the transient domains (gone once they stop)."""
    listed = conn.listAllDomains(libvirt.VIR_CONNECT_LIST_DOMAINS_TRANSIENT)
    return {dom.UUIDString() for dom in listed}


def metadata_element(dom: Domain, namespace: str) -> str | None:
    """The domain's metadata element in ``namespace``; None when it has none."""
    try:
        return str(dom.metadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT, namespace))
    except libvirt.libvirtError as err:
        if err.get_error_code() != libvirt.VIR_ERR_NO_DOMAIN_METADATA:
            raise
    return None


# --- domain events ------------------------------------------------------------------------

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

    NOTE: libvirt delivers a connection's events (and its keepalive and close
    notices) only through an event loop registered before the connection is
    opened, and only while some thread runs it. ``generation`` counts the
    threads started: a watcher registered under another generation may have
    missed events while no thread ran the loop.
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
    the connection closes; returns the registrations for ``unwatch``. Raises ``Error``
    when the driver cannot deliver one of them (nothing stays registered then).

    NOTE: keepalive makes a daemon that stopped answering close the connection, so
    that ``closed`` is told rather than every call hanging.
    """
    registered: list[int] = []

    def on_event(_conn: Connection, dom: Domain, *_details: object) -> None:
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


# --- domain verbs ---------------------------------------------------------------------------


def lookup(conn: Connection, uuid: str) -> Domain | None:
    """The domain with this UUID; None when libvirt has none."""
    try:
        return conn.lookupByUUIDString(uuid)
    except libvirt.libvirtError as err:
        if is_gone(err):
            return None
        raise


def definition(dom: Domain, *, secure: bool = True) -> str:
    """The persistent definition (inactive XML; ``secure``: with its secure fields).

    NOTE: a read-only connection may not ask for secure fields.
    """
    flags = _XML_FLAGS if secure else libvirt.VIR_DOMAIN_XML_INACTIVE
    return str(dom.XMLDesc(flags))


def undefine_with_fallback(dom: Domain) -> str:
    """Undefine with every flag the driver accepts, giving them up one by one."""
    flags = [
        (label, getattr(libvirt, name)) for label, name in _UNDEFINE_FLAGS if hasattr(libvirt, name)
    ]
    rejected: list[str] = []
    while flags:
        try:
            dom.undefineFlags(functools.reduce(operator.or_, (value for _, value in flags)))
        except libvirt.libvirtError as err:
            if not rejects_flag(err):
                raise
            rejected.append(flags.pop()[0])
            continue
        break
    else:
        dom.undefine()
    return "undefined" + (f" (driver rejected {', '.join(rejected)})" if rejected else "")


def snapshots(dom: Domain) -> list[Any]:
    """The domain's snapshots, every parent before its children; [] without support."""
    return _listed(dom.listAllSnapshots, "VIR_DOMAIN_SNAPSHOT_LIST_TOPOLOGICAL")


def checkpoints(dom: Domain) -> list[Any]:
    """The domain's checkpoints, parents first; [] where libvirt has none."""
    if not hasattr(dom, "listAllCheckpoints"):
        return []
    return _listed(dom.listAllCheckpoints, "VIR_DOMAIN_CHECKPOINT_LIST_TOPOLOGICAL")


def current_snapshot(dom: Domain) -> str | None:
    """The name of the domain's current snapshot, if it has one."""
    return str(dom.snapshotCurrent(0).getName()) if dom.hasCurrentSnapshot(0) else None


def snapshot_xml(snapshot: Any) -> str:
    """A snapshot's XML, with its secure fields."""
    return str(snapshot.getXMLDesc(getattr(libvirt, "VIR_DOMAIN_SNAPSHOT_XML_SECURE", 0)))


def checkpoint_xml(checkpoint: Any) -> str:
    """A checkpoint's XML, with its secure fields."""
    return str(checkpoint.getXMLDesc(getattr(libvirt, "VIR_DOMAIN_CHECKPOINT_XML_SECURE", 0)))


def redefine_snapshot(dom: Domain, xml: str, *, current: bool) -> None:
    """Define a kept snapshot's metadata again (``current``: as the current one)."""
    flags = libvirt.VIR_DOMAIN_SNAPSHOT_CREATE_REDEFINE
    if current:
        flags |= libvirt.VIR_DOMAIN_SNAPSHOT_CREATE_CURRENT
    dom.snapshotCreateXML(xml, flags)


def redefine_checkpoint(dom: Domain, xml: str) -> None:
    """Define a kept checkpoint's metadata again."""
    dom.checkpointCreateXML(xml, libvirt.VIR_DOMAIN_CHECKPOINT_CREATE_REDEFINE)


def resume_saved(conn: Connection, image: str, *, paused: bool) -> None:
    """Bring a guest back from a save image, running or (``paused``) paused."""
    conn.restoreFlags(image, None, libvirt.VIR_DOMAIN_SAVE_PAUSED if paused else 0)


def managed_save(dom: Domain, *, running: bool) -> None:
    """Save the guest as libvirt's managed save; a start then resumes it (``running``) or not."""
    dom.managedSave(libvirt.VIR_DOMAIN_SAVE_RUNNING if running else libvirt.VIR_DOMAIN_SAVE_PAUSED)


def _listed(list_all: Any, topological: str) -> list[Any]:
    """``list_all(flags)``; [] when the driver does not support it at all."""
    try:
        return list(list_all(getattr(libvirt, topological, 0)))
    except libvirt.libvirtError as err:
        if rejects_flag(err):
            return []
        raise
