"""While a tool runs, no other thread of its process begins a ledger write,
and a tool does not start while another thread's write is under way."""

from __future__ import annotations

import threading

from runtime.ledger.write_hold import WriteHold


def test_a_write_waits_for_the_tool_and_the_tool_for_a_write():
    hold, order = WriteHold(), []
    writing, tool_may_end = threading.Event(), threading.Event()

    def writer() -> None:
        with hold.writing():
            order.append("write")

    with hold.quiet():
        order.append("tool starts")
        with hold.writing():  # the tool's own thread still writes (a retry's row)
            order.append("own write")
        thread = threading.Thread(target=writer)
        thread.start()
        thread.join(timeout=0.2)
        assert thread.is_alive()  # held back while the tool runs
        order.append("tool ends")
    thread.join(timeout=5)
    assert order == ["tool starts", "own write", "tool ends", "write"]

    def long_write() -> None:
        with hold.writing():
            writing.set()
            tool_may_end.wait(5)
            order.append("long write ends")

    thread = threading.Thread(target=long_write)
    thread.start()
    writing.wait(5)
    threading.Timer(0.2, tool_may_end.set).start()
    with hold.quiet():  # waits for the write under way
        order.append("next tool starts")
    thread.join(timeout=5)
    assert order[-2:] == ["long write ends", "next tool starts"]
