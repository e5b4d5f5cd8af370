"""`shell`: run one bash command line in the workspace.

What it promises, beyond what the permission gate decided:

- It refuses, before running anything, a command that names a toolrun settings
  location or redirects outside the workspace (`runtime.gate.shell.commands`), whatever
  the rules say. Static reading cannot see every way to write a file
  (`python -c ...`), so the settings files are also compared before and after
  the run; one that changed is put back and the call ends `denied`.
- The command runs as `bash -c` in the workspace, in a session of its own, with
  no stdin and an environment built from an allowlist (PATH, HOME, locale): no
  `TOOLRUN_*`, keys, tokens or passwords reach it.
- It runs in the sandbox (`runtime.sandbox`, docs/architecture.md "The sandbox"):
  only the workspace writable, no other workspace, no toolrun home, no `/proc` of
  the worker, no network (unless the org policy lists hosts: then only those,
  through a proxy of the call's own), as `nobody`. Where the sandbox cannot be had, nothing runs
  and the call ends with an error that says why; only an explicit org (or worker)
  setting runs it unconfined, and the call's summary then says so.
- On timeout, and also after a normal exit, the whole process group is ended
  (SIGTERM, then SIGKILL after a grace period): background jobs do not outlive
  the call. On a worker the session is recorded (`runtime.sessions`), so it is
  killed too when the pool process running the call is killed or lost. A
  process that leaves the session on purpose (`setsid`) escapes this only
  unconfined: in the sandbox, the command's pid namespace ends with it.
- A non-zero exit code is a result, not an error: status `ok`, the message
  says "exited with N". `grep` and `diff` exit 1 as an answer, and the model
  needs the output of a failing build; a batch that must stop on failure can
  use `&&` inside one command.
- stdout and stderr are bounded by the result size: the first third and the
  last two thirds of each are kept, with the number of bytes cut between them.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from pydantic import Field

from runtime import sandbox, sessions
from runtime.errors import PathOutsideWorkspace, ToolError
from runtime.gate.shell import (
    commands,  # a module import: runtime.commands imports runtime.tools too
)
from runtime.redaction import Redactor
from runtime.registry.capabilities import ToolContext, ToolInput, ToolOutput, tool
from runtime.tools.bounds import budget, cut_text, json_len, redactor_of
from runtime.tools.settings_guard import SettingsGuard
from runtime.types import Risk, Status

MAX_TIMEOUT = 600.0
MAX_COMMAND = 100_000  # characters; the analysis before running stays cheap
GRACE = 2.0
KEPT_ENV = ("PATH", "HOME", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "USER")
FIXED_ENV = {
    "TERM": "dumb",
    "PAGER": "cat",
    "GIT_PAGER": "cat",
    "GIT_TERMINAL_PROMPT": "0",
    "NO_COLOR": "1",
}
CUT_HINT = (
    "[output cut to fit the result size; redirect it to a file in the workspace and "
    "read_file it with offset and limit, or narrow it with head, tail or grep]"
)


class ShellTimeout(ToolError):
    """The command ran past its timeout; its process group was killed. It may
    have done part of its work: the invocation ends the call `outcome_unknown`
    (kind `timeout`), as for any side effect a timeout stopped."""

    status = Status.timeout


class SettingsChanged(ToolError):
    """The command changed a toolrun settings file; it has been put back."""

    status = Status.denied


class ShellInput(ToolInput):
    command: str = Field(
        min_length=1,
        max_length=MAX_COMMAND,
        description="A bash command line, run in the workspace directory. Pipes, && and ; work; "
        "stdin is empty, so nothing interactive.",
    )
    timeout: float = Field(
        30.0,
        gt=0,
        le=MAX_TIMEOUT,
        description="Seconds before the command and everything it started are killed "
        "(default 30, at most 600).",
    )


@tool(risk=Risk.destructive, timeout=MAX_TIMEOUT + 4 * GRACE, subject=("command", "command"))
def shell(args: ShellInput, ctx: ToolContext) -> ToolOutput:
    """Run a bash command line in the workspace; returns its exit code, stdout and stderr.

    A non-zero exit code is reported, not treated as a failure. Long output is
    cut in the middle (start and end kept). Background jobs are killed when the
    command ends. Commands that write toolrun settings files, or redirect to a
    file outside the workspace, are refused.
    """
    root = ctx.resolve(".")
    _refuse(args.command, root)
    guard = SettingsGuard(root)
    try:
        run = _run(args.command, root, args.timeout, limit=budget(ctx.max_bytes), ctx=ctx)
    finally:
        changed = guard.put_back()
    if changed:
        raise SettingsChanged(
            f"the command changed {', '.join(changed)}, a toolrun settings file; it was put back. "
            "Tools may not change the agent's own permissions; ask the user to edit the settings."
        )
    if run.exit_code is None:
        out, err = run.stdout.parts(redactor_of(ctx)), run.stderr.parts(redactor_of(ctx))
        tail = _squeeze(out, 1024)[0] + _squeeze(err, 1024)[0]
        raise ShellTimeout(
            f"timed out after {args.timeout:g} s; the command and everything it started were "
            f"killed. Give a larger timeout (at most {MAX_TIMEOUT:g} s) or run something "
            f"shorter. Output before the kill:\n{tail}"
        )
    return _output(args.command, run, ctx.max_bytes, redactor_of(ctx))


def _refuse(command: str, root: Path) -> None:
    if "\x00" in command:
        raise ToolError("the command contains a NUL byte; remove it")
    analysis = commands.analyze(command, root)
    reason = commands.touches_settings(analysis, root)
    if reason:
        raise PathOutsideWorkspace(
            f"refused: {reason}. Tools may not change the agent's own permissions; "
            "ask the user to edit the settings."
        )
    outside = commands.outside_redirects(analysis, root)
    if outside:
        raise PathOutsideWorkspace(
            f"refused: the command redirects to {', '.join(map(repr, outside))}, outside the "
            "workspace or not known before it runs; redirect into a workspace file instead."
        )


# --- running ----------------------------------------------------------------------


class _Capture(threading.Thread):
    """Reads a pipe to its end, keeping the first `limit` bytes and the last
    `limit` bytes, so a chatty command cannot fill the worker's memory."""

    def __init__(self, stream: IO[bytes], limit: int) -> None:
        super().__init__(daemon=True)
        self.stream, self.limit = stream, limit
        self.head, self.tail, self.total = bytearray(), bytearray(), 0

    def run(self) -> None:
        fd = self.stream.fileno()
        try:
            while chunk := os.read(fd, 65536):
                self.total += len(chunk)
                room = self.limit - len(self.head)
                self.head += chunk[:room]
                self.tail += chunk[max(room, 0) :]
                del self.tail[: max(len(self.tail) - self.limit, 0)]
        finally:
            self.stream.close()

    def parts(self, redactor: Redactor) -> tuple[str, int]:
        """The kept text, redacted before any bound cuts it, and how many bytes
        were dropped between head and tail."""
        head, tail = bytes(self.head), bytes(self.tail)
        gap = max(self.total - len(head) - len(tail), 0)
        return redactor.redact_text((head + tail).decode("utf-8", errors="replace")), gap


