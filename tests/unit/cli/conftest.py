"""Fixtures the command-line tests share."""

from __future__ import annotations

import http.server
import json
import pathlib
import socket
import threading
from collections.abc import Iterator

import pytest

from nova_orphans.fakes import libvirt_node as worlds
from nova_orphans.record.journal import Journal


@pytest.fixture
def site(tmp_path: pathlib.Path) -> pathlib.Path:
    """A host's files: our config directory, nova's, a state directory with a journal."""
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "nova-pybasedir.conf").write_text("[DEFAULT]\ninstances_path = $pybasedir/i\n")
    state = tmp_path / "state"
    (state / "quarantine").mkdir(parents=True, mode=0o700)
    Journal(str(state / "journal.sqlite")).close()
    worlds.write_node_file(
        tmp_path,
        [
            worlds.node_domain(
                uuid=worlds.random_uuid(), name="i-1", metadata=worlds.nova_metadata()
            )
        ],
    )
    return tmp_path


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A local port something else listens on."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        yield busy.getsockname()[1]


class _Statuses(http.server.BaseHTTPRequestHandler):
    """Answers every request with the status its path starts with (``/401/v3/...``)."""

    def _answer(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        status = int(self.path.split("/")[1])
        body = json.dumps({"error": {"code": status, "title": "Error", "message": "refused"}})
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    do_GET = do_POST = _answer

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def keystone() -> Iterator[str]:
    """A Keystone that fails: ``<url>/<status>/v3`` answers every request with ``status``
    (401, 500, 503...); returns ``<url>``."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Statuses)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
