"""The transport of a real deployment: task messages to Celery workers
(`outbox.CeleryQueue`), and the batch's shared state in Redis
(`redis_state.RedisState`): ends stored in each batch's hash and announced on
the submitting client's channel (one subscription per process,
`transport/listener.py`), the marks of what was sent and taken, cancel flags."""

from __future__ import annotations

import redis
from celery import Celery

from runtime import clock
from runtime.keyspace.names import TTL_SECONDS, UNRECORDED, plan_key, sent_key
from runtime.redaction import BUILT_IN, Redactor
from runtime.transport.base import PlanCopy
from runtime.transport.copies import plan_text
from runtime.transport.leases import reaching
from runtime.transport.outbox import ROUND_MESSAGES, CeleryQueue
from runtime.transport.redis_state import RedisState
from runtime.types import CallMessage


class CeleryTransport(RedisState):
    key: bytes | None = None  # messages are signed with the deployment's key

    def __init__(self, app: Celery, client: redis.Redis, *, redactor: Redactor = BUILT_IN) -> None:
        super().__init__(client)
        self.app, self.queue = app, CeleryQueue(app, redactor=redactor)

    def post(self, messages: list[CallMessage], *, parallel: bool, chained: bool = False) -> bool:
        return self.queue.post(messages, parallel=parallel, chained=chained)

    def post_marked(
        self,
        batch_id: str,
        messages: list[CallMessage],
        *,
        plan: PlanCopy | None = None,
        record: str | bytes | None = None,
    ) -> None:
        """A fresh batch's reads marked sent and posted, with the plan's copy
        and the batch's record, in one round trip where the broker is the
        state's Redis, in two otherwise (`mark_sent`, then `post`). Every
        mark is new at submit; should one not be, its read goes twice, which
        reads allow (docs/architecture.md, "Round trips and memory").

        A stage of more than `ROUND_MESSAGES` reads goes in that many per
        round trip, each built as its round goes, so the submitter never
        holds every payload at once. The first round carries what it carried
        whole: every call's mark, the plan's copy and the record, so every
        mark and the record land before any message. Should the submitter
        die, or Redis fail, between two rounds, the reads not sent are marked
        sent and recorded, as a message the broker lost is: the sweep finds
        the batch (its record kept) and sends each again once its mark is
        `resend_after` old and no worker took it ("Sent before recorded")."""
        call_ids = [message.call_id for message in messages]
        if not self.queue.rides:
            self.mark_sent(batch_id, call_ids, plan=plan, record=record)
            self.post(messages, parallel=True)
            return
        with (
            reaching(f"batch {batch_id}: cannot send its first reads"),
            self.client.pipeline(transaction=False) as pipe,
        ):
            self.drops_ride(pipe)
            if plan is not None:
                pipe.set(plan_key(batch_id), plan_text(plan), ex=TTL_SECONDS)
            if record is not None:
                pipe.hset(UNRECORDED, batch_id, record)
            pipe.hset(sent_key(batch_id), mapping=dict.fromkeys(call_ids, str(clock.now())))
            pipe.expire(sent_key(batch_id), TTL_SECONDS)
            for start in range(0, len(messages) or 1, ROUND_MESSAGES):
                self.queue.ride(pipe, messages[start : start + ROUND_MESSAGES])
                pipe.execute()  # and empties the pipeline for the next round
