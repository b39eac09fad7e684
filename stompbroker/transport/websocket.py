"""
STOMP over WebSocket (RFC 6455): the transport browsers use.

:class:`StompWebSocketProtocol` is an Autobahn ``WebSocketServerProtocol`` that
presents itself to a :class:`~stompbroker.protocol.session.StompSession` as a
transport (``write`` and ``close``), exactly as the TCP adapter does, so both
paths share every line above the socket.  It holds no protocol logic.

Wire-level behaviour:

- **Handshake.** A client may offer the subprotocols ``v12.stomp``,
  ``v11.stomp`` and ``v10.stomp``; the newest one offered (among the versions
  the listener speaks) is chosen, and the session will not agree on a newer
  STOMP version than that: a client that got ``v11.stomp`` speaks 1.1 even if
  its CONNECT also accepts 1.2.  A client offering no subprotocol is served as
  on TCP (its CONNECT's ``accept-version`` decides, 1.2 when it offers it).  A
  client offering only other subprotocols gets HTTP 400, a request that is not a
  WebSocket upgrade gets 426, any other bad handshake another HTTP error.
- **Messages in.** Every WebSocket message, text or binary, is a chunk of the
  STOMP byte stream.  One message may hold any number of frames, one frame may
  span several messages, and a fragmented message is fed to the session
  fragment by fragment as it arrives: nothing is reassembled here, the parser
  keeps the incomplete frame as it does for TCP.
- **Messages out.** One WebSocket message per session write (one frame, or one
  heart-beat EOL), of the kind of the client's first message (text until the
  client has sent one), framed by
  :func:`~stompbroker.transport.ws_frames.server_frame` and written to the
  transport: this is the delivery hot path.  As on TCP, the messages written
  while the broker handles a read are gathered and go to the transport in one
  write when it ends (:mod:`stompbroker.transport.coalesce`); the close frame
  never overtakes them.  A frame that is not valid
  UTF-8 (a binary body) goes out as a binary message even to a text client:
  RFC 6455 forbids it in a text message, and browsers fail the connection on it.
- **Limits.** A message longer than ``max_frame_size`` + 1 (one largest frame
  and its NUL) is refused as soon as its length is announced, before its
  payload is read: the client gets an ERROR frame, then a close with code 1009
  (message too big).  A frame over ``max_frame_size`` spread over several
  messages is caught by the parser and ends the same way.
- **Liveness.** STOMP heart-beats work as on TCP (a server heart-beat is a
  one-byte message).  The server also pings every ``ping_interval`` seconds and
  drops a client that has not answered within ``ping_timeout``.  A pong, like
  any other traffic from the client, counts as hearing from it, for the STOMP
  heart-beat check too: browsers throttle timers in background tabs, so a
  tab's heart-beats can come late while the browser still answers pings.
- **Back-pressure.** As on TCP: the protocol registers a streaming producer
  with the TCP transport, so when the socket's buffer passes its mark the session, after a
  grace for bursts, stops writing (its backlog and slow-consumer policy take
  over) until it drains;
  and when the session asks to read no more (a login in progress, memory, a
  slow subscriber), the TCP transport is paused.
- **Rate limits.** With rate limits, each message's bytes pass through the
  connection's gate (:mod:`stompbroker.broker.flow.rate_gates`), which
  pauses reading from the TCP transport while the client is over its rate.
- **The client's address.** The transport's peer (the client's, from the
  PROXY header behind a ``haproxy:`` listener), or, when that peer is one of
  ``trusted_proxies``, the client a ``Forwarded`` or ``X-Forwarded-For``
  header of the handshake names (:mod:`stompbroker.transport.forwarded`).
- **Compression.** With ``WebSocketConfig.compression`` on, a client's
  permessage-deflate offer (RFC 7692) is accepted and messages of
  ``min_size`` bytes or more go compressed
  (:mod:`stompbroker.transport.ws_compression`); otherwise offers are declined.
- **Origins.** With ``WebSocketConfig.allowed_origins`` set
  (``--allowed-origin``), a handshake whose ``Origin`` is neither the
  broker's own (its ``Host``) nor one the patterns match is refused with a 403;
  one without ``Origin`` (not a browser) is not
  (:mod:`stompbroker.security.origins`).  Without it every origin is taken,
  ``null`` too (a page opened as a file), which Autobahn alone would refuse.
- **Credentials.** An ``Authorization: Bearer TOKEN`` header in the handshake
  stands in for a CONNECT without ``passcode`` (non-browser clients; browsers
  cannot set it), and under TLS the client's certificate is offered for
  ``--auth cert`` (:mod:`stompbroker.transport.peer_credentials`).
- **Close.** When the session closes (after DISCONNECT's RECEIPT, or an
  ERROR), a close frame follows everything written: code 1000, or 1009 after a
  frame too large.  The TCP connection ends at the client's close reply, or
  after one second without one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from attrs import evolve, frozen
from autobahn.twisted.resource import WebSocketResource
from autobahn.twisted.websocket import WebSocketServerFactory, WebSocketServerProtocol
from autobahn.websocket.protocol import WebSocketProtocol
from autobahn.websocket.types import ConnectionDeny, ConnectionRequest
from twisted.internet.interfaces import IDelayedCall, IReactorTime

from stompbroker.broker.flow.rate_gates import ConnectionGate
from stompbroker.logs import logger
from stompbroker.protocol.errors import FrameTooLarge
from stompbroker.protocol.session import SessionConfig, StompSession
from stompbroker.security.origins import AllowedOrigins, is_same_origin
from stompbroker.transport.coalesce import COALESCER, CoalescedWrite, WriteCoalescer
from stompbroker.transport.forwarded import TrustedProxies, client_address
from stompbroker.transport.peer_credentials import bearer_token
from stompbroker.transport.session_link import WriteProducer, link_over
from stompbroker.transport.tcp import rate_gate
from stompbroker.transport.ws_compression import Compression, Deflater
from stompbroker.transport.ws_frames import OPCODE_BINARY, OPCODE_TEXT, server_frame

log = logger("stompbroker.transport.websocket")

#: The STOMP subprotocols (STOMP 1.2, "Protocol Negotiation" applied to RFC 6455
#: section 1.9), newest first, with the version each one stands for.
SUBPROTOCOLS: tuple[tuple[str, str], ...] = (
    ("v12.stomp", "1.2"),
    ("v11.stomp", "1.1"),
    ("v10.stomp", "1.0"),
)

CLOSE_NORMAL = WebSocketProtocol.CLOSE_STATUS_CODE_NORMAL
CLOSE_MESSAGE_TOO_BIG = WebSocketProtocol.CLOSE_STATUS_CODE_MESSAGE_TOO_BIG
_OPEN = WebSocketProtocol.STATE_OPEN


@frozen
class WebSocketConfig:
    """
    Settings of the WebSocket transport, shared by all its connections.

    :ivar ping_interval: seconds between the server's pings; 0 sends none.
    :ivar ping_timeout: seconds a client has to answer a ping before it is
        dropped; 0 waits forever.
    :ivar compression: whether and how permessage-deflate is accepted
        (:mod:`stompbroker.transport.ws_compression`).
    :ivar trusted_proxies: the proxies whose ``Forwarded`` or ``X-Forwarded-For``
        header in the handshake names the client (:mod:`stompbroker.transport.forwarded`).
    :ivar allowed_origins: the web origins whose pages may connect, besides the
        broker's own (:mod:`stompbroker.security.origins`); none set: every origin.
    """

    ping_interval: float = 10.0
    ping_timeout: float = 10.0
    compression: Compression = Compression()
    trusted_proxies: TrustedProxies = TrustedProxies()
    allowed_origins: AllowedOrigins = AllowedOrigins()


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _forwarded_client(peer: Any, headers: dict[str, str], trusted: TrustedProxies) -> str:
    """:returns: ``HOST:PORT`` of the client, as the trusted proxies name it in the handshake."""
    host, port = getattr(peer, "host", str(peer)), getattr(peer, "port", 0)
    forwarded, forwarded_for = headers.get("forwarded"), headers.get("x-forwarded-for")
    host, port = client_address(
        host,
        port,
        [forwarded] if forwarded else [],
        [forwarded_for] if forwarded_for else [],
        trusted,
    )
    return f"{host}:{port}"


def _ignore(data: bytes) -> None:
    """Stands in for the session's ``receive_data`` until it opens, and once it is being refused."""


