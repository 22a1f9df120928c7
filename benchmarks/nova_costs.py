"""What a request to Nova's compute API costs, per endpoint: measured, fitted and charged.

The real-Nova benchmark (``bench_real_nova``) times every request it makes, fits a
line per endpoint (a fixed cost per request plus a cost per record returned, from
the runs at 100 and 1,000 servers) and writes the fit to ``nova_costs.json``
(``--calibrate``). The simulated-Nova benchmarks (``bench_audit``, ``bench_fleet``)
load that file and make the simulated Nova charge the same costs, by sleeping.

Two fits are kept per endpoint: ``client`` is what the caller waited (Nova's time,
the loopback round trip, keystoneauth and JSON decoding); ``server`` is the time
nova-api itself logged for the request (its request log's ``time:``). An
in-process transport, which has no HTTP at all, charges ``client``; a simulated
Nova served over HTTP charges ``server``, as the HTTP client's own work is real.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import re
import statistics
import urllib.parse
from collections.abc import Iterable, Sequence
from typing import Any

#: The committed calibration, written by ``bench_real_nova --calibrate``.
DEFAULT_PATH = pathlib.Path(__file__).resolve().parent / "nova_costs.json"

_UUID = r"[0-9a-fA-F-]{36}"
#: Request path (without the ``/v2.1`` prefix and query) -> endpoint name.
_ENDPOINTS = (
    (re.compile(r"^/servers/detail$"), "servers/detail"),
    (re.compile(r"^/servers$"), "servers"),
    (re.compile(rf"^/servers/{_UUID}$"), "servers/show"),
    (re.compile(rf"^/servers/{_UUID}/migrations$"), "servers/migrations"),
    (re.compile(r"^/os-migrations$"), "os-migrations"),
    (re.compile(r"^/os-hypervisors/detail$"), "os-hypervisors/detail"),
    (re.compile(r"^/os-services$"), "os-services"),
)
#: The list a listing's body holds its records in.
_LIST_KEYS = ("servers", "migrations", "hypervisors", "services")
#: One line of nova-api's request log (nova/api/openstack/requestlog.py), with the
#: user and project of the request context in front of it.
_LOG_LINE = re.compile(
    r"\[\S+ \S+ (?P<user>\S+) (?P<project>\S+) [^\]]*\] \S+ "
    r'"(?P<method>[A-Z]+) (?P<uri>\S+)" status: (?P<status>\d+) len: (?P<length>\d+) '
    r"microversion: \S+ time: (?P<seconds>[0-9.]+)"
)


def endpoint_of(path: str) -> str:
    """The endpoint a request path hits (``/v2.1`` prefix and query ignored), or "other"."""
    route = urllib.parse.urlsplit(path).path.removeprefix("/v2.1")
    for pattern, name in _ENDPOINTS:
        if pattern.match(route):
            return name
    return "other"


def records_in(body: Any) -> int:
    """How many records an answer carries: a listing's items, 1 for one server, else 0."""
    if not isinstance(body, dict):
        return 0
    for key in _LIST_KEYS:
        if isinstance(body.get(key), list):
            return len(body[key])
    return 1 if isinstance(body.get("server"), dict) else 0


@dataclasses.dataclass(frozen=True)
class LoggedRequest:
    """One request as nova-api logged it."""

    method: str
    uri: str
    status: int
    length: int
    seconds: float

    @property
    def endpoint(self) -> str:
        """The endpoint this request hit."""
        return endpoint_of(self.uri)


def parse_request_log(lines: Iterable[str], project: str) -> list[LoggedRequest]:
    """The requests of ``project`` in nova-api's log lines, in the order logged."""
    found = []
    for line in lines:
        match = _LOG_LINE.search(line)
        if match and match["project"] == project:
            found.append(
                LoggedRequest(
                    match["method"],
                    match["uri"],
                    int(match["status"]),
                    int(match["length"]),
                    float(match["seconds"]),
                )
            )
    return found


