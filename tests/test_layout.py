"""The layout docs/architecture.md describes: one package per part, layers that
imports only go down, one way to the ledger, and a client that never loads the
worker's Celery app or Flower."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Imports inside functions only for optional dependencies (MCP), the CLI's start-up time,
# the client's lazy `Runtime` (and the class itself, whose deployment, ledger and
# handles' replies load when a `Runtime` is built or used), PostgreSQL's SQL dialect
# (on SQLite, never needed), the search's .gitignore matcher (few processes search),
# and the Request class Celery loads by name before the tasks module that names it
# has finished.
LAZY_ALLOWED = {
    "runtime/__init__.py",
    "runtime/cli/",
    "runtime/client/runtime.py",
    "runtime/client/handle.py",
    "runtime/ledger/dialects.py",
    "runtime/tools/gitignore.py",
    "runtime/mcp/servers.py",
    "workers/request.py",
}
# docs/architecture.md, "Layers": lowest first. A package imports (at module level)
# only packages of layers below its own, so no two packages import each other.
# `runtime` is runtime/__init__.py, the public names; a top-level module
# (runtime/types.py) is a package of its own.
LAYERS = [
    {"types", "keyring", "clock"},
    {"errors"},
    {"keyspace"},
    {"settings", "workspace", "sessions"},
    {"config", "usage", "flow"},
    {"redaction"},
    {"registry"},
    {"results"},
    {"ledger", "logs", "tracing"},
    {"gate"},
    {"sandbox"},
    {"mcp"},
    {"tools", "adapters"},
    {"transport", "transcript"},
    {"execution", "batch"},
    {"assembly"},
    {"worker"},
    {"client"},
    {"testing"},
    {"stack", "gateway"},
    {"integrations"},
    {"cli", "workers", "runtime"},
]
# Pairs allowed to import upward while a restructuring is under way (none now).
UPWARD_IMPORTS_STILL_ALLOWED: set[tuple[str, str]] = set()
SQL = {"sqlalchemy", "sqlmodel"}


def _modules() -> dict[str, Path]:
    found = {}
    for path in [*(ROOT / "runtime").rglob("*.py"), *(ROOT / "workers").rglob("*.py")]:
        if "migrations" in path.parts:
            continue
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        found[name] = path
    return found


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[0] if parts[0] == "workers" or len(parts) == 1 else parts[1]


def _module_level(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements that run when the module is imported (not in functions)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child
        elif not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield from _module_level(child)


def _imports(tree: ast.Module, modules: dict[str, Path]) -> dict[str, int]:
    """The toolrun modules a module imports when it is imported, with a line each."""
    names: dict[str, int] = {}
    for node in _module_level(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                names.setdefault(full if full in modules else node.module, node.lineno)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                names.setdefault(alias.name, node.lineno)
    return {name: line for name, line in names.items() if name in modules}


def test_no_import_cycles():
    modules = _modules()
    graph = {
        name: set(_imports(ast.parse(path.read_text()), modules)) for name, path in modules.items()
    }
    done: set[str] = set()

    def visit(name: str, trail: list[str]) -> None:
        if name in trail:
            raise AssertionError(
                "import cycle: " + " -> ".join([*trail[trail.index(name) :], name])
            )
        if name in done:
            return
        for imported in graph[name]:
            visit(imported, [*trail, name])
        done.add(name)

    for name in graph:
        visit(name, [])


def test_every_package_has_a_layer():
    layered = [package for layer in LAYERS for package in layer]
    assert len(layered) == len(set(layered)), "a package is in two layers"
    found = {_package(name) for name in _modules()}
    assert found - set(layered) == set(), "add these to LAYERS and docs/architecture.md"
    assert set(layered) - found == set(), "these are gone: take them out of LAYERS"


def test_imports_go_down_the_layers():
    """So no two packages import each other."""
    level = {package: i for i, layer in enumerate(LAYERS) for package in layer}
    modules, upward, used = _modules(), [], set()
    for name, path in modules.items():
        for imported, line in _imports(ast.parse(path.read_text()), modules).items():
            edge = (_package(name), _package(imported))
            if edge[0] == edge[1] or level[edge[0]] > level[edge[1]]:
                continue
            if edge in UPWARD_IMPORTS_STILL_ALLOWED:
                used.add(edge)
                continue
            relative = path.relative_to(ROOT).as_posix()
            upward.append(f"{relative}:{line} imports {imported} ({' -> '.join(edge)})")
    assert not upward, "imports that go up a layer:\n" + "\n".join(upward)
    assert UPWARD_IMPORTS_STILL_ALLOWED - used == set(), "no import needs these any more"


def test_only_the_ledger_holds_a_connection():
    """SQL is written in runtime/ledger/ only, and run through `Ledger`'s methods."""
    outside = []
    for path in _modules().values():
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith("runtime/ledger/"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import | ast.ImportFrom):
                named = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                named += [] if named else [alias.name for alias in node.names]
                if {name.split(".")[0] for name in named} & SQL:
                    outside.append(f"{relative}:{node.lineno} imports {', '.join(named)}")
            if isinstance(node, ast.Attribute) and node.attr == "transaction":
                outside.append(f"{relative}:{node.lineno} opens a ledger transaction")
    assert not outside, "SQL outside runtime/ledger/:\n" + "\n".join(outside)


