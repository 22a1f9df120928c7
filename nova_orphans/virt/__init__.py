"""The libvirt seam: the one package of the product that speaks libvirt-python.

``Host`` (a connection) and ``Guest`` (one of its domains) own every call the product
makes to libvirt, with libvirt's flags, error codes and fallbacks inside: a caller says
``guest.poweroff()`` or ``host.define(xml)`` and gets our own types back (a ``Guest``, a
``Status``, names, XML text), and every libvirt failure is an ``Error``. The parts:
what libvirt's error codes mean (``errors.py``), its state and flag codes (``codes.py``),
opening a connection (``connection.py``), the event loop and the watch on a connection's
domain events (``events.py``).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from typing import Any

import libvirt

from nova_orphans.virt import codes
from nova_orphans.virt.codes import SCAN_STATS, Status, status_of
from nova_orphans.virt.connection import Connection, close_raw, ignore_errors, open_raw
from nova_orphans.virt.errors import Error, Unreachable, no_metadata, raises_error, rejects_flag
from nova_orphans.virt.events import _LOOP as _LOOP
from nova_orphans.virt.events import (
    EVENT_LOOP_TIMEOUT,
    event_loop_answers,
    start_event_loop,
    unwatch,
    watch_domains,
)

__all__ = [
    "EVENT_LOOP_TIMEOUT",
    "SCAN_STATS",
    "Connection",
    "Error",
    "Guest",
    "Host",
    "Status",
    "Unreachable",
    "all_domain_stats",
    "event_loop_answers",
    "ignore_errors",
    "open_connection",
    "start_event_loop",
    "status_of",
    "transient_uuids",
    "undefine_with_fallback",
]


class Guest:
    """One libvirt domain, and every verb the product says to it; each raises ``Error``."""

    def __init__(self, domain: libvirt.virDomain) -> None:
        self._domain = domain

    def __repr__(self) -> str:
        return f"<Guest {self.uuid}>"

    @property
    @raises_error
    def uuid(self) -> str:
        """The domain's UUID."""
        return str(self._domain.UUIDString())

    @property
    @raises_error
    def name(self) -> str:
        """The domain's name."""
        return str(self._domain.name())

    # --- what it is now -------------------------------------------------------------------

    @raises_error
    def status(self) -> Status:
        """Its state, read now."""
        return codes.status(*self._domain.state())

    def is_running(self) -> bool:
        """Whether it holds a running guest now (a fresh state, not ``isActive()``)."""
        return self.status().active

    @raises_error
    def is_active(self) -> bool:
        """Whether libvirt counts it active (``isActive()``)."""
        return bool(self._domain.isActive())

    @raises_error
    def has_persistent_configuration(self) -> bool:
        """Whether it is defined persistently (a transient domain is gone once it stops)."""
        return bool(self._domain.isPersistent())

    @raises_error
    def job_running(self) -> bool:
        """Whether a job (a migration, a save) runs on it.

        NOTE: a driver without job support raises an ``Error`` that is ``unsupported``;
        one refusing job info in the domain's state (an incoming migration's
        destination) raises one that is ``invalid_now``.
        """
        return self._domain.jobInfo()[0] in codes.JOB_RUNNING

    @raises_error
    def get_xml_desc(self) -> str:
        """The XML libvirt shows now (while it runs, the running guest's)."""
        return str(self._domain.XMLDesc(0))

    @raises_error
    def get_definition(self, *, secure: bool = True) -> str:
        """The persistent definition (inactive XML; ``secure``: with its secure fields).

        NOTE: a read-only connection may not ask for secure fields.
        """
        flags = codes.DEFINITION_XML | (codes.SECURE_XML if secure else 0)
        return str(self._domain.XMLDesc(flags))

    @raises_error
    def get_metadata_element(self, namespace: str) -> str | None:
        """Its metadata element in ``namespace``; None when it has none."""
        try:
            return str(self._domain.metadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT, namespace))
        except libvirt.libvirtError as err:
            if not no_metadata(err):
                raise
        return None

    # --- verbs ----------------------------------------------------------------------------

    @raises_error
    def request_shutdown(self) -> None:
        """Ask the guest to shut down (it may ignore it); returns at once."""
        self._domain.shutdown()

    @raises_error
    def poweroff(self) -> None:
        """Stop it at once (libvirt's destroy); a persistent domain stays defined."""
        self._domain.destroy()

    @raises_error
    def launch(self) -> None:
        """Start it."""
        self._domain.create()

    def delete_configuration(self) -> str:
        """Undefine it with every flag the driver accepts (``undefine_with_fallback``)."""
        try:
            return undefine_with_fallback(self._domain)
        except libvirt.libvirtError as err:
            raise Error.of(err) from err

    # --- saved state ----------------------------------------------------------------------

    @raises_error
    def has_managed_save(self) -> bool:
        """Whether it has libvirt's managed-save image (its saved RAM state)."""
        return bool(self._domain.hasManagedSaveImage(0))

    @raises_error
    def save_memory_state(self, *, running: bool) -> None:
        """Save it as libvirt's managed save; a start then resumes it (``running``) or not."""
        flags = libvirt.VIR_DOMAIN_SAVE_RUNNING if running else libvirt.VIR_DOMAIN_SAVE_PAUSED
        self._domain.managedSave(flags)

    def snapshot_names(self) -> list[str]:
        """Its snapshots' names, every parent before its children; [] without support."""
        return [str(snapshot.getName()) for snapshot in self._snapshots()]

    @raises_error
    def snapshots(self) -> list[tuple[str, str]]:
        """Its snapshots' names and XML (with secure fields), parents first."""
        flags = getattr(libvirt, "VIR_DOMAIN_SNAPSHOT_XML_SECURE", 0)
        return [(str(s.getName()), str(s.getXMLDesc(flags))) for s in self._snapshots()]

    @raises_error
    def current_snapshot(self) -> str | None:
        """The name of its current snapshot, if it has one."""
        if not self._domain.hasCurrentSnapshot(0):
            return None
        return str(self._domain.snapshotCurrent(0).getName())

    def checkpoint_names(self) -> list[str]:
        """Its checkpoints' names, parents first; [] where libvirt has none."""
        return [str(checkpoint.getName()) for checkpoint in self._checkpoints()]

    @raises_error
    def checkpoints(self) -> list[tuple[str, str]]:
        """Its checkpoints' names and XML (with secure fields), parents first."""
        flags = getattr(libvirt, "VIR_DOMAIN_CHECKPOINT_XML_SECURE", 0)
        return [(str(c.getName()), str(c.getXMLDesc(flags))) for c in self._checkpoints()]

    @raises_error
    def redefine_snapshot(self, xml: str, *, current: bool) -> None:
        """Define a kept snapshot's metadata again (``current``: as the current one)."""
        flags = libvirt.VIR_DOMAIN_SNAPSHOT_CREATE_REDEFINE
        if current:
            flags |= libvirt.VIR_DOMAIN_SNAPSHOT_CREATE_CURRENT
        self._domain.snapshotCreateXML(xml, flags)

    @raises_error
    def redefine_checkpoint(self, xml: str) -> None:
        """Define a kept checkpoint's metadata again."""
        self._domain.checkpointCreateXML(xml, libvirt.VIR_DOMAIN_CHECKPOINT_CREATE_REDEFINE)

    @raises_error
    def _snapshots(self) -> list[Any]:
        return _listed(self._domain.listAllSnapshots, "VIR_DOMAIN_SNAPSHOT_LIST_TOPOLOGICAL")

    @raises_error
    def _checkpoints(self) -> list[Any]:
        if not hasattr(self._domain, "listAllCheckpoints"):
            return []
        return _listed(self._domain.listAllCheckpoints, "VIR_DOMAIN_CHECKPOINT_LIST_TOPOLOGICAL")


