"""The live table of `toolrun run` and `toolrun watch` on a terminal: every
call that has ended, is running or waits for a person, in the model's order,
under a title that counts them (`2 of 5 ended`), redrawn at a bounded rate
(docs/architecture.md, "The live table").

A redraw writes the whole table again, so it is done only when something
changed (at most every `MIN_GAP` seconds) or when the clocks of running calls
are due to move: every second at first, then less often as the run ages
(`tick_after`). Rich's own refresh thread redrew 8 times a second whether or
not anything changed: 4.4 MB over a five-minute call.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from rich.table import Table

from runtime.results import display
from runtime.types import ApprovalRequested, ToolResult

MIN_GAP = 0.25  # seconds between two redraws for a change
POLL = 0.25  # seconds between two looks at the batch
STARTED_EVERY = 1.0  # seconds between two reads of which calls a worker has taken


def tick_after(age: float) -> float:
    """Seconds between redraws that only move the running calls' clocks, for
    a run `age` seconds old: every second for ten seconds, then a tenth of the
    age, at most every ten seconds (a clock shown to about a tenth)."""
    return min(max(1.0, age / 10), 10.0)


class Board:
    """What the live table shows, and when it is due to be drawn again."""

    def __init__(
        self,
        batch_id: str,
        calls: Iterable[tuple[str, str]],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.batch_id = batch_id
        self.tools = dict(calls)  # call id -> tool, in the model's order
        self.clock = clock
        self.begun = clock()
        self.ended: dict[str, ToolResult] = {}
        self.waiting: dict[str, ApprovalRequested] = {}
        self.running: dict[str, float] = {}  # call id -> when it was first seen taken
        self.taken: set[str] = set()  # the calls a worker had taken, when last read
        self.changed = True
        self.drawn_at: float | None = None
        self.looked_at: float | None = None

    def looks_due(self) -> bool:
        """Whether to read again which calls a worker has taken."""
        now = self.clock()
        return self.looked_at is None or now - self.looked_at >= STARTED_EVERY

    def take(
        self,
        results: Iterable[ToolResult],
        waiting: Iterable[ApprovalRequested],
        started: set[str] | None = None,
    ) -> None:
        """The batch as it stands: its results in, the calls a person was asked
        about and (`started`, when read) the calls a worker has taken; a call
        approved and taken runs, though its notice stays until it ends."""
        now = self.clock()
        if started is not None:
            self.looked_at, self.taken = now, set(started)
        for result in results:
            if result.call_id not in self.ended:
                self.ended[result.call_id] = result
                self.changed = True
        done = self.ended.keys()
        waits = {e.call_id: e for e in waiting if e.call_id not in done | self.taken}
        running = self.taken - done
        if waits.keys() != self.waiting.keys() or running != self.running.keys():
            self.changed = True
        self.waiting = waits
        self.running = {call: self.running.get(call, now) for call in running}

    def due(self) -> bool:
        """Whether to draw now: a change, MIN_GAP after the last draw, or a
        running call's clock due to move."""
        if self.drawn_at is None:
            return True
        since = self.clock() - self.drawn_at
        if self.changed:
            return since >= MIN_GAP
        return bool(self.running) and since >= tick_after(self.clock() - self.begun)

    def drawn(self) -> None:
        self.drawn_at, self.changed = self.clock(), False

    def title(self) -> str:
        total, ended = len(self.tools), len(self.ended)
        parts = [f"batch {self.batch_id}: {ended} of {total} ended"]
        if self.running:
            parts.append(f"{len(self.running)} running")
        if self.waiting:
            parts.append(f"{len(self.waiting)} awaiting approval")
        queued = total - ended - len(self.running) - len(self.waiting)
        if queued > 0:
            parts.append(f"{queued} not started")
        return ", ".join(parts)

    def table(self) -> Table:
        now = self.clock()
        table = display.results_table((), self.title())
        for call, tool in self.tools.items():
            if call in self.ended:
                display.add_result(table, self.ended[call])
            elif call in self.waiting:
                reason = self.waiting[call].reason
                table.add_row(call, tool, "[yellow]awaiting approval[/]", "", "", reason)
            elif call in self.running:
                seconds = now - self.running[call]
                table.add_row(call, tool, "[cyan]running[/]", "", "", f"for {seconds:.0f} s")
        return table
