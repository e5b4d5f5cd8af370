"""runtime/tracing.py without servers: the trace context is signed with the
message, tracing off touches nothing, and a worker's span holds only what the
gate decided and redacted data (arguments only when opted in). The span tests
run in a child process, which sets an in-memory SDK provider of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from runtime import tracing
from runtime.transport import signing
from runtime.types import CallMessage
from tests.support.messages import KEY, message

ROOT = Path(__file__).resolve().parents[1]
PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_the_traceparent_is_covered_by_the_signature(tmp_path):
    sent = CallMessage.model_validate(message("c1", "echo", {"text": "x"}, workspace=tmp_path))
    traced = signing.sealed(sent.model_copy(update={"traceparent": PARENT}), KEY)
    assert signing.genuine(traced, KEY)
    elsewhere = PARENT.replace("b7ad6b7169203331", "0000000000000001")
    assert not signing.genuine(traced.model_copy(update={"traceparent": elsewhere}), KEY)
    assert not signing.genuine(traced.model_copy(update={"traceparent": None}), KEY)


def test_a_message_without_a_trace_signs_as_before_the_field_existed(tmp_path):
    wire = message("c1", "echo", {"text": "x"}, workspace=tmp_path)
    older = {k: v for k, v in wire.items() if k != "traceparent"}  # an older client's message
    older[signing.FIELD] = signing.sign(older, KEY)
    assert signing.genuine(CallMessage.model_validate(older), KEY)


def test_a_traceparent_given_is_checked_and_tracing_off_records_nothing():
    assert not tracing.enabled()  # no provider in the test process
    assert tracing.traceparent(PARENT.upper()) == PARENT
    for bad in ("", "00-xyz", "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"):
        assert tracing.traceparent(bad) is None
    assert tracing.traceparent() is None  # no current span to carry
    with tracing.batch_span("b1", 1, "auto", PARENT) as carried:
        assert carried == PARENT  # handed on untouched
    with tracing.call_span(None, worker=None, redactor=None, arguments=True) as span:
        assert span.span is None  # the message is not even looked at


SPANS = """
import json, sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from runtime import tracing
from runtime.redaction import BUILT_IN
from runtime.results import endings
from runtime.types import CallMessage

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
message = CallMessage.model_validate(json.loads(sys.argv[1]))
for arguments in (False, True):
    with tracing.call_span(message, worker="w@h", redactor=BUILT_IN, arguments=arguments) as span:
        span.ended(endings.cancelled_before_start(message.call_id, message.tool))
found = []
for span in exporter.get_finished_spans():
    found.append({
        "name": span.name,
        "trace": format(span.context.trace_id, "032x"),
        "parent": format(span.parent.span_id, "016x"),
        "attributes": dict(span.attributes),
        "events": {e.name: dict(e.attributes) for e in span.events},
        "error": span.status.status_code.name,
    })
print(json.dumps(found))
"""


def _in_a_child(script: str, *args: str) -> subprocess.CompletedProcess:
    """`script` run by a Python of its own, with no OTEL_ or TOOLRUN_ variable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TOOLRUN_"))}
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done


def test_an_execute_tool_span_holds_redacted_data_and_arguments_only_when_opted_in(tmp_path):
    secret = "sk-live-" + "a1B2c3D4e5F6g7H8i9J0k1L2"
    wire = message(
        "c1",
        "echo",
        {"text": f"api_key={secret}"},
        workspace=tmp_path,
        approved_by="ana",
    ) | {"traceparent": PARENT}
    done = _in_a_child(SPANS, json.dumps(wire))
    plain, opted_in = json.loads(done.stdout)
    for span in (plain, opted_in):
        assert span["name"] == "execute_tool echo"
        assert (span["trace"], span["parent"]) == (PARENT[3:35], PARENT[36:52])
        attributes = span["attributes"]
        assert attributes["gen_ai.operation.name"] == "execute_tool"
        assert attributes["gen_ai.tool.name"] == "echo"
        assert attributes["gen_ai.tool.call.id"] == "c1"
        assert attributes["toolrun.call.status"] == "cancelled"
        assert attributes["error.type"] == "cancelled" and span["error"] == "ERROR"
        assert span["events"]["toolrun.decision"]["toolrun.decision.effect"] == "allow"
        assert span["events"]["toolrun.approval"] == {"toolrun.approval.by": "ana"}
    assert "gen_ai.tool.call.arguments" not in plain["attributes"]
    shown = opted_in["attributes"]["gen_ai.tool.call.arguments"]
    assert "api_key=" in shown and "[REDACTED" in shown
    assert secret not in done.stdout


