"""A webhook receiver on 127.0.0.1 for tests: it keeps every request it is
sent, and answers the first `failures` requests of each delivery id with a 500
(with `stall`, the first of each is held unanswered until the receiver
closes: its sender can be killed while it waits)."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    answered: int


class Receiver:
    def __init__(self, failures: int = 1, *, stall: bool = False) -> None:
        self.failures, self.stall = failures, stall
        self._closing = threading.Event()
        self.requests: list[Received] = []
        self._seen: Counter[str] = Counter()
        self._changed = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                headers = {name.lower(): value for name, value in self.headers.items()}
                with receiver._changed:
                    receiver._seen[headers.get("x-toolrun-delivery", "")] += 1
                    first = receiver._seen[headers.get("x-toolrun-delivery", "")]
                    code = 500 if first <= receiver.failures else 200
                    receiver.requests.append(Received(self.path, headers, body, code))
                    receiver._changed.notify_all()
                if receiver.stall and first == 1:
                    receiver._closing.wait(120)
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._closing.set()
        self.server.shutdown()
        self.server.server_close()

    def wait_for(self, count: int, timeout: float = 60) -> list[Received]:
        """The requests answered 200, once there are at least `count` of them."""
        with self._changed:
            self._changed.wait_for(lambda: len(self.accepted()) >= count, timeout)
            return self.accepted()

    def seen(self, count: int, timeout: float = 60) -> list[Received]:
        """Every request, once there are at least `count` of them."""
        with self._changed:
            self._changed.wait_for(lambda: len(self.requests) >= count, timeout)
            return list(self.requests)

    def accepted(self) -> list[Received]:
        return [request for request in self.requests if request.answered == 200]
