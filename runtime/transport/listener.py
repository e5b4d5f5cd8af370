"""The client's side of the results channel: one pub/sub connection and one
thread per `Runtime`, routing results to each batch's inbox and waking the
batch's follower (runtime/client/follower.py), so no batch needs a thread.

Workers publish a call's result on the channel its message names (`reply_to`,
this listener's own), so a batch costs no subscription of its own. The
listener also follows every batch's channel by pattern, where a cancel from
any process is announced. It subscribes once, before the first batch sends
anything, so no result is published before someone listens. When the
connection drops, it subscribes again and each inbox reads its hash once,
where a result published meanwhile waits (Redis with its append-only file
keeps it over a restart; a Redis without loses it, and the batch's deadline
ends that call). A lost connection is never raised: each batch's deadline
bounds its wait.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable

import redis

from runtime.keyspace.names import (
    BATCH_CHANNELS,
    CANCEL_NOTICE,
    batch_of,
    cancel_key,
    reply_channel,
    results_key,
)
from runtime.keyspace.scripted import LOST
from runtime.types import Status, ToolResult

NOTICE = Status.awaiting_approval

log = logging.getLogger("toolrun.listener")
SWEEP_SECONDS = 1.0  # how often a listener also reads the results hash
RECONNECT_SECONDS = 0.5  # the pause before subscribing again after a lost connection
CONFIRM_SECONDS = 2.0  # how long the first batch waits for Redis to confirm the subscription
WAKE = b""  # put in an inbox to have it read its hash at once


class Inbox:
    """One batch's results as they are published, and its hash when in doubt."""

    def __init__(self, client: redis.Redis, batch_id: str) -> None:
        self.client, self.batch_id = client, batch_id
        self.cancelled = False
        self.confirmed = threading.Event()
        self.gap = False  # a result may have been published while nobody listened
        self._messages: queue.SimpleQueue[bytes] = queue.SimpleQueue()
        self._sweep_at = time.monotonic() + SWEEP_SECONDS
        self._arrived: Callable[[], None] = lambda: None

    def on_arrival(self, callback: Callable[[], None]) -> None:
        """Call `callback` (on the listener's thread; it must not block) each
        time something is put here: the batch's follower then reads `results`."""
        self._arrived = callback

    @property
    def quick(self) -> bool:
        return not self.gap and time.monotonic() < self._sweep_at

    def put(self, data: bytes) -> None:
        self._messages.put(data)
        self._arrived()

    def results(self, waiting: set[str], timeout: float) -> list[ToolResult]:
        """Results of `waiting` calls that arrive within about `timeout`
        seconds (0: those in now); sets `cancelled` if the batch is cancelled
        meanwhile. Reads the hash too after a gap, or `SWEEP_SECONDS` after it
        last did."""
        found = []
        try:
            data = [self._messages.get(timeout=max(0.0, timeout))]
            while not self._messages.empty():
                data.append(self._messages.get_nowait())
        except queue.Empty:
            data = []
        for item in data:
            if item == CANCEL_NOTICE.encode():
                self.cancelled = True
            elif item != WAKE:
                found.append(ToolResult.model_validate_json(item))
        if self.gap or time.monotonic() >= self._sweep_at:
            found += self._sweep(waiting)
        unique: dict[str, ToolResult] = {}  # a result may come both ways: published, and hashed
        for result in found:
            known = unique.get(result.call_id)
            if result.call_id in waiting and (known is None or known.status is NOTICE):
                unique[result.call_id] = result  # an end wins over a notice
        return list(unique.values())

    def _sweep(self, waiting: set[str]) -> list[ToolResult]:
        """The hash's results of `waiting` calls, and the cancel flag (a cancel
        published during a gap was lost with it), in one round trip."""
        ids = sorted(waiting)
        try:
            with self.client.pipeline(transaction=False) as pipe:
                pipe.exists(cancel_key(self.batch_id))
                if ids:
                    pipe.hmget(results_key(self.batch_id), ids)
                cancelled, *values = pipe.execute()
        except LOST as error:
            log.warning("batch %s: cannot read its results: %s", self.batch_id, error)
            return []
        self.cancelled = self.cancelled or bool(cancelled)
        self.gap, self._sweep_at = False, time.monotonic() + SWEEP_SECONDS
        return [ToolResult.model_validate_json(value) for value in (values or [[]])[0] if value]


