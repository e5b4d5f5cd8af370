"""Bearer keys on every route but the health checks (docs/architecture.md,
"The HTTP gateway"). A missing, malformed, wrong or revoked key is a 401 (a
key revoked within the last `RECHECK` seconds may still pass, as a request
already open goes on that long); the token itself is never logged or echoed,
only the key's name. A request that stays open (an event stream, a long poll)
asks `Standing` now and then whether its key is still live, and ends once it
is revoked."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict

from fastapi import Request
from starlette.concurrency import run_in_threadpool

from runtime.gateway.keys import Key, authenticate, digest
from runtime.gateway.problems import Unauthorized
from runtime.ledger.keys import Keys

RECHECK = 1.0  # seconds a key's standing is trusted before the ledger is asked again
TOKENS_KEPT = 1024  # tokens remembered as authenticated (each for `RECHECK` at most)


class Standing:
    """Whether keys are still live: the ledger is asked at most once a
    `RECHECK` per key, however many streams and polls of it are open. A
    token that found its key live within the last `RECHECK` finds it again
    without a read (`known`): a submit's POST and its long poll read the
    key's row once, not twice, and stay on the event loop."""

    def __init__(self, keys: Keys) -> None:
        self.keys = keys
        self._known: dict[str, tuple[float, bool]] = {}  # key id → (when asked, live)
        self._tokens: OrderedDict[str, Key] = OrderedDict()  # a token's digest → its key
        self._lock = threading.Lock()

    def known(self, token: str) -> Key | None:
        """The key `token` found within the last `RECHECK`, if still live then."""
        with self._lock:
            key = self._tokens.get(digest(token))
        return key if key is not None and self.fresh(key.id) else None

    def found(self, token: str, key: Key) -> None:
        """`token` was just authenticated as `key`."""
        self.saw(key.id)
        with self._lock:
            self._tokens[digest(token)] = key
            self._tokens.move_to_end(digest(token))
            while len(self._tokens) > TOKENS_KEPT:
                self._tokens.popitem(last=False)

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


async def bearer(request: Request) -> Key:
    """The FastAPI dependency that names the key of a request: on the event
    loop if its token found its key live within `RECHECK`, else read off it."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise Unauthorized("send an API key as `Authorization: Bearer <key>`")
    gateway = request.app.state.gateway
    key = gateway.standing.known(token)
    if key is None:
        key = await run_in_threadpool(authenticate, gateway.keys, token)
        if key is None:
            raise Unauthorized("the API key is unknown, wrong or revoked")
        gateway.standing.found(token, key)  # a long poll's first look needs no read
    request.state.key_name = key.name
    return key
