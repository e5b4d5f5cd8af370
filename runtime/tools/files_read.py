"""Read-only file tools: `read_file` and `list_dir`.

Both resolve every path inside the workspace (symlinks followed, escapes
refused) and bound what they return by `ctx.max_bytes`, saying what was cut and
how to ask for the rest.
"""

from __future__ import annotations

import codecs
import os
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from pydantic import Field

from runtime.errors import ToolError
from runtime.gate.protected import refuse_home_path
from runtime.redaction import Redactor
from runtime.registry.capabilities import ToolContext, ToolInput, ToolOutput, tool
from runtime.tools.bounds import (
    SNIFF_BYTES,
    binary_kind,
    budget,
    cut_text,
    describe_binary,
    is_binary,
    json_len,
    redactor_of,
)
from runtime.types import Risk
from runtime.workspace import refuse_hard_link, relative_name

MAX_ENTRIES = 500
CONTEXT_BYTES = 16 * 1024  # read around a window, for redaction: a PEM block's start, a cut key
ENTRY_OVERHEAD = 56


class ReadFileInput(ToolInput):
    path: str = Field(description="File to read, relative to the workspace.")
    offset: int = Field(1, ge=1, description="First line to return (1-based). Default 1.")
    limit: int | None = Field(
        None, ge=1, description="Most lines to return. Default: as many as fit the output bound."
    )


class ListDirInput(ToolInput):
    path: str = Field(".", description="Directory to list, relative to the workspace.")


@tool(risk=Risk.read, idempotent=True, paths=("path",))
def read_file(args: ReadFileInput, ctx: ToolContext) -> ToolOutput:
    """Read a UTF-8 text file in the workspace, by lines.

    Returns lines `offset` to `offset + limit - 1` (1-based), bounded by the
    output size limit; when the output is cut, the message gives the `offset` to
    read on from. A binary file is described (format and size), not shown.
    """
    target = ctx.resolve(args.path)
    refuse_home_path(ctx.resolve("."), args.path, target)
    rel = relative_name(ctx.resolve("."), target)
    _require_file(target, rel)
    room = budget(ctx.max_bytes) - json_len(rel)
    try:
        with open(target, "rb") as stream:
            info = os.fstat(stream.fileno())
            refuse_hard_link(info, rel)
            head = stream.read(SNIFF_BYTES)
            size = info.st_size
            if is_binary(head, complete=size <= SNIFF_BYTES):
                return _binary(target, rel, size, head)
            stream.seek(0)
            page = _page(stream, args.offset, args.limit, room, redactor_of(ctx), rel)
    except UnicodeDecodeError:
        return _binary(target, rel, size, head)
    except PermissionError as error:
        raise ToolError(f"{rel} cannot be read: permission denied") from error
    if args.offset > max(page.total, 1):
        raise ToolError(
            f"offset {args.offset} is past the end of {rel}, which has {page.total} lines; "
            "give an offset between 1 and the line count"
        )
    end = args.offset + len(page.lines) - 1
    text = "".join(page.lines)
    content = {
        "path": rel,
        "text": text,
        "start_line": args.offset,
        "end_line": end,
        "total_lines": page.total,
        "truncated": page.truncated,
    }
    span = f"lines {args.offset}-{end} of {page.total}" if page.total else "empty file"
    return ToolOutput(
        content=content,
        message=f"{rel}: {span}\n{text}{_read_note(page, end, ctx.max_bytes)}",
        summary=f"read {rel} ({span})",
    )


@tool(risk=Risk.read, idempotent=True, paths=("path",))
def list_dir(args: ListDirInput, ctx: ToolContext) -> ToolOutput:
    """List one directory of the workspace (not recursive).

    Each entry has a name, a kind (file, dir, symlink or other) and a size in
    bytes for files. Symlinks are listed as symlinks and never followed. Long
    listings are cut; list a subdirectory or use search_files to narrow.
    """
    target = ctx.resolve(args.path)
    refuse_home_path(ctx.resolve("."), args.path, target)
    rel = relative_name(ctx.resolve("."), target)
    if not target.exists():
        raise ToolError(f"{rel} does not exist; list its parent directory to see what is there")
    if not target.is_dir():
        raise ToolError(f"{rel} is not a directory; use read_file to read a file")
    try:
        with os.scandir(target) as scan:
            found = sorted(scan, key=lambda entry: entry.name)
    except PermissionError as error:
        raise ToolError(f"{rel} cannot be listed: permission denied") from error
    entries, lines, used = [], [], 0
    room = budget(ctx.max_bytes) - json_len(rel)
    for entry in found:
        item = _entry(entry)
        # An entry's JSON is its name plus ~50 bytes of keys; its message line is shorter.
        cost = json_len(item["name"]) + ENTRY_OVERHEAD
        if len(entries) >= MAX_ENTRIES or used + cost > room:
            break
        entries.append(item)
        lines.append(_entry_line(item))
        used += cost
    truncated = len(entries) < len(found)
    content = {"path": rel, "entries": entries, "total": len(found), "truncated": truncated}
    note = (
        f"\n[cut: showing {len(entries)} of {len(found)} entries; list a subdirectory or "
        "use search_files with a glob to narrow]"
        if truncated
        else ""
    )
    header = f"{rel}/: {len(found)} entries" if found else f"{rel}/: empty directory"
    return ToolOutput(
        content=content,
        message="\n".join([header, *lines]) + note,
        summary=f"listed {rel} ({len(found)} entries)",
    )