class Listener:
    """Every batch of one `Runtime` on one subscribed connection."""

    def __init__(self, client: redis.Redis, *, chore: Callable[[], None] = lambda: None) -> None:
        """`chore`: called on the listener's thread after each message and at
        least every `SWEEP_SECONDS` (the kept records' drops: `copies.py`)."""
        self.client, self._chore = client, chore
        self.channel = reply_channel(uuid.uuid4().hex)  # where workers answer this client
        self._inboxes: dict[str, Inbox] = {}
        self._lock = threading.Lock()  # the pubsub object
        self._pubsub: redis.client.PubSub | None = None
        self._ready = threading.Event()  # subscribed, and Redis said so
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None

    def watch(self, batch_id: str) -> Inbox:
        """The inbox of a batch about to send; once this returns, Redis has
        confirmed the subscription (or, if it cannot be reached, the inbox
        reads the hash once it can)."""
        inbox = Inbox(self.client, batch_id)
        self._inboxes[batch_id] = inbox
        if not self._ready.is_set():
            self._start()
            if not self._ready.wait(CONFIRM_SECONDS):
                inbox.gap = True
        return inbox

    def unwatch(self, batch_id: str) -> None:
        self._inboxes.pop(batch_id, None)

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            self._drop_connection()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _start(self) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._route, name="toolrun-results", daemon=True
                )
                self._thread.start()

    def _subscribed(self) -> redis.client.PubSub:
        """The pubsub object, made and subscribed if there is none; call with
        the lock held."""
        if self._pubsub is None:
            pubsub = self.client.pubsub()
            try:
                pubsub.subscribe(self.channel)
                pubsub.psubscribe(BATCH_CHANNELS)
            except LOST:
                pubsub.close()
                raise
            self._pubsub = pubsub
        return self._pubsub

    def _drop_connection(self) -> None:
        """Forget the connection; every inbox reads its hash once it is back."""
        pubsub, self._pubsub = self._pubsub, None
        self._ready.clear()
        for inbox in list(self._inboxes.values()):
            inbox.gap = True
        if pubsub is not None:
            try:
                pubsub.close()
            except LOST:
                pass

    def _route(self) -> None:
        while not self._closed.is_set():
            try:
                with self._lock:
                    pubsub = self._subscribed()
                message = pubsub.get_message(timeout=SWEEP_SECONDS)
            except Exception as error:  # noqa: BLE001 - lost, refused, or closed under our feet
                if self._closed.is_set():
                    return
                log.warning("results channel lost, subscribing again: %s", error)
                with self._lock:
                    self._drop_connection()
                self._closed.wait(RECONNECT_SECONDS)
                continue
            if message is not None:
                self._deliver(message)
            self._chore()

    def _deliver(self, message: dict) -> None:
        kind = message["type"]
        if kind in ("subscribe", "psubscribe"):
            if message["data"] == 2:  # both confirmed: first, or again after a reconnect
                self._ready.set()
                for inbox in list(self._inboxes.values()):
                    inbox.gap = True  # redis-py may have reconnected without telling us
                    inbox.put(WAKE)  # read the hash now: any gap just closed
            return
        if kind == "message":  # a result for this client: "<batch id>\n<result JSON>"
            batch_id, _, data = message["data"].rpartition(b"\n")
            inbox = self._inboxes.get(batch_id.decode(errors="replace"))
        elif kind == "pmessage":  # a batch's own channel: a cancel, or a result
            inbox = self._inboxes.get(batch_of(message["channel"].decode(errors="replace")))
            data = message["data"]
        else:
            return
        if inbox is not None:
            inbox.put(data)
