"""Talking to one MCP server: list its tools, call one, and turn every way that
can fail into a `ToolError` whose message says what happened.

Every call opens its own client session: a stdio server is spawned for the call
and stopped after it (a server process per call costs its start-up, about half
a second for a Python server, but no session outlives a call, so a crashed or
wedged server never poisons the next one). Start-up is bounded by the server's
`startup_timeout`, the call (or the listing) by its `timeout`; stopping a stdio
server afterwards takes at most a few more seconds (the SDK closes stdin, then
terminates, then kills). On a worker the server's session is recorded
(`runtime.sessions`), so it dies with a pool process that is killed mid-call.
A stdio server runs in the sandbox (`runtime.sandbox`), as a shell command does:
the call's workspace writable, its own program files (and the servers file's
`read_only` paths) readable, no network, no `/proc` of the worker.

The `mcp` package is imported here only, so the runtime works without it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TypeVar

from runtime import sandbox, sessions
from runtime.errors import ConfigurationError, ToolError
from runtime.mcp.config import ServerConfig
from runtime.mcp.output import output
from runtime.mcp.schema import arguments_of
from runtime.registry.capabilities import ToolContext, ToolOutput
from runtime.sandbox import programs
from runtime.settings import get_settings
from runtime.types import Status

STOP_GRACE = 8.0  # seconds the SDK may take to stop a stdio server after a timeout
MAX_PAGES = 50
ROOTS_PINGS = 3
_T = TypeVar("_T")


class ServerTimeout(ToolError):
    """The server did not answer within its `timeout`."""

    status = Status.timeout


@dataclass(frozen=True)
class RemoteTool:
    """The `execute` of a registered MCP tool: runs on a worker, inside the
    executor's watched thread."""

    server: str
    config: ServerConfig
    tool: str
    asks_roots: bool = False  # the server asked for roots when it was listed
    paths: tuple[str, ...] = ()  # its path-like arguments

    def __call__(self, arguments: Any, ctx: ToolContext) -> ToolOutput:
        sent = anchored(arguments_of(arguments), self.paths, ctx.workspace)
        result = run(
            self.server,
            self.config,
            lambda client: client.call_tool(self.tool, sent),
            ctx,
            roots_first=self.asks_roots,
        )
        return output(result)


def anchored(arguments: dict[str, Any], paths: tuple[str, ...], workspace: Path) -> dict[str, Any]:
    """Relative path arguments made absolute in the workspace, as the gate
    checked them: a server resolves a relative path against its own
    directories, which may be wider than the batch's workspace (until it has
    applied the roots it was sent)."""

    def absolute(value: Any) -> Any:
        if isinstance(value, str) and value and not value.startswith("file:"):
            return value if Path(value).is_absolute() else str(Path(workspace) / value)
        if isinstance(value, list):
            return [absolute(item) for item in value]
        return value

    return {k: absolute(v) if k in paths else v for k, v in arguments.items()}


@dataclass(frozen=True)
class Listing:
    tools: list[dict[str, Any]]  # MCP JSON (camelCase)
    asks_roots: bool


def list_tools(server: str, config: ServerConfig) -> list[dict[str, Any]]:
    """The server's tool definitions as MCP JSON (camelCase), every page."""
    return discover(server, config).tools


def discover(server: str, config: ServerConfig) -> Listing:
    """The server's tools, and whether it asks its client for roots (then each
    call waits until it has asked, so that it knows the workspace first)."""

    async def every_page(client) -> list[dict[str, Any]]:
        tools, cursor = [], None
        for _ in range(MAX_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools += [
                t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in page.tools
            ]
            cursor = page.next_cursor
            if cursor is None:
                break
        return tools

    with tempfile.TemporaryDirectory(prefix="toolrun-mcp-root-") as empty:
        asked: list[bool] = []
        tools = run(server, config, every_page, None, root=Path(empty), asked=asked)
    return Listing(tools, bool(asked))


def run(
    server: str,
    config: ServerConfig,
    step: Callable[[Any], Awaitable[_T]],
    ctx: ToolContext | None,
    *,
    root: Path | None = None,
    asked: list[bool] | None = None,
    roots_first: bool = False,
) -> _T:
    """Connect, run `step(client)`, disconnect; failures as `ToolError`s.

    The session's one MCP root is the call's workspace (or `root`): servers that
    confine themselves to their client's roots then see the batch's workspace
    (docs/architecture.md: the gate confines every path-like argument as well,
    whether a server does or not). With `roots_first`, the call waits, within
    the start-up time, until the server has asked for them."""
    try:
        import anyio
        import mcp  # noqa: F401 - only to say plainly that it is missing
    except ImportError as error:
        raise ConfigurationError(
            "MCP servers are configured but the 'mcp' package is not installed; "
            "install toolrun with the 'mcp' extra"
        ) from error

    workspace = root or (ctx.workspace if ctx is not None else None)

    async def session() -> _T:
        stage = "start"
        roots_given = anyio.Event()
        with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errlog:
            try:
                # One scope whose deadline moves from start-up to the call: a
                # scope may not end inside the transport's task group.
                with anyio.move_on_after(config.startup_timeout) as limit:
                    roots = _roots(workspace, roots_given)
                    async with _connect(config, ctx, workspace, errlog, roots) as client:
                        if roots_first:
                            await roots_given.wait()
                            # Round trips after the answer, so that a server which
                            # applies roots asynchronously has most likely done so
                            # (best effort: the gate is what confines).
                            for _ in range(ROOTS_PINGS):
                                await client.send_ping()
                        stage = "call"
                        limit.deadline = anyio.current_time() + config.timeout
                        result = await step(client)
                        if asked is not None and roots_given.is_set():
                            asked.append(True)
                        return result
                raise TimeoutError
            except Exception as error:  # noqa: BLE001 - every failure becomes a ToolError
                raise _explain(server, config, stage, error, errlog) from None

    return _run_sync(session)


@asynccontextmanager
async def _connect(
    config: ServerConfig,
    ctx: ToolContext | None,
    workspace: Path | None,
    errlog: IO,
    roots: dict[str, Any],
) -> AsyncIterator:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import get_default_environment, stdio_client

    if config.url is not None:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        async with httpx2.AsyncClient(headers=config.headers) as http:
            transport = streamable_http_client(config.url, http_client=http)
            async with Client(transport, **roots) as client:
                yield client
        return
    cwd = config.cwd or (str(ctx.workspace) if ctx is not None else None)
    env = {**get_default_environment(), **config.env}
    argv = _recorded(_confined(config, ctx, workspace, env), config.env)
    parameters = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=cwd)
    async with Client(stdio_client(parameters, errlog=errlog), **roots) as client:
        yield client


