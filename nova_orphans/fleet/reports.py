"""Read per-host audit reports (``audit --format json``, ``[agent] report_file``).

From a directory (every ``*.json`` file in it, not its sub-directories; a
temporary ``*.json.tmp`` of a report being written is not read) or from a
stream of JSON documents (stdin: concatenated or one per line). Every document
becomes a ``PerHostReport`` or a ``BadReport`` saying why it cannot be used —
a file that is not JSON, not an object, of another schema, or lacking what the
merge needs is reported as such, never read as a host with no domains.

NOTE: reports are hostile input (docs/design.md rule 20): a report is read only from a
regular file, and at most ``REPORT_MAX_BYTES`` of it; a bigger one is not read at all.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import stat
from collections.abc import Iterator
from typing import IO, Any

from nova_orphans import exits
from nova_orphans.core.fleet_reports import (
    BadReport,
    PerHostReport,
    ReportedFinding,
    ReportedLeftover,
    ReportedLeftovers,
    SeenDomain,
)
from nova_orphans.core.model import DomainState, Kind, Usage
from nova_orphans.core.strays import UUID, StrayKind
from nova_orphans.exceptions import NovaOrphansError

#: The report shapes this version reads: ``schema_version`` absent (before it existed) or 1.
READABLE_SCHEMAS = (None, 1)
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
    try:
        data = _read_capped(path)
        if len(data) > REPORT_MAX_BYTES:
            return BadReport(source, f"larger than {REPORT_MAX_BYTES} bytes: not read")
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return BadReport(source, f"unreadable: {getattr(exc, 'strerror', None) or exc}")
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        return BadReport(source, f"not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})")
    return parse_document(document, source)


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
    """Every JSON document of ``stream``; garbage ends the stream with one ``BadReport``.

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
    decoder = json.JSONDecoder()
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
            document, position = decoder.raw_decode(text, position)
        except json.JSONDecodeError as exc:
            # NOTE: after garbage there is no telling where the next document starts.
            yield BadReport(source, f"not JSON ({exc.msg} at character {exc.pos}); rest ignored")
            return
        if position - start > REPORT_MAX_BYTES:
            yield BadReport(source, f"larger than {REPORT_MAX_BYTES} characters: not read")
            continue
        yield parse_document(document, source)


def parse_document(document: Any, source: str) -> Parsed:
    """One decoded JSON document as a report, or why it is not a usable one."""
    if not isinstance(document, dict):
        return BadReport(source, f"not a report: a JSON {type(document).__name__}")
    if "hosts" in document and "summary" in document:
        return BadReport(source, "a fleet report, not one host's report")
    schema = document.get("schema_version")
    if schema not in READABLE_SCHEMAS:
        return BadReport(source, f"schema_version {schema!r}: this nova-orphans reads 1")
    host = document.get("host")
    if not isinstance(host, str) or not host:
        return BadReport(source, "not a nova-orphans audit report (no 'host')")
    try:
        return _report(document, source, host)
    except ValueError as exc:
        return BadReport(source, str(exc), host)


def _report(document: dict[str, Any], source: str, host: str) -> PerHostReport:
    checked_at = _time(document.get("checked_at"))
    if "domains" not in document:
        raise ValueError(
            "no 'domains' list (written by a nova-orphans that does not record every domain)"
        )
    identity = document.get("identity")
    state, reason = "absent", "the report carries no identity verdict"
    if isinstance(identity, dict) and isinstance(identity.get("state"), str):
        state, reason = identity["state"], str(identity.get("reason") or "")
    return PerHostReport(
        source,
        host,
        checked_at,
        state,
        reason,
        tuple(_domain(d, i) for i, d in enumerate(_list(document, "domains"))),
        tuple(_finding(f, i) for i, f in enumerate(_list(document, "findings"))),
        _leftovers(document.get("leftovers")),
    )


#: Leftovers one report may tell (a host holds a few hundred guests).
MAX_LEFTOVERS = 100_000
#: A stray directory: an absolute path ending in a canonical UUID, no control characters.
_STRAY_PATH = re.compile(rf"/[^\x00-\x1f\x7f]{{0,4000}}/{UUID.pattern}", re.ASCII)


