"""
STOMP over a stream connection: TCP, TLS, or any Twisted stream endpoint.

The client's address is the transport's peer, taken when the connection is
made; behind a ``haproxy:`` listener that is the client's, from the PROXY
header (:mod:`stompbroker.transport.proxy_header`).  With rate limits, what is
read passes through the connection's gate
(:mod:`stompbroker.broker.flow.rate_gates`) on its way to the session.

Wire-level behaviour: bytes read from the socket go to the session as they
arrive, in whatever chunks the kernel hands over.  What the session writes
while the broker handles a read (of this connection or any other) is gathered
and written once, when that read has been handled, this connection's first
(:mod:`stompbroker.transport.coalesce`); other writes go out straight away.
On Twisted's TCP transport a write is sent at once when nothing of the
connection's waits in Twisted's buffer (:mod:`stompbroker.transport.direct`);
otherwise Twisted buffers it and flushes when the socket is writable.
``TCP_NODELAY`` is set: STOMP frames are small and latency matters more than
the few packets Nagle's algorithm would save.  When the session closes, the
connection is closed after everything written has been flushed, or dropped if
the client has not taken it within :data:`CLOSE_TIMEOUT` seconds.

Back-pressure, both ways, with Twisted's producer/consumer API:

- The protocol registers a streaming producer with the transport
  (:class:`~stompbroker.transport.session_link.WriteProducer`).  When the
  transport's buffer passes its mark (64 KiB), the transport calls
  ``pauseProducing``; the session writes on for a grace that absorbs bursts of
  fan-out, then stops writing to it (its backlog and slow-consumer policy take
  over); ``resumeProducing``, once the buffer has drained, lets it write again.
- When the session (for a login in progress, or the broker, for memory, a
  slow subscriber or a rate limit) asks to read no more, its link pauses the transport
  (``transport.pauseProducing``): the kernel's buffers fill and the client's
  sends block, until it resumes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet.interfaces import IReactorTime
from twisted.internet.protocol import Factory, Protocol, connectionDone
from twisted.python.failure import Failure

from stompbroker.broker.flow.rate_gates import ConnectionGate
from stompbroker.logs import logger
from stompbroker.protocol.session import SessionConfig, StompSession
from stompbroker.transport.coalesce import COALESCER, CoalescedWrite, WriteCoalescer
from stompbroker.transport.direct import direct_writer
from stompbroker.transport.session_link import WriteProducer, link_over

log = logger("stompbroker.transport.tcp")

#: Seconds a closing connection has to take what was written to it before it is dropped.
CLOSE_TIMEOUT = 10.0


class StompProtocol(Protocol):
    """
    One STOMP connection over a stream transport.

    It holds the session, the :class:`~stompbroker.transport.session_link.SessionLink`
    the session writes through, and the
    :class:`~stompbroker.transport.session_link.WriteProducer` registered with
    the Twisted transport; it passes what it reads to the session, through the
    rate limits' gate when there is one.
    """

    #: Any stream transport (TCP, TLS, a PROXY header's wrapper).
    transport: Any
    #: Gathers writes while a read is handled; the process's one by default.
    coalescer: WriteCoalescer = COALESCER
    #: What the connection is called over a plain transport, and over TLS.
    kinds: tuple[str, str] = ("tcp", "tls")

    def __init__(self, broker: Any, clock: IReactorTime, config: SessionConfig) -> None:
        self._broker = broker
        self._clock = clock
        self._config = config
        self.session: StompSession | None = None
        self._abort: Any = None
        self._writer: CoalescedWrite | None = None
        self._gate: ConnectionGate | None = None
        #: What takes the bytes read: the session's, or its gate's, ``receive_data``.
        self._receive: Callable[[bytes], None] | None = None

    def connectionMade(self) -> None:
        transport = self.transport
        _set_nodelay(transport)
        peer = transport.getPeer()
        address = f"{getattr(peer, 'host', peer)}:{getattr(peer, 'port', '')}"
        self._writer = writer = CoalescedWrite(
            direct_writer(transport) or transport.write, self.coalescer
        )
        link = link_over(transport, writer.write, self.close, self.kinds)
        self.session = session = StompSession(
            self._broker, link, self._clock, self._config, address
        )
        self._gate = gate = rate_gate(self._broker, session)
        self._receive = session.receive_data if gate is None else gate.receive_data
        transport.registerProducer(
            WriteProducer(session.pause_writing, session.resume_writing), True
        )
        session.connection_made()

    def dataReceived(self, data: bytes) -> None:
        """Pass what was read to the session, with this read's writes gathered (see above)."""
        if self._receive is not None:
            self.coalescer.handle(self._receive, data, self._writer)

    def close(self) -> None:
        """Close once what was written is flushed; drop it after :data:`CLOSE_TIMEOUT` seconds."""
        transport = self.transport
        if self._writer is not None:
            self._writer.flush()
        if self._abort is None:
            self._abort = self._clock.callLater(CLOSE_TIMEOUT, transport.abortConnection)
        # A registered producer would keep the transport open after it flushed.
        transport.unregisterProducer()
        transport.loseConnection()

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        if self._abort is not None:
            if self._abort.active():
                self._abort.cancel()
            self._abort = None
        session = self.session
        if session is None:
            return
        if self._gate is not None:
            self._gate.close()
        session.connection_lost()
        if session.error is not None:
            log.info(
                "closed {peer} after ERROR: {message}",
                peer=session.peer,
                message=session.error.message,
            )


def rate_gate(broker: Any, session: StompSession) -> ConnectionGate | None:
    """:returns: the gate ``session`` reads through, or ``None`` when no rate limit applies."""
    rates = broker.rates
    return rates.gate(session) if rates.metered else None


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
    broker: Any, reactor: IReactorTime | None = None, config: SessionConfig | None = None
) -> StompServerFactory:
    """
    The factory to listen with, for embedding the broker in an application.

    :param broker: the :class:`~stompbroker.broker.service.Broker` to feed.
    :param reactor: the reactor that times heart-beats; the broker's clock by default.
    :param config: per-connection settings; defaults otherwise.
    :returns: a factory for any stream endpoint's ``listen``.
    """
    return StompServerFactory(broker, reactor or broker.clock, config or SessionConfig())
