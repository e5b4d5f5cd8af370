"""Result builders: one screen line per result that ends cleanly, every string
redacted, content and messages bounded."""

from __future__ import annotations

from runtime.registry.capabilities import ToolOutput
from runtime.results.formatter import SUMMARY_CHARS, failure, success
from runtime.types import Status

SECRET = "sk-ant-api03-" + "S3cr3t" * 6


def test_a_long_summary_is_cut_after_a_whole_word():
    words = " ".join(f"word{i}" for i in range(60))
    summary = failure("c1", "tool", Status.denied, words).summary
    kept = summary.removesuffix("…")
    assert summary.endswith("…") and len(summary) <= SUMMARY_CHARS
    assert f"tool: {words}".startswith(kept) and f"tool: {words}"[len(kept)] == " "


def test_a_word_longer_than_half_the_line_is_cut_itself():
    path = "/" + "deep/" * 60
    summary = failure("c1", "tool", Status.error, f"no {path}").summary
    assert len(summary) == SUMMARY_CHARS and summary.startswith("tool: no /deep/")


def test_a_short_summary_is_one_line_as_it_is():
    result = failure("c1", "tool", Status.error, "two\n  lines")
    assert result.summary == "tool: two lines" and result.model_message == "tool: two\n  lines"


def test_a_failure_carries_its_kind_and_a_bounded_message():
    result = failure("c1", "tool", Status.error, "x" * 5000, kind="format", max_bytes=100)
    assert result.error.kind == "format" and "[message cut at 100 bytes]" in result.error.message
    assert failure("c1", "tool", Status.timeout, "slow").error.kind == "timeout"


def test_success_bounds_content_and_says_what_was_cut():
    output = ToolOutput(content={"text": "y" * 5000}, message="read", summary="read")
    result = success("c1", "tool", output, max_bytes=1000)
    assert result.status is Status.ok and len(result.content["text"]) < 5000
    assert result.model_message.startswith("read\n[content cut: ")


def test_a_bare_return_value_becomes_json_and_a_summary():
    result = success("c1", "tool", {"n": 1}, max_bytes=1000)
    assert (result.model_message, result.summary, result.content) == (
        '{"n": 1}',
        'tool: {"n": 1}',
        {"n": 1},
    )


def test_every_string_is_redacted():
    output = ToolOutput(content={"key": SECRET}, message=SECRET, summary=SECRET)
    result = success("c1", "tool", output, max_bytes=10_000)
    assert SECRET not in result.model_dump_json()


KEY = "AKIAZ3MHQ7WJXK4PLR2D"  # a made-up AWS access key id


def _no_piece_of(key: str, text: str, size: int = 6) -> bool:
    return not any(key[i : i + size] in text for i in range(len(key) - size + 1))


def test_content_is_redacted_before_it_is_cut():
    """A cut through the middle of a key would leave a tail no detector knows."""
    for at in range(200, 280, 3):  # the string budget (max_bytes // 4) lands in the key
        output = ToolOutput(
            content={"text": "x" * at + f" {KEY} " + "y" * 4000}, message="m", summary="s"
        )
        result = success("c1", "tool", output, max_bytes=1000)
        assert _no_piece_of(KEY, result.model_dump_json()), at


def test_a_message_is_redacted_before_it_is_cut():
    for at in range(960, 1010, 3):
        text = "x" * at + f" {KEY} " + "y" * 4000
        ok = success(
            "c1", "tool", ToolOutput(content=None, message=text, summary="s"), max_bytes=1000
        )
        failed = failure("c1", "tool", Status.error, text, max_bytes=1000)
        assert _no_piece_of(KEY, ok.model_dump_json()), at
        assert _no_piece_of(KEY, failed.model_dump_json()), at


def test_a_value_json_shows_as_text_is_redacted_too():
    from pathlib import Path

    output = ToolOutput(content={"where": Path(f"/srv/{KEY}")}, message="m", summary="s")
    result = success("c1", "tool", output, max_bytes=10_000)
    assert KEY not in result.model_dump_json() and result.content["where"].startswith("/srv/")
