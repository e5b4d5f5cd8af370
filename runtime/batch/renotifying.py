"""The sweep's second try at approval notifications (docs/architecture.md,
"Approval notifications"). A notification is lost when every attempt of its
delivery failed (its row says `failed`) or when the process that asked died
before it recorded anything (no row `notification_resend_after` seconds
after the call started to wait: longer than a delivery's retries take). For
each call still waiting, the sweep sends each lost one again, once: it first
records a `sending again` row (the claim: a sweep that finds it sends
nothing), then delivers on a thread with the same retries, and records the
outcome with `again` in its detail. The delivery id is the first one's, so a
receiver that did take the first (its sender died before recording it) drops
the second."""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from datetime import datetime, timedelta

from runtime.batch import notification
from runtime.batch.notifying import Notifying
from runtime.batch.plan import BatchPlan
from runtime.errors import LedgerUnavailable
from runtime.gate.notifiers import Notifier
from runtime.ledger.approvals import Approvals
from runtime.ledger.tables import ApprovalRow, EventKind

log = logging.getLogger("toolrun.notify")
AFTER = 120.0  # a default: runtime.settings.Settings.notification_resend_after
CLAIMED = "sending again"  # the status of the claim row


class Renotifying:
    def __init__(self, notifying: Notifying, approvals: Approvals, *, after: float = AFTER):
        self.notifying, self.approvals, self.after = notifying, approvals, after
        self._settled: set[tuple[str, str]] = set()  # calls no notifier of which needs more

    def sweep(self, now: datetime) -> int:
        """Send again what was lost; how many deliveries it started."""
        rows = self.approvals.pending()
        self._settled &= {(row.batch_id, row.call_id) for row in rows}
        by_batch: defaultdict[str, list[ApprovalRow]] = defaultdict(list)
        for row in rows:
            if (row.batch_id, row.call_id) not in self._settled:
                by_batch[row.batch_id].append(row)
        started = 0
        for batch_id, waiting in by_batch.items():
            told = self._told(batch_id)
            plan: BatchPlan | None = None
            for row in waiting:
                settled = True
                for notifier in self.notifying.notifiers:
                    outcome = told[(row.call_id, notifier.name)]
                    if "again" in outcome or "delivered" in outcome:
                        continue
                    if "failed" not in outcome and row.requested_at > now - timedelta(
                        seconds=self.after
                    ):
                        settled = False  # its first delivery may still be under way
                        continue
                    plan = plan or self._plan(batch_id)
                    if plan is not None and self._claim(row, notifier):
                        self._send(plan, row, notifier)
                        started += 1
                if settled:
                    self._settled.add((row.batch_id, row.call_id))
        return started

    def _told(self, batch_id: str) -> defaultdict[tuple[str, str], set[str]]:
        """What each (call, notifier) of the batch has on record: its
        statuses, and `again` once the sweep claimed its second delivery."""
        found: defaultdict[tuple[str, str], set[str]] = defaultdict(set)
        for event in self.notifying.ledger.events(batch_id):
            if event.kind != EventKind.approval_notified or not isinstance(event.detail, dict):
                continue
            outcome = found[(event.call_id, event.detail.get("notifier"))]
            outcome.add(event.status)
            if event.detail.get("again"):
                outcome.add("again")
        return found

    def _plan(self, batch_id: str) -> BatchPlan | None:
        found = self.notifying.ledger.progress(batch_id, with_plan=True)
        return BatchPlan.model_validate(found.plan) if found and found.plan else None

    def _claim(self, row: ApprovalRow, notifier: Notifier) -> bool:
        try:
            self.notifying.ledger.record_event(
                row.batch_id,
                row.call_id,
                EventKind.approval_notified,
                status=CLAIMED,
                detail={"notifier": notifier.name, "again": True},
            )
        except LedgerUnavailable:
            return False  # the next sweep tries
        return True

    def _send(self, plan: BatchPlan, row: ApprovalRow, notifier: Notifier) -> None:
        log.warning(
            "approval notification to %s was lost; sending it again",
            notifier.name,
            extra={"batch_id": row.batch_id, "call_id": row.call_id},
        )
        message = notification.body(plan, row.call_id, row.arguments, row.expires_at, notifier)
        threading.Thread(
            target=self.notifying.deliver,
            args=(notifier, row.batch_id, row.call_id, message),
            kwargs={"again": True},
            name=f"toolrun-notify-again-{notifier.name}",
        ).start()
