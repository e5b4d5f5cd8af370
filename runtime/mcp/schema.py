"""An MCP tool's JSON Schema → a pydantic input model, so that its arguments are
checked before anything reaches a worker, with the same model-readable
messages as every other tool ("count: must be an integer (got a string)").

Each top-level property becomes a field typed from its JSON type; the
property's whole subschema (enum, bounds, patterns, nested objects, `$ref`s)
is then checked with `jsonschema`, and the root schema once more at the end.
Unknown fields are refused unless the schema allows them
(`additionalProperties`). The model reports the server's own schema as its
JSON Schema, so tool definitions show what the server published.
"""

from __future__ import annotations

import copy
from typing import Annotated, Any, ClassVar

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, create_model, model_validator
from pydantic_core import PydanticCustomError

from runtime.registry.validation import json_type

_TYPES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list,
    "object": dict[str, Any],
}
_DEFINITIONS = ("$defs", "definitions")
_KINDS = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "array": "a list",
    "object": "an object",
    "null": "null",
}


class RemoteInput(BaseModel):
    """Base of the input models built from a server's schema."""

    model_config = ConfigDict(extra="forbid")
    server_schema: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return copy.deepcopy(cls.server_schema)

    @model_validator(mode="after")
    def _whole_schema(self) -> RemoteInput:
        _check(Draft202012Validator(type(self).server_schema), arguments_of(self))
        return self


class OpenRemoteInput(RemoteInput):
    """For a schema that allows properties it does not name."""

    model_config = ConfigDict(extra="allow")


def arguments_of(model: BaseModel) -> dict[str, Any]:
    """What is sent to the server: the fields the model gave, by their JSON names."""
    return model.model_dump(mode="json", by_alias=True, exclude_unset=True)


def input_model(name: str, schema: Any) -> type[RemoteInput]:
    """A model for arguments that `schema` (an object schema) accepts."""
    if not isinstance(schema, dict):
        schema = {"type": "object", "properties": {}}
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    required = set(schema.get("required") or [])
    definitions = {key: schema[key] for key in _DEFINITIONS if key in schema}
    fields: dict[str, Any] = {}
    for index, (prop, subschema) in enumerate(properties.items()):
        subschema = subschema if isinstance(subschema, dict) else {}
        check = AfterValidator(_field_check({**subschema, **definitions}))
        annotation = Annotated[_annotation(subschema), check]
        default = ... if prop in required else subschema.get("default")
        fields[_field_name(prop, index)] = (annotation, Field(default, alias=prop))
    base = RemoteInput if schema.get("additionalProperties") in (None, False) else OpenRemoteInput
    model = create_model(name, __base__=base, **fields)
    model.server_schema = copy.deepcopy(schema)
    return model


def _annotation(subschema: dict[str, Any]) -> Any:
    kind = subschema.get("type")
    return _TYPES.get(kind, Any) if isinstance(kind, str) else Any


def _field_name(prop: str, index: int) -> str:
    """The property's own name, unless pydantic reserves it (private, `model_`,
    an attribute of the base); then an alias carries the JSON name."""
    reserved = prop.startswith(("_", "model_")) or hasattr(RemoteInput, prop) or not prop
    return f"field_{index}" if reserved else prop


def _field_check(subschema: dict[str, Any]):
    validator = Draft202012Validator(subschema)

    def check(value: Any) -> Any:
        _check(validator, value)
        return value

    return check


def _check(validator: Draft202012Validator, value: Any) -> None:
    """Raise the best JSON Schema error as one pydantic error whose context says
    where inside the value it is (`[0, "newText"]`), in the schema's own
    spelling, so the message can point at the failing item."""
    error = best_match(validator.iter_errors(value))
    if error is None:
        return
    where, text, got = list(error.absolute_path), error.message, None
    if error.validator == "required":
        missing = [name for name in error.validator_value if name not in error.instance]
        where, text, got = where + missing[:1], "is required", None
    elif error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = (error.schema or {}).get("properties") or {}
        extra = [name for name in error.instance if name not in allowed]
        where, text, got = where + extra[:1], "is not a known field", None
    elif error.validator == "type":
        kind = str(error.validator_value)
        text, got = f"must be {_KINDS.get(kind, f'of type {kind}')}", json_type(error.instance)
    context = {"text": text, "where": where, "got": got}
    raise PydanticCustomError("json_schema", "{text}", context)
