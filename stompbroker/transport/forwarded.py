"""
The client's address behind trusted HTTP proxies: ``Forwarded`` (RFC 7239)
and ``X-Forwarded-For``, on the web port.

A proxy in front of the web port (nginx, haproxy in HTTP mode, a cloud load
balancer) connects from its own address and names the client in a header.
Anyone can send that header, so it is believed only from the proxies the
operator names (``--trusted-proxy CIDR``; none by default, and then the
headers are ignored):

- the connection's own peer must be a trusted proxy, or the headers are ignored;
- the header lists the hops, the client first and each proxy appending the
  address it was connected from; read from the right, trusted proxies are
  skipped, and the first address that is not one is the client (as nginx's
  ``real_ip_recursive``); if every hop is trusted, the leftmost is taken;
- ``Forwarded`` is read when present, else ``X-Forwarded-For``; repeated
  header lines count as one list, in order;
- a header that cannot be read (an element that is not an IP address, with
  an optional port: RFC 7239's ``unknown`` and obfuscated names included) is
  ignored with a log line, and the connection keeps its own peer's address.

A port is taken from ``Forwarded`` when given (``for="192.0.2.7:4711"``),
otherwise it is 0: ``X-Forwarded-For`` carries none.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable

from attrs import frozen

from stompbroker.logs import logger

__all__ = ["MalformedForwarding", "TrustedProxies", "client_address", "parse_networks"]

log = logger("stompbroker.transport.forwarded")

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address

#: One ``name=value`` pair of a ``Forwarded`` element (RFC 7239 section 4):
#: a token, then a token or a quoted string.
_PAIR = re.compile(
    r"""\s*([!#$%&'*+.^_`|~0-9A-Za-z-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[!#$%&'*+.^_`|~0-9A-Za-z:\[\]-]+)\s*([;,]|$)"""
)


class MalformedForwarding(ValueError):
    """A ``Forwarded`` or ``X-Forwarded-For`` header that names no address we can use."""


def parse_networks(texts: Iterable[str]) -> tuple[Network, ...]:
    """
    :param texts: CIDR blocks (``10.0.0.0/8``) or single addresses.
    :returns: the networks.
    :raises ValueError: naming the first one that is neither.
    """
    networks = []
    for text in texts:
        try:
            networks.append(ipaddress.ip_network(text.strip(), strict=False))
        except ValueError:
            raise ValueError(f"not an address or CIDR block: {text!r}") from None
    return tuple(networks)


@frozen
class TrustedProxies:
    """
    The proxies whose forwarding headers are believed.

    :ivar networks: where they connect from; empty (the default) trusts nobody.
    """

    networks: tuple[Network, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.networks)

    def trusts(self, address: Address) -> bool:
        """:returns: whether ``address`` is one of the trusted proxies."""
        return any(address in network for network in self.networks)


def _address(text: str) -> tuple[Address, int]:
    """
    :param text: ``IPv4``, ``IPv4:PORT``, ``IPv6``, ``[IPv6]`` or ``[IPv6]:PORT``.
    :returns: the address and the port (0 without one).
    :raises MalformedForwarding: for anything else.
    """
    text = text.strip()
    port = "0"
    try:
        if text.startswith("["):
            host, bracket, rest = text[1:].partition("]")
            if not bracket or (rest and not rest.startswith(":")):
                raise ValueError(text)
            port = rest[1:] or "0"
        elif text.count(":") == 1:
            host, _, port = text.partition(":")
        else:
            host = text
        number = int(port)
        if not 0 <= number <= 65535 or not port.isdigit():
            raise ValueError(text)
        return ipaddress.ip_address(host), number
    except ValueError:
        raise MalformedForwarding(f"not an address: {text!r}") from None


def _forwarded_hops(header: str) -> list[tuple[Address, int]]:
    """:returns: the ``for=`` address of each element of a ``Forwarded`` header, in order."""
    hops: list[tuple[Address, int]] = []
    position = 0
    found: str | None = None
    while position < len(header):
        match = _PAIR.match(header, position)
        if match is None:
            raise MalformedForwarding(f"cannot read {header[position:]!r}")
        name, value, separator = match.groups()
        if value.startswith('"'):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        if name.lower() == "for":
            found = value
        if separator != ";":
            if found is None:
                raise MalformedForwarding("an element without for=")
            hops.append(_address(found))
            found = None
        position = match.end()
    if not hops:
        raise MalformedForwarding("no element")
    return hops


def _forwarded_for_hops(header: str) -> list[tuple[Address, int]]:
    """:returns: the addresses of an ``X-Forwarded-For`` header, in order."""
    return [_address(part) for part in header.split(",")]


def client_address(
    host: str,
    port: int,
    forwarded: list[str],
    forwarded_for: list[str],
    trusted: TrustedProxies,
) -> tuple[str, int]:
    """
    Who the client is, given the connection's peer and the forwarding headers.

    :param host: the connection's peer address.
    :param port: the connection's peer port.
    :param forwarded: the lines of the ``Forwarded`` header, in order.
    :param forwarded_for: the lines of the ``X-Forwarded-For`` header, in order.
    :param trusted: the proxies believed.
    :returns: the client's host and port: the peer's, unless a trusted proxy
        named another (see the module notes).
    """
    if not trusted or not (forwarded or forwarded_for):
        return host, port
    try:
        peer = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return host, port
    if not trusted.trusts(peer):
        return host, port
    name, lines = ("Forwarded", forwarded) if forwarded else ("X-Forwarded-For", forwarded_for)
    try:
        if forwarded:
            hops = _forwarded_hops(",".join(lines))
        else:
            hops = _forwarded_for_hops(",".join(lines))
    except MalformedForwarding as error:
        log.info(
            "ignored the {name} header from proxy {proxy}: {error}",
            name=name,
            proxy=host,
            error=str(error),
        )
        return host, port
    for address, hop_port in reversed(hops):
        if not trusted.trusts(address):
            return str(address), hop_port
    address, hop_port = hops[0]
    return str(address), hop_port
