"""`delete_cache`: remove one named cache directory under `.toolrun/cache/`.

A destructive tool, so it is narrow on purpose: the scope is one plain name
(no globs, no separators, no `..`), it must name a cache that exists, and the
directory must really be `<workspace>/.toolrun/cache/<scope>` with no symlink on
the way. `shutil.rmtree` removes symlinks inside the cache without following them.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from pydantic import Field

from runtime.errors import ToolError
from runtime.registry.capabilities import ToolContext, ToolInput, ToolOutput, tool
from runtime.types import Risk

CACHE_DIR = Path(".toolrun") / "cache"
SCOPE = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")


class DeleteCacheInput(ToolInput):
    scope: str = Field(
        description="Name of the one cache to delete: lowercase letters, digits, '_', '.', "
        "'-', starting with a letter or digit (no paths, no wildcards)."
    )


@tool(risk=Risk.destructive, paths=())
def delete_cache(args: DeleteCacheInput, ctx: ToolContext) -> ToolOutput:
    """Delete one cache directory, `.toolrun/cache/<scope>`, and everything in it.

    `scope` must be the exact name of an existing cache; the error for an unknown
    name lists the caches there are. Nothing outside that one directory is touched.
    """
    root = ctx.resolve(".")
    base = root / CACHE_DIR
    existing = _caches(base)
    named = ", ".join(existing) if existing else "none"
    if not SCOPE.fullmatch(args.scope):
        raise ToolError(
            f"scope {args.scope!r} is not a cache name (lowercase letters, digits, '_', '.', "
            f"'-'; no paths or wildcards); existing caches: {named}"
        )
    if args.scope not in existing:
        raise ToolError(f"there is no cache named {args.scope!r}; existing caches: {named}")
    target = base / args.scope
    if ctx.resolve(str(CACHE_DIR / args.scope)) != target:
        raise ToolError(f"cache {args.scope!r} is reached through a symlink; it is not deleted")
    files = _count_files(target)
    shutil.rmtree(target)
    return ToolOutput(
        content={"scope": args.scope, "files_deleted": files},
        message=f"deleted cache {args.scope!r} ({files} files)",
        summary=f"deleted cache {args.scope} ({files} files)",
    )


def _caches(base: Path) -> list[str]:
    """Names of the real (non-symlink) cache directories under `base`."""
    for directory in (base.parent, base):
        if directory.is_symlink():
            raise ToolError(f"{directory.name} is a symlink; caches must be real directories")
    if not base.is_dir():
        return []
    with os.scandir(base) as scan:
        return sorted(
            entry.name
            for entry in scan
            if entry.is_dir(follow_symlinks=False) and SCOPE.fullmatch(entry.name)
        )


def _count_files(directory: Path) -> int:
    """Entries that are not directories (files, symlinks, ...), never following a symlink."""
    count = 0
    with os.scandir(directory) as scan:
        for entry in scan:
            if entry.is_dir(follow_symlinks=False):
                count += _count_files(Path(entry.path))
            else:
                count += 1
    return count
