"""
One client connection's STOMP conversation, sans I/O.

A :class:`StompSession` is fed the bytes a client sent (:meth:`StompSession.receive_data`)
and writes what the client must get through an injected transport (``write`` and
``close``).  It asks the broker for everything else through
:class:`stompbroker.interfaces.IBroker`, and the broker delivers back to the
per-subscription objects it creates (:class:`SessionSubscription`).  Time comes
from an injected clock (``seconds`` and ``callLater``), so heart-beats are tested
with ``twisted.internet.task.Clock`` and this module imports nothing from Twisted.

Theory of operation:

- The session moves through the states of :class:`State`; which commands each
  state accepts is one table, :data:`HANDLERS`.  A command not in the table for
  the current state is an error: before CONNECT it is "expected CONNECT", after
  it a second CONNECT is "already connected", and a name STOMP does not have is
  "unknown command".
- Every client error is a :class:`~stompbroker.protocol.errors.ProtocolError`
  raised wherever it is found and caught here, at the edge: the client gets one
  ERROR frame (with ``receipt-id`` when the offending frame asked for a receipt),
  the connection closes once that frame is flushed, and further input is ignored.
  No other connection can notice.
- The delivery path (:meth:`SessionSubscription.deliver`) is one dict lookup,
  one concatenation and one write: the bytes every subscriber shares are encoded
  once per message and cached on it.
"""

from __future__ import annotations

import enum
from typing import Any, Callable, Optional

from attrs import frozen
from zope.interface import implementer

from stompbroker.interfaces import IConnection, ISubscriber
from stompbroker.protocol.encoder import encode, error_frame, message_prefix, message_tail
from stompbroker.protocol.errors import (
    DuplicateSubscription,
    MalformedFrame,
    MissingHeader,
    NotSupported,
    ProtocolError,
    UnexpectedFrame,
    UnknownCommand,
    UnknownSubscription,
    VersionMismatch,
)
from stompbroker.protocol.frames import CLIENT_COMMANDS, SUPPORTED_VERSIONS, Frame
from stompbroker.protocol.parser import FrameParser

#: Headers of a SEND that concern the hop from client to broker, or that the
#: broker writes itself; they are not forwarded to subscribers.
HOP_HEADERS: frozenset[str] = frozenset(
    {
        "destination",
        "receipt",
        "transaction",
        "content-length",
        "message-id",
        "subscription",
        "ack",
    }
)

ACK_MODES: frozenset[str] = frozenset({"auto", "client", "client-individual"})

#: One heart-beat: an EOL, which every version's parser skips between frames.
HEARTBEAT = b"\n"


class State(enum.Enum):
    """Where a session is in its life."""

    AWAITING_CONNECT = "awaiting-connect"
    CONNECTED = "connected"
    CLOSING = "closing"
    CLOSED = "closed"


@frozen
class SessionConfig:
    """
    Per-connection settings, shared by all sessions of one listener.

    :ivar server_name: sent as CONNECTED's ``server`` header.
    :ivar versions: the protocol versions offered, best first.
    :ivar heartbeat: the server's heart-beat offer in ms, ``(send, receive)``: how
        often it can send, and how often it wants to hear from the client; 0 means never.
    :ivar heartbeat_grace: a client is dead once silent for this many times the
        negotiated receive interval.
    :ivar max_frame_size: largest frame accepted, in bytes, headers and body.
    :ivar max_headers: most headers in one frame.
    :ivar max_header_length: longest header line, in bytes.
    """

    server_name: str = "stompbroker"
    versions: tuple[str, ...] = SUPPORTED_VERSIONS
    heartbeat: tuple[int, int] = (10000, 10000)
    heartbeat_grace: float = 2.0
    max_frame_size: int = 4 * 1024 * 1024
    max_headers: int = 1000
    max_header_length: int = 10240


def negotiate_version(accept_version: Optional[str], ours: tuple[str, ...]) -> str:
    """
    Pick the protocol version for a connection (STOMP 1.2, "Protocol Negotiation").

    :param accept_version: the CONNECT frame's ``accept-version``; absent means 1.0.
    :param ours: the versions we speak, best first.
    :returns: the highest version both sides speak.
    :raises VersionMismatch: when there is none.
    """
    if accept_version is None:
        offered = {"1.0"}
    else:
        offered = {part.strip() for part in accept_version.split(",")}
    for version in ours:
        if version in offered:
            return version
    raise VersionMismatch(
        "unsupported protocol version",
        f"client accepts {accept_version!r}; this broker speaks {','.join(ours)}",
    )


