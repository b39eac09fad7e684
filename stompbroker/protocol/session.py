"""
One client connection's STOMP conversation, sans I/O: the session's state machine.

A :class:`StompSession` is fed the bytes a client sent (:meth:`StompSession.receive_data`)
and writes what the client must get through an injected transport
(:class:`~stompbroker.interfaces.ISessionTransport`).  It asks the broker for
everything else through :class:`~stompbroker.interfaces.IBroker`, and the broker
delivers back to the per-subscription objects it creates.  Time comes from an
injected clock (``seconds`` and ``callLater``), so this module imports nothing
from Twisted.

Theory of operation:

- Two tables are the state machine.  :data:`HANDLERS` says which commands each
  :class:`~stompbroker.protocol.states.State` accepts, and which method handles
  each; a command not in it for the current state is an error: before CONNECT it
  is "expected CONNECT", after it a second CONNECT is "already connected", and a
  name STOMP does not have is "unknown command".  :data:`TRANSITIONS` says which
  :class:`~stompbroker.protocol.states.Event` moves the session from which state
  to which, and :meth:`StompSession._transition` is the only code that changes
  the state; an event the table does not allow is a bug
  (:class:`SessionStateError`), never the client's fault.
- Every client error is a :class:`~stompbroker.protocol.errors.ProtocolError`
  raised wherever it is found and caught here, at the edge: the client gets one
  ERROR frame (with ``receipt-id`` when the offending frame asked for a receipt),
  the connection closes once that frame is flushed, and further input is ignored.
  No other connection can notice.
- The session's other jobs are objects it holds, each built from a
  ``typing.Protocol`` of what it needs of the session, tested alone, and never
  writing another's state (``tests/test_layering.py``): ``receipts``
  (:class:`~stompbroker.protocol.receipts.Receipts`, with the write window),
  ``timers``, ``output`` (the slow-consumer backlog), ``subscriptions`` (and
  ack ids), ``login`` (identity, expiry, renewal) and ``resume``.  The frame
  handlers are functions of the session in the modules of their jobs
  (``negotiation``, ``publishing``, ``subscriptions``, ``lifecycle``).
- SEND, ACK and delivery pass through several parts per message, a call or an
  attribute hop each where the mixins this replaced had none.  Measured with
  callgrind (instructions per message), composition costs under 1%, inside
  the spread between runs (about 0.6%): 143 120 against 142 400 with the
  mixins on ``benchmarks.queue_parts path --frames stompbench`` (same run,
  ``PYTHONHASHSEED=0``), and 147 850 against 149 700 per message fanned out
  to 10 (``benchmarks.fanout_cost``).  Subscriptions bind the output's write
  methods once, and ``_handle`` reads ``receipts`` once per batch of frames.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from zope.interface import implementer

from stompbroker.interfaces import ConnectionDescription, IBroker, IConnection, ISessionTransport
from stompbroker.protocol import lifecycle
from stompbroker.protocol.config import SLOW_CONSUMER_POLICIES, SessionConfig
from stompbroker.protocol.encoder import encode, encode_unnegotiated
from stompbroker.protocol.errors import (
    AuthorizationPending,
    ProtocolError,
    UnexpectedFrame,
    UnknownCommand,
)
from stompbroker.protocol.frames import CLIENT_COMMANDS, Frame
from stompbroker.protocol.login import Login
from stompbroker.protocol.negotiation import let_in, on_connect
from stompbroker.protocol.parser import FrameParser
from stompbroker.protocol.parts import Clock
from stompbroker.protocol.publishing import on_abort, on_begin, on_commit, on_send
from stompbroker.protocol.receipts import Receipts
from stompbroker.protocol.resume.part import Resume
from stompbroker.protocol.slow_consumer import SlowConsumer
from stompbroker.protocol.states import Event, State
from stompbroker.protocol.subscriptions import (
    Subscriptions,
    on_ack,
    on_nack,
    on_subscribe,
    on_unsubscribe,
)
from stompbroker.protocol.timers import Timers
from stompbroker.protocol.write_window import WriteWindow

__all__ = [
    "HANDLERS",
    "SLOW_CONSUMER_POLICIES",
    "TRANSITIONS",
    "Event",
    "SessionConfig",
    "SessionStateError",
    "State",
    "StompSession",
]

#: The settings of a session made without any.
_DEFAULT_CONFIG = SessionConfig()

#: Why a session has stopped reading from its socket: the broker asked.  (Each
#: part of the session names its own reasons, such as ``receipts.BY_HELD``.)
_BY_BROKER = "broker"

# On Python 3.11 reading an Enum member off its class (``State.CONNECTED``) is
# a Python-level descriptor call (about 1 900 instructions, against 1 000 for a
# module constant): the per-frame checks read these.
_CONNECTED = State.CONNECTED
_CLOSING = State.CLOSING
_CLOSED = State.CLOSED

#: Which event moves a session from which state to which: the only place its
#: state changes (h11's ``EVENT_TRIGGERED_TRANSITIONS``).
TRANSITIONS: dict[State, dict[Event, State]] = {
    State.AWAITING_CONNECT: {
        Event.LOGIN_STARTED: State.AUTHENTICATING,
        # Without an authenticator, CONNECT lets the client in at once.
        Event.LOGIN_ACCEPTED: State.CONNECTED,
        Event.ERROR: State.CLOSING,
        Event.CONNECTION_LOST: State.CLOSED,
    },
    State.AUTHENTICATING: {
        Event.LOGIN_ACCEPTED: State.CONNECTED,
        Event.LOGIN_REFUSED: State.CLOSING,
        Event.ERROR: State.CLOSING,
        Event.CONNECTION_LOST: State.CLOSED,
    },
    State.CONNECTED: {
        Event.ERROR: State.CLOSING,
        # Only a connected session has credentials that expire or are renewed.
        Event.CREDENTIALS_EXPIRED: State.CLOSING,
        Event.CREDENTIALS_REFUSED: State.CLOSING,
        Event.DISCONNECT: State.CLOSING,
        Event.CONNECTION_LOST: State.CLOSED,
    },
    State.CLOSING: {Event.CONNECTION_LOST: State.CLOSED},
    # A transport may report the loss twice; nothing else happens to a closed session.
    State.CLOSED: {Event.CONNECTION_LOST: State.CLOSED},
}


class SessionStateError(RuntimeError):
    """An event the session's state does not allow: a bug in the broker, not the client's fault."""


@implementer(IConnection)
class StompSession:
    """
    The server side of one STOMP connection.

    :param broker: an :class:`~stompbroker.interfaces.IBroker`.
    :param transport: an :class:`~stompbroker.interfaces.ISessionTransport`.
    :param clock: a :class:`~stompbroker.protocol.parts.Clock` (the reactor, or ``task.Clock``).
    :param config: the listener's :class:`SessionConfig`.
    :param peer: the client's address, for logs and statistics.
    """

    # One session per connection: slots keep an idle one small (about 1.3 kB
    # less than with a dict) and attribute access on the delivery path fast.
    # Every attribute a session has must be named here.
    __slots__ = (
        "broker",
        "client_id",
        "bytes_received",
        "config",
        "connected_at",
        "error",
        "frames_received",
        "heartbeat",
        "login",
        "messages_received",
        "output",
        "peer",
        "receipts",
        "resume",
        "session_id",
        "state",
        "subscriptions",
        "timers",
        "version",
        "_clock",
        "_handling",
        "_on_closed",
        "_last_received",
        "_parser",
        "_read_pauses",
        "_registered",
        "_transport",
    )

    def __init__(
        self,
        broker: IBroker,
        transport: ISessionTransport,
        clock: Clock,
        config: SessionConfig = _DEFAULT_CONFIG,
        peer: str = "",
    ) -> None:
        self.broker = broker
        self.config = config
        self.peer = peer
        self.state = State.AWAITING_CONNECT
        #: For statistics: frames, bytes and SENDs read (what was written is
        #: counted by ``output``), and when the connection was made.
        self.frames_received = 0
        self.bytes_received = 0
        self.messages_received = 0
        self.connected_at: float = clock.seconds()
        self._transport = transport
        self._clock = clock
        self._parser = FrameParser(
            max_frame_size=config.max_frame_size,
            max_headers=config.max_headers,
            max_header_length=config.max_header_length,
        )
        #: Whether frames are being handled now (a store write that is done
        #: at once must not start handling held frames from inside a handler).
        self._handling = False
        #: Why reading from the socket is paused; empty while it is not.  A
        #: frozenset, replaced on change, so that idle sessions share the empty one.
        self._read_pauses: frozenset[str] = frozenset()
        #: RECEIPTs in order, frames held meanwhile, and the write window.
        self.receipts = Receipts(self, WriteWindow(self, config))
        #: Heart-beats, the connect and frame timeouts.
        self.timers = Timers(self, clock, config)
        #: Where frames go: the transport, or the backlog of a slow consumer.
        self.output: SlowConsumer = SlowConsumer(self, broker, transport, clock, config)
        #: The client's subscriptions and ack ids.
        self.subscriptions = Subscriptions(self, broker)
        #: Resumable sessions: CONNECT's token, detaching, taking up again.
        self.resume = Resume(self)
        #: Who the client is, and its staying logged in.
        self.login = Login(self, transport, clock)
        #: The broker-unique id sent in CONNECTED; empty until then.
        self.session_id: str = ""
        #: The version negotiated; 1.2's rules until CONNECT says otherwise.
        self.version: str = "1.2"
        #: ``(send_ms, receive_ms)`` negotiated; none before CONNECT, nor for 1.0.
        self.heartbeat: tuple[int, int] = (0, 0)
        #: The CONNECT frame's ``client-id``, which scopes durable subscription names.
        self.client_id: str | None = None
        #: When the client was last heard from (read by the heart-beat check).
        self._last_received = self.connected_at
        #: The error that ended the session, if one did; adapters log it.
        self.error: ProtocolError | None = None
        #: Whether the broker has admitted the connection and not yet let it go.
        self._registered = False
        #: Called with this session once its connection is gone (graceful stop).
        self._on_closed: Callable[[Any], None] | None = None

    @property
    def transport(self) -> ISessionTransport:
        """The :class:`~stompbroker.interfaces.ISessionTransport` beneath."""
        return self._transport

    def describe(self) -> ConnectionDescription:
        """:returns: this connection now, for statistics (:meth:`IConnection.describe`)."""
        identity = self.identity
        output = self.output
        return ConnectionDescription(
            session=self.session_id,
            address=self.peer,
            user=None if identity is None or identity.anonymous else identity.name,
            version=self.version if self.session_id else None,
            transport=self._transport.kind(),
            frames_in=self.frames_received,
            frames_out=output.frames_sent,
            bytes_in=self.bytes_received,
            bytes_out=output.bytes_sent,
            messages_in=self.messages_received,
            messages_out=output.messages_sent,
            subscriptions=len(self.subscriptions),
            connected_since=self.connected_at,
        )

    def subscribers(self) -> tuple[Any, ...]:
        """:returns: this connection's subscriptions now (:meth:`IConnection.subscribers`)."""
        return self.subscriptions.values()

    # -- what the parts ask of the session ----------------------------------------

    @property
    def identity(self) -> Any:
        """Who the client logged in as (see :class:`~stompbroker.protocol.login.Login`)."""
        return self.login.identity

    def _let_in(self) -> None:
        """The client is in: CONNECTED, then the frames that waited."""
        let_in(self)

    def _transition(self, event: Event) -> None:
        """
        Move to the state :data:`TRANSITIONS` gives for ``event``.

        :raises SessionStateError: if the table has none from the current state.
        """
        try:
            self.state = TRANSITIONS[self.state][event]
        except KeyError:
            raise SessionStateError(
                f"{event.name} cannot happen to a session in state {self.state.name}"
            ) from None

    # -- the transport's side ------------------------------------------------

    def connection_made(self) -> None:
        """The connection is open: ask the broker to admit it (or fail, if full)."""
        lifecycle.admit(self)

    def connection_lost(self) -> None:
        """The connection is gone: let go of everything, or keep it for a resume."""
        lifecycle.lose(self)

    def shut_down(self, on_closed: Callable[[Any], None]) -> None:
        """The broker is stopping: an ERROR, then close; ``on_closed(self)`` once gone."""
        lifecycle.shut_down(self, on_closed)

    def fail(self, error: ProtocolError) -> None:
        """End the session with an ERROR for a fault the transport found itself."""
        if self.state is not _CLOSING and self.state is not _CLOSED:
            lifecycle.fail(self, error)

    def _fail(self, error: ProtocolError, event: Event = Event.ERROR) -> None:
        """Send an ERROR, then close (the one way every part ends the session)."""
        lifecycle.fail(self, error, event)

    def _close(self, event: Event) -> None:
        lifecycle.close(self, event)

    def receive_data(self, data: bytes) -> None:
        """
        Handle bytes from the client.

        :param data: any chunk of the byte stream.
        """
        state = self.state
        if state is _CLOSING or state is _CLOSED:
            return
        self._last_received = self._clock.seconds()
        self.bytes_received += len(data)
        try:
            frames = self._parser.receive_data(data)
        except ProtocolError as error:
            self.receipts.fail_in_order(error)
            return
        timers = self.timers
        if self._parser.in_frame():
            if timers.frame_started is None:
                timers.start_frame_clock()
        elif timers.frame_started is not None:
            timers.frame_ended()
        self.frames_received += len(frames)
        if self.receipts.held is not None:
            self.receipts.hold(frames)
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
        receipts = self.receipts
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
                except AuthorizationPending as pending:
                    # The application decides this frame's right over HTTP.
                    receipts.await_answer(pending.answer, frames[position:])
                    return
                except ProtocolError as error:
                    if error.receipt_id is None:
                        error.receipt_id = frame.get("receipt")
                    receipts.fail_in_order(error)
                    return
                if receipts.held is not None:
                    receipts.hold(frames[position + 1 :])
                    return
                if self.state is not _CONNECTED:
                    return
        finally:
            self._handling = handling
        fault = self._parser.error
        if fault is not None:
            self.receipts.fail_in_order(fault)

    def keep_alive(self) -> None:
        """
        The client showed life without sending bytes (a WebSocket pong, say).

        It counts as heard from for the heart-beat check, exactly as data does.
        """
        self._last_received = self._clock.seconds()

    # -- reading -------------------------------------------------------------------

    def pause_reading(self, reason: str = _BY_BROKER) -> None:
        """
        The broker asks: read no more from this client (memory, or a slow subscriber).

        :param reason: why; reading resumes once every reason is gone (a rate limit
            pauses for ``rate`` while memory may pause for the broker).
        """
        self._pause_reading(reason)

    def resume_reading(self, reason: str = _BY_BROKER) -> None:
        """The broker asks: read from this client again, as far as ``reason`` goes."""
        self._resume_reading(reason)

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
        # Silence while the session did not read is not the client's.
        now = self._clock.seconds()
        self._last_received = now
        self.timers.restart_frame_clock(now)
        self._transport.resume_reading()

    # -- output ----------------------------------------------------------------

    def pause_writing(self) -> None:
        """The transport's buffer is full (see :meth:`SlowConsumer.pause_writing`)."""
        self.output.pause_writing()

    def resume_writing(self) -> None:
        """The transport has flushed its buffer (see :meth:`SlowConsumer.resume_writing`)."""
        self.output.resume_writing()

    def send_frame(self, frame: Frame) -> None:
        """
        Encode and send one frame in the negotiated version; before CONNECTED
        (an ERROR), unescaped, as the client does not know the version yet.

        :param frame: a server frame.
        """
        if self.session_id:
            self.output.write(encode(frame, self.version))
        else:
            self.output.write(encode_unnegotiated(frame))

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


#: Which commands each state accepts, and the method that handles each.
HANDLERS: dict[State, dict[str, Callable[[StompSession, Frame], None]]] = {
    State.AWAITING_CONNECT: {
        "CONNECT": on_connect,
        "STOMP": on_connect,
    },
    State.CONNECTED: {
        "SEND": on_send,
        "SUBSCRIBE": on_subscribe,
        "UNSUBSCRIBE": on_unsubscribe,
        "ACK": on_ack,
        "NACK": on_nack,
        "BEGIN": on_begin,
        "COMMIT": on_commit,
        "ABORT": on_abort,
        "DISCONNECT": lifecycle.on_disconnect,
    },
    State.AUTHENTICATING: {},
    State.CLOSING: {},
    State.CLOSED: {},
}
