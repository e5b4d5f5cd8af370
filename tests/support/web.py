"""A small web server on loopback, as an internal service (Flower, the gateway)
or a host a test lets a tool reach would be."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Inner(BaseHTTPRequestHandler):
    """Answers a GET of `/` with `inner`, of any other path with `inner <path>`;
    `X-Proxy-Authorization` says whether the request carried that header."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        body = b"inner" if self.path == "/" else f"inner {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Proxy-Authorization", str("Proxy-Authorization" in self.headers))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def serving(host: str = "127.0.0.1") -> Iterator[int]:
    """The port of an `Inner` server on `host`, up for the block."""
    httpd = ThreadingHTTPServer((host, 0), Inner)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield httpd.server_address[1]
    finally:
        httpd.shutdown()
        httpd.server_close()