def negotiate_heartbeat(client: Optional[str], server: tuple[int, int]) -> tuple[int, int]:
    """
    Agree heart-beat intervals (STOMP 1.2, "Heart-beating").

    :param client: the CONNECT frame's ``heart-beat`` header, ``"cx,cy"``.
    :param server: our offer ``(sx, sy)`` in ms.
    :returns: ``(send_ms, receive_ms)``: how often we must send, and how often we
        expect to hear from the client; 0 means not at all.
    :raises MalformedFrame: when the header is not two non-negative integers.
    """
    if client is None:
        return (0, 0)
    try:
        cx_text, cy_text = client.split(",")
        cx, cy = int(cx_text), int(cy_text)
    except ValueError:
        cx = cy = -1
    if cx < 0 or cy < 0:
        raise MalformedFrame(
            "invalid heart-beat header",
            f"heart-beat must be two non-negative integers 'cx,cy', got {client!r}",
        )
    sx, sy = server
    send = max(sx, cy) if sx and cy else 0
    receive = max(cx, sy) if cx and sy else 0
    return (send, receive)


@implementer(ISubscriber)
class SessionSubscription:
    """
    One SUBSCRIBE of one session: what the broker stores and delivers to.

    It holds the encoded start of every MESSAGE it will send (``MESSAGE`` and the
    ``subscription`` header), so a delivery costs one lookup of the message's
    shared bytes, one concatenation and one write.
    """

    __slots__ = (
        "subscription_id",
        "destination",
        "ack_mode",
        "connection",
        "headers",
        "_prefix",
        "_style",
        "_write",
    )

    def __init__(
        self,
        session: "StompSession",
        subscription_id: str,
        destination: str,
        ack_mode: str,
        headers: dict[str, str],
    ) -> None:
        self.subscription_id = subscription_id
        self.destination = destination
        self.ack_mode = ack_mode
        self.connection = session
        self.headers = headers
        self._style = session.version
        self._prefix = message_prefix(subscription_id, session.version)
        self._write = session.write

    def deliver(self, message: Any) -> None:
        """
        Send one MESSAGE frame to the client.

        :param message: a :class:`stompbroker.message.Message`.
        """
        tail = message.wire.get(self._style)
        if tail is None:
            tail = message_tail(message, self._style)
        self._write(self._prefix + tail)

    def __repr__(self) -> str:
        return (
            f"<SessionSubscription {self.subscription_id!r} on {self.destination!r}"
            f" of {self.connection.session_id!r}>"
        )