class _Page:
    """The lines `read_file` returns, and what it learnt about the rest."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.total = 0
        self.truncated = False
        self.long_line: tuple[int, int] | None = None  # (line number, its full size)


def _page(
    stream: BinaryIO, offset: int, limit: int | None, room: int, redactor: Redactor, name: str
) -> _Page:
    """Walk every line (to count them), keeping the window asked for with up to
    `CONTEXT_BYTES` of lines on each side; redact them together, then keep the
    window's lines that fit `room`. So a window inside a private key or a
    multi-line value hides its every line, and no bound cuts a secret before
    the redactor has seen it whole (docs/architecture.md, "Secrets"). A bad
    UTF-8 sequence in the window raises UnicodeDecodeError. `name`: the file's
    path, for the secrets its kind holds (`runtime/redaction/file_kinds.py`)."""
    page = _Page()
    before: deque[tuple[bytes, int]] = deque()
    kept: list[tuple[bytes, int]] = []
    held = taken = 0
    last = offset + limit - 1 if limit else None
    for number, (head, size) in enumerate(_lines(stream, room + CONTEXT_BYTES), start=1):
        page.total = number
        if number < offset:
            before.append((head, size))
            held += len(head)
            while held > CONTEXT_BYTES:
                held -= len(before.popleft()[0])
        elif (last is None or number <= last) and taken < room + CONTEXT_BYTES:
            kept.append((head, size))
            taken += len(head)
    if not kept:
        return page
    context = "".join(_decode(head, size, strict=False) for head, size in before)
    window = "".join(_decode(head, size, strict=True) for head, size in kept)
    # Redaction keeps every newline (a secret's lines become one marker each).
    shown = _split(redactor.redact_text(context + window, name))[len(before) :]
    used = 0
    for number, (line, (head, size)) in enumerate(zip(shown, kept, strict=True), start=offset):
        cost = json_len(line)
        if size == len(head) and used + cost <= room:
            page.lines.append(line)
            used += cost
            continue
        if not page.lines:  # one line longer than the whole bound: show its start
            page.lines.append(cut_text(line, room))
            page.long_line = (number, size)
        break
    wanted = page.total if last is None else min(last, page.total)
    page.truncated = offset + len(page.lines) - 1 < wanted
    return page


def _decode(head: bytes, size: int, *, strict: bool) -> str:
    """A line's text, ending with its newline; of a line longer than was read,
    its first bytes and a newline (so it stays one line when lines are joined)."""
    if size != len(head):
        return _decode_prefix(head) + "\n"
    return head.decode("utf-8") if strict else head.decode("utf-8", errors="replace")


def _split(text: str) -> list[str]:
    """Lines at `\\n` only (str.splitlines also splits at \\r, \\f, U+2028...)."""
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _lines(stream: BinaryIO, cap: int) -> Iterator[tuple[bytes, int]]:
    """(first `cap` bytes, full length) of each line, without holding a huge line."""
    while piece := stream.readline(cap):
        head, size = piece, len(piece)
        while not piece.endswith(b"\n"):
            piece = stream.readline(cap)
            if not piece:
                break
            size += len(piece)
        yield head, size


def _decode_prefix(head: bytes) -> str:
    """Decode a line's first bytes, which may end inside a character."""
    return codecs.getincrementaldecoder("utf-8")().decode(head, final=False)


def _read_note(page: _Page, end: int, max_bytes: int) -> str:
    if page.long_line:
        number, size = page.long_line
        return (
            f"\n[cut: line {number} is {size} bytes, longer than the {max_bytes}-byte output "
            "bound; only its start is shown. Use search_files to find the part you need, "
            f"or read on from offset={number + 1}]"
        )
    if page.truncated:
        return (
            f"\n[cut at the {max_bytes}-byte output bound: showing lines up to {end} of "
            f"{page.total}; call read_file with offset={end + 1} to read on]"
        )
    if end < page.total:
        return f"\n[{page.total - end} more lines; call read_file with offset={end + 1}]"
    return ""


def _binary(target: Path, rel: str, size: int, head: bytes) -> ToolOutput:
    kind = binary_kind(target, head)
    return ToolOutput(
        content={"path": rel, "binary": True, "size": size, "kind": kind},
        message=describe_binary(rel, size, kind),
        summary=f"read {rel} (binary, {kind}, {size} bytes)",
    )


def _require_file(target: Path, rel: str) -> None:
    if not target.exists():
        raise ToolError(f"{rel} does not exist; use list_dir or search_files to find the file")
    if target.is_dir():
        raise ToolError(f"{rel} is a directory; use list_dir to see what it holds")
    if not target.is_file():
        raise ToolError(f"{rel} is not a regular file and cannot be read")


def _entry(entry: os.DirEntry) -> dict:
    if entry.is_symlink():
        return {"name": entry.name, "kind": "symlink", "size": None}
    if entry.is_dir(follow_symlinks=False):
        return {"name": entry.name, "kind": "dir", "size": None}
    if entry.is_file(follow_symlinks=False):
        try:
            size = entry.stat(follow_symlinks=False).st_size
        except OSError:
            size = None
        return {"name": entry.name, "kind": "file", "size": size}
    return {"name": entry.name, "kind": "other", "size": None}


def _entry_line(item: dict) -> str:
    if item["kind"] == "dir":
        return f"{item['name']}/"
    if item["kind"] == "file":
        return f"{item['name']}  ({item['size']} bytes)"
    return f"{item['name']}  ({item['kind']})"
