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
  once per message and cached on it.  Subscriptions that take from a queue (queues,
  and topic subscriptions with client acknowledgements or a durable name) are
  :class:`TrackedSubscription` objects, whose MESSAGE frames also carry ``ack``
  (STOMP 1.2) and, for a redelivery, ``redelivered`` and ``redelivery-count``.
- Persistent messages: a SEND (or COMMIT) whose message the broker must store
  first, and an ACK or NACK that settles stored messages, get back something to
  wait on (a Deferred, though this module never names Twisted).  Its RECEIPT
  waits for it, and so does every RECEIPT after it, so that receipts keep the
  order of the frames they answer; a SEND or COMMIT without a receipt, and a
  DISCONNECT, also stop the session from handling any further frame until
  everything waited on is stored.  Frames that arrive meanwhile are
  held; past ``max_held_bytes`` of them, the session stops reading.
- Authentication (when ``SessionConfig.authenticator`` is set): CONNECT's
  ``login`` and ``passcode`` go to the authenticator, which answers with an
  identity or fails with :class:`~stompbroker.protocol.errors.LoginFailed`,
  maybe later (a Deferred, though this module never names Twisted).
  Meanwhile the session is AUTHENTICATING: it reads nothing more from the
  socket, and frames that came with the CONNECT are held until the answer.
  A token login's expiry, and its renewal by a SEND to ``/control/credentials``,
  are in :mod:`stompbroker.protocol.credentials`.
- Authorization (when ``SessionConfig.access`` is set): every SEND needs the
  ``write`` right on its destination and every SUBSCRIBE the ``read`` right on
  its pattern, checked frame by frame, so that a reloaded access file applies
  to connected clients at once.
- Limits: subscriptions per connection, a connect timeout (a socket that sends
  no CONNECT is closed), and a frame timeout (a frame begun must be complete
  within it).  Each breach is a
  :class:`~stompbroker.protocol.errors.LimitExceeded` naming the limit.
- Slow clients: when the transport's buffer is full it tells the session
  (:meth:`StompSession.pause_writing`).  After a grace that absorbs bursts of
  fan-out (``write_grace``), and until the transport has drained
  (:meth:`StompSession.resume_writing`), writes go to the session's backlog
  and the broker gives its queue subscriptions nothing.  ``auto``-ack topic
  messages are the only ones that keep coming; when they fill
  ``slow_consumer_buffer``, the ``slow_consumer_policy`` decides: ``block``
  the publishers, ``drop-oldest``, or ``disconnect``.  The switch is made by
  rebinding the session's write functions, so a delivery to a client that
  keeps up costs nothing more.
- Acknowledgements and transactions are the broker's business: the session finds
  which subscription and message an ACK or NACK names and passes the
  ``transaction`` header along.  A 1.2 ``ack`` id is ``NUMBER.MESSAGE-ID``, where
  NUMBER is the subscription's number on this connection, so the id alone names
  both.
