"""A call's time limits: the tool's own timeout, which the executor enforces
inside the pool process, and the hard limit past it (the timeout plus
`TOOLRUN_KILL_GRACE`), at which the worker kills that process.

Only a process boundary stops everything a tool can do: C code holding the
GIL (a backtracking `re`, a C extension's loop) freezes every thread of its
process, so no timer inside it can run (docs/architecture.md, "Stopping a
call"). Celery's prefork pool kills a pool process at its task's hard time
limit and starts another; the worker computes that limit from the tool named
in the message, never from a header the sender chose.

The results here say what is known of a call whose timeout passed: a read
ends `timeout`; a side effect may have done part of its work, so it ends
`outcome_unknown`.
"""

from __future__ import annotations

import logging
from typing import Any

import redis

from runtime.ledger.store import Ledger
from runtime.registry.capabilities import Registry
from runtime.results import formatter as results
from runtime.settings import Settings
from runtime.transport import channel, signing
from runtime.types import Risk, Status, ToolResult

log = logging.getLogger("toolrun.worker")
PUBLISH_PATIENCE = 30.0  # seconds the end waits for Redis to come back


def tool_timeout(tool: str | None, registry: Registry, settings: Settings) -> float:
    """Seconds the tool may run: its own timeout, else the default."""
    spec = registry.get(tool) if isinstance(tool, str) else None
    return (spec.timeout if spec is not None else None) or settings.default_timeout


def hard_limit(message: Any, registry: Registry, settings: Settings) -> float:
    """Seconds after which the process running `message` is killed."""
    tool = message.get("tool") if isinstance(message, dict) else None
    return tool_timeout(tool, registry, settings) + settings.kill_grace


def is_read(tool: str, registry: Registry) -> bool:
    spec = registry.get(tool)
    return spec is not None and spec.risk is Risk.read


def overran(call_id: str, tool: str, timeout: float, *, read: bool, **meta: Any) -> ToolResult:
    """The tool ran past its timeout and was stopped inside its process."""
    if read:
        text = f"timed out after {timeout:g} s; try a smaller request"
        return results.failure(call_id, tool, Status.timeout, text, **meta)
    text = (f"timed out after {timeout:g} s and was stopped; it may have done part of its "
            "work, so check its effect before calling it again")  # fmt: skip
    return results.failure(call_id, tool, Status.outcome_unknown, text, kind="timeout", **meta)


def killed(call_id: str, tool: str, limit: float, *, read: bool, **meta: Any) -> ToolResult:
    """The process running the call passed the hard limit and was killed."""
    if read:
        text = (f"timed out: still running {limit:g} s after it started, so the process "
                "running it was killed; try a smaller request")  # fmt: skip
        return results.failure(call_id, tool, Status.timeout, text, kind="killed", **meta)
    text = (f"still running {limit:g} s after it started, so the process running it was "
            "killed; it may have done part of its work, so check its effect before calling "
            "it again")  # fmt: skip
    return results.failure(call_id, tool, Status.outcome_unknown, text, kind="killed", **meta)


def end_killed(message: dict, limit: float, *, worker: str | None, registry: Registry,
               key: bytes, ledger: Ledger, client: redis.Redis
               ) -> tuple[ToolResult, bool] | None:  # fmt: skip
    """The end of a call whose pool process was killed at its hard limit, in
    the worker's main process once that process is gone, recorded through the
    ledger's compare-and-set: (the result, whether this ended the call), or
    None for a message that never ran a tool. A result the process published
    before it was killed stands."""
    if not signing.verify(message, key):  # an unsigned message never ran a tool
        return None
    batch_id, call_id, tool = message["batch_id"], message["call_id"], message["tool"]
    try:
        result = channel.Board(client).recall(batch_id, call_id)
    except channel.LOST:
        result = None
    if result is not None:
        return result, False
    result = killed(call_id, tool, limit, read=is_read(tool, registry), worker=worker)
    log.error("%s ran past its hard limit of %g s; its process was killed", tool, limit)
    ended: list[bool] = []
    ledger.eventually(lambda: ended.append(ledger.record_result(batch_id, result)))
    return result, ended[0] if ended else True
