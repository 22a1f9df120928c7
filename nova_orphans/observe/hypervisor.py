"""Read-only observer of the libvirt domains on one host.

The connection is opened read-only: nothing here can change a domain. Bulk
calls (``getAllDomainStats``, ``listAllDomains``) list the domains with their
state and what they consume (vCPUs, balloon, disk allocation, CPU time); each
domain then costs one ``XMLDesc``, one or two ``metadata`` calls and, when
active, one ``jobInfo``.
"""

from __future__ import annotations

import dataclasses
import types
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

from nova_orphans import model, virt
from nova_orphans.classify.identity import LibvirtIdentity
from nova_orphans.observe import domain_xml, errors

#: What the bulk listing shows of a domain's XML at no extra cost: its name, whether it
#: runs (the XML read is then the running guest's), its disks' targets and sources.
Marker: TypeAlias = tuple[str, bool, tuple[tuple[object, object], ...]]


@dataclasses.dataclass(frozen=True)
class Definition:
    """What a domain's XML and its Nova metadata said when they were read, and the
    ``marker`` the bulk listing showed then."""

    marker: Marker
    parsed: domain_xml.ParsedDomain
    metadata: model.NovaMetadata | None
    metadata_error: str | None

    def says_the_same(self, other: Definition) -> bool:
        """Whether ``other`` says the same of the domain (its marker aside)."""
        return (self.parsed, self.metadata, self.metadata_error) == (
            other.parsed,
            other.metadata,
            other.metadata_error,
        )


def _marker(name: str, status: virt.Status, record: Mapping[str, Any]) -> Marker:
    """The marker of a domain listed with ``name``, ``status`` and its bulk stats ``record``.

    NOTE: libvirt sends no event when a disk is attached to the persistent definition
    of a shut-off guest (what Nova does for a volume attached to a stopped server); the
    bulk stats list the disks of every domain, so such a change shows here.
    """
    disks = tuple(
        (record.get(f"block.{n}.name"), record.get(f"block.{n}.path"))
        for n in range(int(record.get("block.count", 0)))
    )
    return name, status.active, disks


