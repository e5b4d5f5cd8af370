"""A call that waits for approval on `toolrun run`'s terminal
(runtime/cli/prompt.py), with the real CLI against the session's stack:
without a TTY one line says what waits and the exact commands that answer it,
as soon as it waits; on a TTY (a pty here) the person is asked and answers."""

from __future__ import annotations

import json
import os
import pty
import queue
import re
import select
import shlex
import subprocess
import threading
import time

from tests.support.cli import REPO, SCRIPT, stack_env, toolrun
from tests.support.tools import marks

PATIENCE = 90.0  # seconds a step may take on a busy machine before the test fails


def batch_file(tmp_path, *labels):
    path = tmp_path / "batch.json"
    calls = [
        {"id": f"w{i}", "name": "bump", "arguments": {"label": label}}
        for i, label in enumerate(labels, 1)
    ]
    path.write_text(json.dumps(calls))
    return path


def lines_of(stream) -> queue.Queue:
    found: queue.Queue = queue.Queue()

    def read() -> None:
        for line in stream:
            found.put(line.rstrip("\n"))
        found.put(None)

    threading.Thread(target=read, daemon=True).start()
    return found


def next_waiting(found: queue.Queue, seen: list[str]) -> str:
    while True:
        line = found.get(timeout=PATIENCE)
        assert line is not None, seen
        seen.append(line)
        if "awaiting approval" in line:
            return line


def test_without_a_tty_each_waiting_call_is_one_line_with_the_commands_that_answer_it(
    stack, user_settings, workspace, tmp_path
):
    env = stack_env(stack, user_settings)
    path = batch_file(tmp_path, "first", "second")
    argv = [SCRIPT, "run", str(path), "--mode", "default", "--workspace", str(workspace)]
    running = subprocess.Popen(
        argv, env=env, cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True
    )
    seen: list[str] = []
    try:
        found = lines_of(running.stdout)
        for call, answer in (("w1", 0), ("w2", 1)):
            line = next_waiting(found, seen)  # printed while the call waits: nothing answered yet
            assert line.startswith(f"{call}  awaiting approval") and "bump:" in line
            approve, deny = line.split("answer with: ")[1].split("  or: ")
            command = shlex.split([approve, deny][answer])
            assert command[:2] == ["toolrun", ["approve", "deny"][answer]]
            done = toolrun(*command[1:], env=env)
            assert done.returncode == 0, done.stderr
        running.wait(timeout=PATIENCE)
        seen += [line for line in iter(found.get, None)]
    finally:
        running.kill()
        running.wait()
    assert [m["label"] for m in marks(workspace, "effects")] == ["first"]
    ended = [line.split()[:2] for line in seen if line.startswith("w") and "awaiting" not in line]
    assert [call for call, _ in ended] == ["w1", "w2"], seen
    assert "denied" in seen[-1] and "why, for the model" in seen[-1], seen


def test_on_a_tty_the_person_is_asked_and_the_answer_is_given(
    stack, user_settings, workspace, tmp_path
):
    env = {**stack_env(stack, user_settings), "TERM": "xterm", "COLUMNS": "160", "USER": "tess"}
    running, screen = on_a_pty(batch_file(tmp_path, "asked", "refused"), workspace, env)
    main = screen.fd
    try:
        screen.expect("run it?")
        assert "w1 bump waits for approval" in screen.text and '"label": "asked"' in screen.text
        screen.type("y\n")
        screen.expect("approved w1")
        screen.expect("run it?")
        assert "w2 bump waits for approval" in screen.text
        screen.type("n\n")
        screen.expect("why (the model reads it)")
        screen.type("not on a friday\n")
        screen.expect("denied w2")
        assert running.wait(timeout=PATIENCE) is not None
        screen.drain()
    finally:
        running.kill()
        running.wait()
        os.close(main)
    assert [m["label"] for m in marks(workspace, "effects")] == ["asked"]
    batch = re.search(r"waits for approval \(batch ([0-9a-f]+)\)", screen.text).group(1)
    rows = json.loads(toolrun("ledger", batch, "--json", env=env).stdout)
    answers = [(r["call_id"], r["kind"], r["approver"], r["reason"]) for r in rows if r["approver"]]
    assert answers == [
        ("w1", "approval_given", "tess", None),
        ("w2", "approval_refused", "tess", "not on a friday"),
    ]


def on_a_pty(path, workspace, env) -> tuple[subprocess.Popen, Screen]:
    """`toolrun run` with a pty for its terminal, as a person's shell starts it."""
    argv = [SCRIPT, "run", str(path), "--mode", "default", "--workspace", str(workspace)]
    main, other = pty.openpty()
    running = subprocess.Popen(
        argv, env=env, cwd=REPO, stdin=other, stdout=other, stderr=other, close_fds=True
    )
    os.close(other)
    return running, Screen(main)


class Screen:
    """What the program wrote to the pty so far, waited on a read at a time."""

    def __init__(self, fd: int) -> None:
        self.fd, self.text, self._from = fd, "", 0

    def expect(self, wanted: str) -> None:
        """Wait until `wanted` appears after what the last expect matched."""
        deadline = time.monotonic() + PATIENCE
        while wanted not in self.text[self._from :]:
            left = deadline - time.monotonic()
            assert left > 0, f"{wanted!r} never appeared in:\n{self.text}"
            if self._read(left) is False:
                raise AssertionError(f"the program ended before {wanted!r}:\n{self.text}")
        self._from = self.text.index(wanted, self._from) + len(wanted)

    def type(self, keys: str) -> None:
        os.write(self.fd, keys.encode())

    def drain(self) -> None:
        while self._read(1.0):
            pass

    def _read(self, timeout: float) -> bool | None:
        """True: read something; None: nothing came in `timeout`; False: the end."""
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return None
        try:
            chunk = os.read(self.fd, 65536)
        except OSError:  # the program closed the pty
            return False
        self.text += chunk.decode(errors="replace")
        return bool(chunk)


def test_on_a_tty_always_approves_and_remembers_the_calls_rule_for_its_workspace(
    stack, user_settings, workspace, tmp_path, runtime
):
    env = {**stack_env(stack, user_settings), "TERM": "xterm", "COLUMNS": "160", "USER": "abe"}
    running, screen = on_a_pty(batch_file(tmp_path, "always"), workspace, env)
    main = screen.fd
    try:
        screen.expect("run it?")
        screen.type("a\n")
        screen.expect("remembered rule")
        screen.expect("allow bump for this workspace")
        running.wait(timeout=PATIENCE)
        screen.drain()
    finally:
        running.kill()
        running.wait()
        os.close(main)
    later = runtime.submit(
        [{"id": "w1", "name": "bump", "arguments": {"label": "later"}}],
        mode="default",
        workspace=workspace,
    )
    assert [r.status.value for r in later.results(timeout=60)] == ["ok"]  # nobody was asked
    assert [m["label"] for m in marks(workspace, "effects")] == ["always", "later"]
    listed = toolrun("rules", env=env).stdout
    assert f"allow bump  for workspace {workspace.resolve()}  added by abe" in listed
    rule_id = next(line.split()[0] for line in listed.splitlines() if str(workspace) in line)
    assert toolrun("rules", "revoke", rule_id, env=env).returncode == 0
