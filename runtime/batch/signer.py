"""Signing one batch's task messages: each carries the call, the policy
snapshot, the decision, its stage, where to announce its result and the trace
it belongs to, under an HMAC (`runtime.transport.signing`), so a worker runs
only what was admitted."""

from __future__ import annotations

from typing import Any

from runtime.gate.admission import Admitted
from runtime.transport import signing
from runtime.types import Batch, CallMessage


class Signer:
    def __init__(
        self,
        key: bytes,
        batch: Batch,
        policy: dict[str, Any],
        *,
        reply_to: str | None,
        traceparent: str | None = None,
    ) -> None:
        """`traceparent`: the trace context every message of the batch carries."""
        self.key, self.batch, self.reply_to = key, batch, reply_to
        self.traceparent = traceparent
        self.snapshot = policy  # every message of the batch carries it
        self.positions = {call.id: index for index, call in enumerate(batch.calls)}

    def message(
        self,
        admission: Admitted,
        approved_by: str | None = None,
        stage: tuple[int, int, bool] | None = None,
        approval_ms: float | None = None,
    ) -> CallMessage:
        """One call's signed task message; `stage`: (index, calls in it, last)."""
        call, spec, batch = admission.call, admission.spec, self.batch
        index, size, last = stage or (None, 1, False)
        message = CallMessage(
            batch_id=batch.id,
            call_id=call.id,
            tool=spec.name,
            arguments=call.arguments,
            mode=batch.mode,
            workspace=batch.workspace,
            position=self.positions[call.id],
            policy=self.snapshot,
            decision=admission.decision.as_dict(),
            approved_by=approved_by or admission.approved_by,
            on_error=batch.on_error,
            reply_to=self.reply_to,
            stage=index,
            stage_size=size,
            last_stage=last,
            traceparent=self.traceparent,
            approval_ms=approval_ms,
        )
        return signing.sealed(message, self.key)
