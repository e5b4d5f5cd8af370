"""`GET /v1/batches/{id}/transcript` from a gateway in another process: the
document of a provider message's batch (its reply included), its formats, the
conversation field chaining turns, and the same access rule as the batch."""

from __future__ import annotations

from runtime import transcript
from tests.support.transcripts import valid


def _message(call_id: str, path: str) -> dict:
    return {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": call_id, "name": "read_file", "input": {"path": path}}
        ],
    }


def _key_id(token: str) -> str:
    return token.split("_")[1]


def _turn(client, space, call_id):
    body = {"message": _message(call_id, "t.txt"), "workspace": str(space), "conversation": "c-17"}
    response = client.post("/v1/batches", json=body)
    assert response.status_code == 202, response.text
    batch_id = response.json()["batch_id"]
    assert response.json()["transcript"] == f"/v1/batches/{batch_id}/transcript"
    reply = client.get(f"/v1/batches/{batch_id}/reply", params={"wait": 30})
    assert reply.status_code == 200, reply.text
    return batch_id, reply.json()


def test_a_provider_message_s_transcript_holds_its_reply_and_chains(gateway, keys, space, stack):
    (space / "t.txt").write_text("text\n")
    with gateway.client(keys["submitter"]) as client:
        first, _ = _turn(client, space, "toolu_01")
        second, reply = _turn(client, space, "toolu_02")
        one = valid(client.get(f"/v1/batches/{first}/transcript").json())
        response = client.get(f"/v1/batches/{second}/transcript", params={"format": "json"})
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    two = valid(response.json())
    assert two["batch"]["submitter"].startswith("key:") and two["batch"]["submitter"].endswith(
        "-alice"
    )
    assert two["batch"]["format"] == "anthropic"
    assert two["reply"] == {"format": "anthropic", "body": reply}
    assert two["conversation"] == {
        "id": f"gateway:{_key_id(keys['submitter'])}:c-17",
        "previous": {"batch_id": first, "digest": one["integrity"]["digest"]},
    }
    key = stack.signing_key.encode()
    assert transcript.verify(two, key) == [] and transcript.integrity.links([one, two]) == []


def test_formats_and_who_may_read_it(gateway, keys, space):
    (space / "t.txt").write_text("text\n")
    with gateway.client(keys["submitter"]) as client:
        batch_id, _ = _turn(client, space, "toolu_03")
        page = client.get(f"/v1/batches/{batch_id}/transcript", params={"format": "html"})
        assert page.headers["content-type"].startswith("text/html")
        assert 'id="call-toolu_03"' in page.text
        lines = client.get(f"/v1/batches/{batch_id}/transcript", params={"format": "jsonl"})
        valid(transcript.parse(lines.text))
        text = client.get(f"/v1/batches/{batch_id}/transcript", params={"format": "md"})
        assert text.headers["content-type"].startswith("text/markdown")
        assert "`toolu_03`" in text.text
        bad = client.get(f"/v1/batches/{batch_id}/transcript", params={"format": "pdf"})
        assert bad.status_code == 422
    path = f"/v1/batches/{batch_id}/transcript"
    with gateway.client(keys["other"]) as oscar, gateway.client(keys["approver"]) as bob:
        for client in (oscar, bob):
            response = client.get(path)
            assert response.status_code == 404
            assert response.headers["content-type"] == "application/problem+json"
            assert "toolrun.transcript" not in response.text
    with gateway.client(keys["admin"]) as admin:
        assert admin.get(path).status_code == 200
        assert admin.get("/v1/batches/no-such-batch/transcript").status_code == 404
    with gateway.client() as nobody:
        assert nobody.get(path).status_code == 401


def test_two_keys_using_one_conversation_name_get_two_chains(gateway, keys, space):
    (space / "t.txt").write_text("text\n")
    with gateway.client(keys["submitter"]) as alice, gateway.client(keys["other"]) as oscar:
        _turn(alice, space, "toolu_a1")
        theirs, _ = _turn(oscar, space, "toolu_o1")
        document = valid(oscar.get(f"/v1/batches/{theirs}/transcript").json())
    assert document["conversation"]["id"] == f"gateway:{_key_id(keys['other'])}:c-17"
    assert document["conversation"]["previous"] is None  # alice's turn is not oscar's
    with gateway.client(keys["submitter"]) as alice:
        mine, _ = _turn(alice, space, "toolu_a2")
        linked = alice.get(f"/v1/batches/{mine}/transcript").json()["conversation"]["previous"]
    with gateway.client(keys["admin"]) as admin:
        owner_of_previous = admin.get(f"/v1/batches/{linked['batch_id']}").json()["submitted_by"]
    assert owner_of_previous.endswith("-alice")
