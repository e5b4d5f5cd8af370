"""MCP: tool definitions out, servers' tools in. The server tests talk to a real
MCP server (tests/support/mcp_server.py, built with the `mcp` server API) over
stdio and streamable HTTP, calling the registered tools the way the executor
does, without Celery."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import mcp.types
import pytest

from runtime import adapters
from runtime.adapters.mcp import annotations_for
from runtime.errors import ConfigurationError, ToolError
from runtime.mcp.config import ServerConfig, load_servers
from runtime.mcp.schema import arguments_of, input_model
from runtime.mcp.servers import register_servers, risk_of, specs_for, tool_name
from runtime.mcp.session import ServerTimeout, list_tools
from runtime.registry.capabilities import Registry, ToolContext
from runtime.registry.validation import Invalid, validate
from runtime.tools.loading import load_tools
from runtime.types import Risk, Status

SERVER = Path(__file__).resolve().parents[1] / "support" / "mcp_server.py"
COMMAND = [sys.executable, str(SERVER)]


def servers_file(folder: Path, servers: dict) -> Path:
    path = folder / "servers.json"
    path.write_text(json.dumps({"servers": servers}))
    return path


def run(registry: Registry, name: str, arguments: dict, workspace: Path):
    """What the executor does with an admitted call: validate, then execute."""
    spec = registry.get(name)
    checked = validate(spec.input_model, arguments)
    assert not isinstance(checked, Invalid), checked
    context = ToolContext(workspace=workspace, batch_id="b", call_id="c")
    return spec.execute(checked, context)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A trusted and an untrusted stdio server, plus one that refuses to start
    once its flag file exists, registered into a registry of their own."""
    folder = tmp_path_factory.mktemp("mcp")
    flag = folder / "refuse"
    path = servers_file(
        folder,
        {
            "notes": {"command": COMMAND, "trusted": True, "timeout": 3},
            "stranger": {"command": COMMAND},
            "flaky": {
                "command": COMMAND,
                "trusted": True,
                "env": {"NOTES_REFUSE_IF": str(flag)},
                # the sandbox shows the server the flag's folder
                "read_only": [str(flag.parent)],
            },
        },
    )
    registry = Registry()
    register_servers(path, into=registry)
    flag.touch()
    return registry


@pytest.mark.parametrize(
    ("annotations", "trusted", "expected"),
    [
        ({"readOnlyHint": True}, True, (Risk.read, True)),
        ({"readOnlyHint": True}, False, (Risk.unknown, False)),
        (
            {"readOnlyHint": False, "destructiveHint": False, "openWorldHint": False},
            True,
            (Risk.write, False),
        ),
        (
            {
                "readOnlyHint": False,
                "destructiveHint": False,
                "idempotentHint": True,
                "openWorldHint": False,
            },
            True,
            (Risk.write, True),
        ),
        ({"destructiveHint": False}, True, (Risk.external, False)),
        ({"readOnlyHint": False}, True, (Risk.destructive, False)),
        ({"destructiveHint": True, "openWorldHint": False}, False, (Risk.unknown, False)),
        ({"title": "Says nothing"}, True, (Risk.unknown, False)),
        (None, True, (Risk.unknown, False)),
    ],
)
def test_annotations_are_believed_only_from_a_trusted_server(annotations, trusted, expected):
    assert risk_of(annotations, trusted=trusted) == expected


@pytest.mark.parametrize("risk", list(Risk))
def test_a_risk_said_as_hints_reads_back_as_the_same_risk(risk):
    idempotent = risk is Risk.read
    if risk is Risk.unknown:
        assert risk_of(annotations_for(risk, False), trusted=True)[0] is Risk.destructive
    else:
        assert risk_of(annotations_for(risk, idempotent), trusted=True) == (risk, idempotent)


def test_registry_tools_as_mcp_definitions_are_valid_mcp_tools():
    registry = load_tools(["tests.support.tools"], mcp_servers_file=None)
    definitions = adapters.definitions(registry, "mcp")
    for definition in definitions:
        parsed = mcp.types.Tool.model_validate(definition)
        assert parsed.model_dump(mode="json", by_alias=True, exclude_none=True) == definition
    hints = {d["name"]: d["annotations"] for d in definitions}
    assert hints["read_file"]["readOnlyHint"] is True
    assert hints["write_file"]["readOnlyHint"] is False
    assert hints["delete_cache"]["destructiveHint"] is True


def test_remote_names_are_prefixed_and_made_to_fit():
    assert tool_name("notes", "read_note") == "notes__read_note"
    odd = tool_name("notes", "files/read.v2")
    assert odd.startswith("notes__files_read_v2_") and len(odd) <= 64
    long = tool_name("notes", "x" * 80)
    assert len(long) == 64 and long != tool_name("notes", "x" * 81)


