"""The live board: a pool process (a real forked child here) says which chain
step it runs; the main process reads it, and a torn or foreign slot reads as
nothing rather than as a wrong step."""

from __future__ import annotations

import os
import struct
import time

from runtime.worker.board import _SLOT, Board, tag_of


def test_a_forked_child_shows_the_step_it_runs_to_its_parent():
    board = Board(slots=4)
    tag = tag_of("task-1")
    ready_read, ready_write = os.pipe()
    child = os.fork()
    if child == 0:  # the pool process
        board.begin(2, os.getpid(), tag, 3)
        os.write(ready_write, b"1")
        os._exit(0)
    assert os.read(ready_read, 1) == b"1"
    os.waitpid(child, 0)
    step = board.step(child, tag)
    assert step is not None and step.index == 3 and step.tag == tag
    assert 0 <= time.monotonic() - step.started < 60


def test_another_task_an_ended_task_or_an_unknown_process_shows_no_step():
    board, pid = Board(slots=4), 4242
    board.begin(0, pid, tag_of("a"), 1)
    assert board.step(pid, tag_of("b")) is None  # the process has moved on to another task
    assert board.step(pid + 1, tag_of("a")) is None
    board.clear(0, pid)
    assert board.step(pid, tag_of("a")) is None


def test_a_slot_left_torn_by_a_killed_writer_reads_as_nothing_until_rewritten():
    board, pid, tag = Board(slots=2), 4242, tag_of("a")
    board.begin(1, pid, tag, 1)
    struct.pack_into("<Q", board._memory, _SLOT.size, 7)  # odd: a write that never finished
    assert board.step(pid, tag) is None
    board.begin(1, pid, tag, 2)  # the replacement process writes over it
    assert board.step(pid, tag).index == 2


def test_a_process_beyond_the_board_is_not_shown():
    board = Board(slots=1)
    board.begin(5, 4242, tag_of("a"), 1)
    assert board.step(4242, tag_of("a")) is None
