"""A transcript as text: JSON, JSON Lines (a head, one line per call, an end:
a tool can stream it), Markdown and one HTML page; and a JSON or JSON Lines
transcript read back (docs/architecture.md, "Transcripts")."""

from __future__ import annotations

import json
from typing import Any

from runtime.errors import InvalidBatch
from runtime.transcript import markdown, page

FORMATS = ("json", "jsonl", "md", "html")
MEDIA_TYPES = {
    "json": "application/json",
    "jsonl": "application/jsonl",
    "md": "text/markdown; charset=utf-8",
    "html": "text/html; charset=utf-8",
}
HEAD = ("schema", "batch", "conversation", "plan")
END = ("reply", "totals", "integrity")


def render(document: dict[str, Any], format: str) -> str:
    if format == "json":
        return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    if format == "jsonl":
        return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in _lines(document))
    if format == "md":
        return markdown.render(document)
    if format == "html":
        return page.render(document)
    raise InvalidBatch(f"unknown transcript format {format!r}; use one of {', '.join(FORMATS)}")


def _lines(document: dict[str, Any]) -> list[dict[str, Any]]:
    head = {"record": "head"} | {name: document.get(name) for name in HEAD}
    calls = [{"record": "call"} | call for call in document["calls"]]
    end = {"record": "end"} | {name: document[name] for name in END if name in document}
    return [head, *calls, end]


def parse(text: str) -> dict[str, Any]:
    """A transcript written as JSON or JSON Lines, as one document."""
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict) and whole.get("record") is None:
        return whole
    try:
        lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError as error:
        raise InvalidBatch(
            f"not a JSON or JSON Lines transcript: {error.msg} (line {error.lineno})"
        ) from None
    if not lines or not all(isinstance(line, dict) for line in lines):
        raise InvalidBatch("not a JSON or JSON Lines transcript")
    records = [line.get("record") for line in lines]
    if records[0] != "head" or records[-1] != "end" or set(records[1:-1]) - {"call"}:
        raise InvalidBatch("a JSON Lines transcript is a head line, one line per call, an end line")
    strip = lambda line: {k: v for k, v in line.items() if k != "record"}  # noqa: E731
    return strip(lines[0]) | {"calls": [strip(line) for line in lines[1:-1]]} | strip(lines[-1])
