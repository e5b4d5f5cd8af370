"""Real Flower beside real workers: every call of a batch shows under its tool's
name with its batch and call ids, its arguments and result redacted, a call
that did not end ok as a failed task; every page
and API asks for credentials; /metrics counts what ran."""

from __future__ import annotations

import base64
import json
import re
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

import pytest

from runtime.redaction import file_kinds
from runtime.settings import Settings
from tests.conftest import TEST_TOOLS, runtime_on
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(60)

FILE_SECRET = "sk-ant-api03-" + "FlowerFile" * 4
ARG_SECRET = "ghp_" + "FlowerArg1" * 4
ENDED = ("SUCCESS", "FAILURE")
CALLS = [
    {"id": "f", "name": "read_file", "arguments": {"path": "env.txt"}},
    {"id": "e", "name": "echo", "arguments": {"text": f"token {ARG_SECRET}"}},
    {"id": "n", "name": "nap", "arguments": {"label": ARG_SECRET}},
    {"id": "x", "name": "explode", "arguments": {"message": f"leaked {ARG_SECRET}"}},
]


@pytest.fixture(scope="module")
def flower_stack(tmp_path_factory):
    from runtime.stack.embedded import start_stack, stop_stack

    home = tmp_path_factory.mktemp("flower-home")
    settings = Settings(
        home=home, redis_url=None, database_url=None, tool_modules=TEST_TOOLS, reads_concurrency=4
    )
    record = start_stack(settings, extra_env={"TOOLRUN_TOOL_MODULES": TEST_TOOLS})
    yield record
    stop_stack(home)


@pytest.fixture(scope="module")
def flower_runtime(flower_stack, user_settings):
    runtime = runtime_on(flower_stack, user_settings)
    yield runtime
    runtime.close()


