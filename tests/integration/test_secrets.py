"""A secret in a file that read_file returns, and in a tool's arguments, appears
in neither the result, the ledger, nor the worker log."""

from pathlib import Path

from tests.support.waiting import wait_for

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


def test_redis_keeps_no_copy_of_a_plan_once_its_batch_has_ended(runtime, workspace, stack):
    """The plan holds the arguments as the model wrote them (the worker needs
    them): the ledger's row goes when the batch ends, and so must Redis's copy."""

    import redis

    from runtime.keyspace.names import plan_key

    calls = [  # the nap keeps the batch open while the copy is looked at
        {"id": "a", "name": "echo", "arguments": {"text": f"token {ARG_SECRET}"}},
        {"id": "b", "name": "nap", "arguments": {"label": "b", "seconds": 3}},
    ]
    handle = runtime.submit(calls, mode="auto", workspace=workspace)
    client = redis.Redis.from_url(stack.redis_url)
    try:
        assert ARG_SECRET.encode() in (client.get(plan_key(handle.batch_id)) or b"")
        assert [r.status.value for r in handle.results(timeout=60)] == ["ok", "ok"]
        runtime._services.advancer.advance(
            handle.batch_id
        )  # any mover closes it, as the sweep does
        wait_for(lambda: runtime.ledger.batch(handle.batch_id).ended_at, 30, "batch marked ended")
        assert client.get(plan_key(handle.batch_id)) is None
        held = [client.dump(k) or b"" for k in client.scan_iter(f"*{handle.batch_id}*")]
        assert not [v for v in held if ARG_SECRET.encode() in v]
    finally:
        client.close()


ENV_LINE = "DATABASE_HOST=db.denied.example"
DENY = {"deny": ["read_file(.env)", "search_files(.env)", "search_files(secrets/**)"]}


def test_a_search_shows_no_line_of_a_file_a_deny_rule_keeps_from_read_file(runtime, workspace):
    """Issue 40's repro on real workers: search_files from `.`, with glob `.env`,
    or from `secrets` returns none of the denied files' lines, and says how many
    files the rules skipped."""
    (workspace / ".env").write_text(ENV_LINE + "\n")
    (workspace / "secrets").mkdir()
    (workspace / "secrets" / "notes.txt").write_text("DATABASE_HOST=db.notes.example\n")
    (workspace / "app.txt").write_text("DATABASE_HOST=db.app.example\n")
    batch = [
        {"id": "all", "name": "search_files", "arguments": {"pattern": "DATABASE", "path": "."}},
        {
            "id": "glob",
            "name": "search_files",
            "arguments": {"pattern": "DATABASE", "path": ".", "glob": ".env"},
        },
        {"id": "dir", "name": "search_files", "arguments": {"pattern": "D", "path": "secrets"}},
        {"id": "read", "name": "read_file", "arguments": {"path": ".env"}},
    ]
    handle = runtime.submit(batch, mode="auto", workspace=workspace, rules=DENY)
    found = {r.call_id: r for r in handle.results(timeout=60)}
    assert found["read"].status.value == "denied"
    assert [m["path"] for m in found["all"].content["matches"]] == ["app.txt"]
    assert found["all"].content["files_denied"] == 2
    assert "[2 files skipped by deny rules]" in found["all"].model_message
    for call in ("all", "glob", "dir"):
        dumped = found[call].model_dump_json()
        assert found[call].status.value in ("ok", "denied"), dumped
        assert "db.denied.example" not in dumped and "db.notes.example" not in dumped
    assert "files skipped by deny rules" in found["glob"].model_dump_json()
