"""`search_files`: a regex search over the workspace's text files.

The walk never leaves the workspace: symlinks (to files or directories) are
skipped rather than followed, and `.git`, `.toolrun`, toolrun's home and what
the checkout's `.gitignore` files ignore (`runtime.tools.gitignore`) are not
entered. Binary files and files too large to search are skipped and counted,
and so are the files the batch's deny rules for a reading tool cover
(`_denied_by_rules`): a search shows no line read_file may not.
Each file is searched as read_file shows it, redacted: a pattern can tell
whether a line holds a marker, never what the marker hides.

The model's pattern runs on RE2 (`google-re2`), whose time is linear in the
text: a backtracking engine (Python's `re`) can spend hours in C on a pattern
such as `(a+)+$`, holding the GIL, and no timeout inside the process can stop
it (docs/architecture.md, "Stopping a call"). What RE2 does not support
(backreferences, lookaround) is an `invalid_arguments` result saying so.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterator
from pathlib import Path

import re2
from pydantic import Field

from runtime.errors import PathOutsideWorkspace, ToolError, UnsupportedArgument
from runtime.gate import protected
from runtime.gate.protected import refuse_home_path
from runtime.redaction import Redactor
from runtime.registry.capabilities import ToolContext, ToolInput, ToolOutput, tool
from runtime.tools.bounds import SNIFF_BYTES, budget, cut_text, is_binary, json_len, redactor_of
from runtime.tools.gitignore import IgnoreRules
from runtime.types import Risk
from runtime.workspace import refuse_hard_link, relative_name

MAX_MATCHES = 200
MAX_LINE_BYTES = 400
MAX_FILE_BYTES = 10 * 1024 * 1024
SKIP_DIRS = frozenset({".git", ".hg", ".svn", ".toolrun"})
MATCH_OVERHEAD = 40


class SearchFilesInput(ToolInput):
    pattern: str = Field(
        min_length=1,
        description="Regular expression (RE2 syntax: no backreferences or lookaround) "
        "searched for in each line.",
    )
    path: str = Field(".", description="Directory (or file) to search, relative to the workspace.")
    glob: str | None = Field(
        None,
        description="Only search files matching this glob: '*.py' matches file names, "
        "'src/**/*.py' matches paths relative to the workspace.",
    )


@tool(risk=Risk.read, idempotent=True, paths=("path",))
def search_files(args: SearchFilesInput, ctx: ToolContext) -> ToolOutput:
    """Search the text files under a workspace path for a regular expression.

    Returns matching lines as {path, line, text}, in path order, bounded in count
    and size; when cut, narrow the pattern, the path or the glob. Binary files,
    symlinks, the .git and .toolrun directories and what .gitignore files ignore
    are skipped (name an ignored directory as the path to search it).
    """
    regex = compile_pattern(args.pattern)
    root = ctx.resolve(".")
    start = ctx.resolve(args.path)
    refuse_home_path(root, args.path, start)
    rel_start = relative_name(root, start)
    if not start.exists():
        raise ToolError(f"{rel_start} does not exist; use list_dir to find the directory")
    if start.is_file():
        refuse_hard_link(start.stat(), rel_start)
    matches: list[dict] = []
    searched = skipped = denied = used = 0
    room = budget(ctx.max_bytes) - json_len(args.pattern) - json_len(rel_start)
    truncated = False
    for file in _files(start, root, args.glob):
        if _denied_by_rules(file, ctx):
            denied += 1
            continue
        lines = _text_lines(file, redactor_of(ctx))
        if lines is None:
            skipped += 1
            continue
        searched += 1
        rel = relative_name(root, file)
        for number, line in enumerate(lines, start=1):
            if not regex.search(line):
                continue
            match = {"path": rel, "line": number, "text": cut_text(line, MAX_LINE_BYTES)}
            cost = json_len(rel) + json_len(match["text"]) + MATCH_OVERHEAD
            if len(matches) >= MAX_MATCHES or used + cost > room:
                truncated = True
                break
            matches.append(match)
            used += cost
        if truncated:
            break
    content = {
        "pattern": args.pattern,
        "path": rel_start,
        "matches": matches,
        "files_searched": searched,
        "files_skipped": skipped,
        "files_denied": denied,
        "truncated": truncated,
    }
    shown_pattern = redactor_of(ctx).redact_text(args.pattern)  # redacted, then cut
    return ToolOutput(
        content=content,
        message=_message(args, rel_start, matches, searched, skipped, truncated)
        + _denied_note(denied),
        summary=f"searched {rel_start} for /{cut_text(shown_pattern, 60)}/: "
        f"{len(matches)}{'+' if truncated else ''} matches",
    )


def compile_pattern(pattern: str) -> re2._Regexp:
    """The pattern on RE2, or a ToolError the model can act on: a pattern
    Python's `re` accepts but RE2 does not uses a feature RE2 leaves out."""
    options = re2.Options()
    options.log_errors = False  # RE2 would write every refused pattern to stderr
    try:
        return re2.compile(pattern, options)
    except re2.error as error:
        reason = _reason(error)
        try:
            re.compile(pattern)
        except (re.error, RecursionError, OverflowError):
            raise ToolError(
                f"pattern {pattern!r} is not a valid regular expression: {reason}. "
                "Escape special characters with a backslash to search for them literally."
            ) from error
        raise UnsupportedArgument(
            f"pattern {pattern!r} uses a feature the search engine (RE2, linear time) does "
            f"not support: {reason}. Backreferences (\\1), lookahead and lookbehind "
            "((?=...), (?!...), (?<=...)) and \\Z are not available; rewrite the pattern "
            "without them (\\z for the end of a line), or search for a simpler pattern "
            "and read the files."
        ) from error


