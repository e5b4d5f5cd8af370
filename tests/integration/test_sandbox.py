"""Every process a tool starts runs in the sandbox (docs/architecture.md, "The
sandbox"), on the session's stack: the reviewer's repros of issue 37 (the worker's
signing key read through /proc, a `.git/config` that makes an allowed `git diff`
run a program), a build command that tries everything, and, on a stack of its own
whose sandbox cannot start, the error a call gets and the org setting that runs
commands unconfined, marked in the ledger and the transcript."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from runtime.sandbox import view
from runtime.types import Status
from tests.conftest import embedded_stack, runtime_on

pytestmark = pytest.mark.timeout(120)


def shell(runtime, workspace: Path, command: str, rule: str, mode: str = "auto"):
    batch = [{"id": "s", "name": "shell", "arguments": {"command": command}}]
    handle = runtime.submit(batch, mode=mode, workspace=workspace, rules={"allow": [rule]})
    return handle, handle.results(timeout=60)[0]


def test_the_signing_key_is_not_in_any_proc_environ_a_command_can_read(runtime, stack, workspace):
    key = json.loads((stack.home / "stack.json").read_text())["signing_key"]
    _, found = shell(
        runtime, workspace, "grep -l TOOLRUN_SIGNING_KEY /proc/[0-9]*/environ", "shell(grep *)"
    )
    assert found.ok, found.model_message
    assert found.content["stdout"] == "", found.content  # no worker process in sight
    command = "grep -aho 'TOOLRUN_[A-Z_]*=[^[:cntrl:]]*' /proc/[0-9]*/environ"
    _, printed = shell(runtime, workspace, command, "shell(grep *)")
    assert printed.ok and printed.content["stdout"] == "", printed.content
    assert key not in printed.model_dump_json()


def git(workspace: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=workspace,
        check=True,
        capture_output=True,
    )


@pytest.mark.parametrize("setting", ["fsmonitor", "diff.external"])
def test_a_hostile_git_config_runs_only_inside_the_sandbox(
    runtime, stack, workspace, tmp_path, setting
):
    """The config is the host's doing (a file tool's write needs approval); what
    git then runs for an allowed `git diff` stays confined."""
    outside = tmp_path / "escaped.txt"
    program = f"touch ran.txt; echo x > {outside}; cat /proc/[0-9]*/environ > environ.txt; false"
    git(workspace, "init", "-q")
    (workspace / "a.txt").write_text("one\n")
    git(workspace, "add", "a.txt")
    git(workspace, "commit", "-qm", "one")
    (workspace / "a.txt").write_text("two\n")
    with (workspace / ".git" / "config").open("a") as config:
        if setting == "fsmonitor":
            config.write(f'[core]\n\tfsmonitor = "{program}"\n')
        else:
            config.write(f"[diff]\n\texternal = \"sh -c '{program}' --\"\n")
    before = (workspace / ".git" / "config").read_text()
    _, diff = shell(runtime, workspace, "git diff", "shell(git diff *)")
    assert diff.status is Status.ok, diff.model_message
    assert (workspace / "ran.txt").exists()  # git ran it, in the sandbox
    assert not outside.exists()
    key = json.loads((stack.home / "stack.json").read_text())["signing_key"]
    assert "TOOLRUN_" not in (workspace / "environ.txt").read_text()
    assert key not in (workspace / "environ.txt").read_text()
    # and inside, the config is read-only: a command cannot plant such a setting
    _, planted = shell(runtime, workspace, "git config core.pager 'id>x'", "shell(git config *)")
    assert planted.content["exit_code"] != 0, planted.content
    assert (workspace / ".git" / "config").read_text() == before


def test_a_build_does_its_work_in_the_workspace_and_nothing_else(
    runtime, stack, workspace, tmp_path
):
    other = tmp_path / "other-workspace"  # trusted too: every test workspace is
    other.mkdir()
    (other / "secret.txt").write_text("the other batch's secret\n")
    outside = tmp_path / "written-outside.txt"
    port = urlsplit(stack.redis_url).port
    connect = (
        f"import socket; socket.create_connection(('127.0.0.1', {port}), 2); open('redis.txt', 'w')"
    )
    recipe = [
        "echo built > build.txt",
        f"-cat {other / 'secret.txt'} > stolen.txt",
        "-grep -l TOOLRUN_ /proc/[0-9]*/environ > environ.txt",
        f'-python3 -c "{connect}"',
        f"-echo escaped > {outside}",
        "-echo $$HOME > home.txt",
    ]
    (workspace / "Makefile").write_text("test:\n" + "".join(f"\t{line}\n" for line in recipe))
    _, made = shell(runtime, workspace, "make test", "shell(make test)")
    assert made.ok and made.content["exit_code"] == 0, made.model_message
    assert (workspace / "build.txt").read_text() == "built\n"
    assert "secret" not in (workspace / "stolen.txt").read_text()
    assert (workspace / "environ.txt").read_text() == ""
    assert not (workspace / "redis.txt").exists()
    assert not outside.exists()
    assert (workspace / "home.txt").read_text() == f"{view.HOME}\n"  # not the worker's


@pytest.fixture(scope="module")
def unboxed_stack(tmp_path_factory):
    """A stack whose workers' sandbox cannot start: their bwrap is `false`."""
    with embedded_stack(tmp_path_factory.mktemp("unboxed"), bwrap=Path("/bin/false")) as record:
        yield record


