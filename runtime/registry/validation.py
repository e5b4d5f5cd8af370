"""Raw model arguments → a typed input, or one short message naming every bad field.

The message is model feedback, not a traceback: "path: must be a string (got
null)". It stays short enough to send back to the model as it is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

MAX_MESSAGE = 600

_EXPECTED = {
    "string_type": "must be a string",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "list_type": "must be a list",
    "dict_type": "must be an object",
    "model_type": "must be an object",
    "missing": "is required",
    "extra_forbidden": "is not a known field",
}


@dataclass(frozen=True)
class Invalid:
    """Why arguments were refused: one message for the model, one entry per field."""

    message: str
    fields: list[str]


def validate(model: type[BaseModel], arguments: Any) -> BaseModel | Invalid:
    """Typed input, or `Invalid`. A JSON string holding an object is accepted
    (OpenAI sends arguments that way), and an empty string or null is an empty
    object; anything else must be an object."""
    if isinstance(arguments, str) and not arguments.strip():
        arguments = None  # providers send "" for a tool without parameters
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return Invalid("arguments must be a JSON object; got a string that is not JSON", [])
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return Invalid(f"arguments must be a JSON object; got {json_type(arguments)}", [])
    try:
        return model.model_validate(arguments, strict=False)
    except ValidationError as error:
        return _explain(model, error)


def _explain(model: type[BaseModel], error: ValidationError) -> Invalid:
    parts, fields = [], []
    for item in error.errors(include_url=False):
        loc, context = list(item["loc"]), item.get("ctx") or {}
        if item["type"] == "json_schema":  # a JSON Schema check points inside the field
            loc += context.get("where", [])
            expected, got = context["text"], context.get("got")
        else:
            expected = _EXPECTED.get(item["type"], _first_lower(item["msg"]))
            silent = item["type"] in ("missing", "extra_forbidden")
            got = None if silent else json_type(item.get("input"))
        field = path_text(loc)
        fields.append(field)
        parts.append(f"{field}: {expected}" + (f" (got {got})" if got else ""))
    message = "; ".join(parts)
    known = ", ".join(_field_list(model))
    if known:
        message += f". Expected fields: {known}"
    if len(message) > MAX_MESSAGE:
        message = message[: MAX_MESSAGE - 3] + "..."
    return Invalid(message, fields)


def path_text(loc: list[Any] | tuple[Any, ...]) -> str:
    """Where in the arguments, as the model wrote the names: `edits[0].newText`."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "arguments"


def _first_lower(message: str) -> str:
    """Pydantic's message as a predicate after "field: " (its first letter only
    lowered: names it quotes keep their spelling)."""
    return message[:1].lower() + message[1:]


def _field_list(model: type[BaseModel]) -> list[str]:
    out = []
    for name, info in model.model_fields.items():
        kind = _annotation_name(info.annotation)
        out.append(f"{info.alias or name} ({kind}{'' if info.is_required() else ', optional'})")
    return out


def _annotation_name(annotation: Any) -> str:
    names = {str: "string", int: "integer", float: "number", bool: "boolean", list: "list"}
    if annotation in names:
        return names[annotation]
    text = getattr(annotation, "__name__", None) or str(annotation)
    return text.replace("typing.", "")


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
