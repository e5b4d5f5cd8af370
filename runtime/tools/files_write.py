"""File tools with side effects: `write_file` and `edit_file`.

Every write is atomic: the new text goes to a temporary file in the target's own
directory, is flushed to disk, and replaces the target with `os.replace`, so a
crash leaves the old file or the new one, never half of either. Replacing the
directory entry (rather than writing through it) also means a hard link to some
other file is never written through; a file with several hard links is refused
all the same, since the diff would show what the file outside holds
(`runtime.workspace.refuse_hard_link`). Settings files are refused
(`runtime.gate.protected`).
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from pydantic import Field

from runtime.errors import ToolError
from runtime.gate.protected import refuse_settings_path
from runtime.registry.capabilities import ToolContext, ToolInput, ToolOutput, tool
from runtime.tools.bounds import SNIFF_BYTES, bounded_diff, budget, is_binary, redactor_of
from runtime.types import Risk
from runtime.workspace import refuse_hard_link, relative_name

MARKER = "[REDACTED:"  # how every redaction marker begins (runtime/redaction/redactor.py)


def _read_umask() -> int:
    # os.umask can only be read by setting it; do it once, at import, before any
    # worker thread could create files concurrently.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _read_umask()


class WriteFileInput(ToolInput):
    path: str = Field(description="File to create or overwrite, relative to the workspace.")
    content: str = Field(description="The complete new text of the file (UTF-8).")


class EditFileInput(ToolInput):
    path: str = Field(description="File to edit, relative to the workspace.")
    old_string: str = Field(
        description="Exact text to replace, whitespace included; must occur once "
        "unless replace_all is set."
    )
    new_string: str = Field(description="Text to put in its place; must differ from old_string.")
    replace_all: bool = Field(False, description="Replace every occurrence of old_string.")


@tool(risk=Risk.write, idempotent=False, paths=("path",))
def write_file(args: WriteFileInput, ctx: ToolContext) -> ToolOutput:
    """Create a text file, or replace a file's whole content, in the workspace.

    Missing parent directories are created. The write is atomic. Returns whether
    the file was created, its size, and a unified diff of old vs new text. To
    change part of a file, prefer edit_file.
    """
    target, rel = _writable(ctx, args.path)
    if target.is_dir():
        raise ToolError(f"{rel} is a directory; give a file path")
    created = not target.exists()
    old = "" if created else _old_text(target, rel, allow_binary=True)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as error:
        raise ToolError(f"cannot create the directories for {rel}: a parent is a file") from error
    data = args.content.encode("utf-8")
    _atomic_write(target, data)
    diff, cut = _diff(old, args.content, rel, ctx)
    verb = "created" if created else "modified"
    return ToolOutput(
        content={"path": rel, "created": created, "bytes": len(data), "diff": diff},
        message=f"{verb} {rel} ({len(data)} bytes)\n{diff}{_diff_note(cut, rel)}",
        summary=f"{verb} {rel} ({len(data)} bytes)",
    )


@tool(risk=Risk.write, idempotent=False, paths=("path",))
def edit_file(args: EditFileInput, ctx: ToolContext) -> ToolOutput:
    """Replace an exact piece of text in a workspace file.

    `old_string` must occur exactly once, or set `replace_all`; include enough
    surrounding lines to make it unique. The write is atomic. Returns the number
    of replacements and a unified diff.
    """
    target, rel = _writable(ctx, args.path)
    if not args.old_string:
        raise ToolError("old_string is empty; give the text to replace, or use write_file")
    if args.old_string == args.new_string:
        raise ToolError("old_string and new_string are the same; nothing would change")
    if not target.exists():
        raise ToolError(f"{rel} does not exist; use write_file to create it")
    if not target.is_file():
        raise ToolError(f"{rel} is not a regular file; edit_file edits text files")
    old = _old_text(target, rel, allow_binary=False)
    if MARKER in args.old_string:
        raise ToolError(
            f"old_string includes a redaction marker ({MARKER}...); a redacted secret cannot "
            "be matched. Edit the text around it, or write the whole file with write_file"
        )
    found = _shown_occurrences(old, args.old_string, redactor_of(ctx).secrets(old, rel))
    count = len(found)
    if count == 0:
        raise ToolError(
            f"old_string was not found in {rel}; read_file to see its current text and "
            "copy the part to replace exactly, whitespace and indentation included"
        )
    if count > 1 and not args.replace_all:
        raise ToolError(
            f"old_string occurs {count} times in {rel}; add surrounding lines to make it "
            "unique, or set replace_all to replace all of them"
        )
    new = _replaced(old, found, len(args.old_string), args.new_string)
    data = new.encode("utf-8")
    _atomic_write(target, data)
    diff, cut = _diff(old, new, rel, ctx)
    noun = "replacement" if count == 1 else "replacements"
    return ToolOutput(
        content={"path": rel, "replacements": count, "bytes": len(data), "diff": diff},
        message=f"modified {rel} ({count} {noun})\n{diff}{_diff_note(cut, rel)}",
        summary=f"edited {rel} ({count} {noun})",
    )


def _shown_occurrences(text: str, wanted: str, secrets: list[tuple[int, int, str]]) -> list[int]:
    """Where `wanted` occurs in `text`, left to right, not overlapping itself nor
    any secret. Only what read_file shows can be matched, so whether an edit
    finds its text never says what a marker hides (docs/architecture.md, "Secrets")."""
    found, at, size = [], text.find(wanted), len(wanted)
    while at != -1:
        if any(start < at + size and at < end for start, end, _ in secrets):
            at = text.find(wanted, at + 1)  # hidden: as if it were not there
            continue
        found.append(at)
        at = text.find(wanted, at + size)
    return found


def _replaced(text: str, found: list[int], size: int, new: str) -> str:
    pieces, at = [], 0
    for start in found:
        pieces += (text[at:start], new)
        at = start + size
    return "".join([*pieces, text[at:]])


def _writable(ctx: ToolContext, path: str) -> tuple[Path, str]:
    """(resolved target, name shown to the model) for a path a tool may write;
    settings locations are refused (PathOutsideWorkspace)."""
    root = ctx.resolve(".")
    target = ctx.resolve(path)
    if target == root:
        raise ToolError("the path names the workspace itself; give a file path")
    refuse_settings_path(root, path, target)
    return target, relative_name(root, target)


def _old_text(target: Path, rel: str, *, allow_binary: bool) -> str:
    """The current text of `target`; a binary file is '' when it may be replaced,
    else a ToolError."""
    try:
        with open(target, "rb") as stream:
            refuse_hard_link(os.fstat(stream.fileno()), rel)
            data = stream.read()
    except PermissionError as error:
        raise ToolError(f"{rel} cannot be read: permission denied") from error
    text = None
    if not is_binary(data[:SNIFF_BYTES], complete=len(data) <= SNIFF_BYTES):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = None
    if text is not None:
        return text
    if allow_binary:
        return ""
    raise ToolError(f"{rel} is a binary file; edit_file only edits UTF-8 text")


def _atomic_write(target: Path, data: bytes) -> None:
    """Replace `target` with `data` in one step: a temp file in the same directory,
    fsynced, then `os.replace`. The existing file's permission bits are kept."""
    try:
        mode = stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_UMASK
    handle, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temp, mode)
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def _diff(old: str, new: str, rel: str, ctx: ToolContext) -> tuple[str, bool]:
    """The diff of the two texts as read_file would show each, redacted as the
    file they are: a diff line's `-`/`+` would hide a YAML value's indentation
    from the redactor, and a bound must cut only redacted text
    (docs/architecture.md, "Secrets")."""
    redactor = redactor_of(ctx)
    shown_old, shown_new = redactor.redact_text(old, rel), redactor.redact_text(new, rel)
    return bounded_diff(shown_old, shown_new, rel, budget(ctx.max_bytes) - 2 * len(rel))


def _diff_note(cut: bool, rel: str) -> str:
    if not cut:
        return ""
    return f"\n[diff cut at the output bound; the write is complete. read_file {rel} to check it]"
