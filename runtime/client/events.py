"""What this process has learnt of one batch, in the order it learnt it: an
`ApprovalRequested` for each call that waits for a human, and one final
`ToolResult` per call. The batch's follower writes it (docs/architecture.md,
"Following batches"); the handle's streams and its subscribers (the gateway's
event streams) read it. Thread-safe."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from runtime.types import ApprovalRequested, Event, ToolResult

log = logging.getLogger("toolrun.batch")
Subscriber = Callable[[Event], None]


class BatchEvents:
    def __init__(self, call_ids: list[str]) -> None:
        self.call_ids = call_ids
        self._events: list[Event] = []  # notices and final results, as they came
        self._final: dict[str, ToolResult] = {}
        self._noticed: dict[str, ApprovalRequested] = {}
        self._changed = threading.Condition()
        self._subscribers: list[Subscriber] = []

    @property
    def done(self) -> bool:
        return len(self._final) == len(self.call_ids)

    def final(self, call_id: str) -> ToolResult | None:
        return self._final.get(call_id)

    def open_calls(self) -> set[str]:
        """Calls without a final result yet."""
        with self._changed:
            return set(self.call_ids) - self._final.keys()

    def end(self, result: ToolResult) -> None:
        """A call's final result; a second one for the same call is dropped."""
        with self._changed:
            if result.call_id in self._final:
                return
            self._final[result.call_id] = result
        self._add(result)

    def notice(self, notice: ApprovalRequested) -> None:
        """A call waits for approval; dropped if said already or if it has ended."""
        with self._changed:
            if notice.call_id in self._noticed or notice.call_id in self._final:
                return
            self._noticed[notice.call_id] = notice
        self._add(notice)

    def _add(self, event: Event) -> None:
        with self._changed:
            self._events.append(event)
            self._changed.notify_all()
            subscribers = list(self._subscribers)
        for subscriber in subscribers:
            try:
                subscriber(event)
            except Exception:  # noqa: BLE001 - one reader's fault must not stop the others
                log.exception("a subscriber of a batch's events failed")

    def subscribe(self, subscriber: Subscriber) -> list[Event]:
        """Call `subscriber` (on the follower's thread) with every later event;
        returns those in already, so that none is missed or seen twice."""
        with self._changed:
            self._subscribers.append(subscriber)
            return list(self._events)

    def unsubscribe(self, subscriber: Subscriber) -> None:
        with self._changed:
            if subscriber in self._subscribers:
                self._subscribers.remove(subscriber)

    def after(self, index: int, timeout: float | None) -> list[Event]:
        """The events from `index` on, waiting up to `timeout` seconds (None:
        for ever) for one if there is none yet."""
        limit = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            while index >= len(self._events):
                left = None if limit is None else limit - time.monotonic()
                if left is not None and left <= 0:
                    break
                self._changed.wait(left)
            return self._events[index:]

    def wait_done(self, timeout: float | None) -> bool:
        """Wait until every call has its final result; whether they have."""
        with self._changed:
            return self._changed.wait_for(lambda: self.done, timeout)

    def so_far(self) -> tuple[list[ToolResult], list[ApprovalRequested]]:
        """The final results in, in the model's order, and the notices of calls
        still waiting for approval."""
        with self._changed:
            finals = [self._final[c] for c in self.call_ids if c in self._final]
            waiting = [n for c, n in self._noticed.items() if c not in self._final]
        return finals, waiting
