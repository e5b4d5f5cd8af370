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
    (OpenAI sends arguments that way); anything else must be an object."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return Invalid("arguments must be a JSON object; got a string that is not JSON", [])
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return Invalid(f"arguments must be a JSON object; got {_json_type(arguments)}", [])
    try:
        return model.model_validate(arguments, strict=False)
    except ValidationError as error:
        return _explain(model, error)


def _explain(model: type[BaseModel], error: ValidationError) -> Invalid:
    parts, fields = [], []
    for item in error.errors(include_url=False):
        field = ".".join(str(part) for part in item["loc"]) or "arguments"
        fields.append(field)
        expected = _EXPECTED.get(item["type"], item["msg"].lower())
        got = "" if item["type"] in ("missing",) else f" (got {_json_type(item.get('input'))})"
        if item["type"] == "extra_forbidden":
            got = ""
        parts.append(f"{field}: {expected}{got}")
    message = "; ".join(parts)
    known = ", ".join(_field_list(model))
    if known:
        message += f". Expected fields: {known}"
    if len(message) > MAX_MESSAGE:
        message = message[: MAX_MESSAGE - 3] + "..."
    return Invalid(message, fields)


def _field_list(model: type[BaseModel]) -> list[str]:
    out = []
    for name, info in model.model_fields.items():
        kind = _annotation_name(info.annotation)
        out.append(f"{name} ({kind}{'' if info.is_required() else ', optional'})")
    return out


def _annotation_name(annotation: Any) -> str:
    names = {str: "string", int: "integer", float: "number", bool: "boolean", list: "list"}
    if annotation in names:
        return names[annotation]
    text = getattr(annotation, "__name__", None) or str(annotation)
    return text.replace("typing.", "")


def _json_type(value: Any) -> str:
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
