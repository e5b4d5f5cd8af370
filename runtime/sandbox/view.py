"""What a sandboxed process sees of the host's file system, as bubblewrap options
(docs/architecture.md, "The sandbox").

Nothing but what is listed here: the system directories read-only, minus the
secrets among them; the call's workspace read-write, minus toolrun's own
state and the files that make a later git or shell run code (read-only); a
private `/tmp` with a private home in it; a fresh `/proc` and a minimal `/dev`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from runtime.gate.protected import (
    GIT_FILES,
    PROJECT_DIR,
    RC_FILES,
    homes,
    protected_locations,
)

HOME = "/tmp/home"  # the sandbox's $HOME: an empty directory in its private /tmp
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
# Secrets in the system directories: password hashes, host keys, TLS private keys.
SECRETS = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/security/opasswd",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssl/private",
    "/etc/ssh",
)
# Files in a workspace that make a later git or shell run code, or that hold git's
# trust in other paths: read-only inside the sandbox, when they exist.
# Built from the gate's lists (gate/protected.py), so the two never drift apart, and
# `.envrc`, which direnv runs on entering the directory.
RUNS_CODE = (".git/config", ".git/hooks", *sorted(GIT_FILES | RC_FILES), ".envrc")


def options(
    workspace: Path, cwd: Path, read_only: Iterable[Path] = (), places: Iterable[Path] = ()
) -> list[str]:
    """bubblewrap's mount options for a process of the call in `workspace`,
    started in `cwd`; `read_only`: more host paths it may read (an MCP server's
    own files); `places`: directories that must exist, empty (its arguments')."""
    view = ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--dir", HOME]
    for system in SYSTEM:
        view += _system(system)
    for secret in SECRETS:
        view += _masked(Path(secret))
    read_only = [path for path in read_only if path.exists()]
    for path in read_only:
        view += ["--ro-bind", str(path), str(path)]
    for place in places:
        view += ["--dir", str(place)]
    view += ["--bind", str(workspace), str(workspace)]
    for hidden in _toolrun_state(workspace, read_only):
        view += _masked(hidden)
    for name in RUNS_CODE:
        path = (workspace / name).resolve()  # a link's target in the workspace, if one
        if path.exists() and path.is_relative_to(workspace):
            view += ["--ro-bind", str(path), str(path)]
    return [*view, "--chdir", str(cwd)]


def _system(path: str) -> list[str]:
    if not os.path.lexists(path):
        return []
    if os.path.islink(path):  # a merged /usr: /bin -> usr/bin, kept a link
        return ["--symlink", os.readlink(path), path]
    return ["--ro-bind", path, path]


def _masked(path: Path) -> list[str]:
    """`path` hidden: an empty directory (a tmpfs of the sandbox's own: what is
    written there is gone with it) or an empty file."""
    if path.is_symlink() or not path.exists():
        return []
    if path.is_dir():
        return ["--tmpfs", str(path)]
    return ["--ro-bind", "/dev/null", str(path)]


def _toolrun_state(workspace: Path, read_only: list[Path]) -> list[Path]:
    """toolrun's homes and settings files that the sandbox would otherwise show:
    those in the workspace, a system directory or a read-only path, except a home
    that holds the workspace (the demo's workspace is made inside its home)."""
    visible = [workspace, *read_only, *(Path(p) for p in SYSTEM if not os.path.islink(p))]
    found = [workspace / PROJECT_DIR, *homes(), *protected_locations(workspace)]
    hidden = []
    for path in found:
        shown = any(path == root or path.is_relative_to(root) for root in visible)
        if shown and not workspace.is_relative_to(path) and path not in hidden:
            hidden.append(path)
    return hidden