class StompWebSocketProtocol(WebSocketServerProtocol):
    """
    One STOMP connection over WebSocket.

    It holds the session, the :class:`~stompbroker.transport.session_link.SessionLink`
    the session writes through (its ``write`` and ``close`` are this protocol's),
    and the :class:`~stompbroker.transport.session_link.WriteProducer` registered
    with the TCP transport.  Its factory is a :class:`StompWebSocketFactory`.
    """

    factory: StompWebSocketFactory
    #: The TCP (or TLS) transport beneath.
    transport: Any
    session: StompSession | None = None
    #: What the connection is called over a plain transport, and over TLS.
    kinds = ("ws", "wss")
    #: The handshake's ``Authorization: Bearer`` token, if it had one.
    _bearer_token: str | None = None
    #: What takes the bytes of messages: the session's (or its gate's)
    #: ``receive_data`` once open, nothing before and once refused.
    _receive: Callable[[bytes], None] = staticmethod(_ignore)
    #: The kind of the client's first message; ``None`` (text) until it sends one.
    _binary: bool | None = None
    _session_config: SessionConfig
    _message_size = 0
    _write_to_socket: Callable[[bytes], None]
    #: Frames a message: :func:`server_frame`, or a compressing one once negotiated.
    _frame: Callable[[bytes, int], bytes] = staticmethod(server_frame)
    #: Gathers writes while a read is handled; the process's one by default.
    coalescer: WriteCoalescer = COALESCER
    _writer: CoalescedWrite | None = None
    #: ``HOST:PORT`` of the client a trusted proxy named in the handshake, if one did.
    _client: str | None = None
    #: The rate limits' gate the session reads through, if any.
    _gate: ConnectionGate | None = None

    def dataReceived(self, data: bytes) -> None:
        """Autobahn's reading, with this read's writes gathered (see the module docstring)."""
        self.coalescer.handle(super().dataReceived, data)

    def sendCloseFrame(
        self, code: int | None = None, reasonUtf8: bytes | None = None, isReply: bool = False
    ) -> None:
        """Send the close frame after every message gathered so far, never before one."""
        if self._writer is not None:
            self._writer.flush()
        super().sendCloseFrame(code, reasonUtf8, isReply)

    def onConnect(self, request: ConnectionRequest) -> str | None:
        """
        Choose the subprotocol, and with it the STOMP versions this connection may use.

        :param request: the client's opening handshake.
        :returns: the chosen subprotocol, or ``None`` when the client offered none.
        :raises ConnectionDeny: when the client offers only subprotocols we do not
            speak (400), or comes from a page of an origin ``--allowed-origin``
            does not allow (403).
        """
        origin = request.headers.get("origin")
        allowed = self.factory.websocket.allowed_origins
        if (
            origin is not None
            and allowed.configured
            and not is_same_origin(origin, request.headers.get("host", ""))
            and not allowed.matches(origin)
        ):
            raise ConnectionDeny(
                ConnectionDeny.FORBIDDEN, f"origin {origin} is not allowed (--allowed-origin)"
            )
        subprotocol, self._session_config = self.factory.choose_subprotocol(request.protocols)
        self._bearer_token = bearer_token(request.headers)
        trusted = self.factory.websocket.trusted_proxies
        if trusted:
            self._client = _forwarded_client(self.transport.getPeer(), request.headers, trusted)
        return subprotocol

    def onOpen(self) -> None:
        factory = self.factory
        transport: Any = self.transport
        _set_nodelay_under_tls(transport)
        address = self._client
        if address is None:
            peer = transport.getPeer()
            address = f"{getattr(peer, 'host', peer)}:{getattr(peer, 'port', '')}"
        self._writer = CoalescedWrite(transport.write, self.coalescer)
        self._write_to_socket = self._writer.write
        deflate = self._perMessageCompress
        # Compression is negotiated in the handshake (only when it is on).
        self._frame = (
            server_frame
            if deflate is None
            else Deflater(deflate, factory.websocket.compression.min_size, server_frame).frame
        )
        self._max_message_size = factory.max_message_size
        link = link_over(transport, self.write, self.close, self.kinds, self._bearer_token)
        self.session = session = StompSession(
            factory.broker, link, factory.clock, self._session_config, address
        )
        self._gate = gate = rate_gate(factory.broker, session)
        self._receive = session.receive_data if gate is None else gate.receive_data
        # Behind twisted.web, the HTTPChannel that served the upgrade is still the
        # transport's producer after Autobahn took the connection over: it goes.
        # Autobahn's dropConnection unregisters ours, so closing is not held up.
        self.unregisterProducer()
        self.registerProducer(WriteProducer(session.pause_writing, session.resume_writing), True)
        session.connection_made()

    # -- the session's transport ---------------------------------------------

    def write(self, data: bytes) -> None:
        """
        Send one frame (or heart-beat) as one WebSocket message.

        Writes after the WebSocket has started closing are dropped, as a closed
        TCP transport drops them: the session may still be delivering to this
        connection in the reactor turn that saw the client's close frame.
        """
        if self.state == _OPEN:
            if self._binary or not (data.isascii() or _is_utf8(data)):
                self._write_to_socket(self._frame(data, OPCODE_BINARY))
            else:
                self._write_to_socket(self._frame(data, OPCODE_TEXT))

    def close(self) -> None:
        """
        Close once everything written is flushed: code 1009 after a frame too large, else 1000.
        """
        session = self.session
        too_big = session is not None and isinstance(session.error, FrameTooLarge)
        # sendCloseFrame, because sendClose refuses the codes the protocol reserves
        # for itself, 1009 among them.
        self.sendCloseFrame(CLOSE_MESSAGE_TOO_BIG if too_big else CLOSE_NORMAL)

    # -- messages in: streamed into the session --------------------------------

    def onMessageBegin(self, isBinary: bool) -> None:
        self._message_size = 0
        # Autobahn's decompression keeps its count here (our limit is _message_size).
        self.message_data_total_length = 0
        if self._binary is None:
            self._binary = isBinary

    def onMessageFrameBegin(self, length: int) -> None:
        self._message_size += length
        if self._message_size > self._max_message_size:
            self._refuse_message(self._message_size)

    def onMessageFrameData(self, payload: bytes) -> None:
        """The fragment's bytes go to the session as they arrive."""
        self._receive(payload)

    def onMessageFrameEnd(self) -> None:
        """Nothing to do: the fragment's bytes went to the session as they arrived."""

    def onMessageEnd(self) -> None:
        """Nothing to do: message boundaries mean nothing to STOMP."""

    def _refuse_message(self, size: int) -> None:
        """Answer a message over the limit with an ERROR frame and a close with code 1009."""
        session = self.session
        if session is None or self.state != _OPEN:
            return
        self._receive = _ignore
        limit = self._max_message_size - 1
        # The same ERROR the parser's FrameTooLarge gives, so that clients see
        # one message for one limit whichever way they broke it; the session's
        # close then picks code 1009 for it.
        session.fail(
            FrameTooLarge(
                f"frame too large: more than {limit} bytes",
                f"A WebSocket message may carry at most {limit} bytes and the NUL that"
                f" ends a frame; this one announced {size} bytes.",
            )
        )
        log.info(
            "closing {peer}: WebSocket message of {size} bytes over the limit",
            peer=session.peer,
            size=size,
        )

    # -- liveness ----------------------------------------------------------------

    def onPing(self, payload: bytes) -> None:
        super().onPing(payload)
        self._heard_from_client()

    def onPong(self, payload: bytes) -> None:
        self._heard_from_client()

    def _heard_from_client(self) -> None:
        if self.session is not None:
            self.session.keep_alive()

    def onClose(self, wasClean: bool, code: int | None, reason: str | None) -> None:
        session = self.session
        if session is not None:
            if self._gate is not None:
                self._gate.close()
            session.connection_lost()
            error = session.error
            if error is not None:
                log.info(
                    "closed {peer} (WebSocket close code {code}) after ERROR: {message}",
                    peer=session.peer,
                    code=code,
                    message=error.message,
                )


