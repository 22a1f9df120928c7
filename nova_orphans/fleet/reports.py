"""Read per-host audit reports (``audit --format json``, ``[agent] report_file``).

From a directory (every ``*.json`` file in it, not its sub-directories; a
temporary ``*.json.tmp`` of a report being written is not read) or from a
stream of JSON documents (stdin: concatenated or one per line). Every document
becomes a ``PerHostReport`` or a ``BadReport`` saying why it cannot be used —
a file that is not JSON, or not what the shipped schema says a host's report is
(``report_schema``: read schema-first, the first error told), is reported as such,
never read as a host with no domains.

NOTE: reports are hostile input (docs/design.md rule 20): a report is read only from a
regular file, and at most ``REPORT_MAX_BYTES`` of it; a bigger one is not read at all. A
report counts as host H's only when its *source* says H: the file ``H.json`` (as the Ansible
playbooks name what they fetch from H), on stdin the envelope ``{"source": "H", "report": …}``
the collector wrapped it in. A report naming another host inside is merged as neither's: one
host cannot stand in for another. And whatever fails while one report is read (its JSON, its
schema, any exception) fails that report alone (``report_json``). The envelope is the
collector's, not a report: it is checked here, the report inside against the schema.
"""

from __future__ import annotations

import datetime
import json
import os
import stat
from collections.abc import Iterator
from typing import IO, Any

from nova_orphans import exits, shapes
from nova_orphans.classify.leftover import LeftoverKind
from nova_orphans.exceptions import NovaOrphansError
from nova_orphans.fleet import report_json, report_schema
from nova_orphans.fleet.hostname import NotAHostName, check_host_name
from nova_orphans.fleet.records import (
    BadReport,
    PerHostReport,
    ReportedFinding,
    ReportedLeftover,
    ReportedLeftovers,
    SeenDomain,
)
from nova_orphans.fleet.report_json import Refused, failure, shown
from nova_orphans.model import DomainState, Kind, Usage

REPORT_SUFFIX = ".json"
#: The most bytes one report may have. NOTE: a report holds ≈ 1 KiB per domain (its
#: finding, reason and usage included), so 8 MiB is thousands of guests on one host.
REPORT_MAX_BYTES = 8 * 1024 * 1024
#: The most bytes read from standard input (every report of the fleet in one stream).
STREAM_MAX_BYTES = 64 * REPORT_MAX_BYTES

Parsed = PerHostReport | BadReport


class NoReports(NovaOrphansError):
    """The directory or stream holds no report at all (a usage error: exit 2)."""

    exit_code = exits.USAGE


def read_directory(path: str) -> list[Parsed]:
    """Every ``*.json`` file of ``path``, sorted by name; raises ``NoReports`` or ``OSError``."""
    names = sorted(
        n
        for n in os.listdir(path)
        if n.endswith(REPORT_SUFFIX) and not n.startswith(".")
        and os.path.isfile(os.path.join(path, n))
    )  # fmt: skip
    if not names:
        raise NoReports(f"no *{REPORT_SUFFIX} report in {path}")
    return [_read_file(os.path.join(path, n), n) for n in names]


def _read_file(path: str, source: str) -> Parsed:
    """The report of file ``source`` (``H.json``: host H's), or why it is not one.

    NOTE: any exception while it is read, decoded or checked makes this one file bad;
    the other reports are merged all the same."""
    origin = source[: -len(REPORT_SUFFIX)]
    if not _is_host_name(origin):
        return BadReport(
            source,
            f"not named HOST.json ({shown(repr(origin))} is no host name): whose report it "
            "is cannot be told; not read",
        )
    try:
        return _attributed(_read_document(path, source), origin, "its file name")
    except Exception as exc:
        return BadReport(source, f"could not be read ({failure(exc)})")


def _read_document(path: str, source: str) -> Parsed:
    try:
        data = _read_capped(path)
        if len(data) > REPORT_MAX_BYTES:
            return BadReport(source, f"larger than {REPORT_MAX_BYTES} bytes: not read")
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return BadReport(source, f"unreadable: {getattr(exc, 'strerror', None) or exc}")
    try:
        document = report_json.decode(text)
    except json.JSONDecodeError as exc:
        return BadReport(source, f"not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})")
    except Refused as exc:
        return BadReport(source, exc.reason)
    return parse_document(document, source)