@implementer(IConnection)
class StompSession:
    """
    The server side of one STOMP connection.

    :param broker: an :class:`~stompbroker.interfaces.IBroker`.
    :param transport: an :class:`~stompbroker.interfaces.ISessionTransport`.
    :param clock: an :class:`~stompbroker.interfaces.IClock`.
    :param config: the listener's :class:`SessionConfig`.
    :param peer: the client's address, for logs and statistics.
    """

    def __init__(
        self,
        broker: Any,
        transport: Any,
        clock: Any,
        config: SessionConfig = SessionConfig(),
        peer: str = "",
    ) -> None:
        self.broker = broker
        self.config = config
        self.peer = peer
        self.session_id = ""
        self.version = "1.2"
        self.state = State.AWAITING_CONNECT
        self.heartbeat = (0, 0)
        self.subscriptions: dict[str, SessionSubscription] = {}
        self.frames_received = 0
        #: The error that ended the session, if one did; adapters log it.
        self.error: Optional[ProtocolError] = None
        self._transport = transport
        self._transport_write: Callable[[bytes], None] = transport.write
        self._clock = clock
        self._parser = FrameParser(
            max_frame_size=config.max_frame_size,
            max_headers=config.max_headers,
            max_header_length=config.max_header_length,
        )
        self._wrote = False
        self._last_received = clock.seconds()
        self._send_timer: Any = None
        self._receive_timer: Any = None
        self._registered = False

    # -- the transport's side ------------------------------------------------

    def connection_made(self) -> None:
        """
        The connection is open: ask the broker to admit it.

        A broker that is full answers with an ERROR and the connection closes.
        """
        try:
            self.broker.open_connection(self)
        except ProtocolError as error:
            self._fail(error)
            return
        self._registered = True

    def receive_data(self, data: bytes) -> None:
        """
        Handle bytes from the client.

        :param data: any chunk of the byte stream.
        """
        if self.state is State.CLOSING or self.state is State.CLOSED:
            return
        self._last_received = self._clock.seconds()
        try:
            frames = self._parser.receive_data(data)
        except ProtocolError as error:
            self._fail(error)
            return
        for frame in frames:
            self.frames_received += 1
            handler = HANDLERS[self.state].get(frame.command)
            try:
                if handler is None:
                    self._reject(frame)
                handler(self, frame)  # type: ignore[misc]
            except ProtocolError as error:
                if error.receipt_id is None:
                    error.receipt_id = frame.get("receipt")
                self._fail(error)
                return
            if self.state is not State.CONNECTED:
                return

    def connection_lost(self) -> None:
        """The connection is gone, for whatever reason: let go of everything it held."""
        self.state = State.CLOSED
        self._release()

    # -- output ----------------------------------------------------------------

    def write(self, data: bytes) -> None:
        """
        Send bytes to the client; every outgoing frame passes here.

        :param data: encoded frames.
        """
        self._wrote = True
        self._transport_write(data)

    def send_frame(self, frame: Frame) -> None:
        """
        Encode and send one frame in the negotiated version.

        :param frame: a server frame.
        """
        self.write(encode(frame, self.version))

    def _receipt(self, frame: Frame) -> None:
        receipt = frame.get("receipt")
        if receipt is not None:
            self.send_frame(Frame("RECEIPT", (("receipt-id", receipt),)))

    def _fail(self, error: ProtocolError) -> None:
        """Tell the client what went wrong, then close (STOMP 1.2, "ERROR")."""
        self.error = error
        extra: tuple[tuple[str, str], ...] = ()
        if isinstance(error, VersionMismatch):
            extra = (("version", ",".join(self.config.versions)),)
        frame = error_frame(error.message, error.detail, error.receipt_id, extra)
        try:
            self.send_frame(frame)
        except ValueError:
            # The client's receipt id cannot be written in a 1.0 frame: send without it.
            self.send_frame(error_frame(error.message, error.detail, None, extra))
        self._close()

    def _close(self) -> None:
        self.state = State.CLOSING
        self._release()
        self._transport.close()

    def _release(self) -> None:
        """Drop subscriptions, timers and the broker's record of us; safe to repeat."""
        for timer in (self._send_timer, self._receive_timer):
            if timer is not None and timer.active():
                timer.cancel()
        self._send_timer = self._receive_timer = None
        subscriptions, self.subscriptions = self.subscriptions, {}
        for subscription in subscriptions.values():
            self.broker.unsubscribe(subscription)
        if self._registered:
            self._registered = False
            self.broker.close_connection(self)

    # -- heart-beats -----------------------------------------------------------

    def _start_heartbeats(self) -> None:
        send_ms, receive_ms = self.heartbeat
        if send_ms:
            # Checking twice per interval keeps the longest silence under one interval.
            self._send_timer = self._clock.callLater(send_ms / 2000.0, self._send_beat)
        if receive_ms:
            self._receive_timer = self._clock.callLater(
                receive_ms * self.config.heartbeat_grace / 1000.0, self._check_beat
            )

    def _send_beat(self) -> None:
        if not self._wrote:
            self._transport_write(HEARTBEAT)
        self._wrote = False
        self._send_timer = self._clock.callLater(self.heartbeat[0] / 2000.0, self._send_beat)

    def _check_beat(self) -> None:
        allowed = self.heartbeat[1] * self.config.heartbeat_grace / 1000.0
        silent = self._clock.seconds() - self._last_received
        if silent >= allowed:
            self._receive_timer = None
            self._fail(
                ProtocolError(
                    "heart-beat timeout",
                    f"nothing received for {silent:.1f} s; the negotiated heart-beat is"
                    f" {self.heartbeat[1]} ms",
                )
            )
            return
        self._receive_timer = self._clock.callLater(allowed - silent, self._check_beat)

    # -- frames ----------------------------------------------------------------

    def _reject(self, frame: Frame) -> None:
        command = frame.command
        if command not in CLIENT_COMMANDS:
            raise UnknownCommand(
                "unknown command",
                f"{command[:40]!r} is not a STOMP client command",
            )
        if self.state is State.AWAITING_CONNECT:
            raise UnexpectedFrame(
                "expected CONNECT",
                f"the first frame must be CONNECT or STOMP, got {command}",
            )
        raise UnexpectedFrame("already connected", f"{command} received on a connected session")

    def _required(self, frame: Frame, name: str) -> str:
        value = frame.get(name)
        if value is None:
            raise MissingHeader(
                f"missing {name} header",
                f"a {frame.command} frame must have a '{name}' header",
            )
        return value

    def _on_connect(self, frame: Frame) -> None:
        self.version = negotiate_version(frame.get("accept-version"), self.config.versions)
        self._parser.version = self.version
        if self.version != "1.0":
            self.heartbeat = negotiate_heartbeat(frame.get("heart-beat"), self.config.heartbeat)
        self.session_id = self.broker.new_session_id()
        headers = [
            ("version", self.version),
            ("session", self.session_id),
            ("server", self.config.server_name),
        ]
        if self.version != "1.0":
            sx, sy = self.config.heartbeat
            headers.append(("heart-beat", f"{sx},{sy}"))
        self.state = State.CONNECTED
        self.send_frame(Frame("CONNECTED", tuple(headers)))
        self._start_heartbeats()

    def _on_send(self, frame: Frame) -> None:
        destination = self._required(frame, "destination")
        if frame.get("transaction") is not None:
            raise NotSupported(
                "transactions are not supported yet",
                "this broker does not implement BEGIN/COMMIT/ABORT yet",
            )
        seen: set[str] = set()
        headers = []
        for name, value in frame.headers:
            if name in HOP_HEADERS or name in seen:
                continue
            seen.add(name)
            headers.append((name, value))
        self.broker.send(destination, tuple(headers), frame.body)
        self._receipt(frame)

    def _on_subscribe(self, frame: Frame) -> None:
        destination = self._required(frame, "destination")
        subscription_id = frame.get("id")
        if subscription_id is None:
            if self.version != "1.0":
                self._required(frame, "id")
            # STOMP 1.0 made the id optional: the destination is a stable stand-in,
            # and it is what a 1.0 UNSUBSCRIBE by destination names.
            subscription_id = destination
        if subscription_id in self.subscriptions:
            raise DuplicateSubscription(
                "duplicate subscription",
                f"this connection already has a subscription with id {subscription_id!r}",
            )
        ack_mode = frame.get("ack", "auto")
        if ack_mode not in ACK_MODES:
            raise MalformedFrame(
                "invalid ack mode",
                f"ack must be auto, client or client-individual, got {ack_mode!r}",
            )
        subscription = SessionSubscription(
            self, subscription_id, destination, ack_mode, frame.header_dict()
        )
        self.broker.subscribe(subscription)
        self.subscriptions[subscription_id] = subscription
        self._receipt(frame)

    def _on_unsubscribe(self, frame: Frame) -> None:
        subscription_id = frame.get("id")
        if subscription_id is None:
            if self.version != "1.0" or frame.get("destination") is None:
                self._required(frame, "id")
            subscription_id = self._by_destination(frame.get("destination", ""))
        subscription = self.subscriptions.pop(subscription_id, None)
        if subscription is None:
            raise UnknownSubscription(
                "unknown subscription",
                f"this connection has no subscription with id {subscription_id!r}",
            )
        self.broker.unsubscribe(subscription)
        self._receipt(frame)

    def _by_destination(self, destination: str) -> str:
        for subscription_id, subscription in self.subscriptions.items():
            if subscription.destination == destination:
                return subscription_id
        return destination

    def _on_unsupported(self, frame: Frame) -> None:
        raise NotSupported(
            f"{frame.command} is not supported yet",
            "acknowledgements and transactions are not implemented by this broker yet",
        )

    def _on_disconnect(self, frame: Frame) -> None:
        # STOMP 1.2, "DISCONNECT": the receipt goes out, then the connection closes
        # once the transport has flushed it.
        self._receipt(frame)
        self._close()


#: Which commands each state accepts, and the method that handles each.
HANDLERS: dict[State, dict[str, Callable[[StompSession, Frame], None]]] = {
    State.AWAITING_CONNECT: {
        "CONNECT": StompSession._on_connect,
        "STOMP": StompSession._on_connect,
    },
    State.CONNECTED: {
        "SEND": StompSession._on_send,
        "SUBSCRIBE": StompSession._on_subscribe,
        "UNSUBSCRIBE": StompSession._on_unsubscribe,
        "ACK": StompSession._on_unsupported,
        "NACK": StompSession._on_unsupported,
        "BEGIN": StompSession._on_unsupported,
        "COMMIT": StompSession._on_unsupported,
        "ABORT": StompSession._on_unsupported,
        "DISCONNECT": StompSession._on_disconnect,
    },
    State.CLOSING: {},
    State.CLOSED: {},
}
