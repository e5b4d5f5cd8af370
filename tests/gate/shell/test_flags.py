"""Flags that escape a rule's glob: the table per program, the words bash may expand
into flags, and the rule that a `*` never covers one. Each case is read as the gate
reads it (`analyze`, then `allowed_by`), on a workspace with files named like flags."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from runtime.gate.shell.commands import allowed_by, analyze, escape_note
from runtime.gate.shell.flags import PROGRAMS


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("")
    (root / "--output=x").write_text("")
    (root / ".git").mkdir()
    (root / "src" / "up").symlink_to(tmp_path, target_is_directory=True)
    return root


def allowed(command: str, ws: Path, *patterns: str) -> bool:
    return allowed_by(patterns or ("git diff *",), analyze(command, ws))


ESCAPES = [
    # files outside, as `=value`, as the next word, as an abbreviation, into .git or rc files
    ("git diff --output=/tmp/out HEAD", "git diff *"),
    ("git diff --output /tmp/out HEAD", "git diff *"),
    ("git diff --outp=/tmp/out", "git diff *"),
    ("git diff --output=../out", "git diff *"),
    ("git diff --output=.git/hooks/pre-commit", "git diff *"),
    ("git diff --output=sub/.bashrc", "git diff *"),
    ("git diff '--output=/tmp/out'", "git diff *"),
    ("git diff --output=~/out", "git diff *"),
    ("cd src && git diff --output=../../out", "git diff *"),
    ("git -C src diff --output=up/out", "git *"),
    ("tar -C src -cf up/out.tar .", "tar *"),
    # programs that run, whatever their value
    ("git -c core.fsmonitor=id diff", "git *"),
    ("git -c diff.external=./x diff", "git *"),
    ("git --config-env=core.pager=X diff", "git *"),
    ("git --exec-path=. diff", "git *"),
    ("git -C /tmp diff", "git *"),
    ("git --git-dir=/tmp/repo diff", "git *"),
    ("git --work-tree=/ diff", "git *"),
    ("git diff --ext-diff", "git diff *"),
    ("git diff --textconv", "git diff *"),
    ("git fetch --upload-pack='id' origin", "git fetch *"),
    ("git push --receive-pack=id origin", "git push *"),
    ("git clone -u id src dst", "git clone *"),
    ("git rebase -x id HEAD~1", "git rebase *"),
    ("git config core.fsmonitor id", "git *"),
    ("git submodule foreach id", "git submodule *"),
    ("git bisect run ./x", "git bisect *"),
    ("git grep -Oid x", "git grep *"),
    ("find . -exec rm {} ;", "find *"),
    ("find . -fprint /tmp/out", "find *"),
    ("tar cf /tmp/out.tar src", "tar *"),
    ("tar -xzf a.tgz -C /tmp", "tar *"),
    ("tar --to-command=id -xf a.tar", "tar *"),
    ("sort -uo /tmp/out src/a.py", "sort *"),
    ("rsync -e id src dst", "rsync *"),
    ("curl -o /tmp/out http://x", "curl *"),
    ("curl -K cfg http://x", "curl *"),
    ("make -f /tmp/Makefile", "make *"),
    ("make --eval='x: ; id' x", "make *"),
    ("cp -t /tmp src/a.py", "cp *"),
    ("pytest -p evil", "pytest *"),
    ("nice git diff --output=/tmp/out", "nice *"),
    # words bash may expand into flags
    ("git diff *", "git diff *"),
    ("git diff ?-output=x", "git diff *"),
    ("git diff --o*", "git diff *"),
    ("git diff --output{=/tmp/o,}", "git diff *"),
    ("curl -o* http://x", "curl *"),
    ("git diff {--output=/tmp/out,HEAD}", "git diff *"),
    ('git diff ""*', "git diff *"),
    ("find * -name x", "find *"),
    ("git diff --output *", "git diff *"),
    ("xargs git diff", "xargs git diff *"),
    ("xargs -a list git diff", "xargs *"),
]

KEPT = [
    ("git diff", "git diff *"),
    ("git diff HEAD~1 -- src/a.py", "git diff *"),
    ("git diff --output=out.txt", "git diff *"),
    ("git diff --output out.txt HEAD", "git diff *"),
    ("git -C src diff --output=a.diff", "git *"),
    ("make -C src test", "make *"),
    ("git diff --no-ext-diff -c --stat", "git diff *"),
    ("git diff '*'", "git diff *"),
    ("git diff \\*", "git diff *"),
    ("git diff -- *", "git diff *"),
    ("git diff src/*", "git diff *"),
    ("git log -p config", "git log *"),
    ("git add -u", "git add *"),
    ("git cherry-pick -x abc", "git cherry-pick *"),
    ("find . -name '*.py'", "find *"),
    ("tar -czf out.tgz src", "tar *"),
    ("sort -o out.txt src/a.py", "sort *"),
    ("ls *", "ls *"),
    ("grep -c x *", "grep *"),
    ("cat {a,b}", "cat *"),
    ("curl -so /dev/null http://x", "curl *"),
    ("xargs rm", "xargs *"),
    ("git log --grep=fix* --format={a,b}", "git log *"),
]

CASES = [(*case, False) for case in ESCAPES] + [(*case, True) for case in KEPT]


@pytest.mark.parametrize(("command", "pattern", "covered"), CASES)
def test_no_glob_covers_an_escaping_flag_and_the_rest_stays_covered(ws, command, pattern, covered):
    assert allowed(command, ws, pattern) is covered
    assert (escape_note(analyze(command, ws)) is None) is covered


def test_the_reason_names_the_flag_and_what_it_does(ws):
    note = escape_note(analyze("git diff --output=/tmp/out HEAD", ws))
    assert "'--output=/tmp/out'" in note and "outside the workspace" in note
    assert "spells the flag out" in note
    note = escape_note(analyze("git -c core.fsmonitor=id diff", ws))
    assert "'-c'" in note and "git configuration" in note


def test_every_program_in_the_table_is_read_after_a_wrapper(ws):
    for program in sorted(PROGRAMS):
        assert not allowed(f"timeout 5 {program} *", ws, "timeout *"), program


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_file_named_like_a_flag_really_becomes_one(ws, tmp_path):
    """Why `*` must not be covered: bash hands git the file's name as a flag."""
    subprocess.run(["git", "init", "-q"], cwd=ws, check=True)
    shutil.rmtree(ws / ".git" / "hooks", ignore_errors=True)
    (ws / "src" / "a.py").write_text("x\n")
    subprocess.run(["git", "add", "src"], cwd=ws, check=True)
    (ws / "src" / "a.py").write_text("y\n")
    subprocess.run(["bash", "-c", "git diff *"], cwd=ws, capture_output=True)
    assert (ws / "x").exists()  # git wrote its diff to the file `--output=x` named
