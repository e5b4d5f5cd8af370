"""Traces across processes (docs/architecture.md, "Traces and metrics"): a client
process and the stack's celery workers export to a real OTLP/HTTP receiver that
this test runs; each batch is one trace, from the client's span through the
batch's span to one `execute_tool` span per call on the workers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.settings import Settings
from tests.conftest import TEST_TOOLS
from tests.support import otlp

REPO = Path(__file__).resolve().parents[2]
CALLER_TRACE = "0af7651916cd43dd8448eb211c80319c"
CALLER_SPAN = "b7ad6b7169203331"


@pytest.fixture
def receiver():
    server, receiver = otlp.serve()
    yield server, receiver
    server.shutdown()
    server.server_close()


@pytest.fixture
def traced_stack(tmp_path, receiver, user_settings):
    from runtime.stack.embedded import start_stack, stop_stack

    server, _ = receiver
    home = tmp_path / "home"
    settings = Settings(home=home, tool_modules=TEST_TOOLS, user_settings_file=user_settings)
    env = otlp.environment(server, "toolrun-worker") | {"TOOLRUN_TOOL_MODULES": TEST_TOOLS}
    record = start_stack(settings, flower=False, extra_env=env)
    yield record
    stop_stack(home)


def test_each_batch_is_one_trace_from_the_client_to_the_workers(
    traced_stack, receiver, user_settings, workspace
):
    server, spans = receiver
    calls = [
        {"id": "r1", "name": "echo", "arguments": {"text": "one"}},
        {"id": "r2", "name": "echo", "arguments": {"text": "token=sk-live-abcdefghijklmnop1234"}},
        {"id": "w1", "name": "bump", "arguments": {"label": "x"}},
    ]
    spec = {
        "calls": calls,
        "mode": "accept_edits",
        "workspace": str(workspace),
        "traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01",
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOOLRUN_", "OTEL_"))}
    env |= otlp.environment(server, "agent") | {
        "TOOLRUN_HOME": str(traced_stack.home),
        "TOOLRUN_REDIS_URL": traced_stack.redis_url,
        "TOOLRUN_DATABASE_URL": traced_stack.database_url,
        "TOOLRUN_TOOL_MODULES": TEST_TOOLS,
        "TOOLRUN_USER_SETTINGS_FILE": str(user_settings),
        "PYTHONPATH": str(REPO),
    }
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.traced_client", json.dumps(spec)],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr
    statuses = json.loads(done.stdout.strip().splitlines()[-1])
    first, second = statuses
    assert {*statuses[first].values(), *statuses[second].values()} == {"ok"}, statuses

    def tool_spans(found):
        return [s for s in found if s.name.startswith("execute_tool ")]

    found = spans.wait_for(lambda found: len(tool_spans(found)) >= 6, timeout=30)
    [turn] = [s for s in found if s.name == "agent turn"]
    batches = {s.attributes["toolrun.batch.id"]: s for s in found if s.name == "toolrun batch"}
    assert set(batches) == {first, second}
    assert {s.service for s in batches.values()} == {"agent"}

    # The first batch: under the client's own span, in its trace.
    assert batches[first].trace_id == turn.trace_id
    assert batches[first].parent_id == turn.span_id
    # The second: under the caller's `traceparent`, in the caller's trace.
    assert batches[second].trace_id == CALLER_TRACE
    assert batches[second].parent_id == CALLER_SPAN

    for batch_id, batch in batches.items():
        ran = [s for s in tool_spans(found) if s.attributes["toolrun.batch.id"] == batch_id]
        assert sorted(s.attributes["gen_ai.tool.name"] for s in ran) == ["bump", "echo", "echo"]
        for span in ran:  # on the workers, children of the batch's span, in its trace
            assert span.service == "toolrun-worker"
            assert (span.trace_id, span.parent_id) == (batch.trace_id, batch.span_id)
            assert span.name == f"execute_tool {span.attributes['gen_ai.tool.name']}"
            assert span.attributes["gen_ai.operation.name"] == "execute_tool"
            assert span.attributes["gen_ai.tool.call.id"].startswith(("r", "w"))
            assert span.attributes["toolrun.call.status"] == "ok"
            assert span.events["toolrun.decision"]["toolrun.decision.effect"] == "allow"
            assert "gen_ai.tool.call.arguments" not in span.attributes  # not opted in
            assert not span.error
    assert len({s.trace_id for s in found}) == 2  # one trace per batch
