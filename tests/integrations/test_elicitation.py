"""A call the gate holds, asked of the person at the MCP client: the official
MCP Python client's elicitation callback accepts or declines it, and toolrun's
approval follows; progress notifications follow the call."""

from __future__ import annotations

import anyio
import mcp_types as types
import pytest

from tests.integrations.test_mcp_server import served, text
from tests.support.tools import marks

pytestmark = pytest.mark.timeout(180)


def asked_and_answered(
    stack, user_settings, workspace, action: str, label: str, mode: str = "auto"
):
    """One `bump` (which asks in default mode), the person answering `action`;
    what the person was asked, the result and the progress notifications.
    `mode`: the client's protocol: "auto" is 2026-07-28 (the call answers
    `InputRequiredResult` and is retried), "legacy" the initialize handshake
    (the server sends `elicitation/create` on the back-channel)."""
    asked, progress = [], []

    async def person(_ctx, params):
        asked.append(params.message)
        return types.ElicitResult(action=action)

    async def noted(value, total, message):
        progress.append((value, total, message))

    async def main():
        async with served(
            stack, user_settings, workspace, elicitation_callback=person, mode=mode
        ) as c:
            return await c.call_tool("bump", {"label": label}, progress_callback=noted)

    return asked, anyio.run(main), progress


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_an_accepted_elicitation_approves_the_call_and_it_runs(
    stack, user_settings, workspace, runtime, mode
):
    asked, result, progress = asked_and_answered(
        stack, user_settings, workspace, "accept", "yes", mode
    )
    [question] = asked
    assert "bump" in question and "'label': 'yes'" in question
    assert result.is_error is False and text(result) == "bumped"
    assert [mark["label"] for mark in marks(workspace, "effects")] == ["yes"]
    [row] = runtime.deployment.approvals.find(result.meta["toolrun/call_id"])
    assert (row.status, row.answered_by) == ("approved", "mcp client")
    # Progress: each value above the last, the last one the call's end.
    values = [value for value, _, _ in progress]
    assert values == sorted(set(values)) and values[-1] == 1.0
    assert "bump ended ok" in progress[-1][2]


def test_a_declined_elicitation_denies_the_call(stack, user_settings, workspace, runtime):
    _, result, _ = asked_and_answered(stack, user_settings, workspace, "decline", "no")
    assert result.is_error and result.meta["toolrun/status"] == "denied"
    assert "declined by a person" in text(result)
    assert marks(workspace, "effects") == []


def test_a_cancelled_elicitation_leaves_the_call_waiting(stack, user_settings, workspace, runtime):
    _, result, _ = asked_and_answered(stack, user_settings, workspace, "cancel", "later")
    assert result.meta["toolrun/status"] == "awaiting_approval"
    assert "toolrun approve" in text(result)
    batch_id, call_id = result.meta["toolrun/batch_id"], result.meta["toolrun/call_id"]
    assert [row.call_id for row in runtime.pending_approvals(batch_id)] == [call_id]