"""

from __future__ import annotations

import enum
import itertools
from collections import deque
from collections.abc import Callable
from typing import Any

from attrs import define, field, frozen
from attrs.validators import in_
from zope.interface import implementer

from stompbroker.interfaces import IConnection, ISubscriber
from stompbroker.protocol.backlog import Backlog
from stompbroker.protocol.credentials import CONTROL_PREFIX, CredentialsLifetime
from stompbroker.protocol.encoder import encode, error_frame, message_prefix, message_tail
from stompbroker.protocol.errors import (
    DuplicateSubscription,
    LimitExceeded,
    LoginFailed,
    MalformedFrame,
    MissingHeader,
    ProtocolError,
    ShuttingDown,
    UnexpectedFrame,
    UnknownAck,
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

#: Topic destinations; an auto-ack subscription to one is delivered to directly.
TOPIC_PREFIX = "/topic/"
#: A connection's own queues; ``reply-to`` naming one subscribes the sender to it.
TEMP_QUEUE_PREFIX = "/temp-queue/"

#: SUBSCRIBE headers that set a subscription's window, in order of preference
#: (RabbitMQ's, then ActiveMQ's).
PREFETCH_HEADERS = ("prefetch-count", "activemq.prefetchSize")
#: SUBSCRIBE/UNSUBSCRIBE headers that name a durable subscription, which is then
#: keyed by the CONNECT ``client-id`` and this name (ActiveMQ's, then Artemis's).
DURABLE_NAME_HEADERS = ("activemq.subscriptionName", "durable-subscription-name")
#: SUBSCRIBE/UNSUBSCRIBE headers that, set to ``true``, make the subscription's
#: ``id`` the name of a durable subscription (RabbitMQ's).
DURABLE_FLAG_HEADERS = ("durable", "persistent")

#: One heart-beat: an EOL, which every version's parser skips between frames.
HEARTBEAT = b"\n"

#: What happens when a slow client's buffer of topic messages is full.
BLOCK = "block"
DROP_OLDEST = "drop-oldest"
DISCONNECT = "disconnect"
SLOW_CONSUMER_POLICIES = (BLOCK, DROP_OLDEST, DISCONNECT)

#: The rights the session checks (see :mod:`stompbroker.security.access`).
READ = "read"
WRITE = "write"

#: Why a session has stopped reading from its socket.
_BY_BROKER = "broker"
_BY_LOGIN = "login"
_BY_BACKLOG = "backlog"
#: ... because it holds ``max_held_bytes`` of frames it cannot handle yet.
_BY_HELD = "held"


class _Parser(FrameParser):
    """The frame parser, telling the session whether a frame has begun and not ended."""

    __slots__ = ()

    def in_frame(self) -> bool:
        """:returns: whether bytes of an incomplete frame are waiting for the rest."""
        return bool(self._buffer)


class State(enum.Enum):
    """Where a session is in its life."""

    AWAITING_CONNECT = "awaiting-connect"
    AUTHENTICATING = "authenticating"
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
    :ivar max_held_bytes: most bytes of frames (headers and bodies) a session
        holds unhandled while it waits for a persistent message to be stored;
        past it, the session reads nothing more from the client until the store
        has caught up.
    :ivar authenticator: called with CONNECT's ``login``, ``passcode`` and the
        client's address (and ``certificate=``, the client's verified TLS
        certificate, for a CONNECT with neither, see
        :mod:`stompbroker.protocol.credentials`); returns a Deferred of the
        client's identity, which fails
        with :class:`~stompbroker.protocol.errors.LoginFailed` for a refused
        login (:class:`stompbroker.security.auth.Authenticator`).  ``None`` lets every
        client in without an identity.
    :ivar access: checks rights, ``check(identity, right, destination)`` raising
        :class:`~stompbroker.protocol.errors.AccessDenied`
        (:class:`stompbroker.security.access.AccessControl`); ``None`` allows everything.
        It needs an ``authenticator``, which gives the identities it checks.
    :ivar max_subscriptions: most subscriptions one connection may have; 0 means
        no limit.
    :ivar connect_timeout: seconds a client has, from the moment it connects,
        to complete its CONNECT (login included); 0 means for ever.
    :ivar frame_timeout: seconds a client has to complete a frame once its first
        byte has arrived; 0 means for ever.
    :ivar slow_consumer_policy: what happens when ``auto``-ack topic messages for a
        client that does not read fast enough fill ``slow_consumer_buffer``:
        ``block`` the publishers, ``drop-oldest`` messages, or ``disconnect`` it.
    :ivar slow_consumer_buffer: bytes of topic messages kept for a client whose
        socket cannot take them yet; as many bytes of other frames (receipts,
        queue messages) may wait too before the session stops reading from it.
    :ivar write_grace: bytes still written straight to a transport whose buffer
        is full before its client counts as behind.  One reactor turn of
        fan-out can put about 100 KiB on every subscriber (a 64 KiB read of
        small SENDs becomes bigger MESSAGE frames), more than Twisted's 64 KiB
        mark; without a grace, a third of the deliveries of a busy fan-out took
        the slow path, for clients that kept up (measured).
    """

    server_name: str = "stompbroker"
    versions: tuple[str, ...] = SUPPORTED_VERSIONS
    heartbeat: tuple[int, int] = (10000, 10000)
    heartbeat_grace: float = 2.0
    max_frame_size: int = 4 * 1024 * 1024
    max_headers: int = 1000
    max_header_length: int = 10240
    max_held_bytes: int = 32 * 1024 * 1024
    authenticator: Callable[[str | None, str | None, str], Any] | None = None
    access: Any = field(default=None)
    max_subscriptions: int = 1000
    connect_timeout: float = 10.0
    frame_timeout: float = 60.0
    slow_consumer_policy: str = field(default=DISCONNECT, validator=in_(SLOW_CONSUMER_POLICIES))
    slow_consumer_buffer: int = 8 * 1024 * 1024
    write_grace: int = 256 * 1024

    @access.validator
    def _access_needs_identities(self, attribute: Any, value: Any) -> None:
        if value is not None and self.authenticator is None:
            raise ValueError(
                "access rules need an authenticator to give identities; one over a"
                " portal without checkers lets everyone in anonymously"
            )


def _integer(name: str, value: str, minimum: int) -> int:
    """
    Read an integer header.

    :raises MalformedFrame: if ``value`` is not an integer of at least ``minimum``.
    """
    try:
        number = int(value)
    except ValueError:
        number = minimum - 1
    if number < minimum:
        raise MalformedFrame(
            f"invalid {name} header",
            f"{name} must be an integer of at least {minimum}, got {value!r}",
        )
    return number


def negotiate_version(accept_version: str | None, ours: tuple[str, ...]) -> str:
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


def negotiate_heartbeat(client: str | None, server: tuple[int, int]) -> tuple[int, int]:
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


@define(slots=True)
class _Reply:
    """
    A RECEIPT in the session's queue of replies, which go out in order.

    :ivar receipt: the receipt id, or ``None`` for a frame that asked for none.
    :ivar done: whether what it waits for (storing a persistent message) is done.
    """

    receipt: str | None
    done: bool = False


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
        "number",
        "prefetch",
        "max_redeliveries",
        "durable",
        "_prefix",
        "_style",
        "_write",
    )

    def __init__(
        self,
        session: StompSession,
        subscription_id: str,
        destination: str,
        ack_mode: str,
        headers: dict[str, str],
        number: int = 0,
        prefetch: int = 0,
        max_redeliveries: int | None = None,
        durable: tuple[str, str] | None = None,
    ) -> None:
        self.subscription_id = subscription_id
        self.destination = destination
        self.ack_mode = ack_mode
        self.connection = session
        self.headers = headers
        self.number = number
        self.prefetch = prefetch
        self.max_redeliveries = max_redeliveries
        self.durable = durable
        self._style = session.version
        self._prefix = message_prefix(subscription_id, session.version)
        # Only auto-ack topic subscriptions are this class; their messages are
        # the ones a slow client's buffer may drop (see StompSession.write_message).
        self._write = session.write_message

    def deliver(self, message: Any) -> None:
        """
        Send one MESSAGE frame to the client.

        :param message: a :class:`stompbroker.protocol.message.Message`.
        """
        tail = message.wire.get(self._style)
        if tail is None:
            tail = message_tail(message, self._style)
        self._write(self._prefix + tail)

    def count_deliveries(self, count: int, tails: dict[str, int]) -> None:
        """
        Add MESSAGE frames the broker routed here to the connection's frames and
        bytes out: counted per SEND and told in batches, so that a delivery costs
        nothing more (see :mod:`stompbroker.broker.traffic`).

        :param count: how many messages.
        :param tails: bytes of their encoded tails, by escaping style.
        """
        connection = self.connection
        connection.frames_sent += count
        connection.bytes_sent += count * len(self._prefix) + tails.get(self._style, 0)

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} {self.subscription_id!r} on {self.destination!r}"
            f" of {self.connection.session_id!r}>"
        )


