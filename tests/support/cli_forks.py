"""`toolrun` runs forked from one process that imported the command line once.

Each run is still a process of its own (its own pid, environment, working
directory, stdin from /dev/null, stdout and stderr, exit status) running
`runtime.cli.main` as the installed script does; only the import, most of a
short command's time, is shared. Run as `python -m tests.support.cli_forks`,
it reads one JSON request a line on stdin and answers on stdout with the
child's pid, then with its exit status once it ends."""

from __future__ import annotations

import atexit
import json
import os
import sys
import traceback

from runtime.cli import main


def _child(request: dict) -> None:
    """In the forked child: become the requested `toolrun` run, and never return."""
    code: object = 1
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        for fd, path in ((1, request["out"]), (2, request["err"])):
            os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = ["toolrun", *request["args"]]
        try:
            main()
            code = 0
        except SystemExit as exit:
            code = exit.code
    except BaseException:  # noqa: BLE001 - what an uncaught exception does to a script
        traceback.print_exc()
        code = 1
    finally:
        if isinstance(code, str):
            print(code, file=sys.stderr)
            code = 1
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code if isinstance(code, int) else (0 if code is None else 1))


def serve() -> None:
    requests = os.fdopen(os.dup(0), "r")
    answers = os.fdopen(os.dup(1), "w")
    for line in requests:
        request = json.loads(line)
        answers.flush()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            requests.close()
            answers.close()
            _child(request)
        answers.write(json.dumps({"pid": pid}) + "\n")
        answers.flush()
        _, status = os.waitpid(pid, 0)
        answers.write(json.dumps({"code": os.waitstatus_to_exitcode(status)}) + "\n")
        answers.flush()


if __name__ == "__main__":
    serve()
