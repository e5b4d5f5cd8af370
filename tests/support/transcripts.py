"""Every transcript a test makes is checked against the schema in the repository."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema

SCHEMA_FILE = Path(__file__).resolve().parents[2] / "docs" / "schemas" / "transcript-1.json"
_validator = jsonschema.Draft202012Validator(
    json.loads(SCHEMA_FILE.read_text()), format_checker=jsonschema.FormatChecker()
)


def valid(document: dict[str, Any]) -> dict[str, Any]:
    """`document`, after checking it against docs/schemas/transcript-1.json."""
    errors = sorted(_validator.iter_errors(document), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:10])
    return document
