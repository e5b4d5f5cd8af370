"""Workspace confinement: every path a tool touches resolves inside the batch's
workspace, symlinks included, or the call is refused."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from urllib.parse import unquote, urlsplit

from runtime.errors import PathOutsideWorkspace

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://|^file:")


def resolve_inside(workspace: Path | str, path: str) -> Path:
    """`path` (relative to the workspace, or absolute) resolved with every symlink
    followed; `PathOutsideWorkspace` if the result is not inside the workspace."""
    if not isinstance(path, str) or not path.strip():
        raise PathOutsideWorkspace("path is empty; give a path relative to the workspace")
    if _SCHEME.match(path):  # an MCP tool's `uri`: only a file: URI names a path
        if not path.lower().startswith("file:"):
            raise PathOutsideWorkspace(
                f"{path!r} is a URI, not a file path; give a path relative to the workspace"
            )
        path = unquote(urlsplit(path).path)
    if "\x00" in path:
        raise PathOutsideWorkspace(f"path {path!r} contains a NUL byte")
    if path.startswith("~"):
        raise PathOutsideWorkspace(
            f"path {path!r} names a home directory; give a path relative to the workspace"
        )
    root = Path(workspace).resolve(strict=True)
    candidate = Path(path) if os.path.isabs(path) else root / path
    try:
        resolved = candidate.resolve(strict=False)
    except (RuntimeError, OSError) as error:
        # A symlink loop: RuntimeError up to Python 3.12, OSError (ELOOP) after.
        # Where a path leads cannot be known, so it is refused (fail closed).
        raise PathOutsideWorkspace(
            f"path {path!r} cannot be resolved ({error}); give a path without a symlink loop"
        ) from error
    if resolved != root and not resolved.is_relative_to(root):
        raise PathOutsideWorkspace(
            f"path {path!r} resolves to {resolved}, outside the workspace; "
            "only paths inside the workspace may be used"
        )
    return resolved


def refuse_hard_link(info: os.stat_result, shown: str) -> None:
    """`PathOutsideWorkspace` if `info` is a regular file with more than one hard
    link. Another link may sit outside the workspace, where no tool may read or
    write, and finding every link of a file means walking the whole filesystem;
    so a file with several links is refused (docs/architecture.md, "The
    permission gate"). Called on the open file's own `fstat`, so no link made
    between a check and the read slips through."""
    if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
        raise PathOutsideWorkspace(
            f"{shown} has {info.st_nlink} hard links, and another of them may be a file "
            "outside the workspace, so file tools neither read nor write it; ask the user "
            "for a copy that is not hard-linked (cp makes one)"
        )


def relative_name(workspace: Path | str, path: Path) -> str:
    """How a resolved path is shown to the model: relative to the workspace."""
    root = Path(workspace).resolve()
    return "." if path == root else str(path.relative_to(root))
