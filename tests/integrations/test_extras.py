"""The faces' frameworks are extras (pyproject.toml): the core, what `Runtime`,
the workers and `toolrun` import, loads none of them, and each extra holds what
its face imports (docs/architecture.md, "Integrations")."""

from __future__ import annotations

import tomllib

from tests.support.cli import REPO
from tests.test_extras import python

FRAMEWORKS = ("pydantic_ai", "langgraph", "langchain_core", "agents")
EXTRAS = {
    "pydantic-ai": ["pydantic-ai-slim"],
    "langgraph": ["langgraph", "langchain-core"],
    "openai-agents": ["openai-agents"],
    "mcp": ["mcp"],
}


def test_the_core_and_the_cli_import_no_framework(tmp_path):
    done = python(
        "import sys, runtime, runtime.client, runtime.cli, workers, workers.tasks\n"
        f"print(sorted(m for m in sys.modules if m.partition('.')[0] in {FRAMEWORKS!r}))",
        TOOLRUN_HOME=str(tmp_path),
        TOOLRUN_SIGNING_KEY="k" * 32,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_each_face_has_an_extra_that_holds_its_framework():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    core = " ".join(project["dependencies"])
    for extra, requirements in EXTRAS.items():
        held = " ".join(project["optional-dependencies"][extra])
        tested = " ".join(project["optional-dependencies"]["test"])
        for requirement in requirements:
            assert requirement in held and requirement in tested and requirement not in core


def test_mcp_serve_without_the_mcp_extra_names_the_extra_in_one_line():
    done = python(
        "import sys\nsys.modules['mcp'] = None\n"
        "from runtime.cli import main\nsys.argv = ['toolrun', 'mcp', 'serve']\nmain()"
    )
    assert done.returncode != 0
    [line] = done.stderr.splitlines()
    assert line == "toolrun: the MCP server needs its extra: pip install 'tool-runtime[mcp]'"
