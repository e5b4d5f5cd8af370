"""The real `@modelcontextprotocol/server-filesystem` from npm behind toolrun:
rules on its tools bind to their path arguments (a deny rule cannot fail open,
whatever its shape), its calls are confined to the batch's workspace whether
its server is trusted or not, and the batch's workspace is its MCP root.

Its own allowed directory is the tests' whole temporary tree, so what keeps a
batch in its workspace here is toolrun's gate, not the server."""

from __future__ import annotations

import json
import os

import pytest

from runtime.errors import ConfigurationError
from runtime.settings import Settings
from runtime.types import Status
from tests.support.filesystem_server import filesystem_server

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def fs_stack(tmp_path_factory, user_settings):
    from runtime.client import Runtime
    from runtime.stack.embedded import start_stack, stop_stack

    binary = filesystem_server()
    base = str(tmp_path_factory.getbasetemp())
    home = tmp_path_factory.mktemp("toolrun-fs-home")
    servers = tmp_path_factory.mktemp("fs-servers") / ".mcp.json"
    servers.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "fs": {"command": str(binary), "args": [base], "trusted": True, "timeout": 20},
                    "ufs": {"command": str(binary), "args": [base], "timeout": 20},
                }
            }
        )
    )
    settings = Settings(home=home, mcp_servers_file=servers, user_settings_file=user_settings)
    record = start_stack(settings, flower=False)
    try:
        update = {"redis_url": record.redis_url, "database_url": record.database_url}
        runtime = Runtime(settings.model_copy(update=update))
        yield runtime
        runtime.close()
    finally:
        stop_stack(home)


@pytest.fixture
def spaces(tmp_path):
    """Two workspaces side by side; ws1 holds a secret, ws2 a link into ws1."""
    ws1, ws2 = tmp_path / "ws1", tmp_path / "ws2"
    (ws1 / "secret").mkdir(parents=True)
    (ws1 / "a.txt").write_text("ws1 secret\n")
    (ws2 / "secret").mkdir(parents=True)
    (ws2 / "secret" / "x.txt").write_text("ws2 secret\n")
    (ws2 / "b.txt").write_text("two\n")
    (ws2 / ".env").write_text("TOKEN=1\n")
    (ws2 / "sub").mkdir()
    (ws2 / "sub" / ".env").write_text("TOKEN=2\n")
    os.symlink(ws1, ws2 / "out")
    os.symlink(ws2 / "secret", ws2 / "alias")
    return ws1, ws2


def call(call_id, tool, /, **arguments):
    return {"id": call_id, "name": tool, "arguments": arguments}


def run(rt, calls, ws, mode="auto", rules=None):
    return rt.submit(calls, mode=mode, workspace=ws, rules=rules).results(timeout=90)


def test_the_servers_tools_have_their_path_arguments(fs_stack):
    get = fs_stack.registry.get
    assert get("fs__read_text_file").paths == ("path",)
    assert get("fs__read_multiple_files").paths == ("paths",)
    assert get("fs__move_file").paths == ("source", "destination")
    assert get("fs__list_allowed_directories").paths == ()
    assert get("fs__read_text_file").execute.asks_roots  # it asked for roots when listed


@pytest.mark.parametrize("server", ["fs", "ufs"])
def test_a_batch_in_ws2_cannot_read_ws1_through_the_server(fs_stack, spaces, server):
    ws1, ws2 = spaces
    mode = "auto" if server == "fs" else "default"  # the untrusted server's tools always ask
    results = run(
        fs_stack,
        [
            call("abs", f"{server}__read_text_file", path=str(ws1 / "a.txt")),
            call("up", f"{server}__read_text_file", path="../ws1/a.txt"),
            call("link", f"{server}__read_text_file", path="out/a.txt"),
            call("uri", f"{server}__read_text_file", path=(ws1 / "a.txt").as_uri()),
            call("many", f"{server}__read_multiple_files", paths=["b.txt", str(ws1 / "a.txt")]),
            call("move", f"{server}__move_file", source="b.txt", destination=str(ws1 / "b.txt")),
            call("list", f"{server}__list_directory", path=str(ws1)),
        ],
        ws2,
        mode=mode,
    )
    assert [r.status for r in results] == [Status.denied] * 7, [r.model_message for r in results]
    assert all("outside the workspace" in r.model_message for r in results)
    assert not any("ws1 secret" in json.dumps(r.model_dump()) for r in results)
    assert (ws2 / "b.txt").exists() and not (ws1 / "b.txt").exists()


