"""Read-only observer of the libvirt domains on one host.

The connection is opened read-only: nothing here can change a domain. Bulk
calls (``getAllDomainStats``, ``listAllDomains``) list the domains with their
state and what they consume (vCPUs, balloon, disk allocation, CPU time); each
domain then costs one ``XMLDesc``, one or two ``metadata`` calls and, when
active, one ``jobInfo``.
"""

from __future__ import annotations

import contextlib
import os
import types
import urllib.parse
import xml.etree.ElementTree as ET
from typing import Any

import libvirt

from nova_orphans.core import model
from nova_orphans.core.identity import LibvirtIdentity
from nova_orphans.exceptions import one_line
from nova_orphans.observe import domain_xml, errors

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
INACTIVE_STATES = (
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


class LibvirtObserver:
    """Lists the domains of one libvirt connection as ``model.Domain`` records.

    Use ``LibvirtObserver.open(uri)``, ideally as a context manager.
    """

    def __init__(self, conn: libvirt.virConnect, uri: str) -> None:
        self._conn = conn
        self._uri = uri
        self._jobs_supported = True

    @classmethod
    def open(cls, uri: str) -> LibvirtObserver:
        """Open ``uri`` read-only; raise ``HypervisorUnreachable`` when that fails."""
        libvirt.registerErrorHandler(ignore_errors, None)
        _require_test_world(uri)
        try:
            conn = libvirt.openReadOnly(uri)
        except libvirt.libvirtError as err:
            raise errors.HypervisorUnreachable(uri=uri, reason=libvirt_reason(err)) from err
        if conn is None:  # very old bindings return None instead of raising
            raise errors.HypervisorUnreachable(uri=uri, reason="connection failed")
        return cls(conn, uri)

    @property
    def uri(self) -> str:
        """The URI this observer was opened with."""
        return self._uri

    def close(self) -> None:
        """Close the connection; errors while closing are irrelevant and ignored."""
        with contextlib.suppress(libvirt.libvirtError):
            self._conn.close()

    def __enter__(self) -> LibvirtObserver:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: types.TracebackType | None,
    ) -> None:
        self.close()

    def identity(self) -> LibvirtIdentity:
        """What this libvirt says it is: the hostname and type Nova's libvirt driver reports.

        NOTE: Nova's libvirt driver reports ``getHostname()`` as the node's
        ``hypervisor_hostname`` and ``getType()`` as its ``hypervisor_type``.
        """
        try:
            hostname = self._conn.getHostname()
            hypervisor_type = self._conn.getType()
            capabilities = self._conn.getCapabilities()
        except libvirt.libvirtError as err:
            raise self._error(err) from err
        try:
            host_uuid = ET.fromstring(capabilities).findtext("host/uuid")
        except ET.ParseError as err:
            raise errors.HypervisorError(uri=self._uri, reason=f"capabilities: {err}") from err
        return LibvirtIdentity(self._uri, hostname, hypervisor_type, host_uuid)

    def list_domains(self) -> tuple[model.Domain, ...]:
        """Every domain, active and inactive, in libvirt's order.

        A domain that vanishes while it is being read is left out (it is gone);
        any other libvirt failure raises ``HypervisorError``.
        """
        try:
            stats = self._conn.getAllDomainStats(SCAN_STATS, 0)
            transient = {
                dom.UUIDString()
                for dom in self._conn.listAllDomains(libvirt.VIR_CONNECT_LIST_DOMAINS_TRANSIENT)
            }
        except libvirt.libvirtError as err:
            raise self._error(err) from err
        found = []
        for dom, record in stats:
            state, reason = _state_of(record)
            domain = self._read(dom, state, reason, dom.UUIDString() not in transient, record)
            if domain is not None:
                found.append(domain)
        return tuple(found)

    def lookup_domain(self, uuid: str) -> model.Domain | None:
        """A fresh read of one domain by UUID; None when there is no such domain."""
        try:
            dom = self._conn.lookupByUUIDString(uuid)
            state, reason = dom.state()
            persistent = bool(dom.isPersistent())
            stats = self._conn.domainListGetStats([dom], SCAN_STATS, 0)
        except libvirt.libvirtError as err:
            if is_gone(err):
                return None
            raise self._error(err) from err
        return self._read(dom, state, reason, persistent, stats[0][1] if stats else None)

    def _read(
        self,
        dom: libvirt.virDomain,
        state: int,
        reason: int,
        persistent: bool,
        stats: dict[str, Any] | None = None,
    ) -> model.Domain | None:
        try:
            xml = dom.XMLDesc(0)
            found = _metadata_element(dom)
            job_active = self._job_active(dom, state, reason)
        except libvirt.libvirtError as err:
            if is_gone(err):
                return None
            raise self._error(err) from err
        try:
            parsed = domain_xml.parse_domain(xml)
        except domain_xml.DomainXMLError as err:
            raise errors.HypervisorError(uri=self._uri, reason=f"{dom.name()}: {err}") from err
        metadata, metadata_error = _parse_metadata(found)
        return model.Domain(
            uuid=dom.UUIDString(),
            name=dom.name(),
            state=_STATES.get(state, model.DomainState.NOSTATE),
            persistent=persistent,
            job_active=job_active,
            metadata=metadata,
            metadata_error=metadata_error,
            disks=parsed.disks,
            interfaces=parsed.interfaces,
            usage=usage_of(stats or {}, parsed, state not in INACTIVE_STATES),
        )

    def _job_active(self, dom: libvirt.virDomain, state: int, reason: int) -> bool:
        if (state, reason) in _MIGRATING:
            return True
        if state in INACTIVE_STATES or not self._jobs_supported:
            return False
        try:
            job_type = dom.jobInfo()[0]
        except libvirt.libvirtError as err:
            code = err.get_error_code()
            if code == libvirt.VIR_ERR_NO_SUPPORT:
                # NOTE: a driver without job support (the test driver) cannot
                # migrate either; stop asking it for every domain.
                self._jobs_supported = False
                return False
            if code == libvirt.VIR_ERR_OPERATION_INVALID:
                # NOTE: libvirt refuses job info on e.g. an incoming migration's
                # destination; when we cannot tell, assume a job is running.
                return True
            raise
        return job_type in _JOB_RUNNING

    def _error(self, err: libvirt.libvirtError) -> errors.HypervisorError:
        return errors.HypervisorError(uri=self._uri, reason=libvirt_reason(err))


