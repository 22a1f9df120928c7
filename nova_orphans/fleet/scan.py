"""Scan the libvirt domains of many hosts in parallel, each within a deadline.

At most ``concurrency`` scans are in flight at a time. A scan still running
when its host's deadline passes is reported as timed out and abandoned: its
thread is a daemon, so a libvirt call that never returns neither blocks the
other hosts nor keeps the process alive once the report is printed.

NOTE: this is why the scans run on daemon threads behind a counter rather than
in a ``concurrent.futures.ThreadPoolExecutor``: an executor cannot give up on
a running task, keeps its slot taken, and joins its workers at interpreter exit.
"""

from __future__ import annotations

import collections
import dataclasses
import queue
import threading
import time
import urllib.parse
from collections.abc import Callable, Sequence

from nova_orphans.exceptions import one_line
from nova_orphans.fleet.hostname import NotAHostName, check_host_name
from nova_orphans.model import Domain
from nova_orphans.observe.errors import ObserveError
from nova_orphans.observe.hypervisor import LibvirtObserver

#: Scans one libvirt URI: every domain, or raises ``ObserveError``.
Scanner = Callable[[str], Sequence[Domain]]
Clock = Callable[[], float]
#: Seconds between two progress reports while no scan ends.
PROGRESS_TICK = 1.0


@dataclasses.dataclass(frozen=True)
class Progress:
    """Where a fleet scan is: hosts done (of which unreachable) of all, and the hosts
    still being scanned with the seconds each has taken so far, longest first."""

    done: int
    total: int
    unreachable: int
    scanning: tuple[tuple[str, float], ...]


#: Told the progress after each host and every ``PROGRESS_TICK`` seconds.
OnProgress = Callable[[Progress], None]


@dataclasses.dataclass(frozen=True)
class HostScan:
    """The libvirt side of one host: its domains, or why they could not be read."""

    host: str
    uri: str
    domains: tuple[Domain, ...] | None
    error: str | None = None
    seconds: float = 0.0

    @property
    def reachable(self) -> bool:
        """True when the domains were read; an unreachable host has no domain list at all."""
        return self.domains is not None


def libvirt_scan(uri: str) -> tuple[Domain, ...]:
    """Every domain behind ``uri``, read through a read-only connection."""
    with LibvirtObserver.open(uri) as observer:
        return observer.look()


def uri_for(template: str, host: str) -> str:
    """The libvirt URI of ``host``: ``{host}`` in ``template`` replaced by its name,
    checked (``check_host_name``) and percent-encoded; raises ``NotAHostName``.

    NOTE: a checked name has nothing to encode; the encoding keeps any later change of
    the check from putting raw text into a URI (docs/design.md rule 20)."""
    return template.replace("{host}", urllib.parse.quote(check_host_name(host), safe=""))


@dataclasses.dataclass
class _InFlight:
    host: str
    uri: str
    started: float