class TrackedSubscription(SessionSubscription):
    """
    A subscription that takes from a queue, whose MESSAGE frames say how to settle them.

    Each frame gets, after ``subscription``: ``ack:NUMBER.MESSAGE-ID`` when the
    client must acknowledge (STOMP 1.2 only: older versions acknowledge by
    ``message-id``), and ``redelivered:true`` with ``redelivery-count`` when the
    message has come back to its queue before.  Both are ours to write (a number
    and a broker-made id), so they need no escaping.
    """

    __slots__ = ("_ack_prefix",)

    def __init__(self, session: StompSession, *args: Any, **kwargs: Any) -> None:
        super().__init__(session, *args, **kwargs)
        self._write = session.write
        acknowledged = self.ack_mode != "auto" and session.version == "1.2"
        self._ack_prefix = f"ack:{self.number}." if acknowledged else ""

    def deliver(self, message: Any) -> None:
        """
        Send one MESSAGE frame to the client, with its ``ack`` and redelivery headers.

        :param message: a :class:`stompbroker.protocol.message.Message`.
        """
        tail = message.wire.get(self._style)
        if tail is None:
            tail = message_tail(message, self._style)
        head = self._prefix
        if self._ack_prefix:
            head += (self._ack_prefix + message.message_id + "\n").encode("utf-8")
        if message.redeliveries:
            head += b"redelivered:true\nredelivery-count:%d\n" % message.redeliveries
        self._write(head + tail)


def _unknown_subscription(subscription_id: str) -> UnknownSubscription:
    """The error for an UNSUBSCRIBE, ACK or NACK naming a subscription the connection lacks."""
    return UnknownSubscription(
        "unknown subscription",
        f"this connection has no subscription with id {subscription_id!r}",
    )


