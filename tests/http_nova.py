"""The simulated Nova served over HTTP, behind a minimal Keystone, for a real keystoneauth session.

Keystone issues ``ISSUED_TOKEN`` for the right password; Nova answers only requests
carrying an accepted ``X-Auth-Token`` and records every token it saw.
"""

from __future__ import annotations

import contextlib
import email.utils
import http.server
import json
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from nova_orphans.fakes.nova import SimulatedNova

ISSUED_TOKEN = "gAAAAissued-token-0123456789"


def _entry(
    service_type: str, url: str, regions_before: tuple[tuple[str, str], ...] = ()
) -> dict[str, Any]:
    path = url.split("/", 3)[3] if url.count("/") >= 3 else ""
    return {
        "type": service_type,
        "name": service_type,
        "id": f"c-{service_type}",
        "endpoints": [
            {
                "id": f"e-{service_type}-{region}-{i}",
                "interface": i,
                "region": region,
                "region_id": region,
                "url": f"{base}/{path}" if base else url,
            }
            for region, base in (*regions_before, ("RegionOne", ""))
            for i in ("public", "internal", "admin")
        ],
    }


def token_body(
    nova_url: str,
    others: dict[str, str] | None = None,
    regions_before: tuple[tuple[str, str], ...] = (),
) -> dict[str, Any]:
    """A Keystone v3 token whose catalog names ``nova_url`` as the compute endpoint
    (and ``others``: more services, catalog type to URL) in RegionOne, after the regions
    ``regions_before`` ((name, base URL): every service under that base)."""
    domain = {"id": "default", "name": "Default"}
    return {
        "token": {
            "methods": ["password"],
            "expires_at": "2099-01-01T00:00:00.000000Z",
            "issued_at": "2026-01-01T00:00:00.000000Z",
            "user": {"id": "u1", "name": "nova-orphans", "domain": domain},
            "project": {"id": "p1", "name": "service", "domain": domain},
            "roles": [{"id": "r1", "name": "reader"}],
            "catalog": [
                _entry("compute", nova_url, regions_before),
                *(_entry(t, url, regions_before) for t, url in (others or {}).items()),
            ],
        }
    }


class Cloud:
    """A served SimulatedNova (``url``) and Keystone (``auth_url``), and more services.

    ``services``: catalog type -> a simulated service (``get(path)``), served under
    ``/<type>``; ``in_catalog`` the types the token's catalog names; ``delay`` seconds
    each answer of a service waits (a timeout).
    """

    def __init__(self, nova: SimulatedNova, password: str, admin_token: str) -> None:
        self.services: dict[str, Any] = {}
        self.in_catalog: set[str] = set()
        self.delay: dict[str, float] = {}
        self.base = ""
        self.nova = nova
        self.password = password
        self.accepted = {admin_token, ISSUED_TOKEN}
        self.tokens_seen: list[str] = []
        self.url = ""
        self.auth_url = ""
        #: Regions the catalog lists before RegionOne: (name, base URL of every service).
        self.regions_before: tuple[tuple[str, str], ...] = ()
        #: Every path a GET asked, in order.
        self.paths_seen: list[str] = []


def _handler(cloud: Cloud) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def date_time_string(self, timestamp: float | None = None) -> str:
            # NOTE: the Date header is Nova's clock (the simulated one, which also stamps
            # its rows and service reports), as a real Nova's answers carry its own.
            if cloud.nova.date is not None:
                return email.utils.format_datetime(cloud.nova.date, usegmt=True)
            return super().date_time_string(timestamp)

        def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode() if body is not None else b""
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            request = json.loads(self.rfile.read(length) or b"{}")
            if self.path.rstrip("/") != "/identity/v3/auth/tokens":
                return self._send(404, {"error": {"code": 404}})
            user = request["auth"]["identity"].get("password", {}).get("user", {})
            if user.get("password") != cloud.password:
                return self._send(401, {"error": {"code": 401, "title": "Unauthorized"}})
            others = {t: f"{cloud.base}/{t}" for t in sorted(cloud.in_catalog)}
            body = token_body(cloud.url, others, cloud.regions_before)
            self._send(201, body, {"X-Subject-Token": ISSUED_TOKEN})

        def do_GET(self) -> None:
            if self.path.startswith("/identity"):
                # Keystone's version discovery, as the generic password plugin asks it.
                return self._send(
                    200,
                    {
                        "version": {
                            "id": "v3.14",
                            "status": "stable",
                            "updated": "2020-01-01T00:00:00Z",
                            "links": [{"rel": "self", "href": f"{cloud.auth_url}/"}],
                        }
                    },
                )
            token = self.headers.get("X-Auth-Token", "")
            cloud.tokens_seen.append(token)
            cloud.paths_seen.append(self.path)
            kind, _, rest = self.path[1:].partition("/")
            if kind in cloud.services:
                if token not in cloud.accepted:
                    return self._send(401, {"error": {"code": 401, "title": "Unauthorized"}})
                time.sleep(cloud.delay.get(kind, 0))
                status, body = cloud.services[kind].get("/" + rest)
                return self._send(status, body)
            if not self.path.startswith("/v2.1"):
                return self._send(404, {"error": {"code": 404}})
            if token not in cloud.accepted:
                return self._send(401, {"error": {"code": 401, "title": "Unauthorized"}})
            status, body = cloud.nova.get(self.path[len("/v2.1") :] or "/")
            self._send(status, body)

    return Handler


class _Server(http.server.ThreadingHTTPServer):
    """A server that says nothing of a client gone before its answer (a timed-out request
    the client asked again): socketserver would print a traceback into the test's stderr."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


@contextlib.contextmanager
def serve(nova: SimulatedNova, password: str, admin_token: str) -> Iterator[Cloud]:
    """Serve ``nova`` and a Keystone on 127.0.0.1 for the duration of the block."""
    cloud = Cloud(nova, password, admin_token)
    server = _Server(("127.0.0.1", 0), _handler(cloud))
    base = f"http://127.0.0.1:{server.server_address[1]}"
    cloud.url, cloud.auth_url = f"{base}/v2.1", f"{base}/identity/v3"
    cloud.base = base
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield cloud
    finally:
        server.shutdown()
        server.server_close()
