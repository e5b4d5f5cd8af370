"""A call's time limits: the tool's own timeout, which the executor enforces
inside the pool process, and the hard limit past it (the timeout plus
`TOOLRUN_KILL_GRACE`), at which the worker kills that process.

Only a process boundary stops everything a tool can do: C code holding the
GIL (a backtracking `re`, a C extension's loop) freezes every thread of its
process, so no timer inside it can run (docs/architecture.md, "Stopping a
call"). Celery's prefork pool kills a pool process at its task's hard time
limit and starts another; the worker computes that limit from the tool named
in the message, never from a header the sender chose.

The results here say what is known of a call whose timeout passed (the
tool's, the hard limit, or one the tool keeps itself): a read ends
`timeout`; a side effect may have done part of its work, so it ends
`outcome_unknown`.
"""

from __future__ import annotations

from typing import Any

from runtime.registry.capabilities import Registry
from runtime.results import formatter as results
from runtime.settings import Settings
from runtime.types import Risk, Status, ToolResult


def tool_timeout(tool: str | None, registry: Registry, settings: Settings) -> float:
    """Seconds the tool may run: its own timeout, else the default."""
    spec = registry.get(tool) if isinstance(tool, str) else None
    return (spec.timeout if spec is not None else None) or settings.default_timeout


def hard_limit(tool: str | None, registry: Registry, settings: Settings) -> float:
    """Seconds after which the process running a call of `tool` is killed."""
    return tool_timeout(tool, registry, settings) + settings.kill_grace


def is_claimed(tool: str | None, registry: Registry) -> bool:
    """Whether a call of `tool` runs only under a claim (a side effect that is
    not idempotent): at most once, so a lost worker's call ends, not reruns."""
    spec = registry.get(tool) if isinstance(tool, str) else None
    return spec is not None and spec.risk is not Risk.read and not spec.idempotent


def is_read(tool: str, registry: Registry) -> bool:
    spec = registry.get(tool)
    return spec is not None and spec.risk is Risk.read


def overran(call_id: str, tool: str, timeout: float, *, read: bool, **meta: Any) -> ToolResult:
    """The tool ran past its timeout and was stopped inside its process."""
    if read:
        text = f"timed out after {timeout:g} s; try a smaller request"
        return results.failure(call_id, tool, Status.timeout, text, **meta)
    text = (
        f"timed out after {timeout:g} s and was stopped; it may have done part of its "
        "work, so check its effect before calling it again"
    )
    return results.failure(call_id, tool, Status.outcome_unknown, text, kind="timeout", **meta)


def cut_off(call_id: str, tool: str, said: str, **meta: Any) -> ToolResult:
    """A side effect stopped by a timeout of its own (a shell command past its
    `timeout`, an MCP server that did not answer): it may have done part of its
    work, like one stopped at the tool's timeout. (A read keeps `timeout`.)"""
    text = (
        "its outcome is unknown: it may have done part of its work, so check its effect "
        f"before calling it again. {said}"
    )
    return results.failure(call_id, tool, Status.outcome_unknown, text, kind="timeout", **meta)


def killed(call_id: str, tool: str, limit: float, *, read: bool, **meta: Any) -> ToolResult:
    """The process running the call passed the hard limit and was killed."""
    if read:
        text = (
            f"timed out: still running {limit:g} s after it started, so the process "
            "running it was killed; try a smaller request"
        )
        return results.failure(call_id, tool, Status.timeout, text, kind="killed", **meta)
    text = (
        f"still running {limit:g} s after it started, so the process running it was "
        "killed; it may have done part of its work, so check its effect before calling "
        "it again"
    )
    return results.failure(call_id, tool, Status.outcome_unknown, text, kind="killed", **meta)
