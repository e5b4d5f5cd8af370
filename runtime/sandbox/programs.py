"""The host files a configured program (an MCP stdio server) needs to run in the
sandbox, beyond the system directories: read-only, and nothing else.

- its executable, and the installation it belongs to: a Python virtualenv (the
  directory holding `pyvenv.cfg`) and the interpreter that venv was made from;
  the folder holding an npm `node_modules` tree;
- every absolute argument that names an existing file (a server's script), and
  the same installations for it; not the folder it is in, which may be a home.

An operator whose server needs more lists it (the servers file's `read_only`).
A directory its arguments name (a filesystem server's allowed root) exists in the
sandbox, empty but for the workspace if that lies in it (`places`).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path

NODE_MODULES = "node_modules"


def needed(argv: list[str], path: str | None = None) -> list[Path]:
    """Host paths that `argv` reads to start: to be mounted read-only."""
    found: list[Path] = []
    program = argv[0] if os.sep in argv[0] else shutil.which(argv[0], path=path)
    if program:
        found += _installation(Path(program))
    for argument in argv[1:]:
        candidate = Path(argument)
        if candidate.is_absolute() and candidate.is_file():
            found += _installation(candidate)
    return _outermost(found)


def places(argv: list[str]) -> list[Path]:
    """The host directories `argv`'s arguments name: made, empty, in the sandbox,
    so that a server which checks them at its start finds them."""
    return [Path(a) for a in argv[1:] if Path(a).is_absolute() and Path(a).is_dir()]


def _installation(program: Path) -> list[Path]:
    """`program` (as named and with its links followed) and what it belongs to."""
    found = []
    for path in dict.fromkeys([program.absolute(), program.resolve()]):
        found.append(path)
        found += _venv(path) + _node_package(path)
    return found


def _venv(path: Path) -> list[Path]:
    for folder in path.parents:
        config = folder / "pyvenv.cfg"
        if config.is_file():
            base = _venv_home(config)
            return [folder, *([base] if base else [])]
    return []


def _venv_home(config: Path) -> Path | None:
    """The installation the venv was made from (`home = <prefix>/bin`)."""
    for line in config.read_text(errors="replace").splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "home" and value.strip():
            return Path(value.strip()).resolve().parent
    return None


def _node_package(path: Path) -> list[Path]:
    tops = [folder.parent for folder in path.parents if folder.name == NODE_MODULES]
    return tops[-1:]  # the folder above the outermost node_modules


def _outermost(paths: Iterable[Path]) -> list[Path]:
    """The paths, without those inside another one of them."""
    unique = sorted(set(paths), key=lambda p: len(p.parts))
    kept: list[Path] = []
    for path in unique:
        if str(path) != "/" and not any(path.is_relative_to(other) for other in kept):
            kept.append(path)
    return kept
