"""A real MCP server for the tests, built with the `mcp` package's server API.

Notes are files `notes/<name>.txt` under the server's working directory (the
batch's workspace when toolrun spawns it per call). Every append is also
recorded in `.marks/effects.jsonl`, as `tests.support.tools` records its side
effects. Run as a script: `python mcp_server.py` (stdio) or
`python mcp_server.py --http PORT` (streamable HTTP on 127.0.0.1).

`NOTES_REFUSE_IF=<path>`: the server exits at once, before answering, while
that file exists (a server that fails to start).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel

READ = ToolAnnotations(read_only_hint=True)
APPEND = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)

server = MCPServer("notes")


class Note(BaseModel):
    name: str
    text: str
    lines: int


def _path(name: str) -> Path:
    return Path.cwd() / "notes" / f"{name}.txt"


def _note(name: str) -> Note:
    path = _path(name)
    text = path.read_text() if path.exists() else ""
    return Note(name=name, text=text, lines=len(text.splitlines()))


@server.tool(annotations=READ)
def read_note(name: str) -> Note:
    """Read a note; a note never written is empty."""
    return _note(name)


@server.tool(annotations=APPEND)
def append_note(name: str, text: str) -> Note:
    """Append a line to a note."""
    path = _path(name)
    path.parent.mkdir(exist_ok=True)
    with path.open("a") as handle:
        handle.write(text + "\n")
    marks = Path.cwd() / ".marks"
    marks.mkdir(exist_ok=True)
    with (marks / "effects.jsonl").open("a") as handle:
        handle.write(json.dumps({"label": f"append_note:{name}", "at": time.time()}) + "\n")
    return _note(name)


@server.tool(annotations=READ)
def check_name(name: str) -> str:
    """Fails with a message unless the name is lowercase."""
    if name != name.lower():
        raise ToolError(f"note names are lowercase; try {name.lower()!r}")
    return f"{name} is a good name"


@server.tool(annotations=READ)
def crash() -> str:
    """Dies mid-call."""
    os._exit(7)


@server.tool(annotations=READ)
def slow(seconds: float) -> str:
    """Sleeps, then answers."""
    time.sleep(seconds)
    return f"slept {seconds}s"


@server.tool(annotations=APPEND)
def hold(seconds: float, name: str) -> Note:
    """Writes this server's pid to `<name>.pgid` (the server leads its own
    session), sleeps, then appends a line to the note `name`."""
    (Path.cwd() / f"{name}.pgid").write_text(str(os.getpid()))
    time.sleep(seconds)
    return append_note(name, "held")


@server.tool(annotations=READ)
def peek(place: str) -> str:
    """What the server sees at `place`: a folder's entries, a file's text, or why
    it cannot (the sandbox's tests look around with it; not named as a path, so
    the gate leaves it to the server, as it would a server's own reading)."""
    try:
        target = Path(place)
        if target.is_dir():
            return " ".join(sorted(entry.name for entry in target.iterdir()))
        return target.read_text(errors="replace")
    except OSError as error:
        return f"unreadable: {error}"


def main() -> None:
    refuse = os.environ.get("NOTES_REFUSE_IF")
    if refuse and Path(refuse).exists():
        print("notes server: refusing to start (configured to fail)", file=sys.stderr)
        sys.exit(3)
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()


if __name__ == "__main__":
    main()