@dataclass
class _Run:
    exit_code: int | None  # None: killed at the timeout
    stdout: _Capture
    stderr: _Capture


def _run(command: str, root: Path, timeout: float, *, limit: int, ctx: ToolContext) -> _Run:
    env = _environment()
    bash = shutil.which("bash", path=env["PATH"]) or "/bin/sh"
    # The hosts the policy lets the sandbox reach, through a proxy of the call's own
    # (docs/architecture.md, "The sandbox"); unconfined, a process has the host's network.
    with sandbox.reaching(ctx.network if ctx.confined else (), ctx.internal_hosts) as proxy:
        argv = sandbox.confine(
            [bash, "-c", command],
            confined=ctx.confined,
            workspace=root,
            env=env,
            noted=ctx.unconfined,
            proxy=proxy,
        )
        process = subprocess.Popen(
            sessions.wrapped(argv),
            cwd=root,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            close_fds=True,
        )
        stdout, stderr = _Capture(process.stdout, limit), _Capture(process.stderr, limit)
        stdout.start()
        stderr.start()
        try:
            code: int | None = _wait(process, timeout)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            _end_group(process)
    stdout.join(GRACE)
    stderr.join(GRACE)
    return _Run(code, stdout, stderr)


def _wait(process: subprocess.Popen, timeout: float) -> int:
    """The exit code, as soon as the process exits: `Popen.wait(timeout)` polls
    with sleeps that double up to 50 ms, which would add up to half again to a
    command of 10 ms (a sandboxed one's start on a busy machine). A pidfd
    wakes the wait at the exit (Linux 5.3); elsewhere, Popen's polling."""
    try:
        handle = os.pidfd_open(process.pid)
    except (AttributeError, OSError):
        return process.wait(timeout)
    try:
        if not select.select([handle], [], [], timeout)[0]:
            raise subprocess.TimeoutExpired(process.args, timeout)
    finally:
        os.close(handle)
    return process.wait()


