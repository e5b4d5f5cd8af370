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
    """A transcript written as JSON or JSON Lines, as one document. A key given
    twice in one object, or in two lines that make one document, is refused:
    a reader keeps one of them and a person may read the other, so a forged
    `calls` before the sealed one would pass `verify` (docs/architecture.md,
    "Transcripts")."""
    try:
        whole = json.loads(text, object_pairs_hook=_unique)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict) and whole.get("record") is None:
        return whole
    try:
        lines = [
            json.loads(line, object_pairs_hook=_unique)
            for line in text.splitlines()
            if line.strip()
        ]
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
    parts = [strip(lines[0]).items(), [("calls", [strip(line) for line in lines[1:-1]])]]
    return _unique([*parts[0], *parts[1], *strip(lines[-1]).items()])


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object's pairs as a dict; a key given twice is an InvalidBatch."""
    found = dict(pairs)
    if len(found) < len(pairs):
        seen: set[str] = set()
        twice = next(key for key, _ in pairs if key in seen or seen.add(key))
        raise InvalidBatch(f"not a transcript: the key {twice!r} is given twice in one object")
    return found
