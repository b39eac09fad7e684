"""
Virtual hosts: separate namespaces of destinations on one broker, chosen by
CONNECT's ``host`` header (RabbitMQ's vhosts; ``docs/virtual-hosts.md``).

Pure code: which virtual host a ``host`` header selects, and the names a
virtual host's destinations have inside the broker.

Internal names
--------------
A destination ``/queue/NAME`` of the virtual host ``v`` is, inside the broker
(engines, stores, statistics, the redis engine's keys), ``/queue/<M>v/NAME``:
the kind's prefix stays first, so everything that routes by prefix works
unchanged, and the virtual host is a segment of its own, so patterns map
segment by segment (``/topic/>`` in ``v`` is ``/topic/<M>v/>``).  ``<M>`` is
:data:`~stompbroker.broker.routing.syntax.HOST_MARKER`, a control character
that clients may not send once virtual hosts are configured, so no client
name can be mistaken for another host's; and no wildcard matches a segment
that starts with it, so a default host's ``/topic/>`` does not reach into
other hosts.  The default virtual host's names are the names clients send, as
without virtual hosts.

Mapped: topics, queues (and their dead-letter queues, which stay in their
host), streams and durable subscription names.  ``/temp-queue/`` names are
private to their connection already, and ``/reply-queue/`` names are
broker-unique; both stay as they are.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from attrs import frozen

from stompbroker.broker.routing.composite import SEPARATOR
from stompbroker.broker.routing.syntax import HOST_MARKER
from stompbroker.protocol.errors import InvalidDestination, ProtocolError

__all__ = [
    "DEFAULT_HOST",
    "HOST_MARKER",
    "UnknownVirtualHost",
    "VirtualHost",
    "VirtualHosts",
    "client_name",
    "host_of",
    "in_host_of",
    "refuse_marker",
    "shown_key",
    "split_name",
]

#: The default virtual host's name in the management API and statistics, as RabbitMQ's.
DEFAULT_HOST = "/"

#: What a virtual host's name may be: it is one segment of the internal names.
_NAME = re.compile(r"[A-Za-z0-9_-]+\Z")

#: Destination kinds whose names are not mapped (see the module's docstring).
_UNMAPPED = ("/temp-queue/", "/reply-queue/")


class UnknownVirtualHost(ProtocolError):
    """CONNECT's ``host`` names no virtual host, and the broker refuses unknown hosts."""


@frozen
class VirtualHost:
    """
    One configured virtual host.

    :ivar name: its name (letters, digits, ``-``, ``_``).
    :ivar aliases: the other ``host`` header values that select it (host names).
    :ivar access: the rights checker of its sessions (as ``SessionConfig.access``),
        or ``None`` to use the listener's.
    """

    name: str
    aliases: tuple[str, ...] = ()
    access: Any = None

    def __attrs_post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(
                f"virtual host name {self.name!r}: use letters, digits, '-' and '_' only"
            )

    @property
    def prefix(self) -> str:
        """What follows a kind's prefix in each of its internal names: ``<M>NAME/``."""
        return f"{HOST_MARKER}{self.name}/"

    def internal(self, destination: str) -> str:
        """
        :param destination: a destination or pattern as a client of this host sent
            it (a composite one too), already free of the marker.
        :returns: its name inside the broker.
        """
        if SEPARATOR in destination:
            return SEPARATOR.join(
                self.internal(part.strip(" \t")) for part in destination.split(SEPARATOR)
            )
        if destination.startswith(_UNMAPPED):
            return destination
        cut = destination.find("/", 1) + 1
        if cut == 0 or destination[0] != "/":
            # No kind: the router refuses it by its own name.
            return destination
        return destination[:cut] + self.prefix + destination[cut:]

    def durable(self, durable: tuple[str, str] | None) -> tuple[str, str] | None:
        """:returns: a durable subscription's ``(client-id, name)`` inside the broker."""
        if durable is None:
            return None
        return (durable[0], self.prefix + durable[1])


