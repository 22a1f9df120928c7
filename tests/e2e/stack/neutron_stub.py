"""A minimal Neutron stand-in on 127.0.0.1:9696 answering empty collections.

Nova asks Neutron for ports and security groups even for servers booted with
``"networks": "none"``; an empty answer is all it needs.
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _send(self, code, body=None):
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if data:
            self.wfile.write(data)

    def _drain(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)

    def do_GET(self):
        parts = [p for p in urlsplit(self.path).path.split("/") if p]
        if not parts:
            self._send(200, {"versions": [{"id": "v2.0", "status": "CURRENT", "links": []}]})
            return
        if parts[0] == "v2.0":
            parts = parts[1:]
        if len(parts) == 1:
            key = parts[0].removesuffix(".json").replace("-", "_")
            self._send(200, {key: []})
        else:
            self._send(
                404, {"NeutronError": {"type": "NotFound", "message": "not found", "detail": ""}}
            )

    def do_DELETE(self):
        self._drain()
        self._send(204)

    def do_POST(self):
        self._drain()
        self._send(400, {"NeutronError": {"type": "BadRequest", "message": "stub", "detail": ""}})

    do_PUT = do_POST

    def log_message(self, fmt, *args):
        sys.stderr.write(f"{self.address_string()} {fmt % args}\n")


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 9696
    ThreadingHTTPServer.allow_reuse_address = True
    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    main()
