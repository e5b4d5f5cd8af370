"""Asking one hook: its span in the trace, a child of the span around it, with
its answer or its failure and its latency. Run in a child process that sets an
in-memory SDK provider of its own, as tests/test_tracing.py does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from runtime.gate.hooks.calling import consult
from runtime.gate.hooks.declaration import Hook

ROOT = Path(__file__).resolve().parents[3]

SPANS = """
import json
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from runtime.gate.hooks.calling import consult
from runtime.gate.hooks.declaration import Hook

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
request = {"event": "pre_tool_use", "tool": "echo", "arguments": {"text": "deny"}}
with trace.get_tracer("test").start_as_current_span("toolrun batch"):
    for target in ("tests.support.hook_answers:decide", "no_such_module:x"):
        consult(Hook("gate", "pre", "python", target, "org", "org.json"), request, b"k", "echo")
spans = {s.name + ("!" if s.status.status_code.name == "ERROR" else ""): s
         for s in exporter.get_finished_spans()}
batch = spans.pop("toolrun batch")
print(json.dumps({name: {"parent": s.parent.span_id == batch.context.span_id,
                         "attributes": dict(s.attributes)} for name, s in spans.items()}))
"""


def test_a_hook_s_span_holds_its_answer_or_failure_and_latency():
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", SPANS], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    spans = json.loads(done.stdout)
    answered, failed = spans["policy_hook gate"], spans["policy_hook gate!"]
    assert answered["parent"] and failed["parent"]
    assert answered["attributes"]["toolrun.hook.decision"] == "deny"
    assert answered["attributes"]["toolrun.hook.reason"] == "not on a Friday"
    assert answered["attributes"]["toolrun.hook.latency_ms"] >= 0
    assert "cannot import" in failed["attributes"]["toolrun.hook.failure"]


def test_without_tracing_a_hook_is_asked_all_the_same():
    hook = Hook("gate", "pre", "python", "tests.support.hook_answers:decide", "org", "org.json")
    request = {"event": "pre_tool_use", "tool": "echo", "arguments": {"text": "ask"}}
    asked = consult(hook, request, b"k", "echo")
    assert asked.answer.reason == "a person should look" and asked.failure is None
    assert asked.detail()["decision"] == "ask" and not asked.failed_closed