@dataclasses.dataclass(frozen=True)
class Cost:
    """Seconds one request costs: ``fixed`` plus ``per_record`` for each record returned."""

    fixed: float
    per_record: float = 0.0

    def of(self, records: int) -> float:
        """The cost of one request returning ``records`` records."""
        return self.fixed + self.per_record * records


def fit(points: Sequence[tuple[int, float]]) -> Cost:
    """Least-squares line through ``(records, seconds)`` points.

    With a single record count (or a slope below zero, which noise can give), the
    cost is flat: the median of the points.
    """
    if not points:
        raise ValueError("no points to fit")
    ys = [y for _, y in points]
    mean_x, mean_y = statistics.fmean(x for x, _ in points), statistics.fmean(ys)
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    if spread == 0:
        return Cost(statistics.median(ys))
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / spread
    if slope < 0:
        return Cost(statistics.median(ys))
    return Cost(max(mean_y - slope * mean_x, 0.0), slope)


@dataclasses.dataclass(frozen=True)
class Sample:
    """One timed request: its endpoint, the records it returned, client and server seconds."""

    endpoint: str
    records: int
    client: float
    server: float | None = None


@dataclasses.dataclass
class CostModel:
    """Per-endpoint costs; endpoints it has no fit for cost ``default``."""

    client: dict[str, Cost]
    server: dict[str, Cost]
    default: Cost = dataclasses.field(default_factory=lambda: Cost(0.0))
    about: dict[str, Any] = dataclasses.field(default_factory=dict)

    @classmethod
    def flat(cls, seconds: float) -> CostModel:
        """The same fixed cost for every request (the old benchmarks' "2 ms per request")."""
        return cls({}, {}, Cost(seconds), {"model": f"flat {seconds * 1e3:g} ms per request"})

    @classmethod
    def fitted(cls, samples: Iterable[Sample], about: dict[str, Any]) -> CostModel:
        """Fit both sides of every endpoint the samples cover."""
        by_endpoint: dict[str, list[Sample]] = {}
        for sample in samples:
            by_endpoint.setdefault(sample.endpoint, []).append(sample)
        client = {e: fit([(s.records, s.client) for s in got]) for e, got in by_endpoint.items()}
        server = {
            e: fit([(s.records, s.server) for s in got if s.server is not None])
            for e, got in by_endpoint.items()
            if any(s.server is not None for s in got)
        }
        return cls(client, server, about=about)

    def cost(self, path: str, records: int, side: str = "client") -> float:
        """Seconds a request on ``path`` returning ``records`` records costs (``side``)."""
        costs = self.client if side == "client" else self.server
        return costs.get(endpoint_of(path), self.default).of(records)

    def describe(self) -> str:
        """One line saying what this model is."""
        return str(self.about.get("model", "calibrated"))

    def to_json(self) -> str:
        """The model as the JSON ``load`` reads."""

        def side(costs: dict[str, Cost]) -> dict[str, dict[str, float]]:
            return {
                e: {
                    "fixed_ms": round(c.fixed * 1e3, 3),
                    "per_record_ms": round(c.per_record * 1e3, 4),
                }
                for e, c in sorted(costs.items())
            }

        data = {**self.about, "client": side(self.client), "server": side(self.server)}
        return json.dumps(data, indent=2) + "\n"

    @classmethod
    def load(cls, path: pathlib.Path = DEFAULT_PATH) -> CostModel:
        """Read a model written by ``to_json``."""
        data = json.loads(path.read_text(encoding="utf-8"))

        def side(costs: dict[str, dict[str, float]]) -> dict[str, Cost]:
            return {
                e: Cost(c["fixed_ms"] / 1e3, c["per_record_ms"] / 1e3) for e, c in costs.items()
            }

        about = {k: v for k, v in data.items() if k not in ("client", "server")}
        about.setdefault("model", f"calibrated ({path.name})")
        return cls(side(data["client"]), side(data["server"]), about=about)