def scan_hosts(
    hosts: Sequence[str],
    template: str,
    *,
    concurrency: int,
    timeout: float,
    scanner: Scanner = libvirt_scan,
    clock: Clock = time.monotonic,
    progress: OnProgress | None = None,
    on_scanned: Callable[[HostScan], None] | None = None,
) -> list[HostScan]:
    """Scan every host, ``concurrency`` at a time, each within ``timeout`` seconds.

    Returns one ``HostScan`` per host, in the order of ``hosts``. A libvirt
    failure, a timeout or a name that is no host name (``check_host_name``: no URI is
    built, nothing is opened) makes that host unreachable; the others are unaffected.
    Errors other than ``ObserveError`` are bugs and are raised here. ``progress``
    is told how far the scan is after each host and every ``PROGRESS_TICK`` seconds;
    ``on_scanned`` is given each host's scan as soon as it ends (in the caller's thread).
    """
    if concurrency < 1 or timeout <= 0:
        raise ValueError("concurrency must be >= 1 and timeout > 0")
    waiting = collections.deque(dict.fromkeys(hosts))
    done: queue.Queue[tuple[str, tuple[Domain, ...] | None, BaseException | None]] = queue.Queue()
    in_flight: dict[str, _InFlight] = {}
    results: dict[str, HostScan] = {}
    tick = PROGRESS_TICK if progress else None
    while waiting or in_flight:
        ended: list[HostScan] = []
        while waiting and len(in_flight) < concurrency:
            host = waiting.popleft()
            try:
                uri = uri_for(template, host)
            except NotAHostName as exc:
                results[host] = HostScan(host, "", None, f"{exc}: no libvirt URI built")
                ended.append(results[host])
                continue
            in_flight[host] = _start(host, uri, scanner, done, clock)
        if in_flight:
            ended += _collect(done, in_flight, results, timeout, clock, tick)
        for scan in ended:
            if on_scanned:
                on_scanned(scan)
        if progress:
            progress(_progress(results, in_flight, len(waiting) + len(in_flight), clock()))
    return [results[h] for h in hosts]


def _progress(
    results: dict[str, HostScan], in_flight: dict[str, _InFlight], left: int, now: float
) -> Progress:
    scanning = sorted(((h, now - f.started) for h, f in in_flight.items()),
                      key=lambda item: (-item[1], item[0]))  # fmt: skip
    unreachable = sum(1 for r in results.values() if not r.reachable)
    return Progress(len(results), len(results) + left, unreachable, tuple(scanning))


def _start(
    host: str,
    uri: str,
    scanner: Scanner,
    done: queue.Queue[tuple[str, tuple[Domain, ...] | None, BaseException | None]],
    clock: Clock,
) -> _InFlight:
    def run() -> None:
        try:
            done.put((host, tuple(scanner(uri)), None))
        except BaseException as exc:  # handed to the caller's thread, never dropped
            done.put((host, None, exc))

    flight = _InFlight(host, uri, clock())
    threading.Thread(target=run, name=f"scan-{host}", daemon=True).start()
    return flight


def _collect(
    done: queue.Queue[tuple[str, tuple[Domain, ...] | None, BaseException | None]],
    in_flight: dict[str, _InFlight],
    results: dict[str, HostScan],
    timeout: float,
    clock: Clock,
    tick: float | None = None,
) -> list[HostScan]:
    """Wait for one scan to end, the earliest deadline to pass or (``tick``) that many
    seconds; record what happened and return the scans that ended."""
    deadline = min(f.started for f in in_flight.values()) + timeout
    wait = max(0.0, deadline - clock())
    try:
        host, domains, exc = done.get(timeout=wait if tick is None else min(wait, tick))
    except queue.Empty:
        return _expire(in_flight, results, timeout, clock)
    flight = in_flight.pop(host, None)
    if flight is None:
        return []  # a scan that already timed out came back late: its result is ignored
    results[host] = _result(flight, domains, exc, clock() - flight.started)
    return [results[host]]


def _result(
    flight: _InFlight,
    domains: tuple[Domain, ...] | None,
    exc: BaseException | None,
    seconds: float,
) -> HostScan:
    if exc is None:
        return HostScan(flight.host, flight.uri, domains, None, seconds)
    if isinstance(exc, ObserveError):
        return HostScan(flight.host, flight.uri, None, one_line(exc), seconds)
    raise exc


def _expire(
    in_flight: dict[str, _InFlight], results: dict[str, HostScan], timeout: float, clock: Clock
) -> list[HostScan]:
    now = clock()
    expired = []
    for host, flight in list(in_flight.items()):
        if now - flight.started >= timeout:
            del in_flight[host]
            reason = f"libvirt {flight.uri}: no answer within {timeout:g} s (timed out)"
            results[host] = HostScan(host, flight.uri, None, reason, now - flight.started)
            expired.append(results[host])
    return expired
