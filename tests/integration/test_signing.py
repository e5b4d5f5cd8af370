"""Forged, unsigned and tampered task messages pushed straight into the real
broker never run a tool: the worker answers each with a denied result."""

import redis

from runtime.keyspace import names
from runtime.settings import Settings
from runtime.transport.redis_state import RedisState
from runtime.types import Mode, Status
from tests.support.messages import message
from tests.support.tools import marks
from workers.app import make_app


def push(stack, raw, queue="effects"):
    app = make_app(Settings(), redis_url=stack.redis_url)
    app.send_task("toolrun.execute", args=[raw], queue=queue, ignore_result=True)


def wait_result(stack, batch_id, call_id, timeout=30):
    client = redis.Redis.from_url(stack.redis_url)
    pubsub = client.pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(names.results_key(batch_id))
    try:
        for _ in range(int(timeout * 10)):
            stored = RedisState(client).recall(batch_id, call_id)
            if stored:
                return stored
            pubsub.get_message(timeout=0.1)
    finally:
        pubsub.close()
        client.close()
    raise AssertionError(f"no result for {call_id}")


def test_messages_without_the_key_never_run(stack, workspace):
    real_key = stack.signing_key.encode()
    allow = {"allow": ["bump", "obliterate"]}
    cases = {
        "unsigned": message(
            "unsigned",
            "bump",
            {"label": "x"},
            workspace=workspace,
            batch_id="forged",
            key=None,
            rules=allow,
        ),
        "other-key": message(
            "other-key",
            "bump",
            {"label": "x"},
            workspace=workspace,
            batch_id="forged",
            key=b"guessed",
            rules=allow,
        ),
        "tampered": message(
            "tampered",
            "bump",
            {"label": "x"},
            workspace=workspace,
            batch_id="forged",
            key=real_key,
            rules=allow,
        ),
        "widened": message(
            "widened",
            "obliterate",
            {"label": "x"},
            workspace=workspace,
            batch_id="forged",
            key=real_key,
            mode=Mode.auto,
        ),
    }
    cases["tampered"]["arguments"] = {"label": "swapped"}
    cases["widened"]["policy"]["rules"].append(
        {"text": "obliterate", "effect": "allow", "level": "org", "source": "attacker"}
    )
    for raw in cases.values():
        push(stack, raw)
    push(stack, dict(cases["unsigned"], call_id="via-reads"), queue="reads")
    for call_id in [*cases, "via-reads"]:
        result = wait_result(stack, "forged", call_id)
        assert result.status is Status.denied, call_id
        assert "signature" in result.model_message
    assert marks(workspace, "effects") == []


def test_a_correctly_signed_message_runs(stack, workspace):
    from runtime.ledger.store import Ledger
    from runtime.types import Batch, ToolCall

    # A side effect runs only once a client has recorded its batch in the ledger.
    ledger = Ledger(stack.database_url)
    call = ToolCall(id="genuine", name="bump", arguments={"label": "ok"})
    ledger.record_batch(Batch(id="signed", calls=[call], workspace=str(workspace)))
    ledger.close()
    raw = message(
        "genuine",
        "bump",
        {"label": "ok"},
        workspace=workspace,
        batch_id="signed",
        key=stack.signing_key.encode(),
        rules={"allow": ["bump"]},
    )
    push(stack, raw)
    assert wait_result(stack, "signed", "genuine").status is Status.ok
    assert [m["label"] for m in marks(workspace, "effects")] == ["ok"]
