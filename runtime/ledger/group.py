"""Group commit: the ends of calls that finish at about the same time in one
process go to the ledger in one transaction.

A worker's threads finish reads side by side (sixteen naps of one batch end
within milliseconds), and a ledger such as SQLite takes one writer at a time.
The first thread to arrive writes what is waiting, its own row included, while
the others queue; when it commits, the next writes everything that queued
meanwhile. A lone call waits for nobody. If the transaction fails, every call
in it gets the error, and each caller buffers its own row as before; a row the
database refuses is written apart from the others, so it loses no row but its own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from runtime.ledger.ends import CallEnd


@dataclass
class _Waiting:
    end: CallEnd
    done: bool = False
    outcome: bool | BaseException = False  # ended the call, or what its transaction raised


class CommitGroup:
    def __init__(self, write: Callable[[list[CallEnd]], list[bool | BaseException]]) -> None:
        """`write(ends)` writes them (in one transaction where it can) and says
        what became of each (whether it ended its call, or the error), or
        raises for all of them."""
        self._write = write
        self._changed = threading.Condition()
        self._queue: list[_Waiting] = []
        self._leading = False

    def write(self, end: CallEnd) -> bool:
        """Once `end` is committed, whether it ended its call (False: another
        reporter had); or raise what its transaction raised."""
        mine = _Waiting(end)
        with self._changed:
            self._queue.append(mine)
            while self._leading and not mine.done:
                self._changed.wait()
            if mine.done:  # a leader wrote it meanwhile
                return self._outcome(mine)
            self._leading, group, self._queue = True, self._queue, []
        try:
            outcomes = self._write([waiting.end for waiting in group])
        except BaseException as failure:  # noqa: BLE001 - each caller in the group gets it
            outcomes = [failure] * len(group)
        with self._changed:
            for waiting, outcome in zip(group, outcomes, strict=True):
                waiting.done, waiting.outcome = True, outcome
            self._leading = False
            self._changed.notify_all()  # the next leader writes what queued meanwhile
        return self._outcome(mine)

    @staticmethod
    def _outcome(waiting: _Waiting) -> bool:
        if isinstance(waiting.outcome, BaseException):
            raise waiting.outcome
        return waiting.outcome