def _leftovers(item: Any) -> ReportedLeftovers | None:
    """A report's ``leftovers`` (absent or null: not told); a malformed one refuses it."""
    if item is None:
        return None
    if not isinstance(item, dict) or not isinstance(item.get("counts"), dict):
        raise ValueError("'leftovers' is not an object with 'counts'")
    counts: dict[StrayKind, int | None] = {}
    for kind in StrayKind:
        value = item["counts"].get(kind.value)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                  or value < 0):  # fmt: skip
            raise ValueError(f"leftovers: the count of {kind.value} is {value!r}")
        counts[kind] = value
    items = item.get("items")
    if not isinstance(items, list) or len(items) > MAX_LEFTOVERS:
        raise ValueError("leftovers: 'items' is not a list (of at most 100000)")
    return ReportedLeftovers(counts, tuple(_leftover(x, i) for i, x in enumerate(items)))


def _leftover(item: Any, index: int) -> ReportedLeftover:
    where = f"leftovers.items[{index}]"
    kind_name, subject = _fields(item, where, "kind", "subject")
    try:
        kind = StrayKind(kind_name)
    except ValueError:
        raise ValueError(f"{where}: unknown kind {kind_name!r}") from None
    shape = _STRAY_PATH if kind is StrayKind.FILES else UUID
    server = item.get("server")
    if not shape.fullmatch(subject) or not (server is None or UUID.fullmatch(str(server))):
        raise ValueError(f"{where}: not a {kind.value} this nova-orphans tells")
    return ReportedLeftover(kind, subject, server)


def _time(value: Any) -> datetime.datetime:
    try:
        parsed = datetime.datetime.fromisoformat(str(value))
    except ValueError:
        raise ValueError(f"checked_at {value!r} is not an ISO 8601 time") from None
    if parsed.tzinfo is None:
        raise ValueError(f"checked_at {value!r} has no time zone")
    return parsed


def _list(document: dict[str, Any], key: str) -> list[Any]:
    value = document.get(key)
    if not isinstance(value, list):
        raise ValueError(f"'{key}' is not a list")
    return value


def _domain(item: Any, index: int) -> SeenDomain:
    uuid, name, state = _fields(item, f"domains[{index}]", "uuid", "name", "state")
    try:
        return SeenDomain(uuid, name, DomainState(state))
    except ValueError:
        raise ValueError(f"domains[{index}]: unknown state {state!r}") from None


def _finding(item: Any, index: int) -> ReportedFinding:
    uuid, name, kind, reason = _fields(item, f"findings[{index}]", "uuid", "name", "kind", "reason")
    try:
        kind_of = Kind(kind)
    except ValueError:
        raise ValueError(f"findings[{index}]: unknown kind {kind!r}") from None
    # NOTE: "brief" is optional (a report of an older nova-orphans has none).
    brief = item.get("brief")
    return ReportedFinding(
        uuid,
        name,
        kind_of,
        reason,
        _usage(item.get("usage")),
        brief if isinstance(brief, str) else "",
    )


def _usage(item: Any) -> Usage | None:
    """A finding's ``usage`` (reports of older versions have none); a wrong number is None."""
    if not isinstance(item, dict):
        return None

    def number(key: str) -> Any:
        value = item.get(key)
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0
        return value if ok else None

    vcpus, memory, disk = (number(k) for k in ("vcpus", "memory_bytes", "disk_bytes"))
    return Usage(
        vcpus=int(vcpus) if vcpus is not None else None,
        memory_bytes=int(memory) if memory is not None else None,
        disk_bytes=int(disk) if disk is not None else None,
        cpu_seconds=number("cpu_seconds"),
    )


def _fields(item: Any, where: str, *keys: str) -> list[str]:
    if not isinstance(item, dict):
        raise ValueError(f"{where} is not an object")
    values = []
    for key in keys:
        value = item.get(key)
        if not isinstance(value, str):
            raise ValueError(f"{where}: '{key}' is missing or not a string")
        values.append(value)
    return values
