"""A call's hard limit comes from the tool the message names, and what a
stopped call ends as depends on whether it could have had an effect."""

from __future__ import annotations

import pytest

from runtime.execution.time_limits import hard_limit, is_read, killed, overran
from runtime.settings import Settings
from runtime.tools.loading import load_tools
from runtime.types import CallMessage, Status
from tests.support.messages import message


def naming(tool: object) -> str | None:
    """The tool a worker's main process reads from a delivered message."""
    return CallMessage.tool_of(message("c", tool, {}, workspace=".") if tool else tool)


@pytest.fixture(scope="module")
def registry():
    return load_tools(["tests.support.tools", "tests.support.fault_tools"])


def test_the_hard_limit_is_the_tools_timeout_plus_the_grace(registry):
    settings = Settings(default_timeout=30, kill_grace=2)
    assert hard_limit(naming("hold_gil_read"), registry, settings) == 0.5 + 2
    assert hard_limit(naming("read_file"), registry, settings) == 30 + 2  # no timeout of its own
    for unknown in ("nope", None):  # refused later, bounded now
        assert hard_limit(naming(unknown), registry, settings) == 30 + 2
    for malformed in ({"tool": 7}, {}, "text"):
        assert hard_limit(CallMessage.tool_of(malformed), registry, settings) == 30 + 2


def test_a_stopped_read_times_out_and_a_stopped_side_effect_is_unknown(registry):
    assert is_read("hold_gil_read", registry) and not is_read("hold_gil_write", registry)
    assert overran("c", "t", 1, read=True).status is Status.timeout
    assert killed("c", "t", 1.5, read=True).status is Status.timeout
    for ended in (overran("c", "t", 1, read=False), killed("c", "t", 1.5, read=False)):
        assert ended.status is Status.outcome_unknown
        assert "check its effect before calling it again" in ended.model_message
    assert "process running it was killed" in killed("c", "t", 1.5, read=True).model_message
