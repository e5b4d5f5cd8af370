"""The HTML transcript in a real headless browser (Chromium from the system's
packages): the page renders, shows a row for every call with its status,
decision and approval, and logs nothing to the console. A control page with a
console error proves the check would see one."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from runtime import transcript
from runtime.types import ApprovalRequested
from tests.support.transcripts import valid
from tests.transcript.conftest import KEY

pytestmark = pytest.mark.server  # it starts a browser process
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
    pytest.skip(
        "no chromium on PATH (apt-get install -y chromium): the browser test is skipped",
        allow_module_level=True,
    )
CONSOLE = re.compile(r":CONSOLE[:(]\d*\)?\]? ?(.*)")


def _chromium(page: Path, profile: Path, *options: str) -> subprocess.CompletedProcess[str]:
    argv = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",  # as root in a container
        "--disable-gpu",
        "--enable-logging=stderr",
        "--v=0",
        f"--user-data-dir={profile}",
        "--host-resolver-rules=MAP * ~NOTFOUND",  # a page that fetched anything would fail
        *options,
        page.as_uri(),
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def _console(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in done.stderr.splitlines() if ":CONSOLE" in line]


def test_a_console_error_would_be_seen(tmp_path):
    page = tmp_path / "control.html"
    page.write_text('<!doctype html><p>x</p><script>console.error("control-7")</script>')
    done = _chromium(page, tmp_path / "profile", "--dump-dom")
    assert any("control-7" in line for line in _console(done)), done.stderr[-2000:]


def test_the_page_renders_every_call_and_logs_nothing(rt, workspace, tmp_path):
    handle = rt.submit(
        [
            {"id": "read-1", "name": "echo", "arguments": {"text": "AKIAIOSFODNN7EXAMPLE"}},
            {"id": "write-1", "name": "bump", "arguments": {"label": "approved"}},
            {"id": "write-2", "name": "bump", "arguments": {"label": "denied"}},
            {"id": "fail-1", "name": "explode", "arguments": {"message": "it broke"}},
            {"id": "ghost-1", "name": "no_such_tool", "arguments": {}},
            {
                "id": "file-1",
                "name": "write_file",
                "arguments": {"path": "n.md", "content": "a\nb"},
            },
            {
                "id": "edit-1",
                "name": "edit_file",
                "arguments": {"path": "n.md", "old_string": "a", "new_string": "<A>"},
            },
        ],
        mode="default",
        workspace=workspace,
        on_error="continue",
        conversation="c-browser",
    )
    for event in handle.stream(timeout=30):
        if not isinstance(event, ApprovalRequested):
            continue
        if event.call_id == "write-1":
            handle.approve("write-1", by="bob", updated_arguments={"label": "changed"})
        elif event.call_id == "write-2":
            handle.deny(event.call_id, "not today", by="carol")
        else:
            handle.approve(event.call_id, by="bob")
    document = valid(transcript.seal(transcript.build(rt.ledger, handle.batch_id), KEY))
    page = tmp_path / "transcript.html"
    page.write_text(transcript.render(document, "html"))

    done = _chromium(page, tmp_path / "profile", "--dump-dom")
    assert done.returncode == 0, done.stderr[-2000:]
    assert _console(done) == []
    dom = done.stdout
    rows = re.findall(r'<tr class="call" id="call-([^"]+)">(.*?)</tr>', dom, re.S)
    assert [call_id for call_id, _ in rows] == [c["id"] for c in document["calls"]]
    cells = dict(rows)
    assert '<span class="s ok">ok</span>' in cells["read-1"]
    assert "approved" in cells["write-1"] and "bob" in cells["write-1"]
    assert "arguments changed" in cells["write-1"]
    assert "denied" in cells["write-2"] and "carol" in cells["write-2"]
    assert '<span class="s error">error</span>' in cells["fail-1"]
    assert "unknown_tool" in cells["ghost-1"]
    assert "AKIAIOSFODNN7EXAMPLE" not in dom
    assert '<span class="s ok">ok</span>' in cells["edit-1"]
    diffs = re.findall(r'<div class="diff">(.*?)</div>', dom, re.S)
    assert '<span class="add">+ a</span>' in diffs[0] and "n.md" in diffs[0]
    assert '<span class="del">- a</span>' in diffs[1]
    assert '<span class="add">+ &lt;A&gt;</span>' in diffs[1]

    shot = tmp_path / "transcript.png"
    done = _chromium(page, tmp_path / "profile", f"--screenshot={shot}", "--window-size=1280,1900")
    assert shot.exists() and shot.stat().st_size > 10_000, done.stderr[-2000:]
    assert _console(done) == []
    keep = Path("/tmp/toolrun-transcript-screenshot.png")  # for a person to look at
    shutil.copy(shot, keep)