def test_a_batch_reads_its_own_workspace_through_the_server(fs_stack, spaces):
    _, ws2 = spaces
    [relative, absolute] = run(
        fs_stack,
        [
            call("rel", "fs__read_text_file", path="b.txt"),
            call("abs", "fs__read_text_file", path=str(ws2 / "b.txt")),
        ],
        ws2,
    )
    assert (relative.status, absolute.status) == (Status.ok, Status.ok), relative.model_message
    assert relative.model_message == absolute.model_message == "two\n"


# Every shape of rule, as a deny rule: each must refuse the calls it names,
# however the path is spelled (relative, absolute, through a link, in a list).
DENIALS = [
    ("fs__read_text_file", [call("1", "fs__read_text_file", path="b.txt")]),
    (
        "fs__read_text_file(.env)",
        [
            call("1", "fs__read_text_file", path=".env"),
            call("2", "fs__read_text_file", path="sub/.env"),
            call("3", "fs__read_text_file", path="WS/.env"),
        ],
    ),
    (
        "fs__read_text_file(secret/**)",
        [
            call("1", "fs__read_text_file", path="secret/x.txt"),
            call("2", "fs__read_text_file", path="alias/x.txt"),
            call("3", "fs__read_text_file", path="./secret/../secret/x.txt"),
        ],
    ),
    ("fs__read_text_file(secret/x.txt)", [call("1", "fs__read_text_file", path="alias/x.txt")]),
    (
        "fs__read_text_file(WS/secret/*.txt)",
        [
            call("1", "fs__read_text_file", path="secret/x.txt"),
            call("2", "fs__read_text_file", path="alias/x.txt"),
        ],
    ),
    (
        "fs__read_multiple_files(.env)",
        [
            call("1", "fs__read_multiple_files", paths=["b.txt", ".env"]),
        ],
    ),
    (
        "fs__*(.env)",
        [
            call("1", "fs__get_file_info", path=".env"),
            call("2", "fs__read_media_file", path="sub/.env"),
        ],
    ),
    (
        "fs__move_file(.env)",
        [
            call("1", "fs__move_file", source="b.txt", destination=".env"),
            call("2", "fs__move_file", source=".env", destination="c.txt"),
        ],
    ),
    ("*", [call("1", "fs__read_text_file", path="b.txt")]),
]


@pytest.mark.parametrize(("rule", "calls"), DENIALS, ids=[rule for rule, _ in DENIALS])
def test_a_deny_rule_on_an_mcp_tool_cannot_fail_open(fs_stack, spaces, rule, calls):
    _, ws2 = spaces
    rule = rule.replace("WS", str(ws2))
    for item in calls:  # "WS/" is the workspace's absolute path
        for key in ("path", "source", "destination"):
            if key in item["arguments"]:
                item["arguments"][key] = item["arguments"][key].replace("WS", str(ws2))
    mode = "bypass" if "move" in rule else "auto"  # a move is a side effect: let the mode allow it
    results = run(fs_stack, calls, ws2, mode=mode, rules={"deny": [rule]})
    assert [r.status for r in results] == [Status.denied] * len(calls), [
        r.model_message for r in results
    ]
    assert all(f"a deny rule forbids this call ({rule})" in r.model_message for r in results)
    assert (ws2 / ".env").read_text() == "TOKEN=1\n" and (ws2 / "b.txt").exists()


def test_an_allow_rule_on_an_mcp_tool_binds_to_its_path(fs_stack, spaces):
    _, ws2 = spaces
    results = run(
        fs_stack,
        [
            call("txt", "fs__write_file", path="notes.txt", content="hi"),
            call("md", "fs__write_file", path="notes.md", content="hi"),
        ],
        ws2,
        rules={"allow": ["fs__write_file(*.txt)"]},
    )
    assert [r.status for r in results] == [Status.ok, Status.denied], [
        r.model_message for r in results
    ]
    assert (ws2 / "notes.txt").read_text() == "hi" and not (ws2 / "notes.md").exists()


