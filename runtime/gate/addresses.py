"""Which network addresses a tool may reach (docs/architecture.md, "Internal
addresses").

A tool that fetches a URL reaches only public addresses unless the org policy
names the internal host or range (`internal_hosts`): loopback, private,
link-local (where cloud instance metadata answers with credentials),
unspecified, shared, multicast and every other address that is not global
belong to the deployment, not to the model. The check is on the address a
name resolves to, which is the address the tool then connects to.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from runtime.errors import AddressRefused

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
NAT64 = ipaddress.ip_network("64:ff9b::/96")
SHARED = ipaddress.ip_network("100.64.0.0/10")
_HOST = re.compile(r"^(\*\.)?[a-z0-9_]([a-z0-9_-]{0,62})(\.[a-z0-9_]([a-z0-9_-]{0,62}))*\.?$", re.I)


def address_class(address: IPAddress) -> str | None:
    """The class of a non-public address (the word a refusal names), or None
    for a global one. An IPv4 address inside IPv6 (mapped, 6to4, NAT64) is
    judged as the IPv4 address it carries."""
    if isinstance(address, ipaddress.IPv6Address):
        inner = address.ipv4_mapped or address.sixtofour
        if inner is None and address in NAT64:
            inner = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if inner is not None:
            return address_class(inner)
    for word, found in (
        ("unspecified", address.is_unspecified),
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("shared (carrier-grade NAT)", address in SHARED),
        ("private", address.is_private),
        ("reserved", address.is_reserved),
    ):
        if found:
            return word
    return None if address.is_global else "non-public"


@dataclass(frozen=True)
class InternalHosts:
    """What the org policy lets a tool reach although it is internal: host
    names (exact, or `*.suffix`) and addresses or ranges (CIDR)."""

    names: tuple[str, ...] = ()
    networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def parse(cls, entries: Iterable[str], key: str = "internal_hosts") -> InternalHosts:
        """`ValueError` naming the first entry that is neither an address, a
        range nor a host name (`key`: the policy key that lists them)."""
        names, networks = [], []
        for entry in entries:
            if not isinstance(entry, str) or not entry.strip():
                raise ValueError(f"{key} entry {entry!r} is not a host, address or range")
            try:
                networks.append(ipaddress.ip_network(entry.strip()))
                continue
            except ValueError as error:
                if "/" in entry or entry.replace(".", "").isdigit() or ":" in entry:
                    raise ValueError(f"{key} entry {entry!r}: {error}") from None
            if not _HOST.match(entry.strip()):
                raise ValueError(
                    f"{key} entry {entry!r} is neither an address, a range (CIDR) nor a host name"
                )
            names.append(entry.strip().lower().rstrip("."))
        return cls(tuple(names), tuple(networks))

    def names_host(self, host: str) -> bool:
        """Whether a name entry is `host` itself, or a `*.domain` it is under."""
        host = host.lower().rstrip(".")
        return any(
            host == name or (name[:2] == "*." and host.endswith(name[1:])) for name in self.names
        )

    def allows(self, host: str, address: IPAddress) -> bool:
        if self.names_host(host):
            return True
        return any(address.version == net.version and address in net for net in self.networks)


def refusal(host: str, address: IPAddress, allowed: InternalHosts) -> str | None:
    """Why `host` at `address` may not be reached, or None if it may."""
    kind = address_class(address)
    if kind is None or allowed.allows(host, address):
        return None
    literal = host.strip("[]") == str(address)
    where = f"{address} is" if literal else f"{host} resolves to {address},"
    return (
        f"{where} a {kind} address; internal addresses (loopback, private, link-local, "
        "unspecified and the like) are not reached unless the org policy's internal_hosts "
        "names the host or its range"
    )


def connect(
    host: str,
    port: int,
    internal: InternalHosts,
    timeout: float | None = None,
    source_address: tuple[str, int] | None = None,
    *,
    also: Callable[[IPAddress, int], str | None] = lambda address, port: None,
) -> socket.socket:
    """A connection to `host`:`port` from one lookup whose every address is
    checked (`refusal`, then `also`) before any is connected to, so a second
    lookup cannot swap a checked address for an internal one; `AddressRefused`
    says why not."""
    found = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)
    for *_, sockaddr in found:
        address = ipaddress.ip_address(sockaddr[0].partition("%")[0])
        why = refusal(host, address, internal) or also(address, port)
        if why is not None:
            raise AddressRefused(why, kind="internal_address")
    error: OSError = OSError(f"{host} resolves to no address")
    for family, kind, proto, _, sockaddr in found:
        sock = socket.socket(family, kind, proto)
        try:
            if timeout is not None:
                sock.settimeout(timeout)
            if source_address:
                sock.bind(source_address)
            sock.connect(sockaddr)
            return sock
        except OSError as failed:
            sock.close()
            error = failed
    raise error
