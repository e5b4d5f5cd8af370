"""Paths no tool may write: the settings files that hold the agent's own permissions.

docs/architecture.md, "Semantics": no tool call writes, edits, moves or deletes a settings
file of any level, through any path spelling or symlink, whatever the rules say.
The check looks at the path as the model spelt it *and* at where it resolves, so
`.TOOLRUN/settings.json`, `a/../.toolrun/x` and a symlink into `.toolrun/` are all
refused. A `.toolrun` directory anywhere in the workspace counts, since a
subdirectory may be the workspace of another batch.
"""

from __future__ import annotations

import os
from pathlib import Path

from runtime.errors import PathOutsideWorkspace
from runtime.settings import default_home

PROJECT_DIR = ".toolrun"
USER_DIR = Path(".config") / "toolrun"
# Files a program reads at its start and obeys (docs/architecture.md, "The permission
# gate"): git's configuration and hooks run commands (core.fsmonitor, diff.external,
# a pre-commit hook), and a shell runs its rc files. Matched by name at any depth,
# case-insensitively; `.git` covers the directory, a gitdir pointer file and all in it.
GIT_DIR = ".git"
GIT_FILES = frozenset({".gitmodules", ".gitconfig"})
RC_FILES = frozenset({".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile"})
RC_FILES |= {".zshrc", ".zshenv", ".zprofile", ".zlogin", ".zlogout", ".kshrc", ".mkshrc"}
RC_FILES |= {".cshrc", ".tcshrc", ".login", ".logout"}


def refuse_settings_path(workspace: Path, path: str, resolved: Path) -> None:
    """Raise `PathOutsideWorkspace` if writing `path` (resolved to `resolved`)
    could change a toolrun settings file or anything under a `.toolrun/` directory.

    `workspace` is the resolved workspace root; `resolved` is inside it.
    """
    spelt = _workspace_relative(workspace, path)
    if _names_project_dir(spelt) or _names_project_dir(resolved.relative_to(workspace).as_posix()):
        raise PathOutsideWorkspace(_refusal(path))
    for protected in protected_locations(workspace):
        if resolved == protected or resolved.is_relative_to(protected):
            raise PathOutsideWorkspace(_refusal(path))


def refuse_home_path(workspace: Path, path: str, resolved: Path) -> None:
    """Raise `PathOutsideWorkspace` if `path` (resolved to `resolved`) is in
    toolrun's own home: a `.toolrun/` directory (the project's settings, and
    the home of versions before the per-user one), or the home `TOOLRUN_HOME`
    names, else the user's state directory. Its stack record,
    ledger and logs hold what no tool may read (docs/architecture.md, "Secrets")."""
    spelt = _workspace_relative(workspace, path)
    if _names_project_dir(spelt) or _names_project_dir(resolved.relative_to(workspace).as_posix()):
        raise PathOutsideWorkspace(_home_refusal(path))
    for home in homes():
        # A workspace made inside the home (the demo's) holds no state of its own.
        inside = workspace != home and workspace.is_relative_to(home)
        if not inside and (resolved == home or resolved.is_relative_to(home)):
            raise PathOutsideWorkspace(_home_refusal(path))


def protected_file(workspace: Path, path: str, resolved: Path) -> str | None:
    """Why writing `path` (resolved to `resolved`, inside `workspace`) needs a
    person's approval, or None: it is git's configuration or hooks, or a shell's
    rc file, which the next `git diff` or shell would obey. The path as spelt and
    where it resolves are both looked at, so no spelling or symlink dodges it."""
    for relative in (
        _workspace_relative(workspace, path),
        resolved.relative_to(workspace).as_posix(),
    ):
        reason = _guarded(relative)
        if reason:
            return (
                f"path {path!r} is {reason}; writing it lets a later command run any program, "
                "so it needs a person's approval in every mode but bypass"
            )
    return None


def _guarded(relative: str) -> str | None:
    parts = [part.lower() for part in relative.split("/") if part not in ("", ".")]
    if GIT_DIR in parts:
        return "in git's own directory (.git: its config and hooks run commands)"
    if any(a == ".config" and b == "git" for a, b in zip(parts, parts[1:], strict=False)):
        return "git's configuration (.config/git/)"
    name = parts[-1] if parts else ""
    if name in GIT_FILES:
        return f"git's configuration ({name})"
    if name in RC_FILES:
        return f"a shell's start-up file ({name})"
    return None


def homes() -> list[Path]:
    """Where toolrun's home really is: `TOOLRUN_HOME`, else the user's state
    directory (`runtime.settings.default_home`), read at call time as
    `protected_locations` reads its files."""
    try:
        named = os.environ.get("TOOLRUN_HOME")
        return [(Path(named) if named else default_home()).expanduser().resolve()]
    except (RuntimeError, OSError):
        return []


def _home_refusal(path: str) -> str:
    return (
        f"path {path!r} is in toolrun's own home (its stack record, ledger, logs and "
        "settings); no tool reads or writes it. Use a path elsewhere in the workspace."
    )


def _refusal(path: str) -> str:
    return (
        f"path {path!r} is a toolrun settings location (.toolrun/); tools may not "
        "change the agent's own permissions. Write somewhere else, or ask the user "
        "to edit the settings."
    )


def _names_project_dir(relative: str) -> bool:
    return PROJECT_DIR in relative.lower().split("/")


def _workspace_relative(workspace: Path, path: str) -> str:
    """`path` as spelt, normalised without touching the filesystem, relative to
    the workspace ('' if it is not lexically inside it)."""
    normal = Path(os.path.normpath(path.replace("\\", "/")))
    if not normal.is_absolute():
        return normal.as_posix()
    return normal.relative_to(workspace).as_posix() if normal.is_relative_to(workspace) else ""


def protected_locations(workspace: Path) -> list[Path]:
    """Where the project, user and org settings really are, symlinks followed."""
    candidates = [lambda: workspace / PROJECT_DIR, lambda: Path.home() / USER_DIR]
    # Read from the environment at call time, not from Settings, so the user settings
    # and org policy files stay protected even in a process whose settings omit or
    # fail to load them.
    user = os.environ.get("TOOLRUN_USER_SETTINGS_FILE")
    if user:
        candidates.append(lambda: Path(user).expanduser())
    policy = os.environ.get("TOOLRUN_POLICY_FILE")
    if policy:
        candidates.append(lambda: Path(policy).expanduser())
    locations = []
    for candidate in candidates:
        try:
            locations.append(candidate().resolve())
        except (RuntimeError, OSError):
            continue  # no home directory, or a symlink loop: nothing reachable to protect
    return locations
