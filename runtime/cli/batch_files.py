"""The files `toolrun run` reads: a batch (a list of calls, or an object with
`calls`, `mode`, `on_error`, `rules`) or a provider message, each refused with
one line that says what is wrong with it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from runtime.cli.common import check_mode, fail, validation_text
from runtime.registry.argument_limits import MAX_DEPTH
from runtime.types import ToolCall

MAX_FILE_BYTES = 64 << 20  # a batch file's size: calls of bounded arguments, and room


def load_json(file: Path, kind: str) -> Any:
    """The JSON in `file`, or a one-line failure naming the `kind` of file it should be."""
    try:
        size = file.stat().st_size
        if size > MAX_FILE_BYTES:
            fail(
                f"{file} is {size / 2**20:.0f} MiB; a {kind} file may be at most "
                f"{MAX_FILE_BYTES >> 20} MiB (each call's arguments at most "
                "TOOLRUN_MAX_ARGUMENT_BYTES)"
            )
        return json.loads(file.read_text())
    except FileNotFoundError:
        fail(f"no such {kind} file: {file}")
    except (OSError, UnicodeDecodeError) as error:
        fail(f"cannot read {file}: {error}")
    except json.JSONDecodeError as error:
        fail(f"{file} is not valid JSON: {error.msg} at line {error.lineno} column {error.colno}")
    except RecursionError:
        fail(f"{file} is nested too deep to read; arguments may nest {MAX_DEPTH} levels")


def read_batch(file: Path) -> dict[str, Any]:
    data = load_json(file, "batch")
    if isinstance(data, list):
        data = {"calls": data}
    if not isinstance(data, dict) or not isinstance(data.get("calls"), list):
        fail(f"{file} must hold a list of calls or an object with a 'calls' list")
    for index, call in enumerate(data["calls"]):
        try:
            ToolCall.model_validate(call)
        except ValidationError as error:
            fail(f"{file}: call {index} is not a tool call: {validation_text(error)}")
    if data.get("on_error") not in (None, "stop", "continue"):
        fail(f"{file}: on_error must be 'stop' or 'continue', not {data['on_error']!r}")
    if "mode" in data:
        data["mode"] = check_mode(data["mode"])
    rules = data.get("rules")
    if rules is not None and not (
        isinstance(rules, dict) and all(isinstance(v, list) for v in rules.values())
    ):
        fail(f'{file}: rules must be an object of lists: {{"allow": [...], "deny": [...]}}')
    return data


def rules_with(given: Any, allow: list[str] | None, deny: list[str] | None) -> dict | None:
    rules = dict(given or {})
    rules["allow"] = [*rules.get("allow", []), *(allow or [])]
    rules["deny"] = [*rules.get("deny", []), *(deny or [])]
    return rules


def read_message(file: Path, dialect: str) -> dict[str, Any]:
    """A provider message, or a toolrun batch, → a batch of its tool calls."""
    from runtime import adapters
    from runtime.errors import InvalidBatch

    data = load_json(file, "message")
    calls = data if isinstance(data, list) else None
    if (isinstance(data, dict) and "calls" in data) or (
        calls and all(isinstance(c, dict) and "type" not in c for c in calls)
    ):
        return read_batch(file)
    try:
        turn = adapters.parse(data, dialect)
    except InvalidBatch as error:
        fail(f"{file}: {error}")
    if not turn.calls:
        fail(f"{file} holds no tool calls")
    return {"calls": [call.model_dump() for call in turn.calls]}


def dialects() -> tuple[str, ...]:
    from runtime import adapters

    return adapters.FORMATS
