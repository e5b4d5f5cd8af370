"""The live table of `toolrun run` (runtime/cli/board.py): running rows and a
count of what has ended, drawn when something changed and, for the clocks of
running calls, at a rate that falls as the run ages. A clock of the test's own
stands in for time: nothing here is timed."""

from __future__ import annotations

import io
import json
import os
import time

from rich.console import Console

from runtime.cli.board import MIN_GAP, Board, tick_after
from runtime.results import endings
from runtime.types import ApprovalRequested
from tests.cli.test_prompt import PATIENCE, on_a_pty
from tests.support.cli import stack_env

CALLS = [("r1", "nap"), ("w1", "bump"), ("w2", "bump")]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def shown(board: Board) -> str:
    console = Console(file=io.StringIO(), width=160, color_system=None)
    console.print(board.table())
    return console.file.getvalue()


def test_running_calls_have_rows_and_the_title_counts_them():
    clock = Clock()
    board = Board("b1", CALLS, clock)
    assert "b1: 0 of 3 ended, 3 not started" in shown(board)
    board.take([], [], started={"r1"})
    clock.now += 12
    text = shown(board)
    assert "0 of 3 ended, 1 running, 2 not started" in text
    assert "r1" in text and "running" in text and "for 12 s" in text
    done = endings.skipped_at_deadline("r1", "nap")
    asked = ApprovalRequested(call_id="w1", tool="bump", reason="write tools need approval")
    board.take([done], [asked], started={"r1"})
    text = shown(board)
    assert "1 of 3 ended, 1 awaiting approval, 1 not started" in text
    assert "running" not in text and "skipped" in text


def test_an_approved_call_a_worker_took_is_running_not_waiting():
    board = Board("b1", CALLS, Clock())
    asked = ApprovalRequested(call_id="w1", tool="bump", reason="asks")
    board.take([], [asked], started=set())
    board.take([], [asked], started={"w1"})  # its notice stays until it ends
    assert board.running.keys() == {"w1"} and not board.waiting


def test_a_change_is_drawn_but_not_more_often_than_the_gap():
    clock = Clock()
    board = Board("b1", CALLS, clock)
    assert board.due()
    board.drawn()
    board.take([endings.skipped_at_deadline("r1", "nap")], [], started=set())
    assert not board.due()  # changed, but just drawn
    clock.now += MIN_GAP
    assert board.due()
    board.drawn()
    board.take([endings.skipped_at_deadline("r1", "nap")], [], started=set())
    clock.now += 5
    assert not board.due()  # nothing changed and nothing runs: no redraw, however long


def test_running_clocks_move_every_second_then_less_often():
    clock = Clock()
    board = Board("b1", CALLS, clock)
    board.take([], [], started={"r1"})
    draws = 0
    for _ in range(300 * 20):  # five minutes, looked at every 50 ms
        clock.now += 0.05
        if board.due():
            board.drawn()
            draws += 1
    assert 40 <= draws <= 60  # where Rich's own refresh drew 2,400 times
    assert tick_after(0) == tick_after(10) == 1.0 and tick_after(60) == 6.0
    assert tick_after(3600) == 10.0


def test_toolrun_run_on_a_terminal_shows_the_running_call_and_redraws_little(
    stack, user_settings, workspace, tmp_path
):
    """The real CLI on a pty against the session's stack: while the slow call
    runs, its row and the count show; every draw writes the title once, and
    there are no more draws than changes and one a second."""
    path = tmp_path / "batch.json"
    calls = [
        {"id": "slow", "name": "nap", "arguments": {"label": "slow", "seconds": 4}},
        {"id": "quick", "name": "echo", "arguments": {"text": "hi"}},
    ]
    path.write_text(json.dumps(calls))
    env = {**stack_env(stack, user_settings), "TERM": "xterm", "COLUMNS": "160"}
    begun = time.monotonic()
    running, screen = on_a_pty(path, workspace, env)
    try:
        screen.expect("1 of 2 ended, 1 running")
        screen.expect("for ")
        screen.expect("2 of 2 ended")
        assert running.wait(timeout=PATIENCE) == 0
        screen.drain()
    finally:
        running.kill()
        running.wait()
        os.close(screen.fd)
    seconds = time.monotonic() - begun
    draws = screen.text.count(" of 2 ended")
    assert draws <= seconds + 8, (draws, seconds)
