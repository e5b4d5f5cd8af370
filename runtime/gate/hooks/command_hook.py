"""A hook that is a command, run as Claude Code runs its hooks: the request as
JSON on stdin; exit 0 and the answer as JSON on stdout (nothing: no opinion);
exit 2 blocks, stderr being the reason (a pre hook's deny, a post hook's note
for the model); any other exit is a non-blocking error, recorded and otherwise
ignored. A command past its timeout is killed with its process group.

It runs as the process that asks it (the submitter for pre hooks, the worker
for post hooks), outside the sandbox: hooks are the organisation's or the
user's own code, declared in settings no tool call may write, not the
model's (docs/architecture.md, "Policy hooks"). Its environment is an
allowlist, as the shell tool's is, so the cluster's secrets stay out; its
working directory is the batch's workspace.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

from runtime.errors import HookFailed
from runtime.gate.hooks.declaration import Hook

KEPT_ENV = ("PATH", "HOME", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "USER")
BLOCK = 2  # Claude Code's exit code for "blocked, stderr says why"
STDERR_CHARS = 2000


def ask(hook: Hook, request: dict[str, Any], key: bytes) -> Any:
    argv = list(hook.target) if isinstance(hook.target, tuple) else ["/bin/sh", "-c", hook.target]
    workspace = request.get("workspace")
    cwd = workspace if workspace and Path(workspace).is_dir() else None
    env = {name: os.environ[name] for name in KEPT_ENV if name in os.environ}
    env |= {"HOOK_NAME": hook.name, "HOOK_WHEN": hook.when}
    try:
        process = subprocess.Popen(  # noqa: S603 - the settings' own command
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
    except OSError as error:
        raise HookFailed(f"could not start: {error}") from None
    try:
        out, err = process.communicate(json.dumps(request, default=str).encode(), hook.timeout)
    except subprocess.TimeoutExpired:
        _kill(process)
        raise HookFailed(f"gave no answer within {hook.timeout:g} s") from None
    stderr = err.decode(errors="replace").strip()[:STDERR_CHARS]
    if process.returncode == BLOCK:
        reason = stderr or f"hook {hook.name} exited with {BLOCK}"
        return {"decision": "deny", "reason": reason} if hook.when == "pre" else {"note": reason}
    if process.returncode != 0:
        said = f": {stderr}" if stderr else ""
        raise HookFailed(f"exited with {process.returncode}{said}", non_blocking=True)
    if not out.strip():
        return None
    try:
        return json.loads(out)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise HookFailed("wrote something on stdout that is not JSON") from None


def _kill(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.communicate()