def test_a_specifier_on_a_tool_without_a_path_argument_is_refused_naming_the_rule(
    fs_stack, spaces, tmp_path
):
    from runtime.client import Runtime

    _, ws2 = spaces
    rule = "fs__list_allowed_directories(*.txt)"
    with pytest.raises(ConfigurationError, match=r"deny rule 'fs__list_allowed_directories\(\*"):
        fs_stack.submit(
            [call("1", "fs__list_allowed_directories")],
            mode="auto",
            workspace=ws2,
            rules={"deny": [rule]},
        )
    user = tmp_path / "user.json"
    user.write_text(json.dumps({"permissions": {"allow": [rule]}}))
    with pytest.raises(ConfigurationError, match=f"{user}: allow rule"):
        Runtime(fs_stack.settings.model_copy(update={"user_settings_file": user}))


def test_definitions_offer_only_the_tools_that_can_run(fs_stack, spaces):
    from anthropic.types import ToolParam

    from runtime import adapters
    from tests.adapters.test_anthropic import same_after_validation

    _, ws2 = spaces
    policy = fs_stack.policies.policy_for(ws2)
    offered = adapters.definitions(fs_stack.registry, "anthropic", mode="auto", policy=policy)
    names = {d["name"] for d in offered}
    assert {"fs__read_text_file", "fs__read_media_file", "read_file"} <= names
    assert not any(n.startswith("ufs__") for n in names)  # untrusted: asks, and auto cannot
    assert "fs__write_file" not in names and "write_file" not in names
    assert all(same_after_validation(ToolParam, d) for d in offered)
    planned = adapters.definitions(
        fs_stack.registry, "openai", mode="plan", workspace=ws2, settings=fs_stack.settings
    )
    assert "fs__read_text_file" in {d["function"]["name"] for d in planned}
    assert "fs__move_file" not in {d["function"]["name"] for d in planned}
    default = {d["name"] for d in adapters.definitions(fs_stack.registry, "mcp", mode="default")}
    assert "ufs__read_text_file" in default  # someone can answer its question there


def png(width: int = 2, height: int = 2) -> bytes:
    """A real (tiny) PNG."""
    import struct
    import zlib

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def test_images_become_content_blocks_whole_or_not_at_all(fs_stack, spaces):
    import base64

    from anthropic.types import MessageParam
    from openai.types.chat import ChatCompletionToolMessageParam
    from openai.types.responses.response_input_item_param import FunctionCallOutput

    from runtime import adapters
    from tests.adapters.test_anthropic import same_after_validation

    _, ws2 = spaces
    (ws2 / "pixel.png").write_bytes(png())
    (ws2 / "big.png").write_bytes(os.urandom(600 * 1024))  # past the 512 KiB media bound
    small, big = run(
        fs_stack,
        [
            call("small", "fs__read_media_file", path="pixel.png"),
            call("big", "fs__read_media_file", path="big.png"),
        ],
        ws2,
    )
    assert (small.status, big.status) == (Status.ok, Status.ok), small.model_message
    encoded = base64.b64encode(png()).decode()
    assert [(m.kind, m.mime_type, m.data) for m in small.media] == [("image", "image/png", encoded)]
    assert big.media == [] and "left out" in big.model_message
    for result in (small, big):  # described, never base64, never cut
        seen = json.dumps([result.content, result.model_message])
        assert "image/png" in seen and encoded[:40] not in seen and len(seen) < 2000
        assert "offset and limit" not in result.model_message

    anthropic_reply = adapters.reply("anthropic", [small, big])
    assert same_after_validation(MessageParam, anthropic_reply)
    first, second = anthropic_reply["content"]
    assert first["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": encoded},
    }
    assert isinstance(second["content"], str)
    [output, _] = adapters.reply("responses", [small, big])
    assert same_after_validation(FunctionCallOutput, output)
    assert output["output"][1] == {
        "type": "input_image",
        "image_url": f"data:image/png;base64,{encoded}",
        "detail": "auto",
    }
    [chat, _] = adapters.reply("openai", [small, big])
    assert same_after_validation(ChatCompletionToolMessageParam, chat)
    assert "image image/png" in chat["content"] and "not shown" in chat["content"]
    assert encoded[:40] not in chat["content"]