def _end_group(process: subprocess.Popen) -> None:
    """SIGTERM the command's process group, SIGKILL whatever is left after GRACE."""
    group = process.pid  # start_new_session: the group id is the leader's pid
    try:
        os.killpg(group, signal.SIGTERM)
    except ProcessLookupError:
        process.wait()
        sessions.forget(group)
        return
    deadline = time.monotonic() + GRACE
    while time.monotonic() < deadline:
        process.poll()  # reap the leader, or it stays in the group as a zombie
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            sessions.forget(group)
            return
        time.sleep(0.02)
    try:
        os.killpg(group, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()
    sessions.forget(group)


def _environment() -> dict[str, str]:
    """An allowlist, not a blocklist: a secret under an unexpected name stays out."""
    env = {name: os.environ[name] for name in KEPT_ENV if name in os.environ}
    env.setdefault("PATH", os.defpath)
    env.update(FIXED_ENV)
    return env


# --- output -----------------------------------------------------------------------


def _output(command: str, run: _Run, max_bytes: int, redactor: Redactor) -> ToolOutput:
    room = budget(max_bytes)
    out, err = run.stdout.parts(redactor), run.stderr.parts(redactor)
    out_need, err_need = _need(out), _need(err)
    err_room = min(err_need, max(room // 4, room - out_need))
    stdout, out_cut = _squeeze(out, room - err_room)
    stderr, err_cut = _squeeze(err, err_room)
    code = run.exit_code
    status = f"killed by signal {-code}" if code < 0 else f"exited with {code}"
    sections = [status]
    sections += [f"--- stdout ---\n{stdout}"] if stdout else []
    sections += [f"--- stderr ---\n{stderr}"] if stderr else []
    sections += [CUT_HINT] if out_cut or err_cut else []
    line = " ".join(redactor.redact_text(command).split())
    return ToolOutput(
        content={
            "exit_code": code,
            "stdout": stdout,
            "stderr": stderr,
            "truncated": out_cut or err_cut,
        },
        message="\n".join(sections),
        summary=f"{line[:80]}{'…' if len(line) > 80 else ''}: {status}",
    )


def _need(captured: tuple[str, int]) -> int:
    text, gap = captured
    return json_len(text) + (1 << 30 if gap else 0)  # a gap never fits


def _squeeze(captured: tuple[str, int], room: int) -> tuple[str, bool]:
    """The captured text within `room` JSON bytes: whole if it fits, else its
    first third and last two thirds around a note of how much was cut."""
    text, gap = captured
    if not gap and json_len(text) <= room:
        return text, False
    total = gap + len(text.encode())
    size = room - 48
    while size > 32:
        front = cut_text(text, size // 3)
        rest = text[len(front) :].encode()
        back = rest[max(len(rest) - (size - size // 3), 0) :].decode("utf-8", errors="ignore")
        cut = total - len(front.encode()) - len(back.encode())
        squeezed = f"{front}\n[... {cut} bytes cut ...]\n{back}"
        if json_len(squeezed) <= room:
            return squeezed, True
        size = size * 3 // 4
    return f"[{total} bytes cut]"[: max(room, 0)], True