def _set_nodelay_under_tls(transport: Any) -> None:
    """
    Set ``TCP_NODELAY`` beneath TLS.

    Autobahn sets it on a plain TCP transport itself; under TLS the TCP
    transport is one level down.  Frames are small and latency matters more
    than the packets Nagle's algorithm would save.
    """
    tcp = getattr(transport, "transport", None)
    set_nodelay = getattr(tcp, "setTcpNoDelay", None)
    if set_nodelay is not None:
        try:
            set_nodelay(True)
        except OSError:
            return


@frozen
class _ClockTimer:
    """
    The timer Autobahn's factory schedules handshake timeouts and pings with.

    Autobahn's own batches calls on txaio's global reactor; this one uses the
    injected clock, so pings and heart-beats run on the same clock (and tests
    can drive both with ``task.Clock``).
    """

    clock: IReactorTime

    def call_later(self, delay: float, function: Any, *args: Any, **kwargs: Any) -> IDelayedCall:
        return self.clock.callLater(delay, function, *args, **kwargs)


class StompWebSocketFactory(WebSocketServerFactory):
    """
    Makes a :class:`StompWebSocketProtocol` for each connection, all feeding one broker.

    :param broker: the :class:`~stompbroker.broker.service.Broker`.
    :param clock: times heart-beats, pings and handshakes; the reactor.
    :param config: per-connection STOMP settings.
    :param websocket: the WebSocket transport's own settings.
    """

    protocol = StompWebSocketProtocol  # type: ignore[assignment]

    def __init__(
        self,
        broker: Any,
        clock: IReactorTime,
        config: SessionConfig,
        websocket: WebSocketConfig,
    ) -> None:
        super().__init__(server=config.server_name, reactor=clock)
        self.broker = broker
        self.clock = clock
        self.config = config
        self.websocket = websocket
        self.max_message_size = config.max_frame_size + 1
        self._subprotocols = [
            (name, evolve(config, versions=tuple(v for v in config.versions if v <= version)))
            for name, version in SUBPROTOCOLS
            if version in config.versions
        ]
        self.setProtocolOptions(
            # Answer a plain GET with 426 rather than Autobahn's status page,
            # whose ?redirect= parameter is an open redirect.
            webStatus=False,
            # Close with a close frame (e.g. 1009), not by dropping TCP.
            failByDrop=False,
            autoPingInterval=websocket.ping_interval,
            autoPingTimeout=websocket.ping_timeout,
            autoPingRestartOnAnyTraffic=True,
            perMessageCompressionAccept=self._accept_compression,
            # A page opened as a file sends ``Origin: null``, which Autobahn refuses
            # on its own; the origin check in ``onConnect`` decides instead.
            allowNullOrigin=True,
        )
        self._batched_timer = _ClockTimer(clock)

    def _accept_compression(self, offers: list[Any]) -> Any:
        """Autobahn asks what to accept of a client's permessage-deflate offers."""
        return self.websocket.compression.accept(offers, self.max_message_size)

    def choose_subprotocol(self, offered: list[str]) -> tuple[str | None, SessionConfig]:
        """
        :param offered: the subprotocols the client offered, in its order.
        :returns: the newest STOMP subprotocol offered (``None`` when none was
            offered), and the session settings that go with it.
        :raises ConnectionDeny: when the client offered only others.
        """
        if not offered:
            return None, self.config
        for name, config in self._subprotocols:
            if name in offered:
                return name, config
        ours = ", ".join(name for name, _ in self._subprotocols)
        raise ConnectionDeny(
            ConnectionDeny.BAD_REQUEST,
            f"no supported subprotocol offered; this server speaks {ours}",
        )


def stomp_websocket_resource(
    broker: Any,
    reactor: IReactorTime | None = None,
    config: SessionConfig | None = None,
    *,
    websocket: WebSocketConfig | None = None,
) -> WebSocketResource:
    """
    The ``twisted.web`` resource that serves STOMP over WebSocket, for embedding.

    Put it at any path of any site (``root.putChild(b"ws", resource)``); every
    connection feeds ``broker``.

    :param broker: the :class:`~stompbroker.broker.service.Broker` to feed.
    :param reactor: the reactor that times heart-beats and pings; the broker's clock by default.
    :param config: per-connection STOMP settings; defaults otherwise.
    :param websocket: ping settings; defaults otherwise.
    :returns: a leaf resource that takes over the connection of each upgrade request.
    """
    factory = StompWebSocketFactory(
        broker, reactor or broker.clock, config or SessionConfig(), websocket or WebSocketConfig()
    )
    return WebSocketResource(factory)
