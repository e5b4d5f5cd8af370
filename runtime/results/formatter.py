"""`ToolResult` builders: the model message, the one-line screen summary and the
ledger summary, with every string redacted and the content bounded in size.

Every result, success or early end, is finished here, so no path to the caller
skips redaction or the size bound.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic_core import to_jsonable_python

from runtime.redaction import BUILT_IN, Redactor
from runtime.registry.capabilities import ToolOutput
from runtime.results import media
from runtime.types import ErrorInfo, Status, ToolResult

SUMMARY_CHARS = 120
FAILURE_MAX_BYTES = 32 * 1024  # the default result bound (`TOOLRUN_RESULT_MAX_BYTES`)
MEDIA_MAX_BYTES = 512 * 1024  # the default media bound (`TOOLRUN_RESULT_MAX_MEDIA_BYTES`)


def success(
    call_id: str,
    tool: str,
    output: Any,
    *,
    max_bytes: int,
    max_media_bytes: int = MEDIA_MAX_BYTES,
    redactor: Redactor = BUILT_IN,
    **meta: Any,
) -> ToolResult:
    """A tool's return value as an ok result. A tool that returns a bare value
    instead of a `ToolOutput` gets its JSON as the model message. Its images and
    documents have a bound of their own, and one that does not fit is left out
    whole, with a note in the message. `redactor`: the worker's, from its settings."""
    if not isinstance(output, ToolOutput):
        text = output if isinstance(output, str) else _json(output)
        output = ToolOutput(content=output, message=text, summary=_line(text))
    # Redacted first, then bounded: a cut through a key leaves a tail no detector knows.
    content, note = bound(redactor.redact(_plain(output.content)), max_bytes)
    kept, left_out = media.bound(output.media, max_media_bytes)
    message = "\n".join(
        [redactor.redact_text(output.message), *([note] if note else []), *left_out]
    )
    if len(message.encode()) > max_bytes:
        message = message.encode()[:max_bytes].decode(errors="ignore") + f"\n{_cut_note(max_bytes)}"
    result = ToolResult(
        call_id=call_id,
        tool=tool,
        status=Status.ok,
        model_message=message,
        summary=f"{tool}: {output.summary}",
        content=content,
        media=kept,
        **meta,
    )
    return finish(result, redactor, redacted=("content", "model_message"))


def failure(
    call_id: str,
    tool: str,
    status: Status,
    message: str,
    *,
    kind: str | None = None,
    max_bytes: int = FAILURE_MAX_BYTES,
    redactor: Redactor = BUILT_IN,
    **meta: Any,
) -> ToolResult:
    """Any non-ok end: the message is what the model reads to correct itself,
    cut to `max_bytes` (an exception's text or a made-up tool name can be huge),
    once redacted."""
    message = redactor.redact_text(message)
    if len(message.encode()) > max_bytes:
        message = message.encode()[:max_bytes].decode(errors="ignore") + f"\n{_cut_note(max_bytes)}"
    return finish(
        ToolResult(
            call_id=call_id,
            tool=tool,
            status=status,
            model_message=f"{tool}: {message}",
            summary=f"{tool}: {message}",
            error=ErrorInfo(kind=kind or status.value, message=message),
            **meta,
        ),
        redactor,
    )


def finish(
    result: ToolResult, redactor: Redactor = BUILT_IN, *, redacted: tuple[str, ...] = ()
) -> ToolResult:
    """Redact every string the result carries (but the fields named `redacted`,
    redacted before they were bounded) and keep the summary to one line.
    Media bytes are not text: redaction would only corrupt them."""
    dumped = result.model_dump(mode="json", exclude={"media"})
    kept = {name: dumped.pop(name) for name in redacted}
    data = redactor.redact(dumped) | kept
    data["summary"] = _line(data["summary"])
    data["media"] = result.media
    return ToolResult.model_validate(data)


def ledger_summary(result: ToolResult) -> dict[str, Any]:
    """What the ledger keeps of a result: enough to audit, not the whole content;
    the queue wait and CPU time of the attempt that ended it, when measured."""
    kept = {
        "summary": result.summary,
        "error": result.error.model_dump() if result.error else None,
        "duration_ms": result.duration_ms,
    }
    for name in ("queue_wait_ms", "cpu_ms"):
        if (value := getattr(result, name)) is not None:
            kept[name] = value
    return kept


def bound(content: Any, max_bytes: int) -> tuple[Any, str | None]:
    """`content` if its JSON fits in `max_bytes`; else a cut copy and a note
    saying what was cut."""
    size = len(_json(content).encode())
    if size <= max_bytes:
        return content, None
    budget = max(64, max_bytes // 4)
    cut = _cut_strings(content, budget)
    room = max_bytes - 256
    while len(_json(cut).encode()) > max_bytes:  # escaped again, a preview can grow: halve it
        text = _json(content).encode()[:room].decode(errors="ignore")
        cut, room = {"truncated": True, "preview": text}, room // 2
    note = (
        f"[content cut: {size} bytes exceeds the {max_bytes}-byte limit; "
        "ask for a smaller part, e.g. with offset and limit or a narrower pattern]"
    )
    return cut, note


def _plain(value: Any) -> Any:
    """`value` with each leaf as JSON will show it (a path, a date: their text),
    so the redactor sees every string the result will carry; keys are kept, and
    one JSON cannot carry fails in `bound` as it did."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return to_jsonable_python(value, fallback=str)


def _cut_strings(value: Any, budget: int) -> Any:
    if isinstance(value, str) and len(value) > budget:
        return value[:budget] + f"... [{len(value) - budget} characters cut]"
    if isinstance(value, dict):
        return {key: _cut_strings(item, budget) for key, item in value.items()}
    if isinstance(value, list):
        return [_cut_strings(item, budget) for item in value]
    return value


def _cut_note(max_bytes: int) -> str:
    return f"[message cut at {max_bytes} bytes]"


def _line(text: str) -> str:
    """One line of at most `SUMMARY_CHARS`, cut after a whole word (a word longer
    than half the line, such as a path, is cut itself) and marked with "…"."""
    line = " ".join(str(text).split())
    if len(line) <= SUMMARY_CHARS:
        return line
    head = line[: SUMMARY_CHARS - 1]
    if line[SUMMARY_CHARS - 1] != " " and " " in head[SUMMARY_CHARS // 2 :]:
        head = head[: head.rindex(" ")]
    return head.rstrip(" ,;:") + "…"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
