"""One gateway process under bounded load: 50 submitters at once and 200 event
streams open at once (four on each batch), every result delivered exactly once
on every stream. Each batch holds a call that waits for approval, and nothing
is approved until all 200 streams have seen its notice: so all 200 are open
together. Counts only; the timings are `make bench`'s (G1, G2)."""

from __future__ import annotations

import asyncio
import json
from collections import Counter

import httpx
import pytest

SUBMITTERS = 50
STREAMS_PER_BATCH = 4  # 200 streams


async def _events(client: httpx.AsyncClient, batch_id: str, noticed) -> list[dict]:
    events, event = [], {}
    async with client.stream("GET", f"/v1/batches/{batch_id}/events") as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith(":"):
                continue
            if line:
                field, _, value = line.partition(":")
                event[field] = value.removeprefix(" ")
                continue
            if not event:
                continue
            events.append(event)
            if event["event"] == "notice":
                await noticed()
            elif event["event"] == "end":
                break
            event = {}
    return events


def _batch(space, n: int) -> dict:
    return {
        "calls": [
            {"id": f"s{n}r", "name": "echo", "arguments": {"text": str(n)}},
            {
                "id": f"s{n}w",
                "name": "write_file",
                "arguments": {"path": f"out-{n}.txt", "content": str(n)},
            },
        ],
        "mode": "default",
        "workspace": str(space),
    }


async def _load(url: str, submitter: str, approver: str, space) -> list[list[dict]]:
    streams = SUBMITTERS * STREAMS_PER_BATCH
    limits = httpx.Limits(max_connections=streams + SUBMITTERS)
    auth = {"Authorization": f"Bearer {submitter}"}
    async with httpx.AsyncClient(base_url=url, headers=auth, limits=limits, timeout=90) as client:
        submitted = await asyncio.gather(
            *(client.post("/v1/batches", json=_batch(space, n)) for n in range(SUBMITTERS))
        )
        assert {response.status_code for response in submitted} == {202}
        batch_ids = [response.json()["batch_id"] for response in submitted]
        everyone = asyncio.Barrier(streams)

        async def noticed() -> None:
            if await everyone.wait() == 0:  # the last of 200 open streams: answer them all
                answers = [
                    client.post(
                        f"/v1/batches/{b}/calls/s{n}w/approve",
                        headers={"Authorization": f"Bearer {approver}"},
                    )
                    for n, b in enumerate(batch_ids)
                ]
                assert {r.status_code for r in await asyncio.gather(*answers)} == {200}

        return await asyncio.gather(
            *(
                _events(client, batch_id, noticed)
                for batch_id in batch_ids
                for _ in range(STREAMS_PER_BATCH)
            )
        )


@pytest.mark.timeout(300)  # 250 clients; a busy machine serves them slowly
def test_200_streams_and_50_submitters_get_every_result_once(gateway, keys, space):
    streams = asyncio.run(_load(gateway.url, keys["submitter"], keys["approver"], space))
    assert len(streams) == SUBMITTERS * STREAMS_PER_BATCH
    for index, events in enumerate(streams):
        n = index // STREAMS_PER_BATCH
        assert events[-1]["event"] == "end"
        kinds = Counter((e["event"], json.loads(e["data"]).get("call_id")) for e in events[:-1])
        assert kinds == Counter(
            {("result", f"s{n}r"): 1, ("notice", f"s{n}w"): 1, ("result", f"s{n}w"): 1}
        ), events
    assert sorted(p.name for p in space.glob("out-*.txt")) == sorted(
        f"out-{n}.txt" for n in range(SUBMITTERS)
    )
    with httpx.Client(
        base_url=gateway.url, headers={"Authorization": f"Bearer {keys['admin']}"}
    ) as c:
        assert "toolrun_gateway_event_streams 0.0" in c.get("/metrics").text