def _confined(
    config: ServerConfig, ctx: ToolContext | None, workspace: Path | None, env: dict[str, str]
) -> list[str]:
    """The server's command in the sandbox, with the call's workspace (or, for a
    listing, an empty one) writable and its own program files readable. A call
    follows its batch's policy; a listing, the process's settings. A command
    that cannot be found is left as it is: starting it fails as before."""
    argv = config.argv
    program = argv[0] if os.sep in argv[0] else shutil.which(argv[0], path=env.get("PATH"))
    if program is None or workspace is None or not os.path.exists(program):
        return list(argv)
    argv = [program, *argv[1:]]
    cwd = Path(config.cwd).expanduser().resolve() if config.cwd else None
    read_only = [*programs.needed(argv), *(Path(p).expanduser() for p in config.read_only)]
    return sandbox.confine(
        argv,
        confined=ctx.confined if ctx is not None else get_settings().sandbox,
        workspace=Path(os.path.realpath(workspace)),
        env=env,
        cwd=cwd,
        read_only=[*read_only, *([cwd] if cwd else [])],
        places=programs.places(argv),
        noted=ctx.unconfined if ctx is not None else None,
    )


def _recorded(argv: list[str], env: dict[str, str] | None) -> list[str]:
    """On a worker, the server's command made to record its session (the SDK
    starts it in one of its own), so that it dies with the pool process running
    the call (`runtime.sessions`). A command that cannot be found is left as
    it is: starting it fails as before, with the same message."""
    if not sessions.recording():
        return list(argv)
    path = (env or {}).get("PATH", os.environ.get("PATH", os.defpath))
    command = argv[0] if os.sep in argv[0] else shutil.which(argv[0], path=path)
    return list(argv) if command is None else sessions.wrapped([command, *argv[1:]])


def _roots(workspace: Path | None, given: Any) -> dict[str, Any]:
    """The client's answer to `roots/list`: the workspace, and `given` is set."""
    if workspace is None:
        return {}
    from mcp.types import ListRootsResult, Root

    roots = ListRootsResult(roots=[Root(uri=workspace.resolve().as_uri(), name="workspace")])

    async def list_roots(context: Any) -> ListRootsResult:
        given.set()
        return roots

    return {"list_roots_callback": list_roots}


def _explain(
    server: str, config: ServerConfig, stage: str, error: BaseException, errlog: IO
) -> ToolError:
    """One clear message for the model (and the ledger) per way of failing."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if isinstance(error, ToolError):
        return error
    name = f"MCP server {server!r}"
    if isinstance(error, TimeoutError):
        if stage == "call":
            text = (
                f"{name} did not answer within {config.timeout:g} s; it was stopped, "
                "and the call's effect, if any, is unknown"
            )
        else:
            text = f"{name} did not start within {config.startup_timeout:g} s"
        return ServerTimeout(text, kind="mcp_timeout")
    said = _tail(errlog)
    said = f" (its last words: {said})" if said else ""
    if isinstance(error, OSError) and stage == "start":
        return ToolError(f"{name} could not start: {error}", kind="mcp_unavailable")
    if "connection closed" in str(error).lower():
        if stage == "start":
            return ToolError(f"{name} exited before it answered{said}", kind="mcp_unavailable")
        return ToolError(
            f"{name} closed the connection during the call (it may have crashed){said}; "
            "the call's effect, if any, is unknown",
            kind="mcp_server_died",
        )
    if stage == "start":
        text = f"{name} could not be reached: {type(error).__name__}: {error}{said}"
        return ToolError(text, kind="mcp_unavailable")
    return ToolError(f"{name} failed: {type(error).__name__}: {error}", kind="mcp_error")


def _tail(errlog: IO, chars: int = 300) -> str:
    try:
        errlog.seek(0)
        lines = [line.strip() for line in errlog.read().splitlines() if line.strip()]
    except (OSError, ValueError):
        return ""
    return " | ".join(lines[-3:])[-chars:]


def _run_sync(coroutine: Callable[[], Awaitable[_T]]) -> _T:
    """Run on a fresh event loop: here if this thread has none running, else on
    a helper thread (a client created inside an asyncio program)."""
    import anyio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return anyio.run(coroutine)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="toolrun-mcp") as pool:
        return pool.submit(anyio.run, coroutine).result()
