"""Pydantic AI's deferred tools run by toolrun (docs/architecture.md,
"Integrations"): the registry's tools as an `ExternalToolset`, so a run that
calls them ends with `DeferredToolRequests`; `run_requests` runs those calls
as one toolrun batch and hands back `DeferredToolResults`. A call toolrun's
gate holds for a person comes back as one of Pydantic AI's approval requests,
and the answer, in Pydantic AI's own values (`ToolApproved`, `ToolDenied`, a
bool), is given to toolrun by `answer`. Needs the `pydantic-ai` extra."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anyio
from pydantic_ai import DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import ExternalToolset

from runtime.client import Runtime
from runtime.integrations.batches import Options, Outcome, aattach, arun, asettle, run, settle


def toolset(rt: Runtime, *, names: list[str] | None = None) -> ExternalToolset:
    """The registry's tools (or those `names`) as tools a run defers to toolrun."""
    specs = [spec for spec in rt.registry if names is None or spec.name in names]
    return ExternalToolset(
        [
            ToolDefinition(
                name=spec.name,
                description=spec.description,
                parameters_json_schema=spec.input_model.model_json_schema(),
            )
            for spec in specs
        ]
    )


@dataclass
class DeferredBatch:
    """A run's deferred calls as a toolrun batch: `results` holds the calls
    that ended; `approvals` the calls that wait for a person, as Pydantic AI's
    approval requests. When `complete`, `results` answers every call: resume
    the run with `deferred_tool_results=batch.results`."""

    batch_id: str
    results: DeferredToolResults
    approvals: DeferredToolRequests
    parts: dict[str, ToolCallPart]

    @property
    def complete(self) -> bool:
        return not self.approvals.approvals


def run_requests(rt: Runtime, requests: DeferredToolRequests, options: Options) -> DeferredBatch:
    """Run `requests.calls` (in the model's order) as one toolrun batch.
    (Calls another toolset asked approval for, `requests.approvals`, are not
    toolrun's: the application answers them as before.)"""
    outcome = run(rt, _calls(requests), options)
    return _batch(outcome, {part.tool_call_id: part for part in requests.calls})


async def arun_requests(
    rt: Runtime, requests: DeferredToolRequests, options: Options
) -> DeferredBatch:
    """`run_requests` on the event loop (`Runtime.asubmit`): for `await agent.run(...)`."""
    outcome = await arun(rt, _calls(requests), options)
    return _batch(outcome, {part.tool_call_id: part for part in requests.calls})


def _calls(requests: DeferredToolRequests) -> list[dict[str, Any]]:
    return [
        {"id": part.tool_call_id, "name": part.tool_name, "arguments": part.args_as_dict()}
        for part in requests.calls
    ]


def answer(
    rt: Runtime, batch: DeferredBatch, answers: DeferredToolResults, *, by: str
) -> DeferredBatch:
    """Give toolrun a person's answers to `batch.approvals`, in Pydantic AI's
    values (`True` or `ToolApproved(override_args=...)` approve, `False` or
    `ToolDenied(message)` deny), and settle the batch again: complete, or with
    the calls that now wait (a later step of the batch may ask too)."""
    _give(rt, batch, answers, by)
    settled = settle(rt.attach(batch.batch_id), answered=answers.approvals.keys())
    return _batch(settled, batch.parts)


async def aanswer(
    rt: Runtime, batch: DeferredBatch, answers: DeferredToolResults, *, by: str
) -> DeferredBatch:
    """`answer` on the event loop: the ledger's writes on a thread, the wait on the loop."""
    await anyio.to_thread.run_sync(_give, rt, batch, answers, by)
    settled = await asettle(await aattach(rt, batch.batch_id), answered=answers.approvals.keys())
    return _batch(settled, batch.parts)


def _give(rt: Runtime, batch: DeferredBatch, answers: DeferredToolResults, by: str) -> None:
    for call_id, given in answers.approvals.items():
        if isinstance(given, ToolDenied) or given is False:
            reason = given.message if isinstance(given, ToolDenied) else "denied by a person"
            rt.deny(batch.batch_id, call_id, reason, by=by)
        else:
            updated = given.override_args if isinstance(given, ToolApproved) else None
            rt.approve(batch.batch_id, call_id, by=by, updated_arguments=updated)


def _batch(outcome: Outcome, parts: dict[str, ToolCallPart]) -> DeferredBatch:
    results = DeferredToolResults(
        calls={call_id: result.model_message for call_id, result in outcome.results.items()}
    )
    waiting = [parts[call_id] for call_id in outcome.waiting]
    metadata = {
        call_id: {"toolrun_batch": outcome.batch_id, "reason": notice.reason}
        for call_id, notice in outcome.waiting.items()
    }
    approvals = DeferredToolRequests(approvals=waiting, metadata=metadata)
    return DeferredBatch(outcome.batch_id, results, approvals, parts)
