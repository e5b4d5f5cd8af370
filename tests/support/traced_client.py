"""A client process with tracing on (`python -m tests.support.traced_client SPEC`):
submits the batch of SPEC (JSON) inside a span of its own ("agent turn"),
then the same calls again under SPEC's `traceparent` (as a caller without
OpenTelemetry would), waits for both, prints the two batch ids and statuses as
JSON, and exits (its exporter flushes at exit)."""

from __future__ import annotations

import json
import sys

from opentelemetry import trace

from runtime.client import Runtime


def main() -> None:
    spec = json.loads(sys.argv[1])
    parent = spec.pop("traceparent")
    runtime = Runtime.from_env()  # sets the exporter up from OTEL_*
    with trace.get_tracer("agent").start_as_current_span("agent turn"):
        first = runtime.submit(spec["calls"], mode=spec["mode"], workspace=spec["workspace"])
    second = runtime.submit(
        [dict(c, id=c["id"] + "-again") for c in spec["calls"]],
        mode=spec["mode"],
        workspace=spec["workspace"],
        traceparent=parent,
    )
    statuses = {
        handle.batch_id: {r.call_id: _shown(r) for r in handle.results(timeout=60)}
        for handle in (first, second)
    }
    print(json.dumps(statuses), flush=True)
    runtime.close()


def _shown(result) -> str:
    return "ok" if result.ok else f"{result.status.value}: {result.model_message}"


if __name__ == "__main__":
    main()
