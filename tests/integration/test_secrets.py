"""A secret in a file that read_file returns, and in a tool's arguments, appears
in neither the result, the ledger, nor the worker log."""

from pathlib import Path

FILE_SECRET = "sk-ant-api03-" + "FileSecret" * 4
ARG_SECRET = "ghp_" + "ArgSecret1" * 4


def test_secrets_leave_no_trace(runtime, workspace, stack):
    (workspace / "env.txt").write_text(f"ANTHROPIC_API_KEY={FILE_SECRET}\nplain line\n")
    batch = [
        {"id": "f", "name": "read_file", "arguments": {"path": "env.txt"}},
        {"id": "a", "name": "echo", "arguments": {"text": f"token {ARG_SECRET}"}},
        {"id": "i", "name": "echo", "arguments": {"text": ARG_SECRET, "extra": ARG_SECRET}},
    ]
    handle = runtime.submit(batch, mode="auto", workspace=workspace)
    results = handle.results(timeout=60)
    assert results[0].status.value == "ok" and "plain line" in results[0].content["text"]
    dumped = " ".join(r.model_dump_json() for r in results)
    ledger = str([r.model_dump() for r in runtime.ledger.events(handle.batch_id)])
    ledger += str([r.model_dump() for r in runtime.ledger.calls(handle.batch_id)])
    logs = " ".join(Path(w["log"]).read_text() for w in stack.workers)
    for secret in (FILE_SECRET, ARG_SECRET):
        assert secret not in dumped
        assert secret not in ledger
        assert secret not in logs
    assert "[REDACTED:" in dumped