def _reason(error: Exception) -> str:
    said = error.args[0] if error.args else error
    return said.decode(errors="replace") if isinstance(said, bytes) else str(said)


def _files(start: Path, root: Path, glob: str | None) -> Iterator[Path]:
    """Regular files under `start` (itself, if a file), in path order, symlinks
    skipped, toolrun's home (`runtime.gate.protected.homes`) not entered."""
    if start.is_file():
        if _wanted(start, root, glob):
            yield start
        return
    homes = {str(home) for home in protected.homes() if home.is_relative_to(start)}
    rules = IgnoreRules(root, start)
    for folder, dirs, names in os.walk(start, followlinks=False):
        here = Path(folder)
        rules.enter(here)
        # os.walk lists symlinked directories in `dirs` but, with followlinks=False,
        # does not enter them; pruning here keeps that true, skips VCS/state dirs and
        # what a .gitignore leaves out.
        dirs[:] = sorted(
            d
            for d in dirs
            if d not in SKIP_DIRS
            and os.path.join(folder, d) not in homes
            and not rules.ignored(here / d, is_dir=True)
        )
        for name in sorted(names):
            file = here / name
            if file.is_symlink() or not file.is_file() or rules.ignored(file, is_dir=False):
                continue
            if _wanted(file, root, glob):
                yield file


def _denied_by_rules(file: Path, ctx: ToolContext) -> bool:
    """Whether a deny rule of the batch for a reading tool covers `file`, as it
    would deny read_file of it: a search must not show what read_file may not
    (docs/architecture.md, "The permission gate")."""
    return ctx.reading_denied(file) is not None


def _denied_note(denied: int) -> str:
    return f"\n[{denied} files skipped by deny rules]" if denied else ""


def _wanted(file: Path, root: Path, glob: str | None) -> bool:
    if not glob:
        return True
    if "/" not in glob:
        return fnmatch.fnmatchcase(file.name, glob)
    rel = file.relative_to(root).as_posix()
    # fnmatch's '*' already crosses '/', so 'src/**/*.py' needs a form for 'src/a.py' too.
    return fnmatch.fnmatchcase(rel, glob) or fnmatch.fnmatchcase(rel, glob.replace("**/", ""))


def _text_lines(file: Path, redactor: Redactor) -> list[str] | None:
    """The file's lines as read_file shows them, redacted, so that a pattern
    can match a marker and never what it hides (docs/architecture.md,
    "Secrets"); None if the file is binary, too large, unreadable or hard-linked
    (`runtime.workspace.refuse_hard_link`)."""
    try:
        with open(file, "rb") as stream:
            info = os.fstat(stream.fileno())
            refuse_hard_link(info, file.name)
            if info.st_size > MAX_FILE_BYTES:
                return None
            data = stream.read()
    except (OSError, PathOutsideWorkspace):
        return None
    if is_binary(data[:SNIFF_BYTES], complete=len(data) <= SNIFF_BYTES):
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    text = redactor.redact_text(text, str(file))
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()  # no phantom empty line after the final newline
    return [line.removesuffix("\r") for line in lines]


def _message(
    args: SearchFilesInput,
    rel_start: str,
    matches: list[dict],
    searched: int,
    skipped: int,
    truncated: bool,
) -> str:
    where = f"/{args.pattern}/ in {rel_start}" + (f" (glob {args.glob})" if args.glob else "")
    counted = f"{searched} files searched" + (
        f", {skipped} binary, unreadable, hard-linked or over "
        f"{MAX_FILE_BYTES // (1024 * 1024)} MiB skipped"
        if skipped
        else ""
    )
    if not matches:
        return f"no matches for {where}; {counted}"
    lines = [f"{m['path']}:{m['line']}: {m['text']}" for m in matches]
    head = f"{len(matches)} matches for {where}; {counted}"
    note = (
        f"\n[cut after {len(matches)} matches (bound: {MAX_MATCHES} matches or the output "
        "size); narrow the pattern, the path or the glob to see the rest]"
        if truncated
        else ""
    )
    return "\n".join([head, *lines]) + note
