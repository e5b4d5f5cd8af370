"""An HTTP policy hook on 127.0.0.1 for tests: it keeps every request and
answers as tests/support/hook_answers.py decides (a crash is a 500)."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.support.hook_answers import decide


@dataclass(frozen=True)
class Asked:
    headers: dict[str, str]
    body: bytes


class HookServer:
    def __init__(self) -> None:
        self.requests: list[Asked] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                headers = {name.lower(): value for name, value in self.headers.items()}
                server.requests.append(Asked(headers, body))
                try:
                    answer, code = json.dumps(decide(json.loads(body))).encode(), 200
                except RuntimeError:
                    answer, code = b"", 500
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(answer)))
                    self.end_headers()
                    self.wfile.write(answer)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # a slow answer's asker timed out and left: what the test wants

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True  # a slow answer never holds the shutdown
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> HookServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
