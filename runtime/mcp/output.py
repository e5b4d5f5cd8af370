"""An MCP server's answer to a call (a `CallToolResult`) as a tool's output:
what the model reads, every binary payload carried as media or only described."""

from __future__ import annotations

import json
from typing import Any

from runtime.errors import ToolError
from runtime.registry.capabilities import ToolOutput
from runtime.results import media


def output(result: Any) -> ToolOutput:
    """A `CallToolResult` as a tool output: `isError` raises (so the result is an
    `error`), structured content is the content, text blocks are the message.
    Images and PDFs become the output's media (content blocks in replies); in
    the content and the message every binary payload is only described."""
    data = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    raw = data.get("content") or []
    carried = [found for found in (media.from_block(b) for b in raw) if found is not None]
    blocks = [_described(block) for block in raw]
    texts = [block["text"] for block in blocks if block.get("type") == "text"]
    message = "\n".join(texts)
    structured = _scrubbed(data.get("structuredContent"))
    if data.get("isError"):
        raise ToolError(message or "the MCP tool reported an error", kind="mcp_tool_error")
    if not message and structured is not None:
        message = json.dumps(structured, ensure_ascii=False)
    content = structured if structured is not None else blocks
    summary = " ".join(message.split()) or "(no output)"
    return ToolOutput(
        content=content, message=message or "(no output)", summary=summary, media=carried
    )


def _scrubbed(value: Any) -> Any:
    """Structured content with every content-block-shaped binary described (a
    server may repeat its blocks there, base64 and all)."""
    if isinstance(value, list):
        return [_scrubbed(item) for item in value]
    if not isinstance(value, dict):
        return value
    if value.get("type") in ("image", "audio", "resource") and (
        "data" in value or "blob" in (value.get("resource") or {})
    ):
        return _described(value)
    return {key: _scrubbed(item) for key, item in value.items()}


def _described(block: dict[str, Any]) -> dict[str, Any]:
    """A content block with any binary payload replaced by a description: the
    model reads text, and the payload travels as media or not at all."""
    kind = block.get("type")
    if kind in ("image", "audio"):
        size = len(block.get("data") or "") * 3 // 4
        return {"type": "text", "text": media.described(kind, block.get("mimeType"), size)}
    if kind == "resource":
        resource = block.get("resource") or {}
        if "text" in resource:
            return {"type": "text", "text": resource["text"]}
        size = len(resource.get("blob") or "") * 3 // 4
        text = media.described("file", resource.get("mimeType"), size, resource.get("uri"))
        return {"type": "text", "text": text}
    if kind == "resource_link":
        return {"type": "text", "text": f"[resource {block.get('uri', '?')}]"}
    return block
