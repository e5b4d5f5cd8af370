"""The fast tier's guard against server processes (tests/conftest.py). `make check`
runs the tests not marked `server` with this folder on PYTHONPATH, so every Python
process of the run (pytest, and the `toolrun` or benchmark it starts) loads it as
`sitecustomize`: starting a program that is, or starts, a server process then
fails, and is written to the file TESTS_SERVER_STARTS names for the session's end
to report, even if the process that tried swallowed the error."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

STARTS = "TESTS_SERVER_STARTS"  # not TOOLRUN_*: the CLI tests drop those from a child's env
PROGRAMS = {"redis-server", "celery", "postgres", "pg_ctl", "initdb", "flower"}
TOOLRUN_COMMANDS = {"up", "demo", "serve"}  # the `toolrun` commands that start processes
MODULES = {"celery", "tests.benchmarks.bench", "tests.soak"}  # `python -m` that start a stack


def is_server(argv) -> bool:
    words = [argv] if isinstance(argv, str | bytes | os.PathLike) else list(argv)
    words = [os.fsdecode(word) for word in words]
    if len(words) == 1:
        words = words[0].split()
    names = [Path(word).name for word in words]
    if PROGRAMS.intersection(names):
        return True
    if "-m" in words and MODULES.intersection(words[words.index("-m") + 1 :][:1]):
        return True
    cli = "toolrun" in names or "runtime.cli" in words
    return cli and bool(TOOLRUN_COMMANDS.intersection(words))


def install(log: str) -> None:
    start = subprocess.Popen.__init__

    def guarded(self, args, *rest, **options):
        if is_server(args):
            with open(log, "a") as out:
                out.write(f"{os.getpid()}: {args!r}\n")
            raise AssertionError(f"the fast tier started a server process: {args!r}")
        start(self, args, *rest, **options)

    subprocess.Popen.__init__ = guarded


if os.environ.get(STARTS):
    install(os.environ[STARTS])
