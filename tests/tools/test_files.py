"""The built-in file tools, called through the registry on real files."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

import runtime.tools  # noqa: F401  (registers the built-ins)
from runtime.errors import PathOutsideWorkspace, ToolError, UnsupportedArgument
from runtime.registry.capabilities import ToolContext, ToolOutput, registry
from runtime.types import Risk, Status

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


def run(tool: str, workspace: Path, max_bytes: int = 32 * 1024, **args) -> ToolOutput:
    spec = registry.get(tool)
    assert spec is not None, tool
    ctx = ToolContext(workspace=workspace, batch_id="b", call_id="c", max_bytes=max_bytes)
    return spec.execute(spec.input_model(**args), ctx)


def assert_bounded(out: ToolOutput, max_bytes: int) -> None:
    assert len(json.dumps(out.content, ensure_ascii=False).encode()) <= max_bytes
    assert len(out.message.encode()) <= max_bytes


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOPSECRET\n")
    (root / "out_link").symlink_to(outside / "secret.txt")
    (root / "out_dir").symlink_to(outside, target_is_directory=True)
    return root


@pytest.fixture
def outside(ws: Path) -> Path:
    return ws.parent / "outside"


def snapshot(directory: Path) -> dict[str, bytes]:
    files = (p for p in directory.rglob("*") if p.is_file() and not p.is_symlink())
    return {str(p.relative_to(directory)): p.read_bytes() for p in files}


# --- registration -------------------------------------------------------------


def test_specs_declare_risk_paths_and_descriptions() -> None:
    expected = {
        "read_file": (Risk.read, True),
        "list_dir": (Risk.read, True),
        "search_files": (Risk.read, True),
        "write_file": (Risk.write, False),
        "edit_file": (Risk.write, False),
    }
    for name, (risk, idempotent) in expected.items():
        spec = registry.get(name)
        assert spec.risk is risk and spec.idempotent is idempotent
        assert spec.paths == ("path",)
        assert spec.description
        schema = spec.input_model.model_json_schema()
        assert all("description" in field for field in schema["properties"].values())


# --- read_file ----------------------------------------------------------------


def test_read_file_whole(ws: Path) -> None:
    (ws / "a.txt").write_text("one\ntwo\nthree\n")
    out = run("read_file", ws, path="a.txt")
    assert out.content == {
        "path": "a.txt",
        "text": "one\ntwo\nthree\n",
        "start_line": 1,
        "end_line": 3,
        "total_lines": 3,
        "truncated": False,
    }
    assert "one\ntwo\nthree" in out.message and out.summary.startswith("read a.txt")


def test_read_file_offset_and_limit(ws: Path) -> None:
    (ws / "a.txt").write_text("".join(f"line {n}\n" for n in range(1, 6)))
    out = run("read_file", ws, path="a.txt", offset=2, limit=2)
    assert out.content["text"] == "line 2\nline 3\n"
    assert (out.content["start_line"], out.content["end_line"]) == (2, 3)
    assert out.content["total_lines"] == 5 and out.content["truncated"] is False
    assert "offset=4" in out.message


def test_read_file_without_final_newline_and_crlf(ws: Path) -> None:
    (ws / "a.txt").write_bytes(b"a\r\nb")
    out = run("read_file", ws, path="a.txt")
    assert out.content["text"] == "a\r\nb" and out.content["total_lines"] == 2


def test_read_file_offset_past_end(ws: Path) -> None:
    (ws / "a.txt").write_text("x\n")
    with pytest.raises(ToolError, match="past the end"):
        run("read_file", ws, path="a.txt", offset=5)


def test_read_file_empty(ws: Path) -> None:
    (ws / "e.txt").write_text("")
    out = run("read_file", ws, path="e.txt")
    assert out.content["text"] == "" and out.content["total_lines"] == 0
    assert "empty file" in out.message


def test_read_file_truncates_and_pages(ws: Path) -> None:
    lines = [f"{n:05d} some text on this line\n" for n in range(1, 2001)]
    (ws / "big.txt").write_text("".join(lines))
    out = run("read_file", ws, max_bytes=4096, path="big.txt")
    assert_bounded(out, 4096)
    content = out.content
    assert content["truncated"] is True and content["total_lines"] == 2000
    end = content["end_line"]
    assert 1 < end < 2000
    assert f"offset={end + 1}" in out.message and "cut" in out.message
    pages, offset = [content["text"]], end + 1
    while offset <= 2000:
        page = run("read_file", ws, max_bytes=4096, path="big.txt", offset=offset).content
        assert page["start_line"] == offset
        pages.append(page["text"])
        offset = page["end_line"] + 1
    assert "".join(pages) == "".join(lines)


def test_read_file_cuts_one_overlong_line(ws: Path) -> None:
    (ws / "min.js").write_text("é" * 20000 + "\nsecond\n")
    out = run("read_file", ws, max_bytes=4096, path="min.js")
    assert_bounded(out, 4096)
    assert out.content["truncated"] is True and out.content["end_line"] == 1
    assert out.content["text"] and set(out.content["text"]) == {"é"}
    assert "line 1 is 40001 bytes" in out.message and "offset=2" in out.message


@pytest.mark.parametrize(
    ("data", "kind"),
    [(PNG, "PNG image"), (b"caf\xe9 au lait\n", "text that is not UTF-8"), (b"ab\x00cd", None)],
)
def test_read_file_describes_binary(ws: Path, data: bytes, kind: str | None) -> None:
    (ws / "blob.bin").write_bytes(data)
    out = run("read_file", ws, path="blob.bin")
    assert out.content["binary"] is True and out.content["size"] == len(data)
    if kind:
        assert out.content["kind"] == kind
    assert "binary file" in out.message and "text" not in out.content


def test_read_file_binary_after_sniff_window(ws: Path) -> None:
    (ws / "late.txt").write_bytes(b"ok\n" * 4000 + b"bad \xff\n")
    out = run("read_file", ws, path="late.txt")
    assert out.content.get("binary") is True


def test_read_file_multibyte_char_on_sniff_boundary_is_text(ws: Path) -> None:
    (ws / "edge.txt").write_text("a" * 8191 + "é\n")
    assert run("read_file", ws, path="edge.txt").content["text"] == "a" * 8191 + "é\n"


def test_read_file_missing_and_directory(ws: Path) -> None:
    with pytest.raises(ToolError, match="does not exist"):
        run("read_file", ws, path="nope.txt")
    (ws / "d").mkdir()
    with pytest.raises(ToolError, match="list_dir"):
        run("read_file", ws, path="d")


def test_read_file_through_inside_symlink(ws: Path) -> None:
    (ws / "real.txt").write_text("hi\n")
    (ws / "alias.txt").symlink_to(ws / "real.txt")
    assert run("read_file", ws, path="alias.txt").content["text"] == "hi\n"


# --- refusals, for every file tool ----------------------------------------------

ESCAPES = ["../x", "/etc/passwd", "~/.ssh/x", "a\x00b", "out_link", "out_dir/secret.txt"]
CALLS = {
    "read_file": {},
    "list_dir": {},
    "search_files": {"pattern": "SECRET"},
    "write_file": {"content": "pwned\n"},
    "edit_file": {"old_string": "TOPSECRET", "new_string": "pwned"},
}


@pytest.mark.parametrize("path", ESCAPES)
@pytest.mark.parametrize("tool", list(CALLS))
def test_paths_outside_the_workspace_are_refused(
    ws: Path, outside: Path, tool: str, path: str
) -> None:
    before = snapshot(outside)
    with pytest.raises(PathOutsideWorkspace):
        run(tool, ws, path=path, **CALLS[tool])
    assert snapshot(outside) == before


@pytest.mark.parametrize("tool", ["write_file", "edit_file"])
def test_writes_through_outside_directory_link_create_nothing(
    ws: Path, outside: Path, tool: str
) -> None:
    with pytest.raises(PathOutsideWorkspace):
        run(tool, ws, path="out_dir/new/file.txt", **CALLS[tool])
    assert not (outside / "new").exists()


def test_paths_field_is_what_the_gate_checks(ws: Path) -> None:
    spec = registry.get("write_file")
    args = spec.input_model(path="../x", content="")
    assert spec.subject_paths(args) == ["../x"]


# --- list_dir -----------------------------------------------------------------


def test_list_dir_kinds_and_sizes(ws: Path) -> None:
    (ws / "f.txt").write_text("12345")
    (ws / "sub").mkdir()
    out = run("list_dir", ws)
    entries = {e["name"]: e for e in out.content["entries"]}
    assert entries["f.txt"] == {"name": "f.txt", "kind": "file", "size": 5}
    assert entries["sub"]["kind"] == "dir"
    assert entries["out_link"]["kind"] == "symlink" and entries["out_dir"]["kind"] == "symlink"
    assert out.content["truncated"] is False and out.content["total"] == 4
    assert "secret.txt" not in out.message  # the symlinked directory is not traversed


def test_list_dir_is_bounded_in_count(ws: Path) -> None:
    (ws / "many").mkdir()
    for n in range(600):
        (ws / "many" / f"f{n:04d}").write_text("")
    out = run("list_dir", ws, path="many")
    assert len(out.content["entries"]) == 500 and out.content["total"] == 600
    assert out.content["truncated"] is True and "500 of 600" in out.message


def test_list_dir_is_bounded_in_bytes(ws: Path) -> None:
    (ws / "long").mkdir()
    for n in range(200):
        (ws / "long" / (f"{n:03d}" + "n" * 200)).write_text("")
    out = run("list_dir", ws, max_bytes=4096, path="long")
    assert_bounded(out, 4096)
    assert out.content["truncated"] is True and "narrow" in out.message


def test_list_dir_refuses_a_file(ws: Path) -> None:
    (ws / "f.txt").write_text("")
    with pytest.raises(ToolError, match="not a directory"):
        run("list_dir", ws, path="f.txt")


# --- search_files -------------------------------------------------------------


@pytest.fixture
def tree(ws: Path) -> Path:
    (ws / "src" / "pkg").mkdir(parents=True)
    (ws / "src" / "main.py").write_text("import os\nTODO: fix\n")
    (ws / "src" / "pkg" / "util.py").write_text("x = 1\n# TODO later\n")
    (ws / "notes.md").write_text("TODO: write docs\n")
    (ws / "image.png").write_bytes(PNG + b"TODO")
    (ws / ".git").mkdir()
    (ws / ".git" / "HEAD").write_text("TODO in git\n")
    (ws / ".toolrun").mkdir()
    (ws / ".toolrun" / "settings.json").write_text('{"TODO": 1}\n')
    return ws


def test_search_files_finds_lines(tree: Path) -> None:
    out = run("search_files", tree, pattern=r"TODO")
    found = [(m["path"], m["line"]) for m in out.content["matches"]]
    assert found == [("notes.md", 1), ("src/main.py", 2), ("src/pkg/util.py", 2)]
    assert out.content["matches"][0]["text"] == "TODO: write docs"
    assert out.content["files_skipped"] == 1  # image.png
    assert "src/main.py:2: TODO: fix" in out.message


def test_search_files_skips_symlinks_out(tree: Path) -> None:
    out = run("search_files", tree, pattern="TOPSECRET")
    assert out.content["matches"] == [] and "no matches" in out.message


@pytest.mark.parametrize(
    ("glob", "paths"),
    [
        ("*.py", ["src/main.py", "src/pkg/util.py"]),
        ("src/**/*.py", ["src/main.py", "src/pkg/util.py"]),
        ("src/pkg/*.py", ["src/pkg/util.py"]),
        ("*.md", ["notes.md"]),
    ],
)
def test_search_files_glob(tree: Path, glob: str, paths: list[str]) -> None:
    out = run("search_files", tree, pattern="TODO", glob=glob)
    assert [m["path"] for m in out.content["matches"]] == paths


def test_search_files_in_subpath_and_single_file(tree: Path) -> None:
    sub = run("search_files", tree, pattern="TODO", path="src/pkg")
    assert [m["path"] for m in sub.content["matches"]] == ["src/pkg/util.py"]
    one = run("search_files", tree, pattern="import", path="src/main.py")
    assert one.content["matches"] == [{"path": "src/main.py", "line": 1, "text": "import os"}]


def test_search_files_invalid_regex(tree: Path) -> None:
    with pytest.raises(ToolError, match="not a valid regular expression: missing \\)"):
        run("search_files", tree, pattern="foo(")


def test_search_files_catastrophic_pattern_answers_at_once(ws: Path) -> None:
    # On a backtracking engine this line takes about 2**40 steps, in C, holding the GIL.
    (ws / "a.txt").write_text("a" * 40 + "b\n" + "a" * 10 + "\n")
    out = run("search_files", ws, pattern=r"(a+)+$")
    assert [m["line"] for m in out.content["matches"]] == [2]


@pytest.mark.parametrize("pattern", [r"(a)\1", r"(?=a)b", r"(?<!x)y", r"foo\Z"])
def test_search_files_unsupported_pattern_is_invalid_arguments(tree: Path, pattern: str) -> None:
    with pytest.raises(UnsupportedArgument, match="does not support") as raised:
        run("search_files", tree, pattern=pattern)
    assert raised.value.status is Status.invalid_arguments
    assert "rewrite the pattern" in str(raised.value)


def test_search_files_bounded_by_count(ws: Path) -> None:
    (ws / "many.txt").write_text("hit\n" * 300)
    out = run("search_files", ws, pattern="hit")
    assert len(out.content["matches"]) == 200 and out.content["truncated"] is True
    assert "narrow the pattern" in out.message


def test_search_files_bounded_by_bytes(ws: Path) -> None:
    (ws / "wide.txt").write_text(("hit " + "w" * 300 + "\n") * 100)
    out = run("search_files", ws, max_bytes=4096, pattern="hit")
    assert_bounded(out, 4096)
    assert out.content["truncated"] is True and 0 < len(out.content["matches"]) < 100


# --- write_file ---------------------------------------------------------------


def test_write_file_creates_with_parents(ws: Path) -> None:
    out = run("write_file", ws, path="new/deep/a.txt", content="hello\n")
    assert (ws / "new" / "deep" / "a.txt").read_text() == "hello\n"
    assert out.content["created"] is True and out.content["bytes"] == 6
    assert out.content["path"] == "new/deep/a.txt"
    assert "+hello" in out.content["diff"] and out.message.startswith("created")


def test_write_file_modifies_atomically_and_keeps_mode(ws: Path) -> None:
    target = ws / "run.sh"
    target.write_text("echo old\n")
    target.chmod(0o755)
    out = run("write_file", ws, path="run.sh", content="echo new\n")
    assert target.read_text() == "echo new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o755
    assert out.content["created"] is False and out.message.startswith("modified")
    assert "-echo old" in out.content["diff"] and "+echo new" in out.content["diff"]
    assert sorted(p.name for p in ws.iterdir()) == ["out_dir", "out_link", "run.sh"]


def test_write_file_failure_leaves_old_file_and_no_temp(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / "a.txt").write_text("old\n")

    def broken(*_args) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(OSError, match="disk gone"):
        run("write_file", ws, path="a.txt", content="new\n")
    assert (ws / "a.txt").read_text() == "old\n"
    assert sorted(p.name for p in ws.iterdir()) == ["a.txt", "out_dir", "out_link"]


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("read_file", {}),
        ("search_files", {"pattern": "SECRET"}),
        ("write_file", {"content": "replaced\n"}),
        ("edit_file", {"old_string": "TOP", "new_string": "NOT"}),
    ],
)
def test_a_file_with_a_second_hard_link_is_neither_read_nor_written(
    ws: Path, outside: Path, tool: str, args: dict
) -> None:
    """A hard link in the workspace to a file outside is that file: reading it (or
    the diff a write shows) would show what lies outside, so it is refused."""
    os.link(outside / "secret.txt", ws / "hard.txt")
    with pytest.raises(PathOutsideWorkspace, match="2 hard links") as refused:
        run(tool, ws, path="hard.txt", **args)
    assert "TOPSECRET" not in str(refused.value)
    assert (ws / "hard.txt").read_text() == (outside / "secret.txt").read_text() == "TOPSECRET\n"


def test_search_skips_a_hard_linked_file_in_a_directory(ws: Path, outside: Path) -> None:
    os.link(outside / "secret.txt", ws / "hard.txt")
    (ws / "plain.txt").write_text("SECRET here too\n")
    out = run("search_files", ws, pattern="SECRET")
    assert [m["path"] for m in out.content["matches"]] == ["plain.txt"]
    assert out.content["files_skipped"] == 1 and "hard-linked" in out.message


def test_write_file_diff_is_bounded(ws: Path) -> None:
    out = run("write_file", ws, max_bytes=2048, path="big.txt", content="line\n" * 2000)
    assert_bounded(out, 2048)
    assert (ws / "big.txt").read_text() == "line\n" * 2000
    assert "diff cut" in out.message


def test_write_file_refuses_a_directory(ws: Path) -> None:
    (ws / "d").mkdir()
    with pytest.raises(ToolError, match="directory"):
        run("write_file", ws, path="d", content="x")


SETTINGS_SPELLINGS = [
    ".toolrun/settings.json",
    ".TOOLRUN/Settings.json",
    "./.toolrun/settings.json",
    "src/../.toolrun/settings.json",
    ".toolrun/other.json",
    "sub/.toolrun/settings.json",
    "conf/settings.json",  # conf -> .toolrun
    "alias.json",  # alias.json -> .toolrun/settings.json
]


@pytest.fixture
def settings(ws: Path) -> Path:
    (ws / ".toolrun").mkdir()
    (ws / "src").mkdir()
    (ws / "sub" / ".toolrun").mkdir(parents=True)
    path = ws / ".toolrun" / "settings.json"
    path.write_text('{"permissions": {"deny": ["shell"]}}\n')
    (ws / "sub" / ".toolrun" / "settings.json").write_text("{}\n")
    (ws / "conf").symlink_to(ws / ".toolrun", target_is_directory=True)
    (ws / "alias.json").symlink_to(path)
    return path


@pytest.mark.parametrize("path", [*SETTINGS_SPELLINGS, "<absolute>"])
@pytest.mark.parametrize("tool", ["write_file", "edit_file"])
def test_settings_files_are_refused(ws: Path, settings: Path, tool: str, path: str) -> None:
    if path == "<absolute>":
        path = str(settings)
    before = snapshot(ws)
    args = {"content": "{}"} if tool == "write_file" else {"old_string": "deny", "new_string": "x"}
    with pytest.raises(PathOutsideWorkspace, match="settings"):
        run(tool, ws, path=path, **args)
    assert snapshot(ws) == before


def test_settings_dir_behind_a_symlink_is_refused(ws: Path) -> None:
    (ws / "cfg").mkdir()
    (ws / "cfg" / "settings.json").write_text("{}\n")
    (ws / ".toolrun").symlink_to(ws / "cfg", target_is_directory=True)
    with pytest.raises(PathOutsideWorkspace):
        run("write_file", ws, path="cfg/settings.json", content='{"permissions": {}}')
    assert (ws / "cfg" / "settings.json").read_text() == "{}\n"


def test_policy_file_is_refused(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLRUN_POLICY_FILE", str(ws / "policy.json"))
    with pytest.raises(PathOutsideWorkspace):
        run("write_file", ws, path="policy.json", content="{}")
    assert not (ws / "policy.json").exists()


# --- edit_file ----------------------------------------------------------------


def test_edit_file_replaces_once(ws: Path) -> None:
    (ws / "a.py").write_text("def f():\n    return 1\n")
    out = run("edit_file", ws, path="a.py", old_string="return 1", new_string="return 2")
    assert (ws / "a.py").read_text() == "def f():\n    return 2\n"
    assert out.content["replacements"] == 1 and out.content["path"] == "a.py"
    assert "-    return 1" in out.content["diff"] and "+    return 2" in out.content["diff"]
    assert out.message.startswith("modified a.py")


def test_edit_file_ambiguous_needs_context_or_replace_all(ws: Path) -> None:
    (ws / "a.py").write_text("x = 1\ny = 1\nz = 1\n")
    with pytest.raises(ToolError, match="occurs 3 times.*replace_all"):
        run("edit_file", ws, path="a.py", old_string="= 1", new_string="= 2")
    assert (ws / "a.py").read_text() == "x = 1\ny = 1\nz = 1\n"
    run("edit_file", ws, path="a.py", old_string="y = 1", new_string="y = 9")
    out = run("edit_file", ws, path="a.py", old_string="= 1", new_string="= 2", replace_all=True)
    assert out.content["replacements"] == 2
    assert (ws / "a.py").read_text() == "x = 2\ny = 9\nz = 2\n"


@pytest.mark.parametrize(
    ("old", "new", "match"),
    [("missing", "x", "not found"), ("same", "same", "the same"), ("", "x", "empty")],
)
def test_edit_file_refusals(ws: Path, old: str, new: str, match: str) -> None:
    (ws / "a.txt").write_text("same text\n")
    with pytest.raises(ToolError, match=match):
        run("edit_file", ws, path="a.txt", old_string=old, new_string=new)
    assert (ws / "a.txt").read_text() == "same text\n"


def test_edit_file_missing_and_binary(ws: Path) -> None:
    with pytest.raises(ToolError, match="write_file"):
        run("edit_file", ws, path="nope.txt", old_string="a", new_string="b")
    (ws / "img.png").write_bytes(PNG)
    with pytest.raises(ToolError, match="binary"):
        run("edit_file", ws, path="img.png", old_string="PNG", new_string="JPG")
    assert (ws / "img.png").read_bytes() == PNG


def test_edit_file_keeps_crlf(ws: Path) -> None:
    (ws / "w.txt").write_bytes(b"a\r\nb\r\n")
    run("edit_file", ws, path="w.txt", old_string="b", new_string="c")
    assert (ws / "w.txt").read_bytes() == b"a\r\nc\r\n"