class LibvirtObserver:
    """Lists the domains of one libvirt connection as ``model.Domain`` records.

    Use ``LibvirtObserver.open(uri)``, ideally as a context manager; a connection opened
    elsewhere (a test's, a benchmark's) is wrapped as a ``virt.Host``.
    """

    def __init__(self, conn: virt.Host | virt.Connection, uri: str) -> None:
        self._host = conn if isinstance(conn, virt.Host) else virt.Host(conn)
        self._uri = uri
        self._jobs_supported = True

    @classmethod
    def open(cls, uri: str) -> LibvirtObserver:
        """Open ``uri`` read-only; raise ``HypervisorUnreachable`` when that fails."""
        try:
            host = virt.open_connection(uri, read_only=True)
        except virt.Unreachable as err:
            raise errors.HypervisorUnreachable(uri=uri, reason=err.reason) from err
        return cls(host, uri)

    @property
    def uri(self) -> str:
        """The URI this observer was opened with."""
        return self._uri

    @property
    def host(self) -> virt.Host:
        """The read-only connection (for watching its domains' events)."""
        return self._host

    def close(self) -> None:
        """Close the connection; errors while closing are irrelevant and ignored."""
        self._host.close()

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
            hostname = self._host.get_hostname()
            hypervisor_type = self._host.get_type()
            capabilities = self._host.get_capabilities()
        except virt.Error as err:
            raise self._error(err) from err
        try:
            host_uuid = ET.fromstring(capabilities).findtext("host/uuid")
        except ET.ParseError as err:
            raise errors.HypervisorError(uri=self._uri, reason=f"capabilities: {err}") from err
        return LibvirtIdentity(self._uri, hostname, hypervisor_type, host_uuid)

    def look(self) -> tuple[model.Domain, ...]:
        """Every domain, active and inactive, in libvirt's order.

        A domain that vanishes while it is being read is left out (it is gone);
        any other libvirt failure raises ``HypervisorError``.
        """
        return tuple(domain for domain, _ in self.look_reusing(dict))

    def look_reusing(
        self, known: Callable[[], Mapping[str, Definition]]
    ) -> list[tuple[model.Domain, Definition]]:
        """Every domain with its definition, as ``look`` reads them, except that a
        definition in ``known()`` (by UUID, asked once the bulk listing is in) whose marker
        the listing still shows is taken as it is instead of reading the XML again.

        State, persistence, job and usage are read afresh for every domain.
        """
        try:
            stats = self._host.all_domain_stats()
            transient = self._host.transient_uuids()
        except virt.Error as err:
            raise self._error(err) from err
        kept = known()
        found = []
        for guest, record in stats:
            uuid = guest.uuid
            status = virt.status_of(record)
            marker = _marker(guest.name, status, record)
            definition = kept.get(uuid)
            if definition is None or definition.marker != marker:
                definition = self._definition(guest, marker)
                if definition is None:
                    continue  # gone while it was read
            domain = self._domain(guest, status, uuid not in transient, record, definition)
            if domain is not None:
                found.append((domain, definition))
        return found

    def look_up(self, uuid: str) -> model.Domain | None:
        """A fresh read of one domain by UUID; None when there is no such domain."""
        looked = self.look_up_definition(uuid)
        return looked[0] if looked else None

    def look_up_definition(self, uuid: str) -> tuple[model.Domain, Definition] | None:
        """A fresh read of one domain by UUID, with its definition; None when there is none."""
        try:
            guest = self._host.get_guest(uuid)
            status = guest.status()
            persistent = guest.has_persistent_configuration()
            stats = self._host.domain_stats(guest) or {}
        except virt.Error as err:
            if err.gone:
                return None
            raise self._error(err) from err
        definition = self._definition(guest, _marker(guest.name, status, stats))
        if definition is None:
            return None
        domain = self._domain(guest, status, persistent, stats, definition)
        return (domain, definition) if domain is not None else None

    def _definition(self, guest: virt.Guest, marker: Marker) -> Definition | None:
        """The domain's XML and Nova metadata, read now; None when the domain is gone."""
        try:
            xml = guest.get_xml_desc()
            found = _metadata_element(guest)
        except virt.Error as err:
            if err.gone:
                return None
            raise self._error(err) from err
        try:
            parsed = domain_xml.parse_domain(xml)
        except domain_xml.DomainXMLError as err:
            raise errors.HypervisorError(uri=self._uri, reason=f"{guest.name}: {err}") from err
        metadata, metadata_error = _parse_metadata(found)
        return Definition(marker, parsed, metadata, metadata_error)

    def _domain(
        self,
        guest: virt.Guest,
        status: virt.Status,
        persistent: bool,
        stats: dict[str, Any],
        definition: Definition,
    ) -> model.Domain | None:
        try:
            job_active = self._job_active(guest, status)
        except virt.Error as err:
            if err.gone:
                return None
            raise self._error(err) from err
        parsed = definition.parsed
        return model.Domain(
            uuid=guest.uuid,
            name=guest.name,
            state=status.state,
            persistent=persistent,
            job_active=job_active,
            metadata=definition.metadata,
            metadata_error=definition.metadata_error,
            disks=parsed.disks,
            interfaces=parsed.interfaces,
            usage=usage_of(stats, parsed, status.active),
        )

    def _job_active(self, guest: virt.Guest, status: virt.Status) -> bool:
        if status.migrating:
            return True
        if not status.active or not self._jobs_supported:
            return False
        try:
            return guest.job_running()
        except virt.Error as err:
            if err.unsupported:
                # NOTE: a driver without job support (the test driver) cannot
                # migrate either; stop asking it for every domain.
                self._jobs_supported = False
                return False
            if err.invalid_now:
                # NOTE: libvirt refuses job info on e.g. an incoming migration's
                # destination; when we cannot tell, assume a job is running.
                return True
            raise

    def _error(self, err: virt.Error) -> errors.HypervisorError:
        return errors.HypervisorError(uri=self._uri, reason=err.reason)


def _metadata_element(guest: virt.Guest) -> tuple[str, str] | None:
    """The Nova metadata element and its namespace, newest namespace first."""
    for namespace in domain_xml.NOVA_NAMESPACES:
        element = guest.get_metadata_element(namespace)
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