def test_the_servers_file_is_checked_and_reads_claude_mcp_json(tmp_path, caplog):
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"a": {"command": "python", "args": ["s.py"]}}}))
    assert load_servers(path)["a"].argv == ["python", "s.py"]
    for bad, fragment in [
        ({"servers": {"a": {"command": ["x"], "url": "http://h"}}}, "exactly one of"),
        ({"servers": {"a b": {"command": ["x"]}}}, "server name 'a b'"),
    ]:
        path.write_text(json.dumps(bad))
        caplog.clear()
        assert load_servers(path) == {}  # that server is left out, and says why
        assert fragment in caplog.text and "left out" in caplog.text
    for bad in ("[1]", "not json"):
        path.write_text(bad)
        with pytest.raises(ConfigurationError, match=str(path)):
            load_servers(path)
    with pytest.raises(ConfigurationError, match="does not exist"):
        load_servers(tmp_path / "missing.json")


def test_claude_mcp_json_is_read_as_claude_reads_it(tmp_path, caplog):
    """Variables expand, an unsupported transport leaves out only its server,
    and keys other clients write are warnings."""
    path = tmp_path / ".mcp.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "fs": {
                        "command": "npx",
                        "args": ["-y", "server", "${HOME}/src", "${WHERE:-/srv}"],
                        "env": {"TOKEN": "${TOKEN}"},
                        "disabled": False,
                        "autoApprove": ["read"],
                    },
                    "events": {"type": "sse", "url": "https://example.com/sse"},
                    "web": {
                        "type": "http",
                        "url": "${BASE:-https://mcp.example.com}/mcp",
                        "headers": {"Authorization": "Bearer ${TOKEN}"},
                    },
                    "lost": {"command": "x", "args": ["${NOT_SET_ANYWHERE}"]},
                    "fine": {"command": "python", "trust": True},
                }
            }
        )
    )
    servers = load_servers(path, {"HOME": "/home/u", "TOKEN": "t0k"})
    assert sorted(servers) == ["fine", "fs", "web"]
    assert servers["fs"].argv == ["npx", "-y", "server", "/home/u/src", "/srv"]
    assert servers["fs"].env == {"TOKEN": "t0k"}
    assert servers["web"].url == "https://mcp.example.com/mcp"
    assert servers["web"].headers == {"Authorization": "Bearer t0k"}
    assert servers["fine"].trusted is False  # a misspelt key grants nothing
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any("'events'" in m and "transport 'sse' is not supported" in m for m in errors)
    assert any("'lost'" in m and "NOT_SET_ANYWHERE is not set" in m for m in errors)
    assert any("'fs'" in m and "autoApprove" in m and "disabled" in m for m in warnings)
    assert any("'fine'" in m and "trust" in m for m in warnings)
    assert load_servers(path, {"TOKEN": "t", "HOME": "/h"})["fs"].argv[3] == "/h/src"


def test_input_models_check_the_servers_schema_with_model_readable_messages():
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1},
            "limit": {"type": "integer", "maximum": 50, "default": 10},
            "tags": {"type": "array", "items": {"$ref": "#/$defs/Tag"}},
        },
        "required": ["name"],
        "$defs": {"Tag": {"type": "string", "enum": ["a", "b"]}},
    }
    model = input_model("notes__find", schema)
    assert model.model_json_schema() == schema
    assert arguments_of(validate(model, '{"name": "x", "limit": "7"}')) == {"name": "x", "limit": 7}
    cases = {
        '{"limit": 99}': "name: is required; limit: 99 is greater than the maximum of 50",
        '{"name": "x", "tags": ["c"]}': "tags[0]: 'c' is not one of ['a', 'b']",
        '{"name": "x", "extra": 1}': "extra: is not a known field",
        '{"name": null}': "name: must be a string (got null)",
    }
    for raw, fragment in cases.items():
        outcome = validate(model, raw)
        assert isinstance(outcome, Invalid) and fragment in outcome.message, outcome
        assert "Expected fields: name (string)" in outcome.message


def test_a_servers_tools_are_registered_with_risk_from_trusted_annotations(served):
    assert {name for name in served.names() if name.startswith("notes__")} == {
        "notes__read_note",
        "notes__append_note",
        "notes__check_name",
        "notes__crash",
        "notes__slow",
        "notes__hold",
        "notes__peek",
    }
    assert served.get("notes__read_note").risk is Risk.read
    assert served.get("notes__append_note").risk is Risk.write
    assert not served.get("notes__append_note").idempotent
    assert {served.get(n).risk for n in served.names() if n.startswith("stranger__")} == {
        Risk.unknown
    }
    schema = served.get("notes__append_note").input_model.model_json_schema()
    assert schema["required"] == ["name", "text"]


def test_calls_run_in_the_workspace_and_keep_structured_content(served, tmp_path):
    appended = run(served, "notes__append_note", {"name": "todo", "text": "milk"}, tmp_path)
    assert appended.content == {"name": "todo", "text": "milk\n", "lines": 1}
    read = run(served, "notes__read_note", {"name": "todo"}, tmp_path)
    assert read.content["text"] == "milk\n" and '"lines": 1' in read.message
    assert (tmp_path / "notes" / "todo.txt").read_text() == "milk\n"
    assert run(served, "notes__check_name", {"name": "ok"}, tmp_path).message == "ok is a good name"


