"""Telling the org's notifiers that a call waits for approval
(docs/architecture.md, "Approval notifications").

Once per waiting call, cluster-wide: only the process whose insert stored the
approval request (`Approvals.request` returned True) tells them, so two
workers or clients advancing the same batch never both do. Each notifier gets
a POST on a thread of its own, so neither the batch's advance nor another
notifier waits for a slow receiver; a failed attempt (no connection, a
timeout, a 5xx or a 429) is retried through tenacity with backoff, and what
happened (attempts, the final HTTP status or error) is an `approval_notified`
event row of the call. The body is signed: `X-Toolrun-Signature: sha256=` an
HMAC-SHA256 over `<timestamp>.<body>` under the key derived from the signing
key for notifications (runtime/keyring.py), `X-Toolrun-Timestamp` the UNIX
seconds it was signed at; every attempt carries the same `X-Toolrun-Delivery`
id, for a receiver to drop a retry it already took.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import threading
import time
import urllib.error
import urllib.request
from datetime import datetime
from typing import Any

from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from runtime.batch import notification
from runtime.batch.plan import BatchPlan
from runtime.errors import LedgerUnavailable
from runtime.gate.notifiers import Notifier
from runtime.keyring import Purpose, derived
from runtime.ledger.store import Ledger
from runtime.ledger.tables import EventKind

log = logging.getLogger("toolrun.notify")
ATTEMPTS = 5  # per notifier and waiting call
TIMEOUT = 5.0  # seconds one attempt may take
BACKOFF = 0.25  # seconds before the first retry; doubled each time, at most MAX_WAIT
MAX_WAIT = 8.0


class Retryable(Exception):
    """An attempt that may succeed later: no answer, a 5xx or a 429."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class Refused(Exception):
    """The receiver answered with a 4xx other than 429: trying again changes nothing."""

    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


def signature(key: bytes, timestamp: str, body: bytes) -> str:
    """What `X-Toolrun-Signature` carries for `body` signed at `timestamp`
    under the deployment's signing key `key`."""
    own = derived(key, Purpose.notification)
    return "sha256=" + hmac.new(own, timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()


class Notifying:
    def __init__(
        self,
        notifiers: tuple[Notifier, ...],
        *,
        key: bytes,
        ledger: Ledger,
        attempts: int = ATTEMPTS,
        backoff: float = BACKOFF,
    ) -> None:
        self.notifiers, self.key, self.ledger = notifiers, key, ledger
        self.attempts, self.backoff = attempts, backoff

    def tell(self, plan: BatchPlan, call_id: str, arguments: Any, expires_at: datetime) -> None:
        """Start telling every notifier that `call_id` waits; returns at once.
        The threads are not daemons: a short-lived process (`toolrun approve`
        asking for the batch's next call) finishes its deliveries before it exits."""
        for notifier in self.notifiers:
            message = notification.body(plan, call_id, arguments, expires_at, notifier)
            threading.Thread(
                target=self.deliver,
                args=(notifier, plan.batch.id, call_id, message),
                name=f"toolrun-notify-{notifier.name}",
            ).start()

    def deliver(
        self, notifier: Notifier, batch_id: str, call_id: str, message: dict, *, again: bool = False
    ) -> None:
        """POST `message` with retries and record the outcome (`again`: the
        sweep's second delivery, marked so in the row: renotifying.py)."""
        body = json.dumps(message, separators=(",", ":"), default=str).encode()
        delivery = f"{batch_id}/{call_id}/{notifier.name}"
        retrying = Retrying(
            stop=stop_after_attempt(self.attempts),
            wait=wait_exponential(multiplier=self.backoff, max=MAX_WAIT),
            retry=retry_if_exception_type(Retryable),
            reraise=True,
        )
        attempts, status, error = 0, None, None
        try:
            for attempt in retrying:
                with attempt:
                    attempts = attempt.retry_state.attempt_number
                    status = self._post(notifier, body, delivery)
        except (Retryable, Refused) as failure:
            status, error = failure.status, str(failure)
        outcome = "delivered" if error is None else "failed"
        if error is not None:
            log.warning(
                "approval notification to %s failed after %d attempt(s): %s",
                notifier.name,
                attempts,
                error,
                extra={"batch_id": batch_id, "call_id": call_id},
            )
        detail = {"notifier": notifier.name, "http_status": status, "error": error}
        if again:
            detail["again"] = True
        try:
            self.ledger.record_event(
                batch_id,
                call_id,
                EventKind.approval_notified,
                status=outcome,
                attempt=attempts,
                detail=detail,
            )
        except LedgerUnavailable:
            log.warning("approval notification to %s: %s, not recorded", notifier.name, outcome)

    def _post(self, notifier: Notifier, body: bytes, delivery: str) -> int:
        timestamp = str(int(time.time()))
        request = urllib.request.Request(
            notifier.url,
            data=body,
            method="POST",
            headers={
                "Content-Type": "application/json",
                "User-Agent": "toolrun-notify/1",
                "X-Toolrun-Event": notification.EVENT,
                "X-Toolrun-Delivery": delivery,
                "X-Toolrun-Timestamp": timestamp,
                "X-Toolrun-Signature": signature(self.key, timestamp, body),
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
                return response.status
        except urllib.error.HTTPError as failure:
            if failure.code >= 500 or failure.code == 429:
                raise Retryable(f"HTTP {failure.code}", failure.code) from None
            raise Refused(failure.code) from None
        except (OSError, TimeoutError) as failure:  # URLError is an OSError
            raise Retryable(f"{type(failure).__name__}: {failure}") from None
