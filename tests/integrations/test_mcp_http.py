"""`toolrun mcp serve --http PORT` as its own process on the session's stack,
driven by the official MCP client over Streamable HTTP: every request needs a
gateway key, and a call runs as that key, within its roots and mode."""

from __future__ import annotations

import anyio
import httpx
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from runtime.gateway.keys import Role, mint
from runtime.ledger.keys import Keys
from runtime.types import Mode


def call(url: str, token: str | None, name: str, arguments: dict, **options):
    """`options`: the client's own (an elicitation callback)."""

    async def main():
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with httpx2.AsyncClient(headers=headers) as http:
            transport = streamable_http_client(url, http_client=http)
            async with Client(transport, **options) as client:
                names = {tool.name for tool in (await client.list_tools()).tools}
                return names, await client.call_tool(name, arguments)

    return anyio.run(main)


def test_a_call_runs_as_the_key_that_made_it(served, runtime, workspace):
    token = mint(
        Keys(runtime.ledger), f"mcp-{workspace.parent.name}", Role.submitter, roots=[str(workspace)]
    )
    names, result = call(served, token, "echo", {"text": "over http"})
    assert "echo" in names
    assert result.is_error is False and result.content[0].text == "over http"
    row = runtime.ledger.batch(result.meta["toolrun/batch_id"])
    assert row.submitter == f"key:mcp-{workspace.parent.name}"


def test_without_a_live_key_nothing_is_served(served, runtime, workspace):
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    approver = mint(Keys(runtime.ledger), f"ok-{workspace.parent.name}", Role.approver)
    for headers in (
        {},
        {"Authorization": "Bearer trk_000000000000_wrong"},
        {"Authorization": f"Bearer {approver}"},
    ):
        answer = httpx.post(served, json=initialize, headers=headers, timeout=30)
        assert answer.status_code == 401 and "gateway" in answer.json()["error"]


def test_a_key_confined_elsewhere_runs_nothing(served, runtime, workspace, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    token = mint(
        Keys(runtime.ledger), f"far-{workspace.parent.name}", Role.submitter, roots=[str(elsewhere)]
    )
    names, result = call(served, token, "echo", {"text": "x"})
    assert names == set()
    assert result.is_error and "outside the roots" in result.content[0].text


def test_a_call_runs_no_higher_than_the_keys_mode(served, runtime, workspace):
    token = mint(
        Keys(runtime.ledger),
        f"plan-{workspace.parent.name}",
        Role.submitter,
        roots=[str(workspace)],
        max_mode=Mode.plan,
    )
    names, result = call(served, token, "echo", {"text": "x"})
    assert names == set() and result.is_error and "plan" in result.content[0].text


def test_only_an_admin_keys_client_is_asked_to_approve(served, runtime, workspace):
    """The gateway's rule: a submitter key answers no approval, its call waits
    for an approver; an admin key's client is asked, and its answer counts."""
    asked = []

    async def person(_ctx, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept")

    keys, suffix = Keys(runtime.ledger), workspace.parent.name
    submitter = mint(keys, f"sub-{suffix}", Role.submitter, roots=[str(workspace)])
    _, waits = call(served, submitter, "bump", {"label": "sub"}, elicitation_callback=person)
    assert asked == [] and waits.meta["toolrun/status"] == "awaiting_approval"
    admin = mint(keys, f"adm-{suffix}", Role.admin)
    _, ran = call(served, admin, "bump", {"label": "adm"}, elicitation_callback=person)
    assert len(asked) == 1 and ran.is_error is False
    [row] = runtime.deployment.approvals.find(ran.meta["toolrun/call_id"])
    assert (row.status, row.answered_by) == ("approved", f"key:adm-{suffix}")
