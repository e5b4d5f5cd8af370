"""Shell command analysis for the permission gate and the `shell` tool: what a
command line runs, where it redirects, and whether it can be read reliably at all.

Pure functions: nothing is executed (the filesystem is only looked at, to follow
symlinks and expand globs). The reading is bash's, simplified and conservative:

- `;` `&&` `||` `|` `|&` `&` `;;` newline, `(` and `)` split *segments*; quoted
  or escaped separators do not. A rule pattern is matched against one segment at
  a time, so `git diff *` never allows `git diff && rm -rf x`.
- Leading reserved words (`if`, `then`, `do`, `{`, `!`, ...) are dropped, so
  `if x; then rm y; fi` has the segments `x` and `rm y`.
- Environment assignments stay part of a segment: `GIT_DIR=x git diff` is not
  `git diff` (a variable like GIT_EXTERNAL_DIFF or LD_PRELOAD changes what runs),
  so it needs a rule of its own. Deny checks also look at it without them.
- *Opaque* means the text alone does not say what runs: any `$` expansion
  (`$(...)`, `${...}`, `$X`, `$'...'`), backticks, `<(...)`, here-documents,
  `eval`/`exec`/`source`/`trap`/`alias`, a shell (`bash -c`, `| sh`, `xargs sh`),
  unbalanced quotes, line continuations, NUL or control characters. No allow rule
  covers an opaque command; deny rules are checked against everything that can
  be dug out of it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from functools import lru_cache
from pathlib import Path

from runtime.gate.shell.analysis import Analysis, Segment
from runtime.gate.shell.lexer import Lexer, assemble, without_assignments
from runtime.gate.shell.paths import Places, redirect_inside, touches, unknowable, working_dirs

SHELLS = {"sh", "bash", "rbash", "dash", "ash", "zsh", "ksh", "mksh", "yash", "fish", "csh", "tcsh"}
EVALUATORS = {"eval", "exec", "source", ".", "trap", "alias", "busybox"}
# Commands that run their arguments as a command; deny rules look at every suffix.
WRAPPERS = {"env", "command", "builtin", "nohup", "nice", "ionice", "timeout", "stdbuf", "setsid"}
WRAPPERS |= {"sudo", "doas", "su", "runuser", "xargs", "find", "flock", "chrt", "taskset"}
WRAPPERS |= {"watch", "strace", "ltrace", "unbuffer", "script", "parallel", "chroot", "nsenter"}
WRAPPERS |= {"time"}
SAFE_DEVICES = {"/dev/null", "/dev/stdin", "/dev/stdout", "/dev/stderr"}
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
NESTING = 4
MAX_NESTED = 256
SEP = "\x00"  # joins words for matching; a NUL byte cannot reach a shell


def analyze(command: str, workspace: Path) -> Analysis:
    """Split `command` into segments, redirect targets and sub-commands."""
    lexer = Lexer(command)
    lexer.run()
    reasons = lexer.reasons
    if "\x00" in command:
        reasons.insert(0, "the command contains a NUL byte")
    elif CONTROL.search(command):
        reasons.insert(0, "the command contains a control character")
    words, redirects, directories = assemble(lexer.tokens, reasons)
    segments = [Segment(values) for values in words]
    for segment in segments:
        reason = _evaluator(segment.words)
        if reason:
            reasons.append(reason)
    unique = list(dict.fromkeys(reasons))
    return Analysis(
        command=command,
        workspace=Path(workspace),
        segments=segments,
        redirects=redirects,
        opaque="; ".join(unique[:3]) or None,
        subcommands=lexer.subcommands,
        directories=directories,
    )


def matches(pattern: str, segment: Segment) -> bool:
    """Does a rule specifier like `git diff *` match this one segment?

    `*` is the only wildcard and matches any text, spaces included; a trailing
    ` *` (or Claude Code's legacy `:*`) also matches nothing, so `git diff *`
    matches `git diff` but not `git diffx`. Spaces in the pattern are word
    boundaries: `git diff *` does not match the one word `"git diff"`.
    """
    regex = _pattern_regex(pattern)
    return regex is not None and regex.fullmatch(SEP.join(segment.words)) is not None


def outside_redirects(analysis: Analysis, workspace: Path | None = None) -> list[str]:
    """Redirect targets (sub-commands' too) that lead outside the workspace, into
    a settings location, to `/dev/tcp|udp`, or somewhere that cannot be known
    before running (an expansion, or a `cd` that cannot be followed)."""
    root = Path(workspace or analysis.workspace).resolve()
    tree = _tree(analysis)
    if tree is None:
        return ["(sub-commands too many to check)"]
    found = []
    for node in tree:
        cwds = working_dirs(node, root)
        for target in node.redirects:
            if target in SAFE_DEVICES or target in found:
                continue
            if cwds is None or unknowable(target) or not redirect_inside(target, cwds, root):
                found.append(target)
    return found


def allowed_by(patterns: Iterable[str], analysis: Analysis) -> bool:
    """True only when the command can be read, stays in the workspace, leaves
    settings alone, and every one of its segments matches some pattern."""
    patterns = list(patterns)
    return (
        analysis.opaque is None
        and bool(analysis.segments)
        and not outside_redirects(analysis)
        and touches_settings(analysis) is None
        and all(any(matches(p, seg) for p in patterns) for seg in analysis.segments)
    )


def denied_by(patterns: Iterable[str], analysis: Analysis) -> bool:
    """True when any part of the command matches a deny pattern: any segment,
    also without its assignments and wrappers (`env`, `sudo`, `xargs`, `find`,
    ...) and with `/bin/rm` read as `rm`; for an opaque command, also every
    suffix of every segment and every sub-command that can be dug out. A command
    with too many sub-commands to dig through counts as denied."""
    patterns = list(patterns)
    tree = _tree(analysis, eager=True)
    if tree is None:
        return bool(patterns)
    forms = (words for node in tree for words in _deny_forms(node))
    return any(matches(p, Segment(words)) for words in forms for p in patterns)


def touches_settings(analysis: Analysis, workspace: Path | None = None) -> str | None:
    """Why the command could write, move or delete a toolrun settings file
    (project `.toolrun/`, the user's, the org policy), or None.

    Conservative and static: any word that names a settings location counts
    (read-only commands like `cat` excepted), and for commands that change whole
    trees (`rm -r`, `mv`, `chmod -R`, `find -delete`, ...) so does a directory
    that holds one. Obfuscated writes (`python -c ...`) are out of its reach; the
    `shell` tool checks the files again after running.
    """
    root = Path(workspace or analysis.workspace).resolve()
    tree = _tree(analysis)
    if tree is None:
        return "it has too many sub-commands to check"
    places = Places(root)
    for node in tree:
        reason = touches(node, root, places)
        if reason:
            return reason
    return None


def _evaluator(words: list[str]) -> str | None:
    """Why a segment runs text as a command (eval, a shell, ...), or None."""
    rest = without_assignments(words)
    if not rest:
        return None
    first = os.path.basename(rest[0])
    names = [first]
    if first in WRAPPERS:
        names += [os.path.basename(word) for word in rest[1:] if word != "."]
    for name in names:
        if name in SHELLS:
            return f"it runs a shell ({name}), whose input cannot be checked"
        if name in EVALUATORS:
            return f"it uses {name!r}, which runs text as a command"
    if "CDPATH" in " ".join(words):
        return "it sets CDPATH, which changes where cd goes"
    return None


# --- digging for deny rules --------------------------------------------------------


def _deny_forms(analysis: Analysis) -> Iterator[list[str]]:
    for segment in analysis.segments:
        words = segment.words
        yield words
        rest = without_assignments(words)
        if not rest:
            continue
        wrapped = os.path.basename(rest[0]) in WRAPPERS | SHELLS | EVALUATORS
        starts = range(min(len(rest), 64)) if wrapped or analysis.opaque else range(1)
        for start in starts:
            tail = rest[start:]
            yield tail
            yield [os.path.basename(tail[0]), *tail[1:]]


def _tree(analysis: Analysis, *, eager: bool = False) -> list[Analysis] | None:
    """The analysis and those of its sub-commands, NESTING levels deep: `$(...)`,
    backticks and the like, the arguments of `bash -c`, `eval` and wrappers, and
    quoted text that a shell may run (`echo 'rm x' | sh`), or with `eager` any
    quoted text with a space in an opaque command. None when there are more than
    MAX_NESTED of them: too many to check, so the caller answers carefully."""
    tree, level, seen = [analysis], [analysis], {analysis.command}
    for _ in range(NESTING):
        texts = [text for node in level for text in _nested_texts(node, eager)]
        texts = [text for text in dict.fromkeys(texts) if text.strip() and text not in seen]
        if len(tree) + len(texts) > MAX_NESTED:
            return None
        seen.update(texts)
        level = [analyze(text, analysis.workspace) for text in texts]
        tree += level
    return tree


def _nested_texts(analysis: Analysis, eager: bool) -> list[str]:
    texts = list(analysis.subcommands)
    if not analysis.opaque:
        return texts
    runs_text = eager or any(_evaluator(segment.words) for segment in analysis.segments)
    for segment in analysis.segments:
        rest = without_assignments(segment.words)
        if runs_text:
            texts += [word for word in rest if any(char.isspace() for char in word)]
        if rest and os.path.basename(rest[0]) in WRAPPERS | SHELLS | EVALUATORS:
            texts.append(" ".join(rest[1:]))
    return texts


@lru_cache(maxsize=512)
def _pattern_regex(pattern: str) -> re.Pattern[str] | None:
    pattern = pattern.strip()
    if pattern.endswith(":*"):
        pattern = pattern[:-2] + " *"
    tokens = pattern.split()
    if not tokens:
        return None
    parts = [".*".join(re.escape(piece) for piece in tokens[0].split("*"))]
    for index, token in enumerate(tokens[1:], start=1):
        if token == "*" and index == len(tokens) - 1:
            parts.append(f"(?:{SEP}.*)?")
        else:
            parts.append(SEP + ".*".join(re.escape(piece) for piece in token.split("*")))
    return re.compile("".join(parts), re.S)
