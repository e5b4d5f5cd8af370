"""The live board: which chain step each pool process is running, and since
when, in memory shared between a worker's main process and its pool.

A chain runs in one task (docs/architecture.md, "A chain in one task"), so
Celery's main process, which sees only the task, does not know which step
runs. Each pool process writes here as it begins a step; the main process
reads it to give that step its own hard time limit, to renew that step's
lease, and to end that step if the process is killed or lost.

One slot per pool process index (billiard reuses the index of a process it
replaces), each written by its one process only, without a lock (a process
killed holding a lock would stop its main process): a sequence number that
is odd while a write is under way tells a reader that what it read may be
torn, and to read again. The memory is an anonymous shared mapping made
before the pool forks, so every pool process, replacements too, inherits it.
"""

from __future__ import annotations

import mmap
import struct
import time
import zlib
from typing import NamedTuple

SLOTS = 256  # pool processes a worker may run (autoscale's maximum included)
_SLOT = struct.Struct("<QqQid")  # sequence, pid, task tag, step (-1: none), started (monotonic)
_READS = 100  # tries at a slot that is being written before giving up on it


class Step(NamedTuple):
    """What a pool process runs: the `index`th step of the task tagged `tag`,
    begun at `started` (time.monotonic(), which all processes share)."""

    tag: int
    index: int
    started: float


def tag_of(task_id: str | None) -> int:
    """A task id as the board keeps it."""
    return zlib.crc32((task_id or "").encode())


class Board:
    def __init__(self, slots: int = SLOTS) -> None:
        self.slots = slots
        self._memory = mmap.mmap(-1, slots * _SLOT.size)  # MAP_SHARED: children see it

    def begin(self, slot: int, pid: int, tag: int, index: int) -> None:
        """From a pool process: it begins step `index` of the task tagged `tag`."""
        self._write(slot, pid, tag, index, time.monotonic())

    def clear(self, slot: int, pid: int) -> None:
        """From a pool process: its task has ended; it runs no step."""
        self._write(slot, pid, 0, -1, 0.0)

    def step(self, pid: int, tag: int) -> Step | None:
        """From the main process: the step pool process `pid` runs of the task
        tagged `tag`, or None if it runs none of that task (not begun, ended,
        or a torn slot that stays torn: a process killed while writing)."""
        for slot in range(self.slots):
            found = self._read(slot)
            if found is not None and found[0] == pid:
                _, got, index, started = found
                if got == tag and index >= 0:
                    return Step(got, index, started)
                return None
        return None

    def _write(self, slot: int, pid: int, tag: int, index: int, started: float) -> None:
        if not 0 <= slot < self.slots:
            return  # a pool larger than the board: its chains keep the task's own limit
        offset = slot * _SLOT.size
        sequence = _SLOT.unpack_from(self._memory, offset)[0]
        odd = sequence + 1 if sequence % 2 == 0 else sequence + 2  # a killed writer left it odd
        struct.pack_into("<Q", self._memory, offset, odd)
        _SLOT.pack_into(self._memory, offset, odd, pid, tag, index, started)
        struct.pack_into("<Q", self._memory, offset, odd + 1)

    def _read(self, slot: int) -> tuple[int, int, int, float] | None:
        offset = slot * _SLOT.size
        for _ in range(_READS):
            sequence, pid, tag, index, started = _SLOT.unpack_from(self._memory, offset)
            if sequence % 2 == 0 and struct.unpack_from("<Q", self._memory, offset)[0] == sequence:
                return pid, tag, index, started
        return None