class Host:
    """One libvirt connection, and every call the product makes on it; each raises ``Error``.

    ``open_connection`` opens one; a connection opened elsewhere (a test's) is wrapped.
    """

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def close(self) -> None:
        """Close the connection; errors while closing are irrelevant and ignored."""
        close_raw(self._conn)

    @raises_error
    def get_hostname(self) -> str:
        """The hostname libvirt reports (Nova's libvirt driver's ``hypervisor_hostname``)."""
        return str(self._conn.getHostname())

    @raises_error
    def get_type(self) -> str:
        """The driver's type (Nova's libvirt driver's ``hypervisor_type``)."""
        return str(self._conn.getType())

    @raises_error
    def get_capabilities(self) -> str:
        """The host's capabilities XML."""
        return str(self._conn.getCapabilities())

    @raises_error
    def lookup(self, uuid: str) -> Guest | None:
        """The domain with this UUID; None when libvirt has none."""
        try:
            return Guest(self._conn.lookupByUUIDString(uuid))
        except libvirt.libvirtError as err:
            if Error.of(err).gone:
                return None
            raise

    @raises_error
    def get_guest(self, uuid: str) -> Guest:
        """The domain with this UUID; an ``Error`` that is ``gone`` when libvirt has none."""
        return Guest(self._conn.lookupByUUIDString(uuid))

    @raises_error
    def define(self, xml: str) -> Guest:
        """Define a domain persistently from ``xml``."""
        return Guest(self._conn.defineXML(xml))

    @raises_error
    def resume_saved(self, image: str, *, paused: bool) -> None:
        """Bring a guest back from a save image, running or (``paused``) paused."""
        self._conn.restoreFlags(image, None, libvirt.VIR_DOMAIN_SAVE_PAUSED if paused else 0)

    def all_domain_stats(self) -> list[tuple[Guest, dict[str, Any]]]:
        """Every domain with its scan stats record: the scan's one bulk call."""
        return all_domain_stats(self._conn)

    @raises_error
    def domain_stats(self, guest: Guest) -> dict[str, Any] | None:
        """One domain's scan stats record, or None when the driver answers none."""
        stats = self._conn.domainListGetStats([guest._domain], SCAN_STATS, 0)
        return stats[0][1] if stats else None

    def transient_uuids(self) -> set[str]:
        """The UUIDs of the transient domains (gone once they stop)."""
        return transient_uuids(self._conn)

    @raises_error
    def watch(self, changed: Callable[[str], None], closed: Callable[[str], None]) -> list[int]:
        """Watch its domains' events and its closing (``events.watch_domains``)."""
        return watch_domains(self._conn, changed, closed)

    def unwatch(self, registered: list[int]) -> None:
        """Undo ``watch``; errors (a connection already gone) are ignored."""
        unwatch(self._conn, registered)


