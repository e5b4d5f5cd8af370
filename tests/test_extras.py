"""The install's extras (pyproject.toml): the core, what `Runtime` and the
workers need, imports none of the gateway's dependencies, and `toolrun serve`
without them says in one line which extra to install."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

from runtime.cli.gateway import GATEWAY_MODULES

ROOT = Path(__file__).resolve().parents[1]


def python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_library_and_the_workers_import_no_gateway_dependency(tmp_path):
    # What a worker process imports (its tasks build their registry and key at import).
    worker = {"TOOLRUN_HOME": str(tmp_path), "TOOLRUN_SIGNING_KEY": "k" * 32}
    done = python(
        "import sys, runtime, runtime.client, workers, workers.tasks\n"
        f"print(sorted(m for m in sys.modules if m.partition('.')[0] in {GATEWAY_MODULES!r}))",
        **worker,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_serve_without_the_gateway_extra_names_the_extra_in_one_line():
    blocked = "".join(f"sys.modules[{name!r}] = None\n" for name in GATEWAY_MODULES)
    done = python(
        f"import sys\n{blocked}"
        "from runtime.cli import main\n"
        "sys.argv = ['toolrun', 'serve']\n"
        "main()"
    )
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr
    [line] = done.stderr.splitlines()
    name = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"]
    assert line == f"toolrun: the HTTP gateway needs its extra: pip install '{name}[gateway]'"


def test_the_gateway_extra_holds_what_the_gateway_imports():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = " ".join(project["dependencies"])
    extra = " ".join(project["optional-dependencies"]["gateway"])
    for requirement in ("fastapi", "uvicorn", "sse-starlette"):
        assert requirement in extra and requirement not in core