def test_no_toolrun_import_inside_a_function_outside_the_allowed_places():
    hidden = []
    for path in _modules().values():
        relative = path.relative_to(ROOT).as_posix()
        if any(relative.startswith(allowed) for allowed in LAZY_ALLOWED):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for inner in ast.walk(node):
                    module = getattr(inner, "module", None) or ""
                    if isinstance(inner, ast.ImportFrom) and module.startswith(
                        ("runtime", "workers")
                    ):
                        hidden.append(f"{relative}:{inner.lineno}")
    assert hidden == []


def test_a_client_loads_neither_the_worker_app_nor_flower():
    code = (
        "import sys, runtime; from runtime import Runtime; import runtime.cli\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('workers', 'flower')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_importing_runtime_loads_no_deployment_library():
    """`from runtime import Runtime` is an orchestrator's first line and every
    `toolrun` command's: SQLAlchemy, Celery, kombu, Redis and the secret
    detectors load when a `Runtime` is built (docs/architecture.md, "Starting fast")."""
    heavy = ("sqlalchemy", "sqlmodel", "celery", "kombu", "redis", "detect_secrets", "limits")
    code = (
        "import sys; from runtime import Runtime; import runtime.cli\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({heavy!r})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# Where Redis's errors may be caught: the transport (the state seam), the dev stack's
# own probe of its redis-server, and the one module below the seam that does:
# keyspace/scripted.py, whose `reached` raises a lost Redis (`LOST`) as
# `StateUnavailable`. Flow control's Redis side (runtime/flow/) catches none itself:
# its throttle's round trips are wrapped in `reached`, its riders ride the seam's
# pipelines, and the seam calls its budget counters.
REDIS_ERRORS_CAUGHT = ("runtime/transport/", "runtime/stack/", "runtime/keyspace/scripted.py")


def test_redis_errors_stop_at_the_state_seam():
    """Past `REDIS_ERRORS_CAUGHT` a lost Redis is `StateUnavailable`; the
    rest of the keyspace package and all of flow control name none of
    Redis's errors."""
    crossing = []
    for path in _modules().values():
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith(REDIS_ERRORS_CAUGHT):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ExceptHandler) and node.type is not None:
                caught = ast.unparse(node.type)
                if "redis" in caught or "LOST" in caught:
                    crossing.append(f"{relative}:{node.lineno} catches {caught}")
    assert not crossing, "\n".join(crossing)


def test_a_worker_module_builds_nothing_at_import():
    """The registry, key and connections are built when the worker process
    starts (its signals), never when `workers.tasks` is imported."""
    code = "import workers.tasks as t\nprint(len(t._parts), len(t._workers))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0", "0"]
