"""Bearer keys on every route but the health checks (docs/architecture.md,
"The HTTP gateway"). A missing, malformed, wrong or revoked key is a 401; the
token itself is never logged or echoed, only the key's name. A request that
stays open (an event stream, a long poll) asks `Standing` now and then whether
its key is still live, and ends once it is revoked."""

from __future__ import annotations

import threading
import time

from fastapi import Request
from starlette.concurrency import run_in_threadpool

from runtime.gateway.keys import Key, authenticate
from runtime.gateway.problems import Unauthorized
from runtime.ledger.keys import Keys

RECHECK = 1.0  # seconds a key's standing is trusted before the ledger is asked again


class Standing:
    """Whether keys are still live: the ledger is asked at most once a
    `RECHECK` per key, however many streams and polls of it are open."""

    def __init__(self, keys: Keys) -> None:
        self.keys = keys
        self._known: dict[str, tuple[float, bool]] = {}  # key id → (when asked, live)
        self._lock = threading.Lock()

    def fresh(self, key_id: str) -> bool | None:
        """What was learnt in the last `RECHECK` seconds, or None."""
        with self._lock:
            known = self._known.get(key_id)
        if known is None or time.monotonic() - known[0] >= RECHECK:
            return None
        return known[1]

    def saw(self, key_id: str) -> None:
        """The key was just found live (a request authenticated with it)."""
        with self._lock:
            self._known[key_id] = (time.monotonic(), True)

    def live(self, key_id: str) -> bool:
        """Asks the ledger unless `fresh` knows (blocking: call it off the event loop)."""
        known = self.fresh(key_id)
        if known is not None:
            return known
        row = self.keys.get(key_id)
        live = row is not None and row.revoked_at is None
        with self._lock:
            self._known[key_id] = (time.monotonic(), live)
        return live

    async def still_live(self, key_id: str) -> bool:
        known = self.fresh(key_id)
        return known if known is not None else await run_in_threadpool(self.live, key_id)


def bearer(request: Request) -> Key:
    """The FastAPI dependency that names the key of a request."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("send an API key as `Authorization: Bearer <key>`")
    key = authenticate(request.app.state.gateway.keys, token.strip())
    if key is None:
        raise Unauthorized("the API key is unknown, wrong or revoked")
    request.state.key_name = key.name
    request.app.state.gateway.standing.saw(key.id)  # a long poll's first look needs no read
    return key