@implementer(IConnection)
class StompSession(CredentialsLifetime):
    """
    The server side of one STOMP connection.

    :param broker: an :class:`~stompbroker.interfaces.IBroker`.
    :param transport: an :class:`~stompbroker.interfaces.ISessionTransport`.
    :param clock: an :class:`~stompbroker.interfaces.IClock`.
    :param config: the listener's :class:`SessionConfig`.
    :param peer: the client's address, for logs and statistics.
    """

    # One session per connection: slots keep an idle one small (about 1.3 kB
    # less than with a dict) and attribute access on the delivery path fast.
    # Every attribute a session has must be named here.
    __slots__ = (
        "broker",
        "bytes_received",
        "bytes_sent",
        "client_id",
        "config",
        "connected_at",
        "error",
        "frames_received",
        "frames_sent",
        "heartbeat",
        "identity",
        "peer",
        "session_id",
        "state",
        "subscriptions",
        "version",
        "_backlog",
        "_clock",
        "_connect_timer",
        "_expiry_timer",
        "_frame_started",
        "_frame_timer",
        "_handling",
        "_held",
        "_held_bytes",
        "_last_received",
        "_login",
        "_message_write",
        "_numbered",
        "_numbers",
        "_on_closed",
        "_parser",
        "_read_pauses",
        "_receive_timer",
        "_registered",
        "_replies",
        "_send_timer",
        "_transport",
        "_transport_write",
        "_wrote",
    )

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
        #: The CONNECT frame's ``client-id``, which scopes durable subscription names.
        self.client_id: str | None = None
        self.subscriptions: dict[str, SessionSubscription] = {}
        #: str(subscription number) -> subscription, to resolve 1.2 ack ids.
        self._numbered: dict[str, SessionSubscription] = {}
        self._numbers = itertools.count(1)
        self.frames_received = 0
        #: For statistics: bytes read, frames and bytes written (to the socket or
        #: the backlog; heart-beats aside), and when the connection was made.
        self.bytes_received = 0
        self.frames_sent = 0
        self.bytes_sent = 0
        self.connected_at: float = clock.seconds()
        #: The error that ended the session, if one did; adapters log it.
        self.error: ProtocolError | None = None
        #: Who the client logged in as (see ``SessionConfig.authenticator``).
        self.identity: Any = None
        self._transport = transport
        #: Where frames go: the transport, or the backlog while it is full.
        self._transport_write: Callable[[bytes], None] = transport.write
        #: Where auto-ack topic messages go: the same, but droppable while behind.
        self._message_write: Callable[[bytes], None] = transport.write
        self._clock = clock
        self._parser = _Parser(
            max_frame_size=config.max_frame_size,
            max_headers=config.max_headers,
            max_header_length=config.max_header_length,
        )
        self._wrote = False
        self._last_received = clock.seconds()
        self._send_timer: Any = None
        self._receive_timer: Any = None
        self._registered = False
        #: Replies waiting, in order, for a persistent message to be stored.
        self._replies: deque[_Reply] = deque()
        #: Frames received but not handled while the session waits for the
        #: store; ``None`` when it is not waiting.
        self._held: deque[Frame] | None = None
        self._held_bytes = 0
        #: Whether frames are being handled now (a store write that is done
        #: at once must not start handling held frames from inside a handler).
        self._handling = False
        self._login: Any = None
        self._connect_timer: Any = None
        #: Ends the connection when a token login's credentials expire.
        self._expiry_timer: Any = None
        self._frame_timer: Any = None
        #: When the frame now incomplete began, or ``None``.
        self._frame_started: float | None = None
        #: Why reading from the socket is paused; empty while it is not.  A
        #: frozenset, replaced on change, so that idle sessions share the empty one.
        self._read_pauses: frozenset[str] = frozenset()
        #: Called with this session once its connection is gone (graceful stop).
        self._on_closed: Callable[[Any], None] | None = None
        #: What waits for the client while its socket is full; made the first time.
        self._backlog: Backlog | None = None

    @property
    def transport(self) -> Any:
        """The :class:`~stompbroker.interfaces.ISessionTransport` beneath, for statistics."""
        return self._transport

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
        timeout = self.config.connect_timeout
        if timeout:
            self._connect_timer = self._clock.callLater(timeout, self._connect_timed_out)

    def receive_data(self, data: bytes) -> None:
        """
        Handle bytes from the client.

        :param data: any chunk of the byte stream.
        """
        if self.state is State.CLOSING or self.state is State.CLOSED:
            return
        self._last_received = self._clock.seconds()
        self.bytes_received += len(data)
        try:
            frames = self._parser.receive_data(data)
        except ProtocolError as error:
            self._fail(error)
            return
        if self._parser.in_frame():
            if self._frame_started is None:
                self._start_frame_clock()
        else:
            self._frame_started = None
        self.frames_received += len(frames)
        if self._held is not None:
            self._hold(frames)
            return
        self._handle(frames)

    def _handle(self, frames: list[Frame]) -> None:
        """
        Handle frames in order; stop if the session ends or starts waiting for
        the store, holding the rest.  A fault the parser found after them is
        reported once they are all handled.
        """
        handling, self._handling = self._handling, True
        # The table is looked up again only when the state changes (Enum hashing
        # is a Python call, once per frame otherwise).
        state = self.state
        handlers = HANDLERS[state]
        try:
            for position, frame in enumerate(frames):
                if self.state is not state:
                    state = self.state
                    handlers = HANDLERS[state]
                handler = handlers.get(frame.command)
                try:
                    if handler is None:
                        self._reject(frame)
                    handler(self, frame)  # type: ignore[misc]
                except ProtocolError as error:
                    if error.receipt_id is None:
                        error.receipt_id = frame.get("receipt")
                    self._fail(error)
                    return
                if self._held is not None:
                    self._hold(frames[position + 1 :])
                    return
                if self.state is not State.CONNECTED:
                    return
        finally:
            self._handling = handling
        fault = self._parser.error
        if fault is not None:
            self._fail(fault)

    def _hold(self, frames: list[Frame]) -> None:
        """
        Keep frames for later, while the session waits (for the store, or a login).

        Once they come to more than ``max_held_bytes``, read nothing more from
        the client until they have been handled.
        """
        assert self._held is not None
        for frame in frames:
            self._held.append(frame)
            self._held_bytes += len(frame.body) + len(frame.command)
            for name, value in frame.headers:
                self._held_bytes += len(name) + len(value) + 2
        if self._held_bytes > self.config.max_held_bytes and _BY_HELD not in self._read_pauses:
            self._pause_reading(_BY_HELD)

    def keep_alive(self) -> None:
        """
        The client showed life without sending bytes (a WebSocket pong, say).

        It counts as heard from for the heart-beat check, exactly as data does.
        """
        self._last_received = self._clock.seconds()

    def fail(self, error: ProtocolError) -> None:
        """
        End the session with an ERROR, for a fault the transport found itself
        (a WebSocket message over the size limit, say).

        :param error: what to tell the client.
        """
        if self.state is State.CLOSING or self.state is State.CLOSED:
            return
        self._fail(error)

    def connection_lost(self) -> None:
        """The connection is gone, for whatever reason: let go of everything it held."""
        self.state = State.CLOSED
        self._release()
        if self._backlog is not None:
            self._backlog.clear()
        on_closed, self._on_closed = self._on_closed, None
        if on_closed is not None:
            on_closed(self)

    def shut_down(self, on_closed: Callable[[Any], None]) -> None:
        """
        The broker is stopping: tell the client with an ERROR, then close.

        :param on_closed: called with this session once the connection is gone,
            after what was written to it has been flushed.
        """
        self._on_closed = on_closed
        self.fail(ShuttingDown("broker shutting down", "the broker is stopping; connect again later"))

    # -- flow control ------------------------------------------------------------

    def pause_writing(self) -> None:
        """
        The transport's buffer is full (its ``pauseProducing``).

        A burst of fan-out fills it for a moment even for clients that keep up,
        so writes go on straight to the transport for ``write_grace`` more
        bytes; only a client still behind after that takes the slow path
        (:meth:`_fall_behind`).  The transport calls this on every write while
        its buffer is over its mark, so a repeated call returns at once.
        """
        backlog = self._backlog
        if backlog is None:
            backlog = self._backlog = Backlog()
        if backlog.full:
            return
        backlog.full = True
        if backlog.active or self.state is State.CLOSED:
            return
        backlog.grace = self.config.write_grace
        if not backlog.grace:
            self._fall_behind(backlog)
            return
        self._transport_write = self._write_in_grace
        self._message_write = self._message_in_grace

    def _write_in_grace(self, data: bytes) -> None:
        """Write a frame while the transport is full: straight through, within the grace."""
        if self._within_grace(data):
            self._transport.write(data)
        else:
            self._keep(data)

    def _message_in_grace(self, data: bytes) -> None:
        """Write a topic message while the transport is full: straight through, within the grace."""
        if self._within_grace(data):
            self._transport.write(data)
        else:
            self._keep_message(data)

    def _within_grace(self, data: bytes) -> bool:
        """:returns: whether ``data`` fits in the grace; if not, the client is behind now."""
        backlog: Any = self._backlog
        left = backlog.grace - len(data)
        if left >= 0:
            backlog.grace = left
            return True
        self._fall_behind(backlog)
        return False

    def _fall_behind(self, backlog: Backlog) -> None:
        """
        The client is behind: frames wait in the backlog from now on, and the
        broker gives this connection's queue subscriptions nothing until
        :meth:`resume_writing`.
        """
        backlog.active = True
        self._transport_write = self._keep
        self._message_write = self._keep_message
        self.broker.pause_consumers(self)

    def resume_writing(self) -> None:
        """
        The transport has flushed its buffer (its ``resumeProducing``): send the
        backlog, and once it is empty write straight through again.
        """
        backlog = self._backlog
        if backlog is None:
            return
        backlog.full = False
        write = self._transport.write
        if not backlog.active:
            # It caught up within the grace.
            self._transport_write = self._message_write = write
            return
        for data in backlog.drain():
            write(data)
            if backlog.full:
                return
        backlog.active = False
        self._transport_write = self._message_write = write
        if self.state is State.CLOSED or self.state is State.CLOSING:
            return
        if _BY_BACKLOG in self._read_pauses:
            self._resume_reading(_BY_BACKLOG)
        self.broker.resume_consumers(self)

    def _keep(self, data: bytes) -> None:
        """Write while behind: keep any frame but a topic message, which must not be lost."""
        if self._backlog.keep(data) > self.config.slow_consumer_buffer:  # type: ignore[union-attr]
            # The client sends frames whose answers it does not read: read no more.
            if _BY_BACKLOG not in self._read_pauses:
                self._pause_reading(_BY_BACKLOG)

    def _keep_message(self, data: bytes) -> None:
        """Write an auto-ack topic message while behind; the policy decides when the buffer is full."""
        backlog: Any = self._backlog
        if backlog.keep_message(data) <= self.config.slow_consumer_buffer:
            return
        policy = self.config.slow_consumer_policy
        if policy == BLOCK:
            self.broker.block_sender(self)
        elif policy == DROP_OLDEST:
            self.broker.count_dropped(self, backlog.drop_oldest(self.config.slow_consumer_buffer))
        else:
            self._disconnect_slow(backlog)

    def _disconnect_slow(self, backlog: Backlog) -> None:
        """
        Drop the topic messages waiting for this client, and close it with an ERROR.

        The close happens in a moment (``callLater(0)``): this runs inside the
        broker's fan-out, which closing the session from here would change under it.
        """
        dropped = backlog.drop_oldest(0)
        self._message_write = self._count_dropped
        self.broker.count_dropped(self, dropped, disconnected=True)
        limit = self.config.slow_consumer_buffer
        backlog.closing = self._clock.callLater(
            0,
            self._fail,
            LimitExceeded(
                "slow consumer",
                f"the client did not read its messages fast enough: more than {limit}"
                f" bytes of them waited for it (slow-consumer-buffer); {dropped} were"
                " dropped",
            ),
        )

    def _count_dropped(self, data: bytes) -> None:
        """Stands in for writing topic messages to a client being disconnected for slowness."""
        self.broker.count_dropped(self, 1)

    def pause_reading(self) -> None:
        """The broker asks: read no more from this client (memory, or a slow subscriber)."""
        self._pause_reading(_BY_BROKER)

    def resume_reading(self) -> None:
        """The broker asks: read from this client again."""
        self._resume_reading(_BY_BROKER)

    def _pause_reading(self, reason: str) -> None:
        if not self._read_pauses:
            self._transport.pause_reading()
        self._read_pauses = self._read_pauses | {reason}

    def _resume_reading(self, reason: str) -> None:
        if reason not in self._read_pauses:
            return
        self._read_pauses = self._read_pauses - {reason}
        if self._read_pauses or self.state is State.CLOSED or self.state is State.CLOSING:
            return
        # Silence while we did not read is ours: the client's clocks start again.
        now = self._clock.seconds()
        self._last_received = now
        if self._frame_started is not None:
            self._frame_started = now
        self._transport.resume_reading()

    # -- output ----------------------------------------------------------------

    def write(self, data: bytes) -> None:
        """
        Send bytes to the client; every outgoing frame passes here.

        :param data: encoded frames.
        """
        self._wrote = True
        self.frames_sent += 1
        self.bytes_sent += len(data)
        self._transport_write(data)

    def write_message(self, data: bytes) -> None:
        """
        Send an auto-ack topic MESSAGE: as :meth:`write`, but while the client is
        behind, such messages are the ones its slow-consumer policy may drop.

        :param data: one encoded MESSAGE frame.
        """
        self._wrote = True
        self._message_write(data)

    def send_frame(self, frame: Frame) -> None:
        """
        Encode and send one frame in the negotiated version.

        :param frame: a server frame.
        """
        self.write(encode(frame, self.version))

    def _receipt(self, frame: Frame) -> None:
        receipt = frame.get("receipt")
        if receipt is not None:
            self._send_receipt(receipt)

    def _send_receipt(self, receipt: str) -> None:
        if self._replies:
            # An earlier RECEIPT waits for the store: this one goes out after it.
            self._replies.append(_Reply(receipt, done=True))
            return
        self.send_frame(Frame("RECEIPT", (("receipt-id", receipt),)))

    def _receipt_when_stored(self, waiting: Any, frame: Frame, pause: bool = True) -> None:
        """
        Answer a frame whose effect the broker is writing to its store.

        :param waiting: what the broker returned: ``None`` if it writes nothing,
            otherwise a Deferred that fires once the writes are durable.
        :param pause: without a receipt, handle no further frame until then
            (for SEND and COMMIT: a persistent message must be stored before the
            broker acts on the client's next frame); an ACK or NACK without
            receipt only keeps later receipts behind it.
        """
        if waiting is None:
            self._receipt(frame)
            return
        reply = _Reply(frame.get("receipt"))
        self._replies.append(reply)
        if reply.receipt is None and pause:
            # STOMP gives a frame without receipt no answer, so the rule is kept
            # by handling nothing more of this client's until it is stored.
            self._held = deque()
        waiting.addCallbacks(
            self._stored, self._not_stored, callbackArgs=(reply,), errbackArgs=(frame,)
        )

    def _stored(self, result: Any, reply: _Reply) -> None:
        """A store write finished: send the replies it held up, and go on if it paused us."""
        reply.done = True
        if self.state is not State.CONNECTED:
            return
        replies = self._replies
        while replies and replies[0].done:
            receipt = replies.popleft().receipt
            if receipt is not None:
                self.send_frame(Frame("RECEIPT", (("receipt-id", receipt),)))
        if not replies and self._held is not None:
            held, self._held = self._held, None
            self._held_bytes = 0
            self._resume_reading(_BY_HELD)
            # Unless this runs inside the handler that asked (it was stored at
            # once), whose loop goes on by itself, handle what was held.
            if held or not self._handling:
                self._handle(list(held))

    def _not_stored(self, failure: Any, frame: Frame) -> None:
        """A persistent message could not be stored: the client gets an ERROR, not a RECEIPT."""
        if self.state is not State.CONNECTED:
            return
        error = failure.value
        if not isinstance(error, ProtocolError):
            error = ProtocolError("message not stored", str(error))
        if error.receipt_id is None:
            error.receipt_id = frame.get("receipt")
        self._fail(error)

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
        self._held = None
        self._release()
        backlog = self._backlog
        if backlog is not None and backlog.active:
            # Closing waits for the transport to flush, so what waited goes there now.
            write = self._transport.write
            for data in backlog.drain():
                write(data)
        self._transport.close()

    def _release(self) -> None:
        """Drop subscriptions, timers and the broker's record of us; safe to repeat."""
        backlog = self._backlog
        timers = (
            self._send_timer,
            self._receive_timer,
            self._connect_timer,
            self._frame_timer,
            backlog.closing if backlog is not None else None,
        )
        for timer in timers:
            if timer is not None and timer.active():
                timer.cancel()
        self._send_timer = self._receive_timer = self._connect_timer = None
        self._frame_timer = None
        if backlog is not None:
            backlog.closing = None
        login, self._login = self._login, None
        if login is not None:
            login.cancel()
        self._stop_expiry()
        subscriptions, self.subscriptions = self.subscriptions, {}
        self._numbered = {}
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
        if not self._wrote and (self._backlog is None or not self._backlog.active):
            self._transport_write(HEARTBEAT)
        self._wrote = False
        self._send_timer = self._clock.callLater(self.heartbeat[0] / 2000.0, self._send_beat)

    def _check_beat(self) -> None:
        allowed = self.heartbeat[1] * self.config.heartbeat_grace / 1000.0
        silent = self._clock.seconds() - self._last_received
        if self._read_pauses:
            # We are not reading from the client: its silence is not its fault.
            self._receive_timer = self._clock.callLater(allowed, self._check_beat)
            return
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

    # -- timeouts ----------------------------------------------------------------

    def _connect_timed_out(self) -> None:
        self._connect_timer = None
        timeout = self.config.connect_timeout
        self._fail(
            LimitExceeded(
                "connect timeout",
                f"no CONNECT frame was completed within {timeout:g} s of connecting"
                " (connect-timeout)",
            )
        )

    def _start_frame_clock(self) -> None:
        self._frame_started = self._clock.seconds()
        timeout = self.config.frame_timeout
        if timeout and self._frame_timer is None:
            self._frame_timer = self._clock.callLater(timeout, self._check_frame)

    def _check_frame(self) -> None:
        self._frame_timer = None
        started = self._frame_started
        if started is None:
            return
        timeout = self.config.frame_timeout
        waited = self._clock.seconds() - started
        if self._read_pauses:
            # We are not reading from the client: it cannot finish its frame.
            self._frame_timer = self._clock.callLater(timeout, self._check_frame)
            return
        if waited < timeout:
            self._frame_timer = self._clock.callLater(timeout - waited, self._check_frame)
            return
        self._fail(
            LimitExceeded(
                "frame timeout",
                f"a frame was begun and not completed within {timeout:g} s"
                " (frame-timeout)",
            )
        )

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
        self.client_id = frame.get("client-id")
        authenticator = self.config.authenticator
        if authenticator is None:
            self._open()
            return
        self.state = State.AUTHENTICATING
        # Frames that came with the CONNECT wait for the answer.
        self._held = deque()
        login = self._authenticate_connect(authenticator, frame)
        login.addCallbacks(self._logged_in, self._login_refused, errbackArgs=(frame,))
        if self.state is State.AUTHENTICATING:
            # No answer yet (a password is being checked): keep the wait, to
            # cancel it if the client goes, and read nothing more meanwhile.
            self._login = login
            self._pause_reading(_BY_LOGIN)

    def _logged_in(self, identity: Any) -> None:
        """The authenticator let the client in: answer CONNECTED, then handle what waited."""
        self._login = None
        if self.state is not State.AUTHENTICATING:
            return
        self.identity = identity
        self._watch_expiry(identity)
        held, self._held = self._held, None
        self._held_bytes = 0
        self._resume_reading(_BY_LOGIN)
        self._open()
        if not self._handling:
            self._handle(list(held or ()))

    def _login_refused(self, failure: Any, frame: Frame) -> None:
        """
        The authenticator refused the client (after its delay), or the wait was cancelled.

        The client gets "login failed" and nothing more (the authenticator has
        logged why), then the connection closes.
        """
        self._login = None
        if self.state is not State.AUTHENTICATING:
            return
        error = failure.value
        if not isinstance(error, LoginFailed):
            error = LoginFailed()
        if error.receipt_id is None:
            error.receipt_id = frame.get("receipt")
        self._held = None
        self._fail(error)

    def _open(self) -> None:
        """Answer a CONNECT whose client is let in: CONNECTED, heart-beats, no more timeout."""
        self.session_id = self.broker.new_session_id()
        if self._connect_timer is not None:
            self._connect_timer.cancel()
            self._connect_timer = None
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
        # One pass over the headers finds what the session acts on and keeps the
        # first of each user header: a SEND is the commonest frame.
        destination = transaction = receipt = reply_to = None
        seen: set[str] = set()
        headers = []
        for pair in frame.headers:
            name = pair[0]
            if name in seen:
                continue
            seen.add(name)
            if name in HOP_HEADERS:
                if name == "destination":
                    destination = pair[1]
                elif name == "receipt":
                    receipt = pair[1]
                elif name == "transaction":
                    transaction = pair[1]
                continue
            if name == "reply-to":
                reply_to = pair[1]
            headers.append(pair)
        if destination is None:
            destination = self._required(frame, "destination")
        if destination.startswith(CONTROL_PREFIX):
            self._on_control(frame, destination)
            return
        access = self.config.access
        if access is not None:
            access.check(self.identity, WRITE, destination)
        if reply_to is not None and reply_to.startswith(TEMP_QUEUE_PREFIX):
            self._subscribe_to_replies(reply_to)
        waiting = self.broker.send(
            destination,
            tuple(headers),
            frame.body,
            connection=self,
            transaction=transaction,
        )
        if waiting is not None:
            self._receipt_when_stored(waiting, frame)
        elif receipt is not None:
            self._send_receipt(receipt)

    def _subscribe_to_replies(self, temp_queue: str) -> None:
        """
        Make sure replies to ``temp_queue`` reach this client, as RabbitMQ does.

        Unless the client subscribed to it itself, the session subscribes with
        ``auto`` acknowledgement and the temporary queue's name as subscription id,
        which is what the replies' ``subscription`` header will say.
        """
        if temp_queue in self.subscriptions:
            return
        for subscription in self.subscriptions.values():
            if subscription.destination == temp_queue:
                return
        self._add_subscription(
            TrackedSubscription(self, temp_queue, temp_queue, "auto", {}, next(self._numbers))
        )

    def _add_subscription(self, subscription: SessionSubscription) -> None:
        limit = self.config.max_subscriptions
        if limit and len(self.subscriptions) >= limit:
            raise LimitExceeded(
                "too many subscriptions",
                f"a connection may have at most {limit} subscriptions (max-subscriptions)",
            )
        self.broker.subscribe(subscription)
        self.subscriptions[subscription.subscription_id] = subscription
        self._numbered[str(subscription.number)] = subscription

    def _on_subscribe(self, frame: Frame) -> None:
        destination = self._required(frame, "destination")
        access = self.config.access
        if access is not None:
            access.check(self.identity, READ, destination)
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
        prefetch = 0
        for name in PREFETCH_HEADERS:
            value = frame.get(name)
            if value is not None:
                prefetch = _integer(name, value, minimum=0)
                break
        max_redeliveries = frame.get("max-redeliveries")
        durable = None
        if destination.startswith(TOPIC_PREFIX):
            durable = self._durable_name(frame, subscription_id)
        cls = SessionSubscription
        if ack_mode != "auto" or durable is not None or not destination.startswith(TOPIC_PREFIX):
            cls = TrackedSubscription
        self._add_subscription(
            cls(
                self,
                subscription_id,
                destination,
                ack_mode,
                frame.header_dict(),
                next(self._numbers),
                prefetch,
                None
                if max_redeliveries is None
                else _integer("max-redeliveries", max_redeliveries, minimum=-1),
                durable,
            )
        )
        self._receipt(frame)

    def _durable_name(self, frame: Frame, subscription_id: str) -> tuple[str, str] | None:
        """
        Read a SUBSCRIBE's or UNSUBSCRIBE's durable subscription name, if it has one.

        :returns: ``(client-id, name)``: ActiveMQ's and Artemis's name headers need
            the CONNECT ``client-id``; RabbitMQ's ``durable:true`` (or
            ``persistent:true``) names it by the subscription id, and the
            client-id is ``""`` when CONNECT gave none.
        :raises MissingHeader: for a name header on a connection without client-id.
        """
        for header in DURABLE_NAME_HEADERS:
            name = frame.get(header)
            if name:
                if self.client_id is None:
                    raise MissingHeader(
                        "missing client-id header",
                        f"a durable subscription named by {header} needs a client-id"
                        " header on CONNECT",
                    )
                return (self.client_id, name)
        if any(frame.get(header) == "true" for header in DURABLE_FLAG_HEADERS):
            return (self.client_id or "", subscription_id)
        return None

    def _on_unsubscribe(self, frame: Frame) -> None:
        subscription_id = frame.get("id")
        if subscription_id is None:
            if self.version != "1.0" or frame.get("destination") is None:
                self._required(frame, "id")
            subscription_id = self._by_destination(frame.get("destination", ""))
        # With a durable header, UNSUBSCRIBE also deletes the durable subscription,
        # which need not be active on this connection (ActiveMQ, RabbitMQ).
        durable = self._durable_name(frame, subscription_id)
        subscription = self.subscriptions.pop(subscription_id, None)
        if subscription is None:
            if durable is None:
                raise _unknown_subscription(subscription_id)
            self.broker.remove_durable(durable)
        else:
            del self._numbered[str(subscription.number)]
            self.broker.unsubscribe(subscription)
            if durable is not None:
                self.broker.remove_durable(subscription.durable or durable)
        self._receipt(frame)

    def _by_destination(self, destination: str) -> str:
        for subscription_id, subscription in self.subscriptions.items():
            if subscription.destination == destination:
                return subscription_id
        return destination

    def _on_ack(self, frame: Frame) -> None:
        subscription, message_id = self._acknowledged(frame)
        waiting = self.broker.ack(
            self, message_id, subscriber=subscription, transaction=frame.get("transaction")
        )
        self._receipt_when_stored(waiting, frame, pause=False)

    def _on_nack(self, frame: Frame) -> None:
        requeue = frame.get("requeue", "true")
        if requeue not in ("true", "false"):
            raise MalformedFrame(
                "invalid requeue header", f"requeue must be true or false, got {requeue!r}"
            )
        subscription, message_id = self._acknowledged(frame)
        waiting = self.broker.nack(
            self,
            message_id,
            subscriber=subscription,
            requeue=requeue == "true",
            transaction=frame.get("transaction"),
        )
        self._receipt_when_stored(waiting, frame, pause=False)

    def _acknowledged(self, frame: Frame) -> tuple[SessionSubscription | None, str]:
        """
        Find the message an ACK or NACK names, and the subscription it was delivered to.

        STOMP 1.2 names it by ``id``, the MESSAGE's ``ack`` header; 1.1 by
        ``message-id`` and ``subscription``; 1.0 by ``message-id`` alone.  An
        ``id`` that is not one of our ack ids is taken for a message-id (ActiveMQ's
        ack ids are message ids, and clients ported from it send those).

        :returns: the subscription, or ``None`` to look through all of this
            connection's, and the message id.
        :raises MissingHeader: if the frame names no message.
        :raises UnknownAck: for an ack id of a subscription this connection does not have.
        :raises UnknownSubscription: for a ``subscription`` this connection does not have.
        """
        ack_id = frame.get("id") if self.version == "1.2" else None
        if ack_id is not None:
            number, dot, acked = ack_id.partition(".")
            if dot and number.isdigit():
                subscription = self._numbered.get(number)
                if subscription is None:
                    raise UnknownAck(
                        "unknown message to acknowledge",
                        f"ack id {ack_id!r} belongs to no subscription of this connection",
                    )
                return subscription, acked
            return None, ack_id
        message_id = frame.get("message-id")
        if message_id is None:
            # Raises: 1.2 names the message by id, older versions by message-id.
            message_id = self._required(frame, "id" if self.version == "1.2" else "message-id")
        subscription_id = frame.get("subscription")
        if subscription_id is None:
            return None, message_id
        found = self.subscriptions.get(subscription_id)
        if found is None:
            raise _unknown_subscription(subscription_id)
        return found, message_id

    def _on_begin(self, frame: Frame) -> None:
        self.broker.begin(self, self._required(frame, "transaction"))
        self._receipt(frame)

    def _on_commit(self, frame: Frame) -> None:
        waiting = self.broker.commit(self, self._required(frame, "transaction"))
        self._receipt_when_stored(waiting, frame)

    def _on_abort(self, frame: Frame) -> None:
        self.broker.abort(self, self._required(frame, "transaction"))
        self._receipt(frame)

    def _on_disconnect(self, frame: Frame) -> None:
        if self._replies:
            # Receipts of earlier frames wait for the store: DISCONNECT is handled
            # again once they are out, so its own receipt still comes last.
            self._held = deque([frame])
            return
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
        "ACK": StompSession._on_ack,
        "NACK": StompSession._on_nack,
        "BEGIN": StompSession._on_begin,
        "COMMIT": StompSession._on_commit,
        "ABORT": StompSession._on_abort,
        "DISCONNECT": StompSession._on_disconnect,
    },
    State.CLOSING: {},
    State.CLOSED: {},
}