def _attributed(parsed: Parsed, origin: str, how: str) -> Parsed:
    """``parsed`` when the host it names is ``origin``, the host its source says (``how``);
    else a ``BadReport`` of no host: ``origin`` gave no report of its own (it is missing)
    and the host named is told nothing by it (docs/design.md §9, "provenance")."""
    if parsed.host is None or parsed.host == origin:
        return parsed
    return BadReport(
        parsed.source,
        f"names host {shown(repr(parsed.host))} inside, but {how} says {origin}: a report "
        "counts only for the host its source says; not merged",
    )


def _is_host_name(name: str) -> bool:
    try:
        check_host_name(name)
    except NotAHostName:
        return False
    return True


def _read_capped(path: str) -> bytes:
    """At most ``REPORT_MAX_BYTES`` + 1 bytes of the regular file ``path``.

    NOTE: opened without blocking and checked on the open file: a FIFO or a device put in
    the file's place after the directory was listed is refused, never waited on or read.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path}: not a regular file")
        return handle.read(REPORT_MAX_BYTES + 1)


def read_stream(stream: IO[str]) -> list[Parsed]:
    """Every JSON document of ``stream`` (each a report in its envelope: ``_enveloped``);
    garbage ends the stream with one ``BadReport``, a document refused for what it holds
    (``report_json``) is one ``BadReport`` and the next document is read after it.

    At most ``STREAM_MAX_BYTES`` are read; a longer stream adds one ``BadReport`` saying so,
    and a document longer than ``REPORT_MAX_BYTES`` is a ``BadReport`` of its own."""
    text = stream.read(STREAM_MAX_BYTES + 1)
    parsed = list(_documents(text[:STREAM_MAX_BYTES]))
    if len(text) > STREAM_MAX_BYTES:
        parsed.append(
            BadReport("stdin", f"more than {STREAM_MAX_BYTES} characters: the rest is not read")
        )
    if not parsed:
        raise NoReports("no report on standard input")
    return parsed


def _documents(text: str) -> Iterator[Parsed]:
    position, number = 0, 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position >= len(text):
            return
        number += 1
        source = f"stdin #{number}"
        start = position
        try:
            document, position = report_json.decode_at(text, position)
        except json.JSONDecodeError as exc:
            # NOTE: after garbage there is no telling where the next document starts.
            yield BadReport(source, f"not JSON ({exc.msg} at character {exc.pos}); rest ignored")
            return
        except Refused as exc:
            if exc.end is None:
                yield BadReport(source, f"{exc.reason}; where it ends cannot be told: rest ignored")
                return
            yield BadReport(source, exc.reason)
            position = exc.end
            continue
        if position - start > REPORT_MAX_BYTES:
            yield BadReport(source, f"larger than {REPORT_MAX_BYTES} characters: not read")
            continue
        try:
            parsed = _enveloped(document, source)
        except Exception as exc:  # NOTE: this one document fails; the stream goes on
            parsed = BadReport(source, f"could not be read ({failure(exc)})")
        yield parsed


def _enveloped(document: Any, source: str) -> Parsed:
    """The report in ``{"source": "H", "report": …}``, counted as host H's only.

    NOTE: a stream has no file names; a report alone on it says only what it says of
    itself, which any host can say of any other. So a report counts only inside the
    envelope the collector wraps around what it fetched from H (``jq -c --arg source H
    '{source: $source, report: .}'`` wraps every document the host wrote, so the host
    cannot write an envelope of its own).
    """
    if not isinstance(document, dict) or set(document) != {"source", "report"}:
        return BadReport(
            source,
            "no report in its envelope: on standard input each report comes as "
            '{"source": HOST, "report": REPORT}, HOST the host it was fetched from (a report '
            "alone cannot say whose it is)",
        )
    origin = document["source"]
    if not isinstance(origin, str) or not _is_host_name(origin):
        return BadReport(source, f"source {shown(repr(origin))} is no host name: not read")
    report = parse_document(document["report"], f"{source} from {origin}")
    return _attributed(report, origin, "its envelope's source")


def parse_document(document: Any, source: str) -> Parsed:
    """One decoded JSON document as a report, or why it is not a usable one.

    NOTE: schema-first (``report_schema``): the shipped schema decides what a report may
    hold, and a document it refuses is this one ``BadReport`` with the schema's first error.
    What follows maps a valid document to the records and checks only what the schema
    cannot say: that the host is a host name (``hostname.py``) and that ``checked_at`` is a
    time with its zone (``shapes.parse_time``, the one time parser). No type, key, kind,
    state or pattern is checked here: the schema holds each, once.
    """
    refused = report_schema.refusal(document)
    if refused is not None:
        return _refused(document, source, refused)
    host = document["host"]
    if not _is_host_name(host):
        return BadReport(source, f"names host {shown(repr(host))}, which is no host name")
    try:
        return _report(document, source, host)
    except ValueError as exc:
        return BadReport(source, str(exc), host)


def _refused(document: Any, source: str, reason: str) -> BadReport:
    """The ``BadReport`` of a document the schema refused (``reason``: its first error).

    NOTE: only the words of a refusal already made: a document that is no object, of
    another ``schema_version`` or a fleet's report says so, and belongs to no host; any
    other counts as bad for the host it names, if that is a host name."""
    if not isinstance(document, dict):
        return BadReport(source, f"not a report: a JSON {type(document).__name__}")
    readable = report_schema.readable_version()
    version = document.get("schema_version", readable)
    if version != readable:
        return BadReport(
            source, f"schema_version {shown(repr(version))}: this nova-orphans reads {readable}"
        )
    if "hosts" in document and "summary" in document:
        return BadReport(source, "a fleet report, not one host's report")
    host = document.get("host")
    named = isinstance(host, str) and _is_host_name(host)
    return BadReport(source, reason, host if named else None)


def _report(document: dict[str, Any], source: str, host: str) -> PerHostReport:
    identity, domains = document.get("identity"), document["domains"]
    state, reason = "absent", "the report carries no identity verdict"
    if identity is not None:
        state, reason = identity["state"], identity["reason"]
    return PerHostReport(
        source,
        host,
        _time(document["checked_at"]),
        state,
        reason,
        tuple(SeenDomain(d["uuid"], d["name"], DomainState(d["state"])) for d in domains),
        tuple(_finding(f) for f in document["findings"]),
        _leftovers(document.get("leftovers")),
    )


def _leftovers(item: dict[str, Any] | None) -> ReportedLeftovers | None:
    """A report's ``leftovers`` (absent or null: not told)."""
    if item is None:
        return None
    counts = {kind: _count(item["counts"][kind.value]) for kind in LeftoverKind}
    return ReportedLeftovers(
        counts,
        tuple(
            ReportedLeftover(LeftoverKind(x["kind"]), x["subject"], x["server"])
            for x in item["items"]
        ),
    )


def _time(value: str) -> datetime.datetime:
    try:
        return shapes.parse_time(value, zone_required=True)
    except ValueError:
        raise ValueError(
            f"checked_at {shown(repr(value))} is not an ISO 8601 time with its zone"
        ) from None


def _finding(item: dict[str, Any]) -> ReportedFinding:
    # NOTE: "brief" and "usage" are optional (a report of an older nova-orphans has none).
    return ReportedFinding(
        item["uuid"],
        item["name"],
        Kind(item["kind"]),
        item["reason"],
        _usage(item.get("usage")),
        item.get("brief", ""),
    )


def _usage(item: dict[str, Any] | None) -> Usage | None:
    """A finding's ``usage`` (null: libvirt did not say; each number null likewise)."""
    if item is None:
        return None
    return Usage(
        vcpus=_count(item["vcpus"]),
        memory_bytes=_count(item["memory_bytes"]),
        disk_bytes=_count(item["disk_bytes"]),
        cpu_seconds=item["cpu_seconds"],
    )


def _count(value: float | None) -> int | None:
    """A count the schema says is an integer (JSON may write one as ``2.0``), or None."""
    return None if value is None else int(value)
