"""Images and documents from tools: which become provider content blocks, and
the size bound they have of their own (`TOOLRUN_RESULT_MAX_MEDIA_BYTES`).

Only what every provider that takes blocks can read is carried: images as
JPEG, PNG, GIF or WebP, documents as PDF. Anything else, and anything past the
bound, is described in text instead. A file is carried whole or not at all:
half an image is no image.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from typing import Any

from runtime.types import Media

IMAGE_TYPES = {"image/jpeg", "image/png", "image/gif", "image/webp"}
DOCUMENT_TYPES = {"application/pdf"}


def from_block(block: dict[str, Any]) -> Media | None:
    """An MCP content block (`image`, or an embedded `resource` with a blob) as
    media, if it is a kind replies can carry."""
    kind = block.get("type")
    if kind == "image":
        mime, data, name = block.get("mimeType"), block.get("data"), None
    elif kind == "resource" and isinstance(block.get("resource"), dict):
        resource = block["resource"]
        mime, data, name = resource.get("mimeType"), resource.get("blob"), resource.get("uri")
    else:
        return None
    if not isinstance(data, str) or not _base64(data):
        return None
    if mime in IMAGE_TYPES:
        return Media(kind="image", mime_type=mime, data=data, name=name)
    if mime in DOCUMENT_TYPES:
        return Media(kind="document", mime_type=mime, data=data, name=_file_name(name))
    return None


def described(kind: str, mime: Any, size: int, name: Any = None) -> str:
    label = f" {name}" if isinstance(name, str) and name else ""
    return f"[{kind}{label}: {mime or 'unknown type'}, {size} bytes]"


def bound(media: Iterable[Media], max_bytes: int) -> tuple[list[Media], list[str]]:
    """The media that fit in `max_bytes` together, in order, and a note for
    each left out (whole: never cut)."""
    kept, notes, used = [], [], 0
    for item in media:
        if used + item.size <= max_bytes:
            kept.append(item)
            used += item.size
        else:
            notes.append(
                f"[{item.kind} {item.mime_type} of {item.size} bytes left out: results carry at "
                f"most {max_bytes} bytes of images and documents; ask for a smaller one]"
            )
    return kept, notes


def note(media: list[Media], where: str) -> str:
    """Text saying that media exist but cannot be shown in `where`."""
    listed = ", ".join(f"{m.kind} {m.mime_type} ({m.size} bytes)" for m in media)
    return f"[{listed} not shown: {where} carry text only]"


def _base64(data: str) -> bool:
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _file_name(uri: Any) -> str | None:
    if not isinstance(uri, str) or not uri:
        return None
    return uri.rstrip("/").rsplit("/", 1)[-1] or None
