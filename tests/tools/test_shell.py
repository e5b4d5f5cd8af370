"""The `shell` tool on real commands in a temporary workspace: output, exit
codes, the scrubbed environment, process-group kills, bounded output, and the
refusal to touch settings files or redirect outside the workspace."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

import runtime.tools  # noqa: F401  (registers the built-ins)
from runtime.errors import PathOutsideWorkspace, ToolError
from runtime.registry.capabilities import ToolContext, ToolOutput, registry
from runtime.tools.shell import SettingsChanged, ShellTimeout
from runtime.types import Risk, Status

SETTINGS = '{"permissions": {"deny": ["shell(rm *)"]}}'


def run(
    workspace: Path, command: str, max_bytes: int = 32 * 1024, confined: bool = True, **args
) -> ToolOutput:
    """Run `command`; `confined=False` as where the org policy turned the sandbox off."""
    spec = registry.get("shell")
    ctx = ToolContext(
        workspace=workspace, batch_id="b", call_id="c", max_bytes=max_bytes, confined=confined
    )
    return spec.execute(spec.input_model(command=command, **args), ctx)


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    (home / ".config" / "toolrun").mkdir(parents=True)
    (home / ".config" / "toolrun" / "settings.json").write_text(SETTINGS)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("TOOLRUN_POLICY_FILE", raising=False)
    root = tmp_path / "ws"
    (root / ".toolrun").mkdir(parents=True)
    (root / ".toolrun" / "settings.json").write_text(SETTINGS)
    return root


def alive(pid: int) -> bool:
    """True if `pid` runs (a zombie waiting for its reaper counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def test_spec() -> None:
    spec = registry.get("shell")
    assert spec.risk is Risk.destructive and not spec.idempotent
    assert spec.subject == ("command", "command")
    assert spec.timeout > 600
    schema = spec.input_model.model_json_schema()
    assert schema["properties"]["timeout"]["maximum"] == 600


def test_runs_in_the_workspace(ws: Path) -> None:
    (ws / "a.txt").write_text("hello\n")
    out = run(ws, "pwd && cat a.txt && echo oops >&2")
    assert out.content == {
        "exit_code": 0,
        "stdout": f"{ws.resolve()}\nhello\n",
        "stderr": "oops\n",
        "truncated": False,
    }
    assert out.message.startswith("exited with 0")
    assert "hello" in out.message and "oops" in out.message
    assert "exited with 0" in out.summary


def test_non_zero_exit_is_a_result(ws: Path) -> None:
    out = run(ws, "echo partial; exit 3")
    assert out.content["exit_code"] == 3
    assert out.content["stdout"] == "partial\n"
    assert out.message.startswith("exited with 3")


def test_writes_inside_the_workspace(ws: Path) -> None:
    run(ws, "mkdir -p sub && echo hi > sub/out.txt && git --version > /dev/null 2>&1; true")
    assert (ws / "sub" / "out.txt").read_text() == "hi\n"


def test_stdin_is_empty(ws: Path) -> None:
    started = time.monotonic()
    out = run(ws, "cat; read line; echo done $?", timeout=10)
    assert out.content["stdout"] == "done 1\n"
    assert time.monotonic() - started < 5


def test_environment_is_scrubbed(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    leaks = {
        "OPENAI_API_KEY": "sk-leak-1",
        "GITHUB_TOKEN": "leak-2",
        "DB_PASSWORD": "leak-3",
        "MY_SECRET_THING": "leak-4",
        "TOOLRUN_TEST_LEAK": "leak-5",
        "AWS_SECRET_ACCESS_KEY": "leak-6",
        "BASH_ENV": str(ws / "evil.sh"),
        "HARMLESS_LOOKING": "leak-7",
    }
    for name, value in leaks.items():
        monkeypatch.setenv(name, value)
    (ws / "evil.sh").write_text("echo EVIL_RAN\n")
    out = run(ws, "env")
    names = {line.split("=", 1)[0] for line in out.content["stdout"].splitlines()}
    assert not names & set(leaks)
    assert not any(name.startswith("TOOLRUN_") for name in names)
    for value in leaks.values():
        assert value not in out.content["stdout"]
    assert "EVIL_RAN" not in out.content["stdout"]
    assert {"PATH", "HOME"} <= names


def running(marker: str) -> list[int]:
    """Host pids of live processes whose command line holds `marker`: a sandboxed
    command's own pids are those of its pid namespace, which the host does not use."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            line = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if entry.name.isdigit() and marker.encode() in line and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def gone(marker: str) -> bool:
    deadline = time.monotonic() + 5
    while running(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not running(marker)


def test_timeout_kills_the_process_group(ws: Path) -> None:
    command = "sleep 100.31 & sleep 100.31 & setsid sleep 100.31 & touch started; wait"
    started = time.monotonic()
    with pytest.raises(ShellTimeout) as caught:
        run(ws, command, timeout=1)
    assert caught.value.status is Status.timeout
    assert "timed out after 1 s" in str(caught.value)
    assert time.monotonic() - started < 10
    assert (ws / "started").exists()
    assert gone("100.31")  # in the sandbox, even the one that left the session


def test_timeout_reports_output_so_far(ws: Path) -> None:
    with pytest.raises(ShellTimeout) as caught:
        run(ws, "echo before-the-hang; sleep 100", timeout=0.5)
    assert "before-the-hang" in str(caught.value)


def test_background_jobs_end_with_the_command(ws: Path) -> None:
    started = time.monotonic()
    out = run(ws, "sleep 100.32 & echo started")
    assert out.content["stdout"] == "started\n"
    assert time.monotonic() - started < 10
    assert gone("100.32")


def test_output_is_bounded_head_and_tail_kept(ws: Path) -> None:
    out = run(ws, "seq 1 200000; seq 1 50000 >&2", max_bytes=4096)
    assert len(json.dumps(out.content, ensure_ascii=False).encode()) <= 4096
    assert out.content["truncated"] is True
    stdout = out.content["stdout"]
    assert stdout.startswith("1\n2\n3\n") and stdout.endswith("199999\n200000\n")
    assert "bytes cut" in stdout
    assert out.content["stderr"].endswith("50000\n")
    assert "cut" in out.message


def test_endless_output_does_not_fill_memory(ws: Path) -> None:
    out = run(ws, "head -c 50000000 /dev/zero | tr '\\0' x", max_bytes=2048, timeout=60)
    assert out.content["truncated"] is True
    assert len(json.dumps(out.content).encode()) <= 2048


def test_nul_byte_is_refused(ws: Path) -> None:
    with pytest.raises(ToolError):
        run(ws, "echo a\x00b")


# --- the settings files and the workspace ---------------------------------------------

SETTINGS_WRITES = [
    "rm .toolrun/settings.json",
    "rm -f ./.toolrun/../.toolrun/settings.json",
    "echo x > ./.toolrun/../.toolrun/settings.json",
    "echo '{}' > .TOOLRUN/settings.json",
    "mv .toolrun x",
    "mv .toolrun/settings.json x.json",
    "ln -sf /dev/null .toolrun/settings.json",
    "cp /dev/null .toolrun/settings.json",
    "sed -i s/deny/allow/ .toolrun/settings.json",
    "truncate -s0 .toolrun/settings.json",
    "echo x | tee .toolrun/settings.json",
    "cd .toolrun && rm settings.json",
    "rm .tool{run,x}/settings.json",
    "rm .toolru?/settings.json",
    "rm -rf .",
    "find . -name settings.json -delete",
    "find . -name settings.json | xargs rm",
    "echo $(rm .toolrun/settings.json)",
    "bash -c 'rm .toolrun/settings.json'",
    "rm ~/.config/toolrun/settings.json",
    "echo '{}' > ~/.config/toolrun/settings.json",
    "rm -r ~/.config",
]


@pytest.mark.parametrize("command", SETTINGS_WRITES)
def test_settings_writes_are_refused(command: str, ws: Path) -> None:
    with pytest.raises(PathOutsideWorkspace) as caught:
        run(ws, f"touch ran; {command}")
    assert caught.value.status is Status.denied
    assert "settings" in str(caught.value)
    assert not (ws / "ran").exists()  # refused before anything ran
    assert (ws / ".toolrun" / "settings.json").read_text() == SETTINGS
    assert (Path.home() / ".config" / "toolrun" / "settings.json").read_text() == SETTINGS


def test_settings_written_through_a_symlink_made_earlier_are_refused(ws: Path) -> None:
    (ws / "conf").symlink_to(ws / ".toolrun")
    with pytest.raises(PathOutsideWorkspace):
        run(ws, "echo '{}' > conf/settings.json")
    (ws / "hard.json").hardlink_to(ws / ".toolrun" / "settings.json")
    with pytest.raises(PathOutsideWorkspace):
        run(ws, "echo '{}' > hard.json")
    assert (ws / ".toolrun" / "settings.json").read_text() == SETTINGS


def test_org_policy_file_is_protected(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    policy = ws.parent / "org" / "policy.json"
    policy.parent.mkdir()
    policy.write_text(SETTINGS)
    monkeypatch.setenv("TOOLRUN_POLICY_FILE", str(policy))
    with pytest.raises(PathOutsideWorkspace):
        run(ws, f"sed -i s/deny/allow/ {policy}")
    assert policy.read_text() == SETTINGS


# What the sandbox hides (.toolrun/) an unconfined command can reach: the settings
# files are compared before and after it, and put back.


def test_obfuscated_settings_write_is_put_back(ws: Path) -> None:
    script = (
        "import pathlib; p = pathlib.Path('.tool' + 'run', 'settings.json'); "
        'p.write_text(\'{"permissions": {"allow": ["shell"]}}\'); print(\'wrote\')'
    )
    with pytest.raises(SettingsChanged) as caught:
        run(ws, f'{sys.executable} -c "{script}"', confined=False)
    assert caught.value.status is Status.denied
    assert "put back" in str(caught.value)
    assert (ws / ".toolrun" / "settings.json").read_text() == SETTINGS


def test_obfuscated_settings_delete_and_swap_are_put_back(ws: Path) -> None:
    os.chmod(ws / ".toolrun" / "settings.json", 0o600)
    script = (
        "import os, shutil; d = '.tool' + 'run'; shutil.move(d, 'moved'); "
        "os.mkdir('elsewhere'); os.symlink('elsewhere', d)"
    )
    with pytest.raises(SettingsChanged):
        run(ws, f'{sys.executable} -c "{script}"', confined=False)
    target = ws / ".toolrun" / "settings.json"
    assert not (ws / ".toolrun").is_symlink()
    assert target.read_text() == SETTINGS
    assert os.stat(target).st_mode & 0o777 == 0o600


def test_created_settings_file_is_removed(ws: Path) -> None:
    (ws / ".toolrun" / "settings.json").unlink()
    script = "open('.tool' + 'run/settings.json', 'w').write('{}')"
    with pytest.raises(SettingsChanged):
        run(ws, f'{sys.executable} -c "{script}"', confined=False)
    assert not (ws / ".toolrun" / "settings.json").exists()


def test_reading_settings_is_fine_unconfined(ws: Path) -> None:
    out = run(ws, "cat .toolrun/settings.json", confined=False)
    assert out.content["stdout"] == SETTINGS


def test_the_sandbox_hides_the_workspaces_toolrun_folder(ws: Path) -> None:
    script = "open('.tool' + 'run/settings.json', 'w').write('{}')"
    out = run(ws, f'ls -A .toolrun; python3 -c "{script}"; cat .toolrun/settings.json')
    assert out.content["stdout"] == "{}"  # written in the sandbox's own folder, gone with it
    assert (ws / ".toolrun" / "settings.json").read_text() == SETTINGS


@pytest.mark.parametrize(
    "command",
    [
        "echo x > ../outside.txt",
        "echo x > /tmp/toolrun-shell-test-outside.txt",
        "echo x >> ~/outside.txt",
        "cd .. && echo x > outside.txt",
        "echo x 2> ../outside.txt",
        "echo x > $HOME/outside.txt",
    ],
)
def test_redirects_outside_the_workspace_are_refused(command: str, ws: Path) -> None:
    with pytest.raises(PathOutsideWorkspace) as caught:
        run(ws, f"touch ran; {command}")
    assert caught.value.status is Status.denied
    assert not (ws / "ran").exists()
    assert not (ws.parent / "outside.txt").exists()
    assert not (Path.home() / "outside.txt").exists()
    assert not Path("/tmp/toolrun-shell-test-outside.txt").exists()


def test_dev_null_is_fine(ws: Path) -> None:
    assert run(ws, "echo x > /dev/null 2>&1").content["exit_code"] == 0


def test_output_and_the_command_line_are_redacted_before_they_are_cut(ws: Path) -> None:
    from runtime.results.formatter import success

    key = "AKIAZ3MHQ7WJXK4PLR2D"  # a made-up AWS access key id
    pieces = [key[i : i + 6] for i in range(len(key) - 5)]
    for tail in range(1995, 2025, 4):  # the kept end of the output starts inside the key
        (ws / "out.txt").write_text("x" * 5000 + f" {key} " + "z" * tail)
        result = success("c", "shell", run(ws, "cat out.txt", max_bytes=4096), max_bytes=4096)
        assert result.content["truncated"]
        assert not [p for p in pieces if p in result.model_dump_json()], tail
    long = run(ws, f"echo {'w' * 60} {key} >/dev/null")
    assert not [p for p in pieces if p in success("c", "shell", long, max_bytes=4096).summary]
