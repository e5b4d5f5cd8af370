"""The worker's task events (what Flower shows of a task), sent in bursts.

Celery's worker holds its task events in a buffer and sends what it holds on
the next turn of its event loop. A turn mostly takes one message off the
queue or hears from one pool process, so a burst of messages cost the main
process a PUBLISH round trip for each message's `task-received`, another for
its `task-started`, and another for its `task-succeeded`, all on the one
process that hands every message to the pool. Here the buffer is sent
`FLUSH_SECONDS` after the first event put in it (at once when it holds
Celery's limit of 24): every event is still sent, stamped with the time it
happened, and Flower sees it at most that much later
(docs/architecture.md, "What Flower shows").
"""

from __future__ import annotations

import logging
import time

from celery.worker.consumer import Consumer

log = logging.getLogger("toolrun.worker")
FLUSH_SECONDS = 0.05  # how long an event may wait in the buffer for others
LOST_SECONDS = 1.0  # a flush this late never will be: its timer went with the loop


class CallConsumer(Consumer):
    """Celery's consumer, with its task events sent in bursts."""

    _flush_at: float | None = None  # when the flush on the event loop's timer is due

    def on_send_event_buffered(self) -> None:
        if not self.hub:
            return super().on_send_event_buffered()
        now = time.monotonic()
        # A restarted consumer (the broker lost and found again) may have lost
        # the timer's entry with its loop: then the next event schedules another.
        if self._flush_at is None or now > self._flush_at + LOST_SECONDS:
            self._flush_at = now + FLUSH_SECONDS
            self.hub.call_later(FLUSH_SECONDS, self._flush_due_events)

    def _flush_due_events(self) -> None:
        self._flush_at = None
        self._flush_events()

    def stop(self) -> None:
        self._flush_held()
        super().stop()

    def shutdown(self) -> None:
        self._flush_held()
        super().shutdown()

    def _flush_held(self) -> None:
        """Send what the buffer holds before the dispatcher closes (a warm
        shutdown leaves no event behind)."""
        try:
            self._flush_events()
        except Exception:  # noqa: BLE001 - the broker away: those events are lost, as Celery's are
            log.warning("task events held at shutdown were not sent", exc_info=True)
