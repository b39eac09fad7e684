"""
Listeners behind a load balancer that speaks the PROXY protocol
(``--listen haproxy:tcp:PORT``, haproxy's ``send-proxy`` or ``send-proxy-v2``).

Twisted's ``haproxy:`` endpoint (:mod:`twisted.protocols.haproxy`) reads the
PROXY header (v1 or v2) and then answers ``getPeer`` with the client's address.
But it connects the wrapped protocol as soon as the balancer's TCP connection
opens, before the header has arrived: a STOMP connection, which takes its
peer's address then (for the per-address limit, the logs, the management API),
would see the balancer's.  :class:`ProxyHeaderWrapper` connects the wrapped
protocol only once the header is read, so that everything above it sees the
client; a balancer that sends no header within :data:`HEADER_TIMEOUT` seconds,
or a bad one, is dropped, and the wrapped protocol never hears of it.

Once connected, every read goes to ``wrappedProtocol``, as in any Twisted
``ProtocolWrapper``: Autobahn's ``WebSocketResource`` takes a connection over on
its upgrade by replacing the wrapper's ``wrappedProtocol`` (the web port's HTTP
channel) with its WebSocket protocol, so the wrapper must not keep a reference
of its own to the protocol it first connected.

A ``haproxy:`` listener believes whatever header its peer sends: expose it to
the balancer only (bind it on an interface clients cannot reach, or filter).
"""

from __future__ import annotations

from typing import Any

from twisted.internet import endpoints
from twisted.internet.interfaces import IReactorTime, IStreamServerEndpoint
from twisted.internet.protocol import Protocol, connectionDone

# The wrapper's classes are not re-exported by the package, only its endpoint.
from twisted.protocols.haproxy._wrapper import HAProxyProtocolWrapper, HAProxyWrappingFactory
from twisted.python.failure import Failure
from zope.interface import directlyProvides, implementer, providedBy

from stompbroker.logs import logger

__all__ = ["HEADER_TIMEOUT", "ProxyHeaderEndpoint", "listening_endpoint"]

log = logger("stompbroker.transport.proxy_header")

#: Seconds the balancer has to send the PROXY header after connecting.
HEADER_TIMEOUT = 10.0
#: Bytes that tell a v2 header from a v1 one (a v1 header may be shorter, up to its CRLF).
SIGNATURE_BYTES = 16
#: The endpoint prefix of Twisted's PROXY-protocol wrapper.
PREFIX = "haproxy:"


class _Pending(Protocol):
    """
    Stands in for the wrapped protocol while the header is read: keeps what follows it.

    :param protocol: the protocol to connect once the header is read.
    """

    def __init__(self, protocol: Any) -> None:
        self.protocol = protocol
        self.received: list[bytes] = []

    def dataReceived(self, data: bytes) -> None:
        self.received.append(data)


class ProxyHeaderWrapper(HAProxyProtocolWrapper):
    """
    Twisted's PROXY-protocol wrapper, which connects the wrapped protocol only
    once the header has been read (see the module notes).
    """

    factory: ProxyHeaderFactory

    def __init__(self, factory: Any, wrappedProtocol: Any) -> None:
        super().__init__(factory, wrappedProtocol)
        self._pending: _Pending | None = _Pending(wrappedProtocol)
        self.wrappedProtocol = self._pending
        self._timeout: Any = None
        #: What was read before the wrapper could tell the header's version.
        self._head: bytes | None = b""

    def makeConnection(self, transport: Any) -> None:
        directlyProvides(self, providedBy(transport))
        Protocol.makeConnection(self, transport)
        self.factory.registerProtocol(self)
        self._timeout = self.factory.clock.callLater(HEADER_TIMEOUT, self._no_header)

    def dataReceived(self, data: bytes) -> None:
        pending = self._pending
        if pending is None:
            self.wrappedProtocol.dataReceived(data)
            return
        head = self._head
        if head is not None:
            # Twisted's wrapper tells v1 from v2 on its first read, and drops a
            # connection whose first read is too short to tell: gather enough.
            head += data
            if len(head) < SIGNATURE_BYTES and not (head.startswith(b"PROXY") and b"\r\n" in head):
                self._head = head
                return
            self._head = None
            data = head
        super().dataReceived(data)
        # Twisted's wrapper keeps what it read of the header here; set once it is whole.
        if self._proxyInfo is None or self._pending is None:
            return
        self._cancel_timeout()
        self._pending = None
        self.wrappedProtocol = protocol = pending.protocol
        protocol.makeConnection(self)
        for chunk in pending.received:
            # wrappedProtocol, not protocol: an upgrade may hand the connection
            # over between two chunks, and a refusal lose it (then it is None).
            current: Any = self.wrappedProtocol
            if current is None:
                break
            current.dataReceived(chunk)

    def loseConnection(self) -> None:
        if self._pending is not None and self._proxyInfo is None:
            transport: Any = self.transport
            log.info("dropped {peer}: no valid PROXY protocol header", peer=transport.getPeer())
        super().loseConnection()

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        self._cancel_timeout()
        if self._pending is None:
            super().connectionLost(reason)
            return
        # The wrapped protocol was never connected: it has nothing to lose.
        self._pending = None
        self.factory.unregisterProtocol(self)

    def _no_header(self) -> None:
        self._timeout = None
        transport: Any = self.transport
        log.info(
            "dropped {peer}: no PROXY protocol header within {timeout} s",
            peer=transport.getPeer(),
            timeout=HEADER_TIMEOUT,
        )
        transport.abortConnection()

    def _cancel_timeout(self) -> None:
        if self._timeout is not None and self._timeout.active():
            self._timeout.cancel()
        self._timeout = None


class ProxyHeaderFactory(HAProxyWrappingFactory):
    """
    Wraps a factory's protocols in :class:`ProxyHeaderWrapper`.

    :param wrappedFactory: the factory whose protocols serve the clients.
    :param clock: times the header's deadline.
    """

    protocol = ProxyHeaderWrapper

    def __init__(self, wrappedFactory: Any, clock: IReactorTime) -> None:
        super().__init__(wrappedFactory)
        self.clock = clock


@implementer(IStreamServerEndpoint)
class ProxyHeaderEndpoint:
    """
    A server endpoint whose connections start with a PROXY header.

    :param wrapped: the endpoint the balancer connects to.
    :param clock: times the header's deadline.
    """

    def __init__(self, wrapped: IStreamServerEndpoint, clock: IReactorTime) -> None:
        self._wrapped = wrapped
        self._clock = clock

    def listen(self, protocolFactory: Any) -> Any:
        """Listen on the wrapped endpoint, reading each connection's header first."""
        return self._wrapped.listen(ProxyHeaderFactory(protocolFactory, self._clock))


def listening_endpoint(reactor: Any, description: str) -> IStreamServerEndpoint:
    """
    :param reactor: the reactor to listen on.
    :param description: a Twisted server endpoint description.
    :returns: its endpoint, as ``serverFromString`` makes it, except that a
        ``haproxy:`` one connects its protocols once the PROXY header is read.
    """
    if description.startswith(PREFIX):
        wrapped = endpoints.serverFromString(reactor, description[len(PREFIX) :])
        return ProxyHeaderEndpoint(wrapped, reactor)
    endpoint: IStreamServerEndpoint = endpoints.serverFromString(reactor, description)
    return endpoint
