"""Keeping tool output bounded and readable: cut text at a byte budget, tell text
from binary, describe a binary file, and build a bounded unified diff.

Every built-in tool measures its output with these, so "what was cut" is
worded the same way everywhere (docs/architecture.md, "Semantics").
"""

from __future__ import annotations

import codecs
import difflib
import json
import mimetypes
from pathlib import Path

from runtime.redaction import BUILT_IN, Redactor
from runtime.registry.capabilities import ToolContext

SNIFF_BYTES = 8 * 1024

_SIGNATURES: list[tuple[bytes, str]] = [
    (b"\x89PNG\r\n\x1a\n", "PNG image"),
    (b"\xff\xd8\xff", "JPEG image"),
    (b"GIF8", "GIF image"),
    (b"%PDF", "PDF document"),
    (b"PK\x03\x04", "ZIP archive (zip, jar, wheel, docx, ...)"),
    (b"\x1f\x8b", "gzip-compressed data"),
    (b"BZh", "bzip2-compressed data"),
    (b"\xfd7zXZ\x00", "xz-compressed data"),
    (b"\x7fELF", "ELF executable or library"),
    (b"SQLite format 3\x00", "SQLite database"),
    (b"\x00asm", "WebAssembly module"),
]


def redactor_of(ctx: ToolContext) -> Redactor:
    """What a tool redacts with before it matches or cuts text: the worker's."""
    return ctx.redactor or BUILT_IN


def json_len(text: str) -> int:
    """Bytes `text` takes as a JSON string body (escapes counted, quotes not)."""
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8")) - 2


def cut_text(text: str, max_bytes: int) -> str:
    """The longest prefix of `text` whose UTF-8 form fits in `max_bytes`."""
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text
    return data[: max(max_bytes, 0)].decode("utf-8", errors="ignore")


def budget(max_bytes: int) -> int:
    """Bytes left for the main text of a result once keys and notes are paid for."""
    return max(max_bytes - min(512, max_bytes // 4), 64)


def is_binary(head: bytes, *, complete: bool = False) -> bool:
    """True if `head` (the first bytes of a file) has a NUL byte or is not UTF-8.

    Unless `complete`, `head` may end inside a multi-byte character; that is not
    counted against it.
    """
    if b"\x00" in head:
        return True
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=complete)
    except UnicodeDecodeError:
        return True
    return False


def binary_kind(path: Path, head: bytes) -> str:
    """A short human name for a binary file's format, from its bytes, then its name."""
    for signature, kind in _SIGNATURES:
        if head.startswith(signature):
            return kind
    if head[257:262] == b"ustar":
        return "tar archive"
    if b"\x00" not in head:
        return "text that is not UTF-8"
    guessed, _ = mimetypes.guess_type(path.name)
    return guessed or "binary data"


def describe_binary(rel: str, size: int, kind: str) -> str:
    """The message a tool gives instead of dumping a binary file."""
    return (
        f"{rel} is a binary file ({kind}, {size} bytes); its content is not shown. "
        "Text tools cannot read or edit it."
    )


def bounded_diff(old: str, new: str, rel: str, max_bytes: int) -> tuple[str, bool]:
    """A unified diff of `old` → `new`, cut at whole lines to `max_bytes`.

    Returns the diff and whether it was cut.
    """
    lines = difflib.unified_diff(
        old.splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile=f"a/{rel}",
        tofile=f"b/{rel}",
    )
    kept: list[str] = []
    used = 0
    for line in lines:
        if not line.endswith("\n"):
            line += "\n\\ No newline at end of file\n"
        size = json_len(line)
        if used + size > max_bytes:
            return "".join(kept), True
        kept.append(line)
        used += size
    return "".join(kept), False
