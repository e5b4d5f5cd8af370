"""`http_get`'s opener: http and https only, redirects on the same host only,
and every connection made to an address checked first, from one lookup
(runtime/tools/http.py says why; docs/architecture.md, "Internal addresses")."""

from __future__ import annotations

import functools
import http.client
import socket
import urllib.request
from urllib.parse import urlsplit

from runtime.errors import ToolError
from runtime.gate.addresses import InternalHosts, connect

MAX_REDIRECTS = 5


class _SameHostRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only to the same host, never https → http, at most
    MAX_REDIRECTS times; any other redirect ends the fetch as the answer."""

    max_redirections = max_repeats = MAX_REDIRECTS + 1  # our own count speaks first

    def __init__(self) -> None:
        self.followed = 0

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        old, new = urlsplit(req.full_url), urlsplit(newurl)
        downgrade = old.scheme == "https" and new.scheme != "https"
        if new.scheme not in ("http", "https") or downgrade or "@" in new.netloc:
            return None
        if (new.hostname or "").lower() != (old.hostname or "").lower():
            return None
        self.followed += 1
        if self.followed > MAX_REDIRECTS:
            raise ToolError(f"more than {MAX_REDIRECTS} redirects from {req.full_url}; stopped")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _connect(
    address: tuple[str, int],
    timeout: object = socket._GLOBAL_DEFAULT_TIMEOUT,
    source_address: tuple[str, int] | None = None,
    *,
    internal: InternalHosts,
) -> socket.socket:
    """http.client's `create_connection`, with one lookup whose every address
    is checked before any is connected to (`addresses.connect`)."""
    # http.client's "not given" is its own marker, not None
    given = None if timeout is socket._GLOBAL_DEFAULT_TIMEOUT else timeout
    return connect(address[0], address[1], internal, given, source_address)  # type: ignore[arg-type]


class _CheckedHTTP(http.client.HTTPConnection):
    def __init__(self, *args, internal: InternalHosts, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._create_connection = functools.partial(_connect, internal=internal)


class _CheckedHTTPS(http.client.HTTPSConnection):
    def __init__(self, *args, internal: InternalHosts, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._create_connection = functools.partial(_connect, internal=internal)


class _CheckedHTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, internal: InternalHosts) -> None:
        super().__init__()
        self.internal = internal

    def http_open(self, req):
        return self.do_open(functools.partial(_CheckedHTTP, internal=self.internal), req)


class _CheckedHTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, internal: InternalHosts) -> None:
        super().__init__()
        self.internal = internal

    def https_open(self, req):
        connection = functools.partial(_CheckedHTTPS, internal=self.internal)
        return self.do_open(connection, req, context=self._context)


def opener(internal: InternalHosts) -> urllib.request.OpenerDirector:
    opener = urllib.request.OpenerDirector()
    for handler in (
        _CheckedHTTPHandler(internal),
        _CheckedHTTPSHandler(internal),
        urllib.request.HTTPDefaultErrorHandler(),
        _SameHostRedirects(),
        urllib.request.HTTPErrorProcessor(),
    ):
        opener.add_handler(handler)
    return opener
