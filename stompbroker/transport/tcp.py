"""
STOMP over a stream connection: TCP, TLS, or any Twisted stream endpoint.

Wire-level behaviour: bytes read from the socket go to the session as they
arrive, in whatever chunks the kernel hands over; what the session writes goes
to ``transport.write``, which Twisted buffers and flushes when the socket is
writable, so many frames written in one reactor turn leave in few syscalls.
``TCP_NODELAY`` is set: STOMP frames are small and latency matters more than
the few packets Nagle's algorithm would save.  When the session closes, the
connection is closed after everything written has been flushed.
"""

from __future__ import annotations

from typing import Any, Optional

from twisted.internet.interfaces import IReactorTime
from twisted.internet.protocol import Factory, Protocol
from twisted.python.failure import Failure
from stompbroker.logs import logger

from stompbroker.protocol.session import SessionConfig, StompSession

log = logger("stompbroker.transport.tcp")


class StompProtocol(Protocol):
    """
    One STOMP connection over a stream transport.

    It is the session's transport (``write``/``close``) and nothing else.
    """

    def __init__(self, broker: Any, clock: IReactorTime, config: SessionConfig) -> None:
        self._broker = broker
        self._clock = clock
        self._config = config
        self.session: Optional[StompSession] = None

    def connectionMade(self) -> None:
        _set_nodelay(self.transport)
        peer = self.transport.getPeer()
        address = f"{getattr(peer, 'host', peer)}:{getattr(peer, 'port', '')}"
        self.write = self.transport.write  # type: ignore[method-assign]
        self.session = StompSession(self._broker, self, self._clock, self._config, address)
        self.dataReceived = self.session.receive_data  # type: ignore[method-assign]
        self.session.connection_made()

    def dataReceived(self, data: bytes) -> None:
        """Replaced per instance in ``connectionMade`` by the session's ``receive_data``."""

    def write(self, data: bytes) -> None:
        """Replaced per instance in ``connectionMade`` by the transport's ``write``."""

    def close(self) -> None:
        """Close once everything written is flushed."""
        self.transport.loseConnection()

    def connectionLost(self, reason: Failure = Failure(ConnectionError())) -> None:
        session = self.session
        if session is None:
            return
        session.connection_lost()
        if session.error is not None:
            log.info(
                "closed {peer} after ERROR: {message}",
                peer=session.peer,
                message=session.error.message,
            )


def _set_nodelay(transport: Any) -> None:
    """Set ``TCP_NODELAY`` on a TCP transport, or on the TCP transport under TLS."""
    for candidate in (transport, getattr(transport, "getHandle", lambda: None)()):
        set_nodelay = getattr(candidate, "setTcpNoDelay", None)
        if set_nodelay is not None:
            try:
                set_nodelay(True)
            except OSError:
                continue
            return


class StompServerFactory(Factory):
    """
    Makes a :class:`StompProtocol` for each connection, all feeding one broker.

    :param broker: the :class:`stompbroker.broker.service.Broker`.
    :param clock: times heart-beats; the reactor.
    :param config: per-connection settings.
    """

    protocol = StompProtocol

    def __init__(self, broker: Any, clock: IReactorTime, config: SessionConfig) -> None:
        self.broker = broker
        self.clock = clock
        self.config = config

    def buildProtocol(self, addr: Any) -> StompProtocol:
        protocol = StompProtocol(self.broker, self.clock, self.config)
        protocol.factory = self
        return protocol


def stomp_server_factory(
    broker: Any, reactor: Optional[IReactorTime] = None, config: Optional[SessionConfig] = None
) -> StompServerFactory:
    """
    The factory to listen with, for embedding the broker in an application.

    :param broker: the :class:`~stompbroker.broker.service.Broker` to feed.
    :param reactor: the reactor that times heart-beats; the broker's clock by default.
    :param config: per-connection settings; defaults otherwise.
    :returns: a factory for any stream endpoint's ``listen``.
    """
    return StompServerFactory(broker, reactor or broker.clock, config or SessionConfig())
