"""An MCP server's answer as a tool's output (runtime/mcp/output.py)."""

from __future__ import annotations

import base64
import json

import mcp.types

from runtime import adapters
from runtime.mcp.output import output


def test_pdfs_become_document_blocks_and_other_binaries_are_described():
    from anthropic.types import MessageParam
    from openai.types.responses.response_input_item_param import FunctionCallOutput

    from runtime.results import formatter as results
    from tests.adapters.test_anthropic import same_after_validation

    pdf = base64.b64encode(b"%PDF-1.4\n%%EOF\n").decode()
    blob = base64.b64encode(b"\x00\x01 not a picture").decode()
    answer = mcp.types.CallToolResult.model_validate(
        {
            "content": [
                {
                    "type": "resource",
                    "resource": {
                        "uri": "file:///ws/a.pdf",
                        "mimeType": "application/pdf",
                        "blob": pdf,
                    },
                },
                {
                    "type": "resource",
                    "resource": {
                        "uri": "file:///ws/a.bin",
                        "blob": blob,
                        "mimeType": "application/octet-stream",
                    },
                },
                {"type": "audio", "data": blob, "mimeType": "audio/wav"},
            ]
        }
    )
    done = output(answer)
    assert [(m.kind, m.name) for m in done.media] == [("document", "a.pdf")]
    assert pdf not in json.dumps(done.content) and blob not in json.dumps(done.content)
    assert "[file file:///ws/a.bin: application/octet-stream, " in done.message
    assert "[audio: audio/wav, " in done.message
    result = results.success("c1", "fs__read", done, max_bytes=4096)
    reply = adapters.reply("anthropic", [result])
    assert same_after_validation(MessageParam, reply)
    assert reply["content"][0]["content"][1]["type"] == "document"
    [item] = adapters.reply("responses", [result])
    assert same_after_validation(FunctionCallOutput, item)
    assert item["output"][1]["type"] == "input_file" and item["output"][1]["filename"] == "a.pdf"
    assert results.success("c1", "fs__read", done, max_bytes=4096, max_media_bytes=4).media == []
