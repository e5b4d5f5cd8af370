"""The gateway's OpenAPI document (/openapi.json), as a client generator reads
it: valid by a validator, one operationId per operation, the event stream
declared as one, every answer of a submit listed with its problem body, and a
client generated from it by openapi-python-client driving the gateway."""

from __future__ import annotations

import importlib
import subprocess
import sys
from collections import Counter

import httpx
import pytest
from openapi_spec_validator import validate

from tests.gateway.test_access import PROBLEM

pytestmark = pytest.mark.timeout(300)  # the generator, on a busy machine


@pytest.fixture(scope="module")
def document(gateway) -> dict:
    return httpx.get(f"{gateway.url}/openapi.json", timeout=60).json()


def operations(document: dict) -> list[dict]:
    return [op for path in document["paths"].values() for op in path.values()]


def test_the_document_is_valid_openapi(document):
    validate(document)  # raises, naming what is wrong


def test_every_operation_has_its_own_id(document):
    ids = Counter(op["operationId"] for op in operations(document))
    assert not [name for name, count in ids.items() if count > 1], ids


def test_the_events_are_declared_an_event_stream(document):
    answer = document["paths"]["/v1/batches/{batch_id}/events"]["get"]["responses"]["200"]
    assert list(answer["content"]) == ["text/event-stream"]


def test_a_submit_lists_each_answer_it_gives(document):
    responses = document["paths"]["/v1/batches"]["post"]["responses"]
    assert {"200", "202"} <= set(responses)  # 200: ended within `wait`
    for status in ("401", "403", "409", "413", "422", "429"):
        content = responses[status]["content"]
        assert list(content) == [PROBLEM], (status, content)
        schema = content[PROBLEM]["schema"]
        assert {"type", "title", "status", "detail"} <= set(schema["properties"]), schema


def test_a_generated_client_checks_health_and_submits(gateway, keys, space, tmp_path):
    (space / "notes.txt").write_text("hello\n")
    spec = tmp_path / "openapi.json"
    spec.write_text(httpx.get(f"{gateway.url}/openapi.json", timeout=60).text)
    package = tmp_path / "toolrun_client"
    done = subprocess.run(
        [sys.executable, "-m", "openapi_python_client", "generate", "--path", str(spec)]
        + ["--output-path", str(package), "--meta", "none"],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    sys.path.insert(0, str(tmp_path))
    try:
        client = importlib.import_module("toolrun_client")
        health = importlib.import_module("toolrun_client.api.health.health")
        submit = importlib.import_module("toolrun_client.api.batches.submit_v1_batches_post")
        models = importlib.import_module("toolrun_client.models")
    finally:
        sys.path.remove(str(tmp_path))

    with client.Client(base_url=gateway.url) as anyone:
        assert health.sync(client=anyone).to_dict() == {"status": "ok"}
    batch = models.Submission.from_dict(
        {
            "calls": [{"id": "1", "name": "read_file", "arguments": {"path": "notes.txt"}}],
            "workspace": str(space),
        }
    )
    with client.AuthenticatedClient(base_url=gateway.url, token=keys["submitter"]) as alice:
        ended = submit.sync_detailed(client=alice, body=batch, wait=30)
    assert ended.status_code == 200, ended.content
    state = ended.parsed.to_dict()
    assert state["state"] == "ended" and state["results"][0]["status"] == "ok", state
    with client.AuthenticatedClient(base_url=gateway.url, token="not-a-key") as stranger:
        refused = submit.sync_detailed(client=stranger, body=batch)
    assert refused.status_code == 401
    assert refused.parsed.to_dict()["status"] == 401  # the problem body, typed
