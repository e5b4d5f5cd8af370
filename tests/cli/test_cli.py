"""`toolrun` as a user runs it: the installed console script, in a subprocess.

Bad input is one line on stderr starting `toolrun:` and a non-zero exit, never
a traceback. Nothing here needs Redis or workers."""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path

import pytest

from tests.support.cli import assert_one_line_error, toolrun, toolrun_env

BUILTIN_RISKS = {
    "read_file": "read",
    "list_dir": "read",
    "search_files": "read",
    "write_file": "write",
    "edit_file": "write",
    "delete_cache": "destructive",
}


@pytest.fixture
def env(tmp_path):
    return toolrun_env(tmp_path / "home")


def batch_file(folder: Path, content: str, name: str = "batch.json") -> Path:
    path = folder / name
    path.write_text(content)
    return path


A_CALL = [{"id": "c1", "name": "read_file", "arguments": {"path": "README.md"}}]


def test_a_missing_batch_file_is_one_line(env, tmp_path):
    done = toolrun("run", str(tmp_path / "absent.json"), env=env)
    assert_one_line_error(done, "absent.json")


@pytest.mark.parametrize("content", ["{bad", "", "[{'id': 1}]", '{"calls": [}'])
def test_malformed_json_is_one_line(env, tmp_path, content):
    done = toolrun("run", str(batch_file(tmp_path, content)), env=env)
    assert_one_line_error(done, "batch.json", "not valid JSON")


def test_a_file_that_is_not_utf8_is_one_line(env, tmp_path):
    path = tmp_path / "batch.json"
    path.write_bytes(b"\xff\xfe[]")
    assert_one_line_error(toolrun("run", str(path), env=env), "batch.json")


@pytest.mark.parametrize("depth", [10_000, 200_000])
def test_a_batch_file_nested_deep_is_one_line(env, tmp_path, depth):
    path = batch_file(tmp_path, "[" * depth + "]" * depth)
    assert_one_line_error(toolrun("run", str(path), env=env), "batch.json", "nested")


def test_calls_nested_deep_in_a_batch_file_are_one_line(env, tmp_path):
    calls = '[{"id": "c1", "name": "read_file", "arguments": {"x": ' + "[" * 5000 + "]" * 5000
    path = batch_file(tmp_path, calls + "}}]")
    assert_one_line_error(toolrun("run", str(path), env=env), "batch.json", "nested")


def test_a_huge_batch_file_is_one_line(env, tmp_path):
    path = tmp_path / "batch.json"
    with open(path, "w") as handle:
        handle.truncate(65 << 20)  # sparse: 65 MiB of NULs, never written out
    assert_one_line_error(toolrun("run", str(path), env=env), "batch.json", "MiB")


def test_an_unknown_mode_option_is_one_line(env, tmp_path):
    path = batch_file(tmp_path, json.dumps(A_CALL))
    done = toolrun("run", str(path), "--mode", "yolo", env=env)
    assert_one_line_error(done, "unknown mode", "yolo")


@pytest.mark.parametrize("mode", ["yolo", 3, None, ["auto"]])
def test_an_unknown_mode_in_the_file_is_one_line(env, tmp_path, mode):
    path = batch_file(tmp_path, json.dumps({"calls": A_CALL, "mode": mode}))
    assert_one_line_error(toolrun("run", str(path), env=env), "unknown mode")


@pytest.mark.parametrize(
    "data",
    [42, "calls", None, {"x": 1}, {"calls": {"id": "c1"}}, {"calls": None}],
    ids=["number", "string", "null", "no-calls", "calls-not-a-list", "calls-null"],
)
def test_json_that_is_not_a_batch_is_one_line(env, tmp_path, data):
    path = batch_file(tmp_path, json.dumps(data))
    assert_one_line_error(toolrun("run", str(path), env=env), "list of calls")


@pytest.mark.parametrize(
    "calls",
    [[1], [{"id": "c1"}], [{"id": "c1", "name": "read_file", "argz": {}}]],
    ids=["not-an-object", "no-name", "unknown-key"],
)
def test_a_call_that_is_not_a_tool_call_is_one_line(env, tmp_path, calls):
    path = batch_file(tmp_path, json.dumps(calls))
    assert_one_line_error(toolrun("run", str(path), env=env), "call 0")


def test_an_unknown_on_error_is_one_line(env, tmp_path):
    path = batch_file(tmp_path, json.dumps({"calls": A_CALL, "on_error": "explode"}))
    assert_one_line_error(toolrun("run", str(path), env=env), "on_error")


def test_run_without_redis_says_how_to_get_one(env, tmp_path):
    path = batch_file(tmp_path, json.dumps(A_CALL))
    done = toolrun("run", str(path), "--mode", "auto", env=env)
    assert_one_line_error(done, "toolrun up", "TOOLRUN_REDIS_URL")


def test_an_unknown_setting_is_one_line(tmp_path):
    env = toolrun_env(tmp_path / "home", TOOLRUN_BOGUS="1")
    assert_one_line_error(toolrun("tools", env=env), "TOOLRUN_BOGUS")


def test_an_invalid_setting_is_one_line(tmp_path):
    env = toolrun_env(tmp_path / "home", TOOLRUN_READS_CONCURRENCY="0")
    assert_one_line_error(toolrun("tools", env=env), "reads_concurrency")


def test_an_unimportable_tool_module_is_one_line(tmp_path):
    env = toolrun_env(tmp_path / "home", TOOLRUN_TOOL_MODULES="no_such_module_here")
    assert_one_line_error(toolrun("tools", env=env), "no_such_module_here")


def test_tools_lists_the_builtins_with_their_risks(env):
    done = toolrun("tools", env=env)
    assert done.returncode == 0, done.stderr
    listed = {}
    for line in done.stdout.splitlines():
        name, risk, *_ = line.split()
        listed[name] = risk
    assert {name: listed.get(name) for name in BUILTIN_RISKS} == BUILTIN_RISKS


def test_tools_lists_the_tools_of_tool_modules_too(tmp_path):
    env = toolrun_env(tmp_path / "home", TOOLRUN_TOOL_MODULES="tests.support.tools")
    done = toolrun("tools", env=env)
    assert done.returncode == 0, done.stderr
    risks = {line.split()[0]: line.split()[1] for line in done.stdout.splitlines()}
    assert risks["nap"] == "read" and risks["obliterate"] == "destructive"


def test_the_ledger_of_an_unknown_batch_is_one_line(env):
    assert_one_line_error(toolrun("ledger", "nonexistent", env=env), "nonexistent")


def test_down_with_nothing_running_says_so(env):
    done = toolrun("down", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "nothing was running"


def test_tools_offers_only_what_can_run_in_a_mode(env):
    done = toolrun("tools", "--format", "openai", "--mode", "plan", env=env)
    assert done.returncode == 0, done.stderr
    names = {d["function"]["name"] for d in json.loads(done.stdout)}
    assert {"read_file", "list_dir", "search_files"} <= names
    assert not names & {"write_file", "edit_file", "shell", "http_get", "delete_cache"}
    listed = toolrun("tools", "--mode", "auto", env=env).stdout
    assert "read_file" in listed and "write_file" not in listed


def test_version_prints_the_installed_package_s_version(tmp_path):
    """Through the installed script, as the other tests' forked runs are not."""
    done = toolrun("--version", env=toolrun_env(tmp_path / "home"), script=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"toolrun {version('tool-runtime')}\n"