def open_connection(uri: str, *, read_only: bool) -> Host:
    """A connection to ``uri``, read-only or read-write; ``Unreachable`` when that fails."""
    return Host(open_raw(uri, read_only=read_only))


@raises_error
def all_domain_stats(conn: Connection) -> list[tuple[Guest, dict[str, Any]]]:
    """Every domain of ``conn`` with its scan stats record: the scan's one bulk call."""
    return [(Guest(dom), record) for dom, record in conn.getAllDomainStats(SCAN_STATS, 0)]


@raises_error
def transient_uuids(conn: Connection) -> set[str]:
    """The UUIDs of the transient domains of ``conn`` (gone once they stop)."""
    listed = conn.listAllDomains(libvirt.VIR_CONNECT_LIST_DOMAINS_TRANSIENT)
    return {dom.UUIDString() for dom in listed}


def undefine_with_fallback(dom: libvirt.virDomain) -> str:
    """Undefine with every flag the driver accepts, giving them up one by one; what it did.

    Raises libvirt's own error (``Guest.delete_configuration`` raises it as ours).
    """
    flags = codes.undefine_flags()
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


def _listed(list_all: Any, topological: str) -> list[Any]:
    """``list_all(flags)``; [] when the driver does not support it at all."""
    try:
        return list(list_all(getattr(libvirt, topological, 0)))
    except libvirt.libvirtError as err:
        if rejects_flag(err):
            return []
        raise
