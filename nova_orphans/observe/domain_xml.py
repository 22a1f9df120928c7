"""Parse libvirt domain XML and Nova's ``<nova:instance>`` metadata.

Pure functions over strings: no libvirt, no I/O. The domain XML comes from
libvirt (trusted); the metadata element holds user-influenced text (the
server's display name), so it is parsed defensively and every problem becomes
a ``MetadataError`` whose message is one readable line.
"""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET

from nova_orphans import exits, model
from nova_orphans.exceptions import NovaOrphansError

NOVA_NS_1_1 = "http://openstack.org/xmlns/libvirt/nova/1.1"
NOVA_NS_1_0 = "http://openstack.org/xmlns/libvirt/nova/1.0"
#: Namespaces Nova has written its metadata under, newest first.
NOVA_NAMESPACES = (NOVA_NS_1_1, NOVA_NS_1_0)

# The attribute of <source> that names what a disk or interface is backed by.
_DISK_SOURCE_ATTR = {"file": "file", "block": "dev", "dir": "dir", "vhostuser": "path"}
_INTERFACE_SOURCE_ATTR = {
    "bridge": "bridge",
    "network": "network",
    "direct": "dev",
    "vdpa": "dev",
    "vhostuser": "path",
}
# Children of <nova:instance> we read; at least one must be present.
_NOVA_FIELDS = ("name", "creationTime", "owner", "flavor", "package")


class DomainXMLError(NovaOrphansError, ValueError):
    """The domain XML could not be parsed (libvirt handed us something broken)."""

    exit_code = exits.ERROR


class MetadataError(NovaOrphansError, ValueError):
    """The ``<nova:instance>`` element is unreadable; the message says why."""

    exit_code = exits.ERROR


#: Bytes per unit of libvirt's memory elements (``<currentMemory unit=...>``).
_MEMORY_UNITS = {
    **dict.fromkeys(("b", "bytes"), 1),
    **dict.fromkeys(("KB",), 1000),
    **dict.fromkeys(("k", "KiB"), 1024),
    **dict.fromkeys(("MB",), 1000**2),
    **dict.fromkeys(("M", "MiB"), 1024**2),
    **dict.fromkeys(("GB",), 1000**3),
    **dict.fromkeys(("G", "GiB"), 1024**3),
    **dict.fromkeys(("TB",), 1000**4),
    **dict.fromkeys(("T", "TiB"), 1024**4),
}


@dataclasses.dataclass(frozen=True)
class ParsedDomain:
    """What the domain XML says: devices, and the sizing the scan's stats may lack."""

    disks: tuple[model.Disk, ...]
    interfaces: tuple[model.Interface, ...]
    #: ``<vcpu current=...>`` (else the element's text).
    vcpus: int | None
    #: ``<currentMemory>`` in bytes: the balloon's target.
    memory_bytes: int | None


def parse_domain(domain_xml: str) -> ParsedDomain:
    """Parse a ``<domain>`` XML document: its disks and interfaces in document order, its sizing."""
    try:
        root = ET.fromstring(domain_xml)
    except ET.ParseError as err:
        raise DomainXMLError(f"domain XML is not well-formed: {err}") from err
    if root.tag != "domain":
        raise DomainXMLError(f"domain XML root is <{root.tag}>, expected <domain>")
    devices = root.find("devices")
    disks = tuple(_disk(el) for el in devices.iterfind("disk")) if devices is not None else ()
    interfaces = (
        tuple(_interface(el) for el in devices.iterfind("interface")) if devices is not None else ()
    )
    return ParsedDomain(disks, interfaces, _vcpus(root), _memory(root.find("currentMemory")))


def parse_devices(
    domain_xml: str,
) -> tuple[tuple[model.Disk, ...], tuple[model.Interface, ...]]:
    """Return the disks and interfaces of a ``<domain>`` XML document, in document order."""
    parsed = parse_domain(domain_xml)
    return parsed.disks, parsed.interfaces


def _vcpus(root: ET.Element) -> int | None:
    el = root.find("vcpu")
    if el is None:
        return None
    return _int(el.get("current")) or _int(el.text)


def _memory(el: ET.Element | None) -> int | None:
    if el is None:
        return None
    amount = _int(el.text)
    factor = _MEMORY_UNITS.get(el.get("unit", "KiB"))
    return amount * factor if amount is not None and factor else None


def _int(text: str | None) -> int | None:
    try:
        return int(text.strip()) if text else None
    except ValueError:
        return None