def _metadata_element(dom: libvirt.virDomain) -> tuple[str, str] | None:
    """The Nova metadata element and its namespace, newest namespace first."""
    for namespace in domain_xml.NOVA_NAMESPACES:
        try:
            return dom.metadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT, namespace), namespace
        except libvirt.libvirtError as err:
            if err.get_error_code() != libvirt.VIR_ERR_NO_DOMAIN_METADATA:
                raise
    return None


def _parse_metadata(
    found: tuple[str, str] | None,
) -> tuple[model.NovaMetadata | None, str | None]:
    if found is None:
        return None, None
    try:
        return domain_xml.parse_nova_metadata(*found), None
    except domain_xml.MetadataError as err:
        return None, str(err)


def usage_of(stats: dict[str, Any], parsed: domain_xml.ParsedDomain, active: bool) -> model.Usage:
    """What the domain consumes, from its bulk stats record, else from its XML.

    Disk: the bytes its file-backed disks take on this host (``block.N.physical``,
    the image file's size; else ``allocation``); network and block-device disks
    (RBD, iSCSI, LVM volumes) are not this host's instance storage.
    NOTE: an inactive guest holds neither memory nor CPUs; its disks stay.
    """
    disk_bytes = _local_disk_bytes(stats, parsed.disks)
    cpu = stats.get("cpu.time")
    cpu_seconds = cpu / 1e9 if cpu is not None else None
    if not active:
        return model.Usage(0, 0, disk_bytes, cpu_seconds)
    vcpus = stats.get("vcpu.current", parsed.vcpus)
    balloon = stats.get("balloon.current")
    memory = balloon * 1024 if balloon is not None else parsed.memory_bytes
    return model.Usage(
        vcpus=int(vcpus) if vcpus is not None else None,
        memory_bytes=int(memory) if memory is not None else None,
        disk_bytes=disk_bytes,
        cpu_seconds=cpu_seconds,
    )


def _local_disk_bytes(stats: dict[str, Any], disks: tuple[model.Disk, ...]) -> int | None:
    """Bytes allocated by the file-backed disks, or None when the stats do not say."""
    files = {d.target for d in disks if d.source_type == "file" and d.device == "disk"}
    count = stats.get("block.count")
    if count is None:
        return None if files else 0
    total = 0
    for n in range(int(count)):
        if stats.get(f"block.{n}.name") in files:
            taken = stats.get(f"block.{n}.physical", stats.get(f"block.{n}.allocation"))
            if taken is None:
                return None
            total += int(taken)
    return total


def _state_of(record: dict[str, int]) -> tuple[int, int]:
    return record.get("state.state", libvirt.VIR_DOMAIN_NOSTATE), record.get("state.reason", 0)


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
        raise errors.HypervisorUnreachable(uri=uri, reason=f"no such file {parsed.path}")


def is_gone(err: libvirt.libvirtError) -> bool:
    """True when the error says the domain does not exist (any more)."""
    return bool(err.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN)


def libvirt_reason(err: libvirt.libvirtError) -> str:
    """libvirt's message on one line."""
    return one_line(err.get_error_message() or err)


def ignore_errors(_ctx: object, _err: object) -> None:
    """Keep libvirt from printing every error to stderr; we report them ourselves."""