def test_every_way_a_server_fails_is_a_tool_error_with_a_clear_message(served, tmp_path):
    with pytest.raises(ToolError, match="note names are lowercase; try 'shout'") as reported:
        run(served, "notes__check_name", {"name": "SHOUT"}, tmp_path)
    assert reported.value.kind == "mcp_tool_error"
    with pytest.raises(ToolError, match="closed the connection during the call") as died:
        run(served, "notes__crash", {}, tmp_path)
    assert died.value.kind == "mcp_server_died"
    started = time.monotonic()
    with pytest.raises(ServerTimeout, match="did not answer within 3 s") as slow:
        run(served, "notes__slow", {"seconds": 120}, tmp_path)
    assert slow.value.status is Status.timeout
    # Stopped at its timeout, not answered when its sleep ended; a bound of 3 s plus
    # STOP_GRACE failed at 11.0 s on a busy machine, so the bound is the sleep itself.
    assert time.monotonic() - started < 120
    with pytest.raises(ToolError, match="exited before it answered.*refusing to start"):
        run(served, "flaky__read_note", {"name": "x"}, tmp_path)


def test_a_server_that_never_answers_times_out_at_start_up():
    mute = ServerConfig(
        command=(sys.executable, "-c", "import time; time.sleep(60)"), startup_timeout=1
    )
    started = time.monotonic()
    with pytest.raises(ServerTimeout, match="'mute' did not start within 1 s"):
        list_tools("mute", mute)
    assert time.monotonic() - started < 60  # given up on, not waited out (a busy machine is slow)


def test_a_server_that_cannot_start_is_left_out_and_the_others_load(tmp_path, caplog):
    path = servers_file(
        tmp_path,
        {"gone": {"command": ["/nonexistent/mcp-server"]}, "notes": {"command": COMMAND}},
    )
    registry = Registry()
    register_servers(path, into=registry)
    assert registry.names() and all(n.startswith("notes__") for n in registry.names())
    assert "could not start" in caplog.text and "'gone'" in caplog.text


def test_servers_without_the_mcp_package_are_a_startup_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "mcp", None)
    path = servers_file(tmp_path, {"notes": {"command": ["never-started"]}})
    with pytest.raises(ConfigurationError, match="'mcp' package is not installed"):
        register_servers(path, into=Registry())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_streamable_http_server_is_registered_and_called(tmp_path):
    port = free_port()
    server = subprocess.Popen(
        [*COMMAND, "--http", str(port)], cwd=tmp_path, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 20
        while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
            assert time.monotonic() < deadline and server.poll() is None, "server did not start"
            time.sleep(0.1)
        url = f"http://127.0.0.1:{port}/mcp"
        path = servers_file(tmp_path, {"remote": {"url": url, "trusted": True}})
        registry = Registry()
        register_servers(path, into=registry)
        assert registry.get("remote__read_note").risk is Risk.read
        (tmp_path / "notes").mkdir()
        (tmp_path / "notes" / "far.txt").write_text("away\n")
        assert run(registry, "remote__read_note", {"name": "far"}, tmp_path).content == {
            "name": "far",
            "text": "away\n",
            "lines": 1,
        }
    finally:
        server.terminate()
        server.wait(10)


EDIT_SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "edits": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"oldText": {"type": "string"}, "newText": {"type": "string"}},
                "required": ["oldText", "newText"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["path", "edits"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("edits", "expected"),
    [
        ([{"oldText": "a"}], "edits[0].newText: is required"),
        (
            [{"oldText": "a", "newText": "b"}, {"oldText": "a", "newText": 3}],
            "edits[1].newText: must be a string (got a number)",
        ),
        (
            [{"oldText": "a", "newText": "b", "dryRun": True}],
            "edits[0].dryRun: is not a known field",
        ),
        ("a", "edits: must be a list (got a string)"),
    ],
)
def test_schema_messages_keep_the_servers_spelling_and_point_at_the_item(edits, expected):
    from runtime.mcp.schema import input_model
    from runtime.registry.validation import Invalid, validate

    result = validate(input_model("fs__edit_file", EDIT_SCHEMA), {"path": "a", "edits": edits})
    assert isinstance(result, Invalid)
    assert result.message.startswith(expected), result.message
    assert "(got a list)" not in result.message


def test_a_server_reached_by_url_gives_its_tools_its_host():
    tools = [{"name": "find", "inputSchema": {"type": "object", "properties": {}}}]
    remote = ServerConfig(url="https://MCP.example.com:8443/mcp")
    [spec] = specs_for("search", remote, tools)
    assert spec.host == "mcp.example.com"
    [local] = specs_for("files", ServerConfig(command="npx"), tools)
    assert local.host is None
