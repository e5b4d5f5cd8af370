"""What a call's raw arguments may hold before anything serializes them.

A model's arguments travel as JSON through Redis, the ledger and Flower. A
value JSON cannot carry faithfully (a lone surrogate, NaN or Infinity),
nesting deeper than any tool needs, or a size past the bound each failed
whole batches at the first serializer that met them. Admission checks them
first, so such a call ends `invalid_arguments` alone, with a message the
model can act on, and is never sent or stored as it came.

The walk is iterative (no recursion to exhaust) and stops at the first fault.
"""

from __future__ import annotations

import json
import math
from typing import Any

MAX_DEPTH = 64  # objects and lists inside each other; no tool's input comes near
DEFAULT_MAX_BYTES = 1024 * 1024  # TOOLRUN_MAX_ARGUMENT_BYTES's default


def fault(arguments: Any, *, max_bytes: int = DEFAULT_MAX_BYTES) -> str | None:
    """Why `arguments` cannot be carried, for the model; None if they can.
    A JSON string (OpenAI's arguments) is checked as what it holds."""
    if isinstance(arguments, str):
        size = _text_bytes(arguments)
        if size is None:
            return _SURROGATE
        if size > max_bytes:
            return _too_big(size, max_bytes)
        try:
            arguments = json.loads(arguments, parse_constant=_constant)
        except _Constant as constant:
            return _not_a_number(str(constant))
        except RecursionError:
            return _too_deep()
        except ValueError:
            return None  # not JSON: validation says so
    return _walk(arguments, max_bytes)


def _walk(arguments: Any, max_bytes: int) -> str | None:
    size, pending = 0, [(arguments, 1)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, dict | list | tuple):
            if depth > MAX_DEPTH:
                return _too_deep()
            size += 2
            items = value.items() if isinstance(value, dict) else ((None, v) for v in value)
            for key, item in items:
                if isinstance(key, str):
                    pending.append((key, depth))
                pending.append((item, depth + 1))
                size += 1
            continue
        if isinstance(value, str):
            length = _text_bytes(value)
            if length is None:
                return _SURROGATE
            size += length + 2
        elif isinstance(value, float):
            if not math.isfinite(value):
                return _not_a_number(repr(value))
            size += 24
        else:
            size += 8
        if size > max_bytes:
            return _too_big(size, max_bytes, at_least=True)
    return None


def _text_bytes(text: str) -> int | None:
    """UTF-8 length, or None for a string with a lone surrogate (no UTF-8 exists)."""
    if text.isascii():
        return len(text)
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError:
        return None


class _Constant(ValueError):
    pass


def _constant(name: str) -> float:
    raise _Constant(name)


_SURROGATE = (
    "arguments hold a string with a lone surrogate (an unpaired \\ud800-\\udfff escape), "
    "which is not valid Unicode; send the text itself, or escape both halves of the pair"
)


def _not_a_number(name: str) -> str:
    return (
        f"arguments hold {name}, which JSON cannot carry; send a finite number "
        "(or a string) instead"
    )


def _too_deep() -> str:
    return (
        f"arguments are nested more than {MAX_DEPTH} objects or lists deep; "
        "send a flatter structure"
    )


def _too_big(size: int, max_bytes: int, *, at_least: bool = False) -> str:
    about = "over " if at_least else ""
    return (
        f"arguments are {about}{size:,} bytes as JSON, past the bound of {max_bytes:,}; "
        "send less (a path to a file instead of its content, or several smaller "
        "calls)"
    )
