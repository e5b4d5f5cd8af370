"""Event ids of a batch's stream, and the cursor a `Last-Event-ID` stands for
(docs/architecture.md, "The HTTP gateway").

The cursor is a bitmap, two bits a call in the model's order (its notice, its
final result), of what a stream has sent. While it is short (`SMALL` hex
digits: up to 64 calls) it is the id itself, and a resume is exact in any
gateway process. Past that the whole cursor in every id made a stream's bytes
grow with the square of its calls (31 MB for 10,000 results), so the id is a
tag of this process's log of the stream, its position in it, and a
watermark: `<tag>.<sent>.<w>` says the stream's first `sent` events, and in
any case the final results of the first `w` calls. A resume in this process
finds the log and is exact; one in another process (or after the log was
dropped) knows only the watermark and sends again what lies past it, so a
client that resumes elsewhere may see a result twice (its `call_id` says so).
"""

from __future__ import annotations

import re
import secrets
import string
import threading
from array import array
from collections import OrderedDict

from runtime.gateway.problems import Problem

SMALL = 32  # hex digits of a cursor that is its own id
MAX_CURSOR = 100_000  # hex digits: 200,000 calls; a longer Last-Event-ID is not one of ours
MAX_CALLS = 2 * MAX_CURSOR
KEEP = 1024  # streams whose logs this process keeps for their resumes
_TAGGED = re.compile(r"^([0-9a-f]{16})\.([0-9]{1,7})\.([0-9]{1,7})$")


class Log:
    """One stream's events past its start, in the order it sent them."""

    def __init__(self, tag: str, start: int) -> None:
        self.tag, self.start = tag, start
        self.bits = array("I")

    def cursor(self, sent: int) -> int:
        cursor = self.start
        for bit in self.bits[:sent]:
            cursor |= 1 << bit
        return cursor


class Cursors:
    """The logs of this process's streams, the newest `KEEP` of them."""

    def __init__(self) -> None:
        self._logs: OrderedDict[str, Log] = OrderedDict()
        self._lock = threading.Lock()

    def open(self, start: int) -> Log:
        log = Log(secrets.token_hex(8), start)
        with self._lock:
            self._logs[log.tag] = log
            while len(self._logs) > KEEP:
                self._logs.popitem(last=False)
        return log

    def find(self, tag: str) -> Log | None:
        with self._lock:
            return self._logs.get(tag)

    def parse(self, text: str | None) -> int:
        """The cursor `text` (a `Last-Event-ID`) stands for; 0 for none."""
        if not text:
            return 0
        tagged = _TAGGED.match(text)
        if tagged is not None:
            log, sent, watermark = self.find(tagged[1]), int(tagged[2]), int(tagged[3])
            if log is not None and sent <= len(log.bits):
                return log.cursor(sent)
            watermark = min(watermark, MAX_CALLS)
            return ((1 << 2 * watermark) - 1) // 3 << 1  # the final bit of each call below it
        if len(text) > MAX_CURSOR or not all(c in string.hexdigits for c in text):
            raise Problem(
                400,
                "invalid Last-Event-ID",
                "Last-Event-ID must be the id of an event this stream sent",
            )
        return int(text, 16)


class Ids:
    """The ids of one stream's events, from the cursor it started at."""

    def __init__(self, cursors: Cursors, calls: int, start: int) -> None:
        self.cursors, self.calls = cursors, calls
        self.finals = bytearray(calls)  # whether each call's final result was sent
        for position in range(calls):
            self.finals[position] = start >> (2 * position + 1) & 1
        self.watermark = 0
        self._advance()
        self.log: Log | None = None

    def next(self, sent: int, bit: int) -> str:
        """The id of the event that set `bit`, `sent` being the cursor with it."""
        if bit & 1:
            self.finals[bit >> 1] = 1
            self._advance()
        if sent.bit_length() <= 4 * SMALL and self.log is None:
            return format(sent, "x")
        if self.log is None:
            self.log = self.cursors.open(sent & ~(1 << bit))
        self.log.bits.append(bit)
        return f"{self.log.tag}.{len(self.log.bits)}.{self.watermark}"

    def _advance(self) -> None:
        while self.watermark < self.calls and self.finals[self.watermark]:
            self.watermark += 1
