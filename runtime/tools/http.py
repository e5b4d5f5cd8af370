"""`http_get`: fetch one http(s) URL; return its status, a few headers and a
bounded body (text decoded, binary described).

- Only `http://` and `https://`, and no `user@` in the URL: `http://a.com@b.com/`
  reads as one host to people and as another to parsers, and the permission rule
  matched the host. The opener has no file, ftp or data handler at all.
- Redirects are followed on the same host only (at most five), never from https
  down to http: a rule that allows one host must not let a redirect reach
  another. A redirect elsewhere is returned as the answer (status and
  `location`), so fetching it takes a call of its own, which the gate checks.
- The body is read up to the bound, never whole, within one overall deadline.
- A 4xx or 5xx status is an answer, not an error; a failed connection is an error.
- Internal addresses (loopback, private, link-local, unspecified...) are
  `denied` unless the org policy's `internal_hosts` names them
  (docs/architecture.md, "Internal addresses"). Every connection, each redirect's
  too, resolves its host once, checks every address it got, and connects to
  those addresses, never to a second lookup's: a name that resolves to a public
  address for the check and to 127.0.0.1 for the connection reaches nothing.
  Environment proxies are not used: through a proxy the address connected to
  would be the proxy's choice, not the one checked.
"""

from __future__ import annotations

import http.client
import re
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from email.message import Message
from pathlib import PurePosixPath
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from pydantic import Field

from runtime.errors import ToolError
from runtime.gate.addresses import InternalHosts
from runtime.registry.capabilities import ToolContext, ToolInput, ToolOutput, tool
from runtime.tools.bounds import (
    SNIFF_BYTES,
    binary_kind,
    budget,
    cut_text,
    is_binary,
    json_len,
    redactor_of,
)
from runtime.tools.http_opener import opener
from runtime.types import Risk

if TYPE_CHECKING:
    from runtime.redaction import Redactor

TIMEOUT = 20.0
CHUNK = 64 * 1024
CONTEXT_BYTES = 4096  # read past the limit, so a secret across it is redacted whole
HEADER_ROOM = 768
SHOWN_HEADERS = ("content-type", "content-length", "content-encoding", "last-modified", "location")
TEXT_TYPE = re.compile(
    r"text/|application/(?:json|xml|javascript|ecmascript|x-www-form-urlencoded|x-sh|toml|yaml)"
    r"|application/[\w.+-]*\+(?:json|xml)|image/svg\+xml",
    re.I,
)
USER_AGENT = "toolrun-http_get/1"


class HttpGetInput(ToolInput):
    url: str = Field(description="The http:// or https:// URL to fetch (GET).")
    max_bytes: int | None = Field(
        None,
        ge=1,
        description="Most body bytes to return. Default and ceiling: the result size limit.",
    )


@tool(risk=Risk.external, idempotent=True, timeout=TIMEOUT + 10, subject=("url", "url"))
def http_get(args: HttpGetInput, ctx: ToolContext) -> ToolOutput:
    """Fetch a web page or file over http(s) with GET.

    Returns the final URL, the status, a few headers and the body: text as text
    (cut at the size limit), binary described by format and size. 4xx/5xx
    statuses are returned, not raised. Redirects are followed on the same host
    only; a redirect to another host is returned with its `location`, to fetch
    with a new call.
    """
    url = _checked(args.url)
    room = max(budget(ctx.max_bytes) - HEADER_ROOM - 2 * json_len(url), 64)
    limit = min(args.max_bytes or room, room)
    deadline = time.monotonic() + TIMEOUT
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT, "Accept": "*/*"})
    internal = InternalHosts.parse(ctx.internal_hosts)
    try:
        response = opener(internal).open(request, timeout=TIMEOUT)
    except urllib.error.HTTPError as error:
        response = error  # a status is an answer, whatever it is
    except ToolError:
        raise
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as error:
        raise ToolError(
            f"cannot fetch {url}: {_reason(error)}; check the URL or try later"
        ) from error
    with response:
        # Past the limit too: a secret the limit would cut must be seen whole to be
        # redacted before the cut (docs/architecture.md, "Secrets").
        body, complete = _read(response, limit + CONTEXT_BYTES, deadline, url)
        final = response.geturl()
        status = response.status or response.code
        headers = _headers(response.headers)
    text = Text(limit=limit, room=room, redactor=redactor_of(ctx))
    return _output(final, status, headers, body, complete, response.headers, text)


