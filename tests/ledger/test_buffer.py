"""The ledger's buffer: rows that could not be written wait, in order, and are
written once the ledger is back; a row the ledger refuses is dropped, said in a log."""

from __future__ import annotations

from runtime.errors import LedgerRefused, LedgerUnavailable
from runtime.ledger.buffer import LedgerBuffer


class Database:
    """Writes that land in `rows` while `up`, and fail as the ledger does when not."""

    def __init__(self) -> None:
        self.rows: list[str] = []
        self.up = True

    def row(self, name: str, fault: type[Exception] = LedgerUnavailable):
        def work() -> None:
            if not self.up:
                raise fault("down")
            self.rows.append(name)

        return work


def test_rows_wait_while_the_ledger_is_down_and_land_in_order_once_it_is_back():
    database, buffer = Database(), LedgerBuffer(interval=3600)  # its thread never flushes here
    assert buffer.write(database.row("a"))
    database.up = False
    assert not buffer.write(database.row("b"))
    database.up = True
    assert not buffer.write(database.row("c"))  # kept behind "b", not written before it
    assert (database.rows, len(buffer)) == (["a"], 2)
    assert buffer.flush()
    assert (database.rows, len(buffer)) == (["a", "b", "c"], 0)


def test_flush_stops_at_the_first_row_that_still_fails():
    database, buffer = Database(), LedgerBuffer(interval=3600)
    database.up = False
    buffer.keep(database.row("a"))
    assert not buffer.flush() and len(buffer) == 1


def test_a_refused_row_is_dropped_not_retried(caplog):
    database, buffer = Database(), LedgerBuffer(interval=3600)
    database.up = False
    assert not buffer.write(database.row("a", LedgerRefused))
    assert len(buffer) == 0 and "refused a row" in caplog.text


def test_a_row_kept_as_the_flusher_finishes_is_written_all_the_same():
    """A row kept while the flusher writes the last rows it holds (the writer
    waits for its lock) must not be left behind when that flusher stops: the
    soak found ends published by a worker and never written. A slow log
    handler stands for the worker's log file, written as the flusher stops."""
    import logging
    import time

    class Slow(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            time.sleep(0.01)

    logger, handler = logging.getLogger("toolrun.ledger"), Slow()
    logger.addHandler(handler)
    level, logger.level = logger.level, logging.INFO
    try:
        _kept_as_the_flusher_finishes()
    finally:
        logger.removeHandler(handler)
        logger.level = level


def _kept_as_the_flusher_finishes() -> None:
    import threading
    import time

    for _ in range(20):
        buffer, written = LedgerBuffer(interval=0.001), []
        inside, go = threading.Event(), threading.Event()

        def first(inside=inside, go=go, written=written) -> None:
            inside.set()
            go.wait(5)
            written.append("first")

        buffer.keep(first)
        assert inside.wait(5)  # the flusher is writing `first`, holding its lock
        late = threading.Thread(target=buffer.write, args=(lambda w=written: w.append("late"),))
        late.start()  # `first` is still kept: this row is kept after it
        time.sleep(0.002)
        go.set()
        late.join(5)
        deadline = time.monotonic() + 5
        while written != ["first", "late"]:
            assert time.monotonic() < deadline, written
            time.sleep(0.001)
