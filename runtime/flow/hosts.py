"""The host a per-host rate counts under: the address a spelling reaches
(docs/architecture.md, "Flow control"), read as the SSRF guard's `connect`
(`runtime/gate/addresses.py`) reads it, through the resolver."""

from __future__ import annotations

import functools
import ipaddress
import socket
import time

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def canonical_host(host: str) -> str:
    """The address a host spelling reaches, as one text: what a per-host rate
    counts under (docs/architecture.md, "Flow control"). `127.1`, `2130706433`,
    `0x7f000001`, `0177.0.0.1` and `localhost` are all 127.0.0.1, since the
    resolver `connect` asks reads them so; a name with several addresses
    counts under its lowest, one that does not resolve under its lowercase
    spelling (no connection reaches anything through it). Looked up at most
    once a minute per spelling in a process."""
    name = host.strip("[]").lower().rstrip(".")
    try:
        return _text(ipaddress.ip_address(name))  # a literal already: no lookup
    except ValueError:
        pass
    return _resolved(name, int(time.monotonic() // 60)) or name


@functools.lru_cache(maxsize=1024)
def _resolved(name: str, minute: int) -> str | None:
    try:
        found = socket.getaddrinfo(name, None, 0, socket.SOCK_STREAM)
    except (OSError, UnicodeError, ValueError):
        return None
    addresses = {ipaddress.ip_address(sockaddr[0].partition("%")[0]) for *_, sockaddr in found}
    return min((_text(a) for a in addresses), key=_order, default=None)


def _text(address: Address) -> str:
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1 is 127.0.0.1
    return str(mapped or address)


def _order(text: str) -> tuple[int, int]:
    address = ipaddress.ip_address(text)
    return address.version, int(address)
