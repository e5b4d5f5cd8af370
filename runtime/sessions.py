"""The process sessions a call started, so that they die with it.

A tool that starts a command in a session of its own (the shell's bash, an MCP
stdio server) outlives the pool process running it if that process is killed:
at the hard limit, or by anyone. So a worker's pool processes record every such
session in a registry on disk, one directory per pool process
(`<root>/<host>-<pid namespace>/<pid>-<start time>/<session id>`), and the worker's main process,
once a pool process is gone, kills what it recorded (SIGKILL to each group and
every member of each session, then waits until none is left) before it ends
the call (docs/architecture.md, "Stopping a call"). A worker that starts kills
what pool processes that no longer exist left behind.

A session records itself before it runs anything: the command is started
through a few lines of `sh` that create the entry (named by its own pid), then
check that their parent is still the pool process that started them, and only
then `exec` the command. So a pool process killed while it spawns leaves no
session unrecorded: either the entry exists before the main process looks, or
the session sees its parent gone and exits.

Nothing is recorded until `configure` names a root: only worker processes
(prefork, one call per pool process at a time) do. A process that leaves its
session on purpose (`setsid`) escapes this, as it escapes the shell's own
timeout.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import time
from pathlib import Path

PATIENCE = 5.0  # seconds SIGKILLed sessions may take to be gone
# $1: the pool process's directory, $2: its pid, then the command. 125: not run.
RECORD_THEN_RUN = (
    ': > "$1/$$" || exit 125; '
    'read -r _ _ _ parent _ < "/proc/$$/stat" || exit 125; '
    '[ "$parent" = "$2" ] || exit 125; '
    'shift 2; exec "$@"'
)
_root: list[Path] = []
_SH = [shutil.which("sh") or "/bin/sh"]
_mine: dict[int, Path] = {}  # pid -> this process's directory (a forked child has its own)
# Whether this process may have entries left to end: it started a session
# since its last clean look. Most calls start none, and `end_own` then looks
# at nothing (a look is a mkdir, two directory listings: ten system calls).
_looking: list[bool] = [False]


def configure(root: Path | None) -> None:
    """Record sessions under `root` from now on (None: stop recording). A
    worker's main process calls this before it forks its pool."""
    _root.clear()
    _mine.clear()
    if root is not None and Path("/proc/self/stat").exists():
        here = root / _namespace()
        here.mkdir(mode=0o700, parents=True, exist_ok=True)
        _root.append(here.resolve())


def _namespace() -> str:
    """This host and pid namespace: a pid means something only there (a home
    shared by containers or hosts keeps each one's sessions apart)."""
    try:
        namespace = os.readlink("/proc/self/ns/pid").strip("pid:[]")
    except OSError:
        namespace = "0"
    return f"{socket.gethostname()}-{namespace}"


def recording() -> bool:
    return bool(_root)


def wrapped(argv: list[str]) -> list[str]:
    """`argv`, to be started in a new session, made to record that session in
    this process's directory before it runs (unchanged when not recording).
    The `sh` in front costs about 2 ms a command."""
    if not _root:
        return argv
    _looking[0] = True  # before the session can exist: `end_own` looks from now on
    directory, pid = str(_directory()), str(os.getpid())
    return [_SH[0], "-c", RECORD_THEN_RUN, "toolrun-session", directory, pid, *argv]


def forget(session: int) -> None:
    """A session the tool ended itself: its entry goes."""
    if _root:
        with contextlib.suppress(OSError):
            (_directory() / str(session)).unlink()


def end_own() -> bool:
    """After a call, in the process that ran it: kill whatever session it
    recorded that is still there, and clear the entries. True if none is left.
    A process that started none since its last clean look has none to end."""
    if not _root or not _looking[0]:
        return True
    _looking[0] = False  # cleared before the look: one started meanwhile sets it again
    gone = _end(_directory())
    if not gone:  # a survivor is looked for again after the next call
        _looking[0] = True
    return gone


def kill_own() -> None:
    """In a process about to kill itself (the fence, runtime/execution/fence.py):
    SIGKILL each session it recorded at once, neither waiting nor looking for
    strays, so no thread of it can see its command end and record a result
    before it dies. What is left is ended by whoever finds the process gone
    (`end_left_by`, `end_orphans`), as for any killed pool process."""
    if not _root:
        return
    for entry in _entries(_directory()):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(int(entry.name), signal.SIGKILL)


def leave() -> None:
    """A pool process that exits: what it recorded goes, and so does its directory."""
    if _root:
        directory = _directory()
        _end(directory)
        with contextlib.suppress(OSError):
            directory.rmdir()


def end_left_by(pid: int, patience: float = PATIENCE) -> bool:
    """From the worker's main process, once pool process `pid` is gone: kill
    every session it recorded and wait until they are gone. True if none is left."""
    if not _root:
        return True
    gone = True
    for directory in _root[0].glob(f"{pid}-*"):
        if not _exists(directory.name):
            gone = _end(directory, patience) and gone
    return gone


def end_orphans(patience: float = PATIENCE) -> bool:
    """At a worker's start: the sessions of every pool process that no longer exists."""
    if not _root:
        return True
    gone = True
    for directory in _root[0].iterdir():
        if directory.is_dir() and not _exists(directory.name):
            gone = _end(directory, patience) and gone
    return gone


def _directory() -> Path:
    pid = os.getpid()
    if pid not in _mine:
        _mine.clear()
        _mine[pid] = _root[0] / f"{pid}-{_started(pid)}"
    _mine[pid].mkdir(mode=0o700, parents=True, exist_ok=True)
    return _mine[pid]


def _end(directory: Path, patience: float = PATIENCE) -> bool:
    sessions = [int(entry.name) for entry in _entries(directory)]
    deadline = time.monotonic() + patience
    while True:
        members = _members(sessions)
        for pid in members:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        for session in sessions:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(session, signal.SIGKILL)
        if not members or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    if members:
        return False
    for entry in _entries(directory):
        with contextlib.suppress(OSError):
            entry.unlink()
    if directory != _mine.get(os.getpid()):
        with contextlib.suppress(OSError):
            directory.rmdir()
    return True


def _entries(directory: Path) -> list[Path]:
    try:
        return [entry for entry in directory.iterdir() if entry.name.isdigit()]
    except OSError:
        return []


def _members(sessions: list[int]) -> list[int]:
    """Live (not zombie) processes in one of `sessions`, or in a process group
    of that id."""
    if not sessions:
        return []
    wanted = {str(session) for session in sessions} - {
        str(os.getpid()),
        str(os.getpgrp()),
        str(os.getsid(0)),
    }  # never this process's own
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _stat(entry.name)
            # state, ppid, pgrp, session
            if stat and stat[0] not in "ZX" and (stat[2] in wanted or stat[3] in wanted):
                found.append(int(entry.name))
    return found


def _exists(name: str) -> bool:
    """Whether the pool process of directory `<pid>-<start time>` still runs."""
    pid, _, started = name.partition("-")
    if not pid.isdigit():
        return False
    stat = _stat(pid)
    return stat is not None and stat[0] not in "ZX" and stat[19] == started


def _started(pid: int) -> str:
    stat = _stat(str(pid))
    return stat[19] if stat else "0"


def _in_child() -> None:
    _looking[0] = False  # the parent's sessions are its own: the child's directory is new


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_in_child)


def _stat(pid: str) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name: state, ppid, pgrp,
    session, ... (the start time is the 20th)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rfind(")") + 2 :].split()
