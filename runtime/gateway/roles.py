"""What each key may do (docs/architecture.md, "The HTTP gateway"): the checks
a route makes before it touches the runtime. Each returns what to use or raises
`Forbidden`, a 403 that says which limit the request passed."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from runtime.gateway.keys import Key, Role
from runtime.gateway.problems import Forbidden, Problem
from runtime.types import Mode

# From the least to the most a batch may do without a human: `auto` runs less
# than `default`, which can ask for what `auto` denies.
MODES = (Mode.plan, Mode.auto, Mode.default, Mode.accept_edits, Mode.bypass)


def require(key: Key, *roles: Role) -> None:
    if key.role is not Role.admin and key.role not in roles:
        allowed = ", ".join(role.value for role in (*roles, Role.admin))
        raise Forbidden(f"key {key.name!r} is a {key.role.value} key; this needs {allowed}")


def mode_for(key: Key, asked: Mode | None) -> Mode:
    """The batch's mode: as asked, never above the key's maximum; not asked,
    `default`, or the key's maximum if that is lower."""
    top = key.max_mode or Mode.bypass
    if asked is None:
        return min(Mode.default, top, key=MODES.index)
    if MODES.index(asked) > MODES.index(top):
        raise Forbidden(f"key {key.name!r} may use modes up to {top.value}, not {asked.value}")
    return asked


def workspace_for(key: Key, asked: str | None) -> str:
    """The batch's workspace, resolved: inside one of the key's roots. Not
    asked, the key's first root."""
    if asked is None:
        if not key.roots:
            raise Problem(422, "workspace required", "give the batch's workspace directory")
        return key.roots[0]
    try:
        workspace = Path(asked).expanduser().resolve()
    except (ValueError, OSError, RuntimeError):  # a NUL, a lone surrogate, a symlink loop
        raise Problem(422, "invalid workspace", "the workspace is not a usable path") from None
    if key.roots is not None and not within(workspace, key.roots):
        raise Forbidden(f"workspace {asked!r} is outside the roots of key {key.name!r}")
    try:  # only inside the roots: whether a path exists elsewhere is not a key's to learn
        usable = workspace.is_dir()
    except OSError:  # a component longer than the file system allows
        usable = False
    if not usable:
        raise Problem(422, "invalid workspace", "the workspace is not an existing directory")
    return str(workspace)


def within(workspace: str | Path, roots: Iterable[str]) -> bool:
    path = Path(workspace)
    return any(path == Path(root) or path.is_relative_to(root) for root in roots)


def rules_for(key: Key, rules: dict[str, list[str]] | None, org_allows: list[str]) -> None:
    """A submitter's batch may restrict (`ask`, `deny`) freely, and may allow
    only what an org policy rule allows, word for word."""
    if key.role is Role.admin or not rules:
        return
    beyond = [rule for rule in rules.get("allow", []) if rule not in org_allows]
    if beyond:
        raise Forbidden(
            f"a {key.role.value} key's batch may allow only what the org policy allows; "
            f"not allowed there: {', '.join(beyond)}"
        )
