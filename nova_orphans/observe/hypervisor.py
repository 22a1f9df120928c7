"""Read-only observer of the libvirt domains on one host.

The connection is opened read-only: nothing here can change a domain. Bulk
calls (``getAllDomainStats``, ``listAllDomains``) list the domains with their
state and what they consume (vCPUs, balloon, disk allocation, CPU time); each
domain then costs one ``XMLDesc``, one or two ``metadata`` calls and, when
active, one ``jobInfo``.
"""

from __future__ import annotations

import types
import xml.etree.ElementTree as ET
from typing import Any

from nova_orphans import virt
from nova_orphans.core import model
from nova_orphans.core.identity import LibvirtIdentity
from nova_orphans.observe import domain_xml, errors


class LibvirtObserver:
    """Lists the domains of one libvirt connection as ``model.Domain`` records.

    Use ``LibvirtObserver.open(uri)``, ideally as a context manager.
    """

    def __init__(self, conn: virt.Connection, uri: str) -> None:
        self._conn = conn
        self._uri = uri
        self._jobs_supported = True

    @classmethod
    def open(cls, uri: str) -> LibvirtObserver:
        """Open ``uri`` read-only; raise ``HypervisorUnreachable`` when that fails."""
        try:
            conn = virt.open_connection(uri, read_only=True)
        except virt.Unreachable as err:
            raise errors.HypervisorUnreachable(uri=uri, reason=err.reason) from err
        return cls(conn, uri)

    @property
    def uri(self) -> str:
        """The URI this observer was opened with."""
        return self._uri

    def close(self) -> None:
        """Close the connection; errors while closing are irrelevant and ignored."""
        virt.close(self._conn)

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
        except virt.Error as err:
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
            stats = virt.all_domain_stats(self._conn)
            transient = virt.transient_uuids(self._conn)
        except virt.Error as err:
            raise self._error(err) from err
        found = []
        for dom, record in stats:
            state, reason = virt.state_of(record)
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
            stats = virt.domain_stats(self._conn, dom)
        except virt.Error as err:
            if virt.is_gone(err):
                return None
            raise self._error(err) from err
        return self._read(dom, state, reason, persistent, stats)

    def _read(
        self,
        dom: virt.Domain,
        state: int,
        reason: int,
        persistent: bool,
        stats: dict[str, Any] | None = None,
    ) -> model.Domain | None:
        try:
            xml = dom.XMLDesc(0)
            found = _metadata_element(dom)
            job_active = self._job_active(dom, state, reason)
        except virt.Error as err:
            if virt.is_gone(err):
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
            state=virt.domain_state(state),
            persistent=persistent,
            job_active=job_active,
            metadata=metadata,
            metadata_error=metadata_error,
            disks=parsed.disks,
            interfaces=parsed.interfaces,
            usage=usage_of(stats or {}, parsed, not virt.is_inactive(state)),
        )

    def _job_active(self, dom: virt.Domain, state: int, reason: int) -> bool:
        if virt.is_migrating(state, reason):
            return True
        if virt.is_inactive(state) or not self._jobs_supported:
            return False
        try:
            return virt.job_running(dom)
        except virt.Error as err:
            if virt.is_unsupported(err):
                # NOTE: a driver without job support (the test driver) cannot
                # migrate either; stop asking it for every domain.
                self._jobs_supported = False
                return False
            if virt.is_invalid_now(err):
                # NOTE: libvirt refuses job info on e.g. an incoming migration's
                # destination; when we cannot tell, assume a job is running.
                return True
            raise

    def _error(self, err: virt.Error) -> errors.HypervisorError:
        return errors.HypervisorError(uri=self._uri, reason=virt.reason(err))


def _metadata_element(dom: virt.Domain) -> tuple[str, str] | None:
    """The Nova metadata element and its namespace, newest namespace first."""
    for namespace in domain_xml.NOVA_NAMESPACES:
        element = virt.metadata_element(dom, namespace)
        if element is not None:
            return element, namespace
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