def _checked(url: str) -> str:
    url = url.strip()
    if any(char.isspace() or ord(char) < 32 or char == "\\" for char in url):
        raise ToolError("the URL contains whitespace, a control character or a backslash")
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https"):
        shown = f"{parts.scheme}://" if parts.scheme else "a URL without a scheme"
        raise ToolError(f"only http:// and https:// URLs can be fetched, not {shown}")
    if "@" in parts.netloc:
        raise ToolError("URLs with a user name or password (user@host) are refused")
    try:
        _ = parts.port
    except ValueError as error:
        raise ToolError(f"the URL's port is not valid: {error}") from error
    if not parts.hostname:
        raise ToolError("the URL names no host; give a full URL like https://example.com/")
    return url


def _read(response, limit: int, deadline: float, url: str) -> tuple[bytes, bool]:
    """Up to `limit` bytes of the body, and whether that is all of it."""
    data = bytearray()
    try:
        while len(data) <= limit:
            if time.monotonic() > deadline:
                raise ToolError(f"{url} sent its body too slowly (over {TIMEOUT:g} s); try later")
            chunk = response.read(min(CHUNK, limit + 1 - len(data)))
            if not chunk:
                return bytes(data), True
            data += chunk
    except (http.client.HTTPException, OSError) as error:
        raise ToolError(f"reading the body of {url} failed: {_reason(error)}") from error
    return bytes(data[:limit]), False


def _headers(headers: Message) -> dict[str, str]:
    return {name: headers[name] for name in SHOWN_HEADERS if headers.get(name) is not None}


def _output(
    url: str,
    status: int,
    headers: dict[str, str],
    body: bytes,
    complete: bool,
    raw: Message,
    bound: Text,
) -> ToolOutput:
    content: dict = {"url": url, "status": status, "headers": headers}
    kind = raw.get_content_type() if raw.get("content-type") else ""
    head = body[:SNIFF_BYTES]
    text, cut = "", False
    # A declared text type is trusted (its charset may not be UTF-8) unless it has NULs.
    binary = not TEXT_TYPE.match(kind) if kind else is_binary(head, complete=complete)
    if binary or b"\x00" in head:
        described = binary_kind(PurePosixPath(urlsplit(url).path or "/"), head)
        size = raw.get("content-length") or (f"{len(body)}" if complete else f"over {len(body)}")
        body = body[: bound.limit]
        content["binary"] = line = f"{kind or described}, {size} bytes; content not shown"
    else:
        text, cut = _text(body, raw.get_content_charset(), bound)
        content["text"] = text
        cut = cut or not complete
        shown = min(len(body), bound.limit)
        line = f"{shown}{'' if complete and not cut else '+'} bytes of {kind or 'text'}"
    content["truncated"] = cut
    note = "" if not cut else "\n[body cut at the size limit; fetch a more specific URL]"
    redirect = ""
    if 300 <= status < 400 and "location" in headers:
        redirect = (
            f"\nredirect to {headers['location']} not followed (another host, or https to "
            "http); call http_get with that URL to fetch it"
        )
    shown = "".join(f"\n{name}: {value}" for name, value in headers.items())
    return ToolOutput(
        content=content,
        message=f"GET {url} → {status}{shown}{redirect}\n\n{text or line}{note}",
        summary=f"GET {url} → {status} ({line})",
    )


@dataclass(frozen=True)
class Text:
    """How a text body is bounded: `limit` bytes of it, in `room` JSON bytes,
    redacted first."""

    limit: int
    room: int
    redactor: Redactor


def _text(body: bytes, charset: str | None, bound: Text) -> tuple[str, bool]:
    """The body decoded (its charset, else UTF-8) and redacted, then cut to
    `bound.limit` bytes and `bound.room` JSON bytes."""
    try:
        text = body.decode(charset or "utf-8", errors="replace")
    except LookupError:
        text = body.decode("utf-8", errors="replace")
    text = bound.redactor.redact_text(text)
    cut = len(text.encode()) > bound.limit
    if cut:
        text = cut_text(text, bound.limit)
    while json_len(text) > bound.room:
        text, cut = cut_text(text, len(text.encode()) * 9 // 10), True
    return text, cut


def _reason(error: BaseException) -> str:
    reason = getattr(error, "reason", None) or error
    return str(reason) or type(reason).__name__
