"""Results and ledger rows on a terminal: plain lines off a TTY, rich tables on one."""

from __future__ import annotations

from rich.console import Console

from runtime.ledger.tables import EventRow
from runtime.results import endings
from runtime.results.display import event_line, ledger_table, result_line, results_table
from runtime.results.formatter import success

OK = success("c1", "nap", "slept", max_bytes=1000, worker="reads@h")
SKIPPED = endings.skipped_at_deadline("c2", "bump")


def rendered(table) -> str:
    console = Console(width=200, record=True, color_system=None)
    console.print(table)
    return console.export_text()


def test_a_result_line_is_call_status_and_summary():
    assert result_line(OK) == "c1  ok                nap: slept"
    assert result_line(SKIPPED).startswith("c2  skipped           bump: skipped: the batch's")


def test_the_results_table_has_a_row_per_result():
    text = rendered(results_table([OK, SKIPPED]))
    assert "reads@h" in text and "nap: slept" in text and "skipped" in text


def test_ledger_rows_show_their_reason_or_the_summary_they_recorded():
    decided = EventRow(
        id=1,
        batch_id="b",
        call_id="c1",
        kind="decision",
        effect="deny",
        rule="mode:auto",
        reason="write tools are denied in auto mode",
    )
    ended = EventRow(
        id=2,
        batch_id="b",
        call_id="c1",
        kind="finished",
        status="ok",
        detail={"summary": "nap: slept"},
    )
    assert event_line(decided).split()[:5] == ["1", "c1", "decision", "deny", "mode:auto"]
    assert event_line(decided).endswith(" write tools are denied in auto mode")
    assert event_line(ended).endswith("nap: slept")
    text = rendered(ledger_table([decided, ended], "ledger"))
    assert "write tools are denied" in text and "nap: slept" in text