def _disk(el: ET.Element) -> model.Disk:
    source_type = el.get("type", "file")
    source = el.find("source")
    protocol = source.get("protocol") if source is not None else None
    target = el.find("target")
    return model.Disk(
        target=(target.get("dev", "") if target is not None else ""),
        device=el.get("device", "disk"),
        source_type=source_type,
        source=_disk_source(source_type, source),
        protocol=protocol,
        serial=_text(el.find("serial")),
    )


def _disk_source(source_type: str, source: ET.Element | None) -> str | None:
    if source is None:
        return None  # e.g. an empty CD-ROM drive
    if source_type == "network":
        name = source.get("name")
        return f"{source.get('protocol')}:{name}" if name else None
    if source_type == "volume":
        pool, volume = source.get("pool"), source.get("volume")
        return f"{pool}/{volume}" if pool and volume else None
    attr = _DISK_SOURCE_ATTR.get(source_type)
    return source.get(attr) if attr else None


def _interface(el: ET.Element) -> model.Interface:
    if_type = el.get("type", "")
    mac = el.find("mac")
    target = el.find("target")
    source = el.find("source")
    attr = _INTERFACE_SOURCE_ATTR.get(if_type)
    return model.Interface(
        type=if_type,
        mac=mac.get("address") if mac is not None else None,
        target_dev=target.get("dev") if target is not None else None,
        source=source.get(attr) if source is not None and attr else None,
    )


def parse_nova_metadata(metadata_xml: str, namespace: str) -> model.NovaMetadata:
    """Read a ``<nova:instance>`` element into ``NovaMetadata``.

    ``metadata_xml`` is what ``virDomainGetMetadata`` returned for ``namespace``
    (libvirt strips the namespace) or the element as it appears in the domain
    XML (namespaced). Missing fields are None. Raises ``MetadataError`` when
    the text is not XML, declares a DTD, has another root element, or carries
    none of the fields Nova writes.
    """
    version = namespace.rsplit("/", 2)[-2:]
    label = "Nova metadata (" + "/".join(version) + ")"
    root = _parse_metadata_root(metadata_xml, label)
    if _local_name(root, namespace) != "instance":
        raise MetadataError(f"{label} root element is <{root.tag}>, expected <instance>")
    fields = _nova_children(root, namespace, label)
    if not fields:
        raise MetadataError(f"{label} <instance> carries none of the fields Nova writes")
    owner = fields.get("owner")
    return model.NovaMetadata(
        namespace=namespace,
        display_name=_text(fields.get("name")),
        creation_time=_text(fields.get("creationTime")),
        project_id=_child_attr(owner, "project", "uuid", namespace),
        user_id=_child_attr(owner, "user", "uuid", namespace),
        flavor=_attr(fields.get("flavor"), "name"),
        package=_attr(fields.get("package"), "version"),
    )


def _parse_metadata_root(metadata_xml: str, label: str) -> ET.Element:
    if not metadata_xml or not metadata_xml.strip():
        raise MetadataError(f"{label} is empty")
    # NOTE: libvirt serialises the element itself, so a DTD can only be there
    # if something hand-crafted the text; refuse it rather than expand entities.
    if "<!DOCTYPE" in metadata_xml or "<!ENTITY" in metadata_xml:
        raise MetadataError(f"{label} declares a DTD or entities; refused")
    try:
        return ET.fromstring(metadata_xml)
    except ET.ParseError as err:
        raise MetadataError(f"{label} is not well-formed XML: {err}") from err


def _local_name(el: ET.Element, namespace: str) -> str | None:
    """The element's name if it is unqualified or in ``namespace``, else None."""
    tag = el.tag
    if not isinstance(tag, str):
        return None  # comments and processing instructions
    if tag.startswith("{"):
        uri, _, local = tag[1:].partition("}")
        return local if uri == namespace else None
    return tag


def _nova_children(root: ET.Element, namespace: str, label: str) -> dict[str, ET.Element]:
    fields: dict[str, ET.Element] = {}
    for child in root:
        name = _local_name(child, namespace)
        if name not in _NOVA_FIELDS:
            continue
        if name in fields:
            raise MetadataError(f"{label} has more than one <{name}> element")
        fields[name] = child
    return fields


def _text(el: ET.Element | None) -> str | None:
    if el is None or el.text is None:
        return None
    return el.text.strip() or None


def _attr(el: ET.Element | None, attr: str) -> str | None:
    if el is None:
        return None
    return el.get(attr) or None


def _child_attr(el: ET.Element | None, child: str, attr: str, namespace: str) -> str | None:
    if el is None:
        return None
    for sub in el:
        if _local_name(sub, namespace) == child:
            return _attr(sub, attr)
    return None