def test_without_a_sandbox_a_command_is_not_run_and_the_model_is_told_why(
    unboxed_stack, user_settings, workspace
):
    client = runtime_on(unboxed_stack, user_settings)
    try:
        _, result = shell(client, workspace, "touch ran.txt", "shell(touch *)")
    finally:
        client.close()
    assert result.status is Status.error
    assert result.error.kind == "sandbox_unavailable"
    assert "sandbox" in result.model_message and "Nothing was run" in result.model_message
    assert "Traceback" not in result.model_message
    assert not (workspace / "ran.txt").exists()


def test_the_org_setting_runs_commands_unconfined_and_says_so(
    unboxed_stack, user_settings, workspace, tmp_path
):
    policy = tmp_path / "org.json"
    policy.write_text(json.dumps({"sandbox": {"enabled": False}}))
    client = runtime_on(unboxed_stack, user_settings, policy_file=policy)
    try:
        handle, result = shell(client, workspace, "touch ran.txt", "shell(touch *)")
        rows = client.ledger.calls(handle.batch_id)
        transcript = client.transcript(handle.batch_id)
    finally:
        client.close()
    assert result.ok and (workspace / "ran.txt").exists(), result.model_message
    assert result.summary.startswith("[unconfined] ")
    assert rows[0].summary.startswith("[unconfined] ")
    assert "[unconfined]" in json.dumps(transcript)


def test_a_worker_says_at_its_start_whether_it_can_confine(stack, unboxed_stack):
    confined = Path(stack.workers[0]["log"]).read_text()
    assert "sandbox: on: every process a tool starts is confined" in confined
    unboxed = Path(unboxed_stack.workers[0]["log"]).read_text()
    assert "sandbox: UNAVAILABLE: /bin/false failed its check" in unboxed


@pytest.fixture(scope="module")
def fault_stack(tmp_path_factory, user_settings):
    from tests.support.faults import FaultStack

    home = tmp_path_factory.mktemp("sandbox-faults")
    stack = FaultStack(
        home, user_settings=user_settings, visibility_timeout=120, effects_concurrency=1
    )
    with stack, stack.client() as runtime:
        yield stack, runtime


def marked(marker: str) -> list[int]:
    """Host pids of live processes whose command line holds `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            line = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if entry.name.isdigit() and marker.encode() in line and state != "Z":
            found.append(int(entry.name))
    return found


def ancestors(pid: int) -> list[int]:
    chain = []
    while pid > 1:
        try:
            pid = int((Path(f"/proc/{pid}/stat")).read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError):
            break
        chain.append(pid)
    return chain


def test_a_lost_pool_process_takes_its_sandboxed_command_with_it(fault_stack, workspace):
    """The recorded session is bubblewrap's: killing it empties the command's pid
    namespace, a job that left the command's session (`setsid`) included."""
    stack, runtime = fault_stack
    command = "setsid sleep 300.4242 & sleep 300.4242"
    batch = [{"id": "s", "name": "shell", "arguments": {"command": command}}]
    handle = runtime.submit(
        batch,
        mode="auto",
        workspace=workspace,
        rules={"allow": ["shell(setsid *)", "shell(sleep *)"]},
    )
    deadline = time.monotonic() + 30
    while len(marked("300.4242")) < 2:
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.02)
    pools = stack.pool_processes(stack.workers("effects")[0])
    pool = next(pid for pid in ancestors(marked("300.4242")[0]) if pid in pools)
    stack.kill_pool_process(pool)
    [result] = handle.results(timeout=60)
    assert result.status is Status.outcome_unknown, result.model_message
    assert marked("300.4242") == []


def test_toolrun_status_says_whether_this_machine_can_confine(runtime):
    from runtime.stack import status

    found = status.collect(runtime.settings, timeout=1.0)
    assert found.sandbox.startswith("on: every process a tool starts is confined")
    assert f"sandbox {found.sandbox}" in status.lines(found)
    unboxed = runtime.settings.model_copy(update={"bwrap": Path("/bin/false")})
    assert status.collect(unboxed, timeout=1.0).sandbox.startswith("UNAVAILABLE")
