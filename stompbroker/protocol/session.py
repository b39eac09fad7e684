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
- The session's other jobs are modules of their own, each a mixin of
  :class:`StompSession`: CONNECT, negotiation and login
  (:mod:`~stompbroker.protocol.negotiation`), a token login's expiry and
  renewal (:mod:`~stompbroker.protocol.credentials`), SEND and transactions
  (:mod:`~stompbroker.protocol.publishing`), the client's subscriptions and ack
  ids (:mod:`~stompbroker.protocol.subscriptions`), receipts and held frames
  (:mod:`~stompbroker.protocol.receipts`), pending store writes (``write_window``),
  slow consumers (``slow_consumer``), timers (``timers``), resumption
  (``resuming``), and the connection's opening and ending: admission, ERROR,
  close, DISCONNECT (``lifecycle``).  Mixins rather than objects of their own
  because SEND, ACK and delivery pass through several of them for every
  message, and must not pay for a call or an attribute hop between objects;
  each mixin's state is a slot of the session, which the mixin names in its
  ``SLOTS``, and each mixin declares what it uses of the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from zope.interface import implementer

from stompbroker.interfaces import ConnectionDescription, IConnection
from stompbroker.protocol.config import SLOW_CONSUMER_POLICIES, SessionConfig
from stompbroker.protocol.credentials import CredentialsMixin
from stompbroker.protocol.encoder import encode
from stompbroker.protocol.errors import (
    AuthorizationPending,
    ProtocolError,
    UnexpectedFrame,
    UnknownCommand,
)
from stompbroker.protocol.frames import CLIENT_COMMANDS, Frame
from stompbroker.protocol.lifecycle import LifecycleMixin
from stompbroker.protocol.negotiation import HandshakeMixin
from stompbroker.protocol.parser import FrameParser
from stompbroker.protocol.publishing import PublishingMixin
from stompbroker.protocol.receipts import ReceiptsMixin
from stompbroker.protocol.resuming import ResumeMixin
from stompbroker.protocol.slow_consumer import SlowConsumerMixin
from stompbroker.protocol.states import Event, State
from stompbroker.protocol.subscriptions import SubscriptionsMixin
from stompbroker.protocol.timers import TimersMixin
from stompbroker.protocol.write_window import WriteWindowMixin

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


class _Parser(FrameParser):
    """The frame parser, telling the session whether a frame has begun and not ended."""

    __slots__ = ()

    def in_frame(self) -> bool:
        """:returns: whether bytes of an incomplete frame are waiting for the rest."""
        return bool(self._buffer)


@implementer(IConnection)
class StompSession(
    HandshakeMixin,
    CredentialsMixin,
    PublishingMixin,
    SubscriptionsMixin,
    ReceiptsMixin,
    WriteWindowMixin,
    SlowConsumerMixin,
    TimersMixin,
    ResumeMixin,
    LifecycleMixin,
):
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
    # Every attribute a session has must be named here or in a part's SLOTS.
    __slots__ = (
        (
            "broker",
            "bytes_received",
            "bytes_sent",
            "config",
            "connected_at",
            "frames_received",
            "frames_sent",
            "messages_received",
            "messages_sent",
            "peer",
            "state",
            "_clock",
            "_handling",
            "_parser",
            "_read_pauses",
            "_transport",
        )
        + HandshakeMixin.SLOTS
        + CredentialsMixin.SLOTS
        + SubscriptionsMixin.SLOTS
        + ReceiptsMixin.SLOTS
        + WriteWindowMixin.SLOTS
        + SlowConsumerMixin.SLOTS
        + TimersMixin.SLOTS
        + ResumeMixin.SLOTS
        + LifecycleMixin.SLOTS
    )

    def __init__(
        self,
        broker: Any,
        transport: Any,
        clock: Any,
        config: SessionConfig = _DEFAULT_CONFIG,
        peer: str = "",
    ) -> None:
        self.broker = broker
        self.config = config
        self.peer = peer
        self.state = State.AWAITING_CONNECT
        #: For statistics: frames and bytes read, frames and bytes written (to
        #: the socket or the backlog; heart-beats aside), and when the
        #: connection was made.
        self.frames_received = 0
        self.bytes_received = 0
        self.frames_sent = 0
        self.bytes_sent = 0
        self.messages_received = 0
        self.messages_sent = 0
        self.connected_at: float = clock.seconds()
        self._transport = transport
        self._clock = clock
        self._parser = _Parser(
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
        self._init_lifecycle()
        self._init_handshake()
        self._init_credentials()
        self._init_subscriptions()
        self._init_receipts()
        self._init_write_window()
        self._init_slow_consumer(transport.write)
        self._init_timers(self.connected_at)
        self._init_resume()

    @property
    def transport(self) -> Any:
        """The :class:`~stompbroker.interfaces.ISessionTransport` beneath."""
        return self._transport

    def describe(self) -> ConnectionDescription:
        """:returns: this connection now, for statistics (:meth:`IConnection.describe`)."""
        identity = self.identity
        return ConnectionDescription(
            session=self.session_id,
            address=self.peer,
            user=None if identity is None or identity.anonymous else identity.name,
            version=self.version if self.session_id else None,
            transport=self._transport.kind(),
            frames_in=self.frames_received,
            frames_out=self.frames_sent,
            bytes_in=self.bytes_received,
            bytes_out=self.bytes_sent,
            messages_in=self.messages_received,
            messages_out=self.messages_sent,
            subscriptions=len(self.subscriptions),
            connected_since=self.connected_at,
        )

    def subscribers(self) -> tuple[Any, ...]:
        """:returns: this connection's subscriptions now (:meth:`IConnection.subscribers`)."""
        return tuple(self.subscriptions.values())

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
            self._fail_in_order(error)
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
                except AuthorizationPending as pending:
                    # The application decides this frame's right over HTTP.
                    self._await_answer(pending.answer, frames[position:])
                    return
                except ProtocolError as error:
                    if error.receipt_id is None:
                        error.receipt_id = frame.get("receipt")
                    self._fail_in_order(error)
                    return
                if self._held is not None:
                    self._hold(frames[position + 1 :])
                    return
                if self.state is not _CONNECTED:
                    return
        finally:
            self._handling = handling
        fault = self._parser.error
        if fault is not None:
            self._fail_in_order(fault)

    def keep_alive(self) -> None:
        """
        The client showed life without sending bytes (a WebSocket pong, say).

        It counts as heard from for the heart-beat check, exactly as data does.
        """
        self._last_received = self._clock.seconds()

    # -- reading -------------------------------------------------------------------

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
        self._restart_clocks()
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
    State.AUTHENTICATING: {},
    State.CLOSING: {},
    State.CLOSED: {},
}
