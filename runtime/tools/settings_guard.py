"""The toolrun settings files as they were before a shell command ran, and put
back if the command changed them: static reading of a command line cannot see
every way to write a file (`python -c ...`), so `shell` compares the files
after the run too (docs/architecture.md, "The permission gate")."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from runtime.gate.protected import PROJECT_DIR, USER_DIR


class SettingsGuard:
    """The settings files as they were before the command; `put_back` restores
    any that changed. (A user who edits a settings file while a command runs
    sees that edit undone; the call's message says which file.)"""

    def __init__(self, root: Path) -> None:
        paths = [root / PROJECT_DIR / "settings.json", Path.home() / USER_DIR / "settings.json"]
        for name in ("TOOLRUN_POLICY_FILE", "TOOLRUN_USER_SETTINGS_FILE"):
            if os.environ.get(name):
                paths.append(Path(os.environ[name]).expanduser())
        self.before = {path: _state(path) for path in dict.fromkeys(paths)}

    def put_back(self) -> list[str]:
        changed = []
        for path, before in self.before.items():
            if _state(path) != before:
                changed.append(str(path))
                try:
                    _restore(path, before)
                except OSError as error:
                    changed[-1] += f" (could not be put back: {error})"
        return changed


_State = tuple[str, bytes | str | None, int]


def _state(path: Path) -> _State:
    """Where `path` leads, its bytes (None: absent) and its permission bits."""
    try:
        data: bytes | str | None = path.read_bytes()
        mode = stat.S_IMODE(path.stat().st_mode)
    except (FileNotFoundError, NotADirectoryError):
        data, mode = None, 0
    except OSError as error:
        data, mode = f"unreadable: {error.strerror}", 0
    return os.path.realpath(path), data, mode


def _restore(path: Path, before: _State) -> None:
    real, data, mode = before
    if isinstance(data, str):
        return  # it could not be read before either; nothing to put back
    target = Path(real)
    if os.path.realpath(path) != real:  # a symlink was swapped in on the way
        if path.parent.is_symlink():
            path.parent.unlink()
        if path.is_symlink() or path.is_file():
            path.unlink()
        target = path
    if data is None:
        target.unlink(missing_ok=True)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(dir=target.parent, prefix=".settings.", suffix=".tmp")
    with os.fdopen(handle, "wb") as stream:
        stream.write(data)
    os.chmod(temp, mode)
    os.replace(temp, target)
