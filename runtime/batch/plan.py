"""What a batch needs to move on without its client, fixed at submit: its
stages, each call's decision and signed task message, its policy snapshot,
deadline and where its results are announced. Stored in the ledger with the
batch's rows, so any process (a worker, the sweep, an approver) can carry the
batch on (docs/architecture.md, "A batch the cluster owns").
"""

from __future__ import annotations

import functools
from typing import Any, Literal

from pydantic import BaseModel

from runtime.batch.stages import plan as stages_of
from runtime.gate.admission import Admitted, Refused
from runtime.gate.decision import Effect
from runtime.types import Batch, CallMessage, Risk, ToolCall

CHAIN_STEPS = 32  # ordered steps one chain carries at most
CHAIN_BYTES = 256 * 1024  # and their messages at most: the chain's first message holds all


class PlannedCall(BaseModel):
    id: str
    tool: str
    read: bool  # runs side by side with the reads next to it
    effect: Literal["allow", "ask", "refused"]
    reason: str = ""
    rule: str = ""
    message: CallMessage | None = None  # signed; None for a refused call
    stage: int = 0


class PlannedStage(BaseModel):
    parallel: bool
    calls: list[str]


class BatchPlan(BaseModel):
    batch: Batch
    policy: dict[str, Any]  # the snapshot every message carries
    reply_to: str | None
    deadline: float  # epoch seconds
    approval_timeout: float
    calls: dict[str, PlannedCall]
    stages: list[PlannedStage]
    traceparent: str | None = None  # the trace of the batch's span (runtime/tracing.py)

    def call(self, call_id: str) -> ToolCall:
        """A call of the batch by id, in constant time (a batch may hold thousands)."""
        return self._by_id[call_id]

    @functools.cached_property
    def _by_id(self) -> dict[str, ToolCall]:
        return {call.id: call for call in self.batch.calls}

    def chain_from(self, index: int, ended: set[str]) -> list[str]:
        """Ordered steps from stage `index` on that can travel as one chain: each
        allowed as it stands (no approval to wait for), none ended, no more
        than a chain carries."""
        steps: list[str] = []
        size = 0
        for stage in self.stages[index:]:
            call = self.calls[stage.calls[0]]
            if stage.parallel or call.effect != "allow" or call.id in ended:
                break
            size += len(call.message.model_dump_json()) if call.message else 0
            if steps and (len(steps) >= CHAIN_STEPS or size > CHAIN_BYTES):
                break
            steps.append(call.id)
        return steps


def build(
    batch: Batch,
    admissions: list[Admitted | Refused],
    *,
    sign: Any,
    policy: dict[str, Any],
    reply_to: str | None,
    deadline: float,
    approval_timeout: float,
    traceparent: str | None = None,
) -> BatchPlan:
    """`sign(admission, (stage, its size, last))` gives an admitted call's
    signed task message."""
    stages = stages_of(admissions, _is_read)
    calls: dict[str, PlannedCall] = {}
    for index, stage in enumerate(stages):
        # A stage's size counts the calls a worker will end: a refused call ended at
        # submit, and the worker that ends the last of the others moves the batch on.
        sent = sum(isinstance(a, Admitted) for a in stage.calls)
        where = (index, max(sent, 1), index == len(stages) - 1)
        for admission in stage.calls:
            calls[admission.call.id] = _planned(admission, where, sign)
    refused = {a.call.id for a in admissions if isinstance(a, Refused)}
    kept = batch.model_copy(
        update={
            "calls": [  # a refused call's arguments are never needed
                call.model_copy(update={"arguments": {}}) if call.id in refused else call
                for call in batch.calls
            ]
        }
    )
    return BatchPlan(
        batch=kept,
        policy=policy,
        reply_to=reply_to,
        deadline=deadline,
        approval_timeout=approval_timeout,
        calls=calls,
        traceparent=traceparent,
        stages=[
            PlannedStage(parallel=s.parallel, calls=[a.call.id for a in s.calls]) for s in stages
        ],
    )


def _planned(admission: Admitted | Refused, where: tuple[int, int, bool], sign: Any) -> PlannedCall:
    stage = where[0]
    call = admission.call
    read = _is_read(admission)
    if isinstance(admission, Refused):
        decided = admission.decision  # None: refused before the gate (unknown tool, ...)
        return PlannedCall(
            id=call.id,
            tool=call.name if isinstance(call.name, str) else "?",
            read=read,
            effect="refused",
            reason=decided.reason if decided else "",
            rule=decided.rule if decided else "",
            stage=stage,
        )
    decision = admission.decision
    effect = "ask" if decision.effect is Effect.ask else "allow"
    return PlannedCall(
        id=call.id,
        tool=admission.spec.name,
        read=read,
        effect=effect,
        reason=decision.reason,
        rule=decision.rule,
        message=sign(admission, where),
        stage=stage,
    )


def _is_read(admission: Admitted | Refused) -> bool:
    return admission.spec is not None and admission.spec.risk is Risk.read