def fetch(flower: dict, path: str, *, password: str | None = None) -> tuple[int, str]:
    """GET a Flower path with the stack's credentials, or `password`, or none ("")."""
    headers = {}
    secret = flower["password"] if password is None else password
    if secret:
        token = base64.b64encode(f"{flower['user']}:{secret}".encode()).decode()
        headers["Authorization"] = f"Basic {token}"
    request = urllib.request.Request(flower["url"] + path, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")


def events(flower: dict) -> Counter:
    """flower_events_total from /metrics, by (task, type)."""
    status, text = fetch(flower, "metrics")
    assert status == 200
    counts: Counter = Counter()
    for line in text.splitlines():
        found = re.match(r"flower_events_total\{(.*)\} (\S+)$", line)
        if found:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', found[1]))
            counts[labels["task"], labels["type"]] += float(found[2])
    return counts


def test_every_page_and_api_asks_for_credentials(flower_stack):
    flower = flower_stack.flower
    for path in ("", "tasks", "workers", "api/tasks", "api/workers", "api/task/info/x", "metrics"):
        assert fetch(flower, path, password="")[0] == 401, path
        assert fetch(flower, path, password="wrong")[0] == 401, path
    for path in ("", "tasks", "api/tasks", "api/workers", "metrics"):
        assert fetch(flower, path)[0] == 200, path
    # The one exception, for the compose healthcheck: it says "OK" and nothing else.
    assert fetch(flower, "healthcheck", password="") == (200, "OK")


def test_api_workers_lists_the_stack_s_workers_without_a_refresh(flower_stack):
    """Flower inspects workers when it starts, before the stack's answer; the
    stack has it inspect them again once they do (runtime/stack/flower.py)."""
    status, body = fetch(flower_stack.flower, "api/workers")
    assert status == 200
    shown = json.loads(body)
    assert set(shown) == {worker["name"] for worker in flower_stack.workers}
    assert all("stats" in info and "active_queues" in info for info in shown.values())


def test_each_call_shows_under_its_tool_with_its_ids_and_no_secret(
    flower_stack, flower_runtime, workspace
):
    flower = flower_stack.flower
    before = events(flower)
    (workspace / "env.txt").write_text(f"ANTHROPIC_API_KEY={FILE_SECRET}\nplain line\n")
    handle = flower_runtime.submit(
        CALLS, mode="auto", workspace=workspace, rules={"allow": ["explode"]}, on_error="continue"
    )
    results = handle.results(timeout=30)
    assert [r.status.value for r in results] == ["ok", "ok", "ok", "error"]

    def ended():
        status, body = fetch(flower, "api/tasks")
        assert status == 200
        ours = {
            task_id: task
            for task_id, task in json.loads(body).items()
            if handle.batch_id in (task.get("args") or "")
        }
        done = len(ours) == len(CALLS) and all(t["state"] in ENDED for t in ours.values())
        return (body, ours) if done else None

    body, ours = wait_for(ended, 20, "task of each call shown ended by Flower", every=0.3)

    answers = [body]
    tools = {call["id"]: call["name"] for call in CALLS}
    queues = {worker["name"]: worker["queue"] for worker in flower_stack.workers}
    shown_results = {}
    for task_id in ours:
        status, body = fetch(flower, f"api/task/info/{task_id}")
        assert status == 200
        info = json.loads(body)
        [shown] = json.loads(info["args"])  # the dispatcher's argsrepr
        call_id = shown["call_id"]
        assert shown["batch_id"] == handle.batch_id
        assert info["name"] == f"toolrun.{tools[call_id]}"
        # A call that did not end ok is a failed task, its summary the exception.
        assert info["state"] == ("FAILURE" if call_id == "x" else "SUCCESS"), info
        assert info["kwargs"] == "{}"
        assert queues[info["worker"]] == ("effects" if call_id == "x" else "reads")
        shown_results[call_id] = info["exception"] if call_id == "x" else info["result"]
        answers += [body, fetch(flower, f"task/{task_id}")[1]]  # the page a person opens
    for call_id, result in shown_results.items():
        assert f"'call_id': '{call_id}'" in result
    assert "'status': 'error'" in shown_results["x"] and "ValueError" in shown_results["x"]

    after = events(flower)
    for call in CALLS:
        name = f"toolrun.{call['name']}"
        ended = "task-failed" if call["id"] == "x" else "task-succeeded"
        for kind in ("task-sent", "task-received", "task-started", ended):
            assert after[name, kind] >= before[name, kind] + 1, (name, kind)
    status, metrics = fetch(flower, "metrics")
    assert "flower_task_runtime_seconds_count" in metrics
    answers += [metrics, fetch(flower, "api/workers")[1], fetch(flower, "tasks")[1]]

    for answer in answers:
        assert FILE_SECRET not in answer and ARG_SECRET not in answer
    assert "[REDACTED:" in "".join(answers)


def test_no_corpus_secret_reaches_a_result_the_ledger_a_worker_log_or_flower(
    flower_stack, flower_runtime, workspace
):
    """Each corpus file (tests/data/secrets) read through read_file, and sent as
    an argument to a tool that prints it to the worker log and returns it. A file
    whose secrets only its kind tells (`.pgpass`, `master.key`: redaction/file_kinds.py)
    is read, not echoed: as a bare argument its text names no file, and a bare hex
    key is any hash (docs/architecture.md, "Secrets")."""
    corpus = Path(__file__).resolve().parents[1] / "data" / "secrets"
    manifest = json.loads((corpus / "manifest.json").read_text())
    calls = []
    for n, name in enumerate(sorted(manifest)):
        (workspace / name).write_text((corpus / name).read_text())
        calls.append({"id": f"r{n}", "name": "read_file", "arguments": {"path": name}})
        if file_kinds.kind_of(name) is None:
            text = (corpus / name).read_text()
            calls.append({"id": f"e{n}", "name": "echo", "arguments": {"text": text}})
    handle = flower_runtime.submit(calls, mode="auto", workspace=workspace)
    results = handle.results(timeout=60)
    assert [r.status.value for r in results] == ["ok"] * len(calls), results
    assert all("[REDACTED:" in r.model_dump_json() for r in results)

    seen = {"results": " ".join(r.model_dump_json() for r in results)}
    ledger = flower_runtime.ledger
    seen["ledger"] = str([r.model_dump() for r in ledger.events(handle.batch_id)])
    seen["ledger"] += str([r.model_dump() for r in ledger.calls(handle.batch_id)])
    seen["worker logs"] = " ".join(Path(w["log"]).read_text() for w in flower_stack.workers)
    assert "echo tool saw:" in seen["worker logs"]

    def shown():
        _, body = fetch(flower_stack.flower, "api/tasks")
        tasks = json.loads(body).items()
        ours = [t for t, task in tasks if handle.batch_id in (task.get("args") or "")]
        return (body, ours) if len(ours) == len(calls) else None

    body, ours = wait_for(shown, 20, "task of each call shown by Flower", every=0.3)
    pages = [body] + [fetch(flower_stack.flower, f"api/task/info/{t}")[1] for t in ours]
    pages += [fetch(flower_stack.flower, f"task/{t}")[1] for t in ours[:4]]
    seen["flower"] = " ".join(pages)
    for where, text in seen.items():
        for name, secrets in manifest.items():
            for kind, value in secrets:
                assert value not in text, (where, name, kind)
