"""A whole `Runtime` in one process, for the tests of your own tools and agent
loop: no Redis, no Celery, no worker process to start.

    with memory_runtime(my_tool) as rt:
        handle = rt.submit([{"id": "1", "name": "my_tool", "arguments": {...}}], mode="auto")
        [result] = handle.results(timeout=10)

It is the client, the permission gate, the batch's rules and the executor that
a deployment runs, on the in-memory transport (`runtime/transport/memory.py`:
the workers are threads of this process) and a real SQLite ledger in a
directory of its own, deleted when the process exits. What a deployment adds (Celery's
delivery, Redis, other processes) is what toolrun's own integration tests cover.
"""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from runtime.client import Runtime
from runtime.errors import ConfigurationError
from runtime.ledger.store import Ledger
from runtime.registry.capabilities import CapabilitySpec, Registry, registry
from runtime.settings import Settings
from runtime.tools.loading import load_tools
from runtime.worker.in_memory import memory_transport

Tool = Callable | CapabilitySpec | Registry


@contextmanager
def memory_runtime(
    *tools: Tool, settings: Settings | None = None, workspace: str | Path | None = None
) -> Iterator[Runtime]:
    """A `Runtime` on the in-memory transport, closed (its open batches
    cancelled) on the way out.

    `tools`: functions decorated with `@tool`, `CapabilitySpec`s or registries;
    only these can be called. None: the tools a deployment with `settings`
    loads (the built-ins, `TOOLRUN_TOOL_MODULES`, entry points).
    `settings`: as given to `Runtime`, and they govern it (its redaction
    patterns, timeouts, bounds); the ledger is always a fresh SQLite file.
    None: the defaults, with a state directory and a user settings file of its
    own, so that the tests read no file of the machine's user.
    `workspace`: a directory the runtime trusts, as `toolrun trust` would (its
    project rules may then allow); only with the default settings."""
    base = Path(tempfile.mkdtemp(prefix="toolrun-memory-"))
    # Removed when the process exits, not with the runtime: a batch's thread or the
    # transport's sweep may still be ending when `close` returns.
    atexit.register(shutil.rmtree, base, ignore_errors=True)
    if settings is None:
        user = base / "user.json"
        trusted = [str(Path(workspace).resolve())] if workspace is not None else []
        user.write_text(json.dumps({"trusted_workspaces": trusted}))
        settings = Settings(home=base / "home", user_settings_file=user)
    elif workspace is not None:
        raise ConfigurationError(
            "memory_runtime: trust a workspace in your own settings' user file, "
            "or pass `workspace` without `settings`"
        )
    settings = settings.model_copy(update={"database_url": f"sqlite:///{base / 'ledger.db'}"})
    chosen = _registry(tools, settings)
    ledger = Ledger.from_settings(settings)
    transport = memory_transport(registry=chosen, ledger=ledger, settings=settings)
    runtime = Runtime(settings, registry=chosen, ledger=ledger, transport=transport)
    try:
        yield runtime
    finally:
        runtime.close()


def _registry(tools: tuple[Tool, ...], settings: Settings) -> Registry:
    if not tools:
        return load_tools(settings.module_names, mcp_servers_file=settings.mcp_servers_file)
    if len(tools) == 1 and isinstance(tools[0], Registry):
        return tools[0]
    chosen = Registry()
    for item in tools:
        if isinstance(item, Registry):
            for spec in item:
                chosen.register(spec)
        elif isinstance(item, CapabilitySpec):
            chosen.register(item)
        elif callable(item):
            spec = next((spec for spec in registry if spec.execute is item), None)
            if spec is None:
                raise ConfigurationError(
                    f"{getattr(item, '__name__', item)!r} is not a tool: decorate it with "
                    "@tool, or pass its CapabilitySpec or registry"
                )
            chosen.register(spec)
        else:
            raise TypeError(f"memory_runtime takes tools and registries, not {item!r}")
    return chosen
