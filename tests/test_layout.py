"""The layout docs/architecture.md describes: one package per part, imports that
go one way, and a client that never loads the worker's Celery app or Flower."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Imports inside functions only for optional dependencies (MCP), the CLI's start-up time,
# the client's lazy `Runtime`, and the Request class Celery loads by name before the
# tasks module that names it has finished.
LAZY_ALLOWED = {
    "runtime/__init__.py",
    "runtime/cli/",
    "runtime/mcp/servers.py",
    "workers/request.py",
}


def _modules() -> dict[str, Path]:
    found = {}
    for path in [*(ROOT / "runtime").rglob("*.py"), *(ROOT / "workers").rglob("*.py")]:
        if "migrations" in path.parts:
            continue
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        found[name] = path
    return found


def _imports(tree: ast.Module, modules: dict[str, Path]) -> set[str]:
    """The toolrun modules a module imports when it is imported."""
    names = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                names.add(full if full in modules else node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {name for name in names if name in modules}


def test_no_import_cycles():
    modules = _modules()
    graph = {name: _imports(ast.parse(path.read_text()), modules) for name, path in modules.items()}
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