def host_of(destination: str) -> str | None:
    """
    Tell which virtual host a destination belongs to: the seam for what is set
    per virtual host (policies).

    :param destination: an internal name.
    :returns: the virtual host's name, or ``None`` for the default host.
    """
    cut = destination.find("/", 1) + 1
    if not cut or destination[cut : cut + 1] != HOST_MARKER:
        return None
    end = destination.find("/", cut)
    return destination[cut + 1 : end] if end > 0 else None


def client_name(destination: str) -> str:
    """
    :param destination: an internal name.
    :returns: the name a client of its virtual host knows it by (the same for
        the default host).
    """
    cut = destination.find("/", 1) + 1
    if not cut or destination[cut : cut + 1] != HOST_MARKER:
        return destination
    end = destination.find("/", cut)
    return destination if end < 0 else destination[:cut] + destination[end + 1 :]


def in_host_of(destination: str, name: str) -> str:
    """
    :param destination: an internal name.
    :param name: a destination as a client of its virtual host names it (a
        policy's dead-letter queue).
    :returns: the broker's name of ``name`` in ``destination``'s virtual host.
    """
    host = host_of(destination)
    return name if host is None else VirtualHost(host).internal(name)


def split_name(destination: str) -> tuple[str, str]:
    """
    :param destination: an internal name.
    :returns: its virtual host (:data:`DEFAULT_HOST` for the default one) and
        the name its clients know: what management and statistics show.
    """
    return host_of(destination) or DEFAULT_HOST, client_name(destination)


def shown_key(destination: str) -> str:
    """
    :param destination: an internal name.
    :returns: a unique key to show for it where one string must name it (the
        keys of ``/stats``): the client's name in the default host, as without
        virtual hosts, and ``HOST:NAME`` in another (names start with ``/``, a
        host's name holds no ``:``).
    """
    host, name = split_name(destination)
    return name if host == DEFAULT_HOST else f"{host}:{name}"


def refuse_marker(destination: str) -> None:
    """
    :raises InvalidDestination: if a client's destination holds the marker.
    """
    if HOST_MARKER in destination:
        raise InvalidDestination(
            "invalid character in destination",
            f"The destination {destination!r} holds the control character"
            f" {HOST_MARKER!r}, which the broker reserves for virtual hosts.",
        )


class VirtualHosts:
    """
    The configured virtual hosts, and which one a CONNECT's ``host`` selects.

    :param hosts: the virtual hosts besides the default one.
    :param refuse_unknown: refuse a ``host`` that names none of them (and is not
        ``/`` or absent) with an ERROR, rather than take it to the default host.
    :raises ValueError: for a name or alias given twice, or the name ``/``.
    """

    def __init__(self, hosts: Iterable[VirtualHost], refuse_unknown: bool = False) -> None:
        self.hosts: dict[str, VirtualHost] = {}
        self.refuse_unknown = refuse_unknown
        self._by_header: dict[str, VirtualHost] = {}
        for host in hosts:
            self.hosts[host.name] = host
            for header in dict.fromkeys((host.name, *host.aliases)):
                if header in self._by_header or header == DEFAULT_HOST:
                    raise ValueError(f"virtual host {header!r} is named twice")
                self._by_header[header] = host

    def select(self, header: str | None) -> VirtualHost | None:
        """
        :param header: CONNECT's ``host``, ``None`` if absent.
        :returns: the virtual host it names, or ``None`` for the default host.
        :raises UnknownVirtualHost: for a host that names none, when refused.
        """
        if header is None:
            return None
        host = self._by_header.get(header)
        if host is None and self.refuse_unknown and header != DEFAULT_HOST:
            raise UnknownVirtualHost(
                "unknown virtual host",
                f"CONNECT's host {header!r} names no virtual host of this broker; it"
                f" serves {', '.join(sorted(self._by_header))} and the default host"
                f" ({DEFAULT_HOST!r}).",
            )
        return host
