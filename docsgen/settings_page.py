"""docs/reference/settings.md: one row per field of `Settings`, its variable,
type, default and description, read from the model itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from runtime.settings import PREFIX, Settings

INTRO = """\
# Settings

One typed object, `runtime.settings.Settings`, read once from `TOOLRUN_*`
environment variables. Every setting has a default, so an empty environment is
a working one (the embedded stack). An unknown `TOOLRUN_*` variable is a
startup error, so a misspelt setting is never silently ignored
(`TOOLRUN_TEST_*` is left to the test suite).

This page is generated from the fields of `runtime/settings.py` when the site
is built: the description is the field's own.

"""


def variable(name: str) -> str:
    return f"{PREFIX}{name.upper()}"


def default(field: FieldInfo) -> str:
    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    if "shown_default" in extra:  # a default that depends on the machine (the user's home)
        return f"`{extra['shown_default']}`"
    if field.default_factory is not None:
        value: Any = field.default_factory()  # type: ignore[call-arg]
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if value is None:
        return "none"
    if isinstance(value, Path):
        return f"`{value}`"
    if value == "":
        return "empty"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{value}`"


def kind(field: FieldInfo) -> str:
    text = str(field.annotation).replace("typing.", "").replace("pydantic.types.", "")
    text = text.replace("<class '", "").replace("'>", "").replace("pathlib.", "")
    return text.replace("|", "or")


def cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def page() -> str:
    rows = ["| variable | type | default | what |", "|---|---|---|---|"]
    for name, field in Settings.model_fields.items():
        what = cell(field.description or "")
        rows.append(f"| `{variable(name)}` | {cell(kind(field))} | {default(field)} | {what} |")
    return INTRO + "\n".join(rows) + "\n"