CONFIGURE = "from runtime import tracing; print(tracing.configure(), tracing.enabled())"


def test_only_the_otel_variables_turn_the_exporter_on():
    def configured(**variables: str) -> str:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")} | variables
        done = subprocess.run(
            [sys.executable, "-c", CONFIGURE], cwd=ROOT, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    endpoint = "http://127.0.0.1:9"  # nothing is sent: the process exits before an export
    assert configured() == "False False"
    assert configured(OTEL_EXPORTER_OTLP_ENDPOINT=endpoint) == "True True"
    assert configured(OTEL_EXPORTER_OTLP_ENDPOINT=endpoint, OTEL_SDK_DISABLED="true") == (
        "False False"
    )
    assert configured(OTEL_EXPORTER_OTLP_ENDPOINT=endpoint, OTEL_TRACES_EXPORTER="none") == (
        "False False"
    )


KEPT = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from runtime import tracing
own = TracerProvider()
trace.set_tracer_provider(own)
print(tracing.configure(), trace.get_tracer_provider() is own)
"""


def test_an_applications_own_provider_is_kept():
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://127.0.0.1:9"
    done = subprocess.run(
        [sys.executable, "-c", KEPT], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True"]  # toolrun's spans join the application's


UNRUN = """
import json, tempfile
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from runtime import memory_runtime
from runtime.types import ApprovalRequested
from tests.support import tools

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
workspace = tempfile.mkdtemp()
chosen = (tools.echo, tools.nap, tools.obliterate, tools.explode, tools.bump)
with memory_runtime(*chosen, workspace=workspace) as rt:
    first = rt.submit(
        [
            {"id": "e1", "name": "echo", "arguments": {"text": "hi"}},
            {"id": "u1", "name": "no_such_tool", "arguments": {}},
            {"id": "n1", "name": "nap", "arguments": {"label": "n"}},
            {"id": "o1", "name": "obliterate", "arguments": {"label": "o"}},
        ],
        mode="accept_edits", workspace=workspace, on_error="continue", rules={"deny": ["nap"]},
    )
    for event in first.stream(timeout=30):
        if isinstance(event, ApprovalRequested):
            first.deny(event.call_id, "not today", by="carol")
    second = rt.submit(
        [
            {"id": "x1", "name": "explode", "arguments": {"message": "boom"}},
            {"id": "s1", "name": "bump", "arguments": {"label": "s"}},
        ],
        mode="accept_edits", workspace=workspace,
    )
    statuses = [r.status.value for h in (first, second) for r in h.results(timeout=30)]
found = [
    {
        "name": span.name,
        "trace": format(span.context.trace_id, "032x"),
        "parent": span.parent and format(span.parent.span_id, "016x"),
        "id": format(span.context.span_id, "016x"),
        "attributes": dict(span.attributes),
        "error": span.status.status_code.name,
    }
    for span in exporter.get_finished_spans()
]
print(json.dumps({"statuses": statuses, "spans": found}))
"""


def test_calls_that_were_refused_denied_or_skipped_have_a_span_saying_so():
    found = json.loads(_in_a_child(UNRUN).stdout.strip().splitlines()[-1])
    assert found["statuses"] == ["ok", "unknown_tool", "denied", "denied", "error", "skipped"]
    batches = {s["id"]: s for s in found["spans"] if s["name"] == "toolrun batch"}
    calls = {}
    for span in found["spans"]:
        if span["name"].startswith("execute_tool "):
            assert span["parent"] in batches  # the batch's span is its parent
            assert span["trace"] == batches[span["parent"]]["trace"]
            calls.setdefault(span["attributes"]["gen_ai.tool.call.id"], []).append(span)
    assert sorted(calls) == ["e1", "n1", "o1", "s1", "u1", "x1"]
    unrun = {call_id: spans[0]["attributes"] for call_id, spans in calls.items()}
    for call_id, status in [("u1", "unknown_tool"), ("n1", "denied"), ("o1", "denied")]:
        assert unrun[call_id]["toolrun.call.status"] == status
        assert unrun[call_id]["toolrun.call.ran"] is False
        assert unrun[call_id]["error.type"] == status and calls[call_id][0]["error"] == "ERROR"
    assert unrun["s1"]["toolrun.call.status"] == "skipped"
    assert "x1" in unrun["s1"]["toolrun.call.summary"]
    assert unrun["n1"]["toolrun.decision.rule"] == "nap"
    assert unrun["n1"]["toolrun.decision.effect"] == "deny"
    assert "carol" in unrun["o1"]["toolrun.call.summary"]
    assert "toolrun.call.ran" not in unrun["e1"] and "toolrun.call.ran" not in unrun["x1"]
