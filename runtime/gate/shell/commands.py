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
- A *flag that escapes* (`runtime.gate.shell.flags`: `git diff --output=/x`,
  `git -c core.fsmonitor=cmd diff`, a `*` bash may expand into a flag) is never
  covered by a rule's `*`; only a rule that spells it out allows it.
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
from pathlib import Path

from runtime.gate.shell import flags
from runtime.gate.shell.analysis import Analysis, Segment
from runtime.gate.shell.lexer import Lexer, assemble, command_words, without_assignments
from runtime.gate.shell.paths import (
    Places,
    guarded_target,
    redirect_inside,
    touches,
    unknowable,
    working_dirs,
)
from runtime.gate.shell.patterns import covers, matches

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


def analyze(command: str, workspace: Path) -> Analysis:
    """Split `command` into segments, redirect targets and sub-commands."""
    lexer = Lexer(command)
    lexer.run()
    reasons = lexer.reasons
    if "\x00" in command:
        reasons.insert(0, "the command contains a NUL byte")
    elif CONTROL.search(command):
        reasons.insert(0, "the command contains a control character")
    words, loose, redirects, directories = assemble(lexer.tokens, reasons)
    segments = [Segment(values) for values in words]
    for segment in segments:
        reason = _evaluator(segment.words)
        if reason:
            reasons.append(reason)
    unique = list(dict.fromkeys(reasons))
    segments = _with_escapes(
        segments, loose, Analysis(command, Path(workspace), segments, directories=directories)
    )
    return Analysis(
        command=command,
        workspace=Path(workspace),
        segments=segments,
        redirects=redirects,
        opaque="; ".join(unique[:3]) or None,
        subcommands=lexer.subcommands,
        directories=directories,
    )


def escape_note(analysis: Analysis) -> str | None:
    """Why no rule's glob covers the command, for the decision's reason, or None."""
    found = [escape.reason for segment in analysis.segments for escape in segment.escapes]
    if not found:
        return None
    listed = "; ".join(list(dict.fromkeys(found))[:3])
    return (
        f"a rule's `*` never covers a flag that escapes: {listed}; "
        "only a rule that spells the flag out covers it"
    )


def guarded_redirects(analysis: Analysis) -> str | None:
    """Why the command's redirects (its sub-commands' too) write git's
    configuration or hooks or a shell's rc file, or None."""
    root = analysis.workspace.resolve()
    for node in _tree(analysis) or [analysis]:
        cwds = working_dirs(node, root) or [root]
        for target in node.redirects:
            reason = None if unknowable(target) else guarded_target(target, cwds, root)
            if reason:
                return f"it redirects to {target!r}: {reason}"
    return None


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
        and all(any(covers(p, seg) for p in patterns) for seg in analysis.segments)
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


def _with_escapes(
    segments: list[Segment], loose: list[set[int]], analysis: Analysis
) -> list[Segment]:
    """The segments with their flags that escape a rule's glob (`flags.escapes`),
    whose files are judged from every directory a `cd` may lead to."""
    known: list = []  # (root, cwds), found once a flag names a file

    def astray(value: str) -> str | None:
        if value in SAFE_DEVICES:
            return None
        if not known:
            root = analysis.workspace.resolve()
            known.extend([root, working_dirs(analysis, root)])
        root, cwds = known
        if unknowable(value):
            return "is only known when the command runs"
        if cwds is None and not os.path.isabs(value):
            return "is relative to a directory only known when the command runs"
        if not redirect_inside(value, cwds or [root], root):
            return "leads outside the workspace or into a toolrun settings location"
        if guarded_target(value, cwds or [root], root):
            return "is git's configuration or hooks or a shell's rc file"
        return None

    out = []
    for segment, marked in zip(segments, loose, strict=True):
        words = segment.words
        first = len(words) - len(command_words(words))
        starts = [first] if first < len(words) else []
        if starts and os.path.basename(words[first]) in WRAPPERS:
            rest = range(first + 1, len(words))
            starts += [i for i in rest if os.path.basename(words[i]) in flags.PROGRAMS]
        found = flags.escapes(words, marked, starts, astray)
        out.append(Segment(words, tuple(found)) if found else segment)
    return out


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
