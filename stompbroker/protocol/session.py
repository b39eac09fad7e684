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
  name STOMP does not have is "unknown command".  :data:`TRANSITIONS` (in
  :mod:`~stompbroker.protocol.states`) says which
  :class:`~stompbroker.protocol.states.Event` moves the session from which state
  to which, and :meth:`~stompbroker.protocol.states.SessionState.move` is the
  only code that changes the state; an event the table does not allow is a bug
  (:class:`SessionStateError`), never the client's fault.
- Every client error is a :class:`~stompbroker.protocol.errors.ProtocolError`
  raised wherever it is found and caught here, at the edge: the client gets one
  ERROR frame (with ``receipt-id`` when the offending frame asked for a receipt),
  the connection closes once that frame is flushed, and further input is ignored.
  No other connection can notice.
- The session's other jobs are objects it holds, each given only what it uses
  (values, callables, the small interfaces of :mod:`~stompbroker.protocol.parts`),
  tested alone, and never writing another's state (``tests/test_layering.py``):
  ``receipts`` (:class:`~stompbroker.protocol.receipts.Receipts`, with the
  write window), ``timers``, ``output`` (the slow-consumer backlog),
  ``subscriptions`` (and ack ids), ``login`` (identity, expiry, renewal),
  ``resume``, and the state and reading they read.  Parts do not call each
  other through the session: the session sequences them, in its frame
  handlers (the methods :data:`HANDLERS` names) and in how it begins and ends
  (admitted by the broker, ended by an ERROR, a DISCONNECT, a shutdown or the
  loss of the connection).  What a handler reads of a frame is the pure
  functions of ``negotiation`` and ``send_reading`` and the parts' methods.
- How a session ends: one that ends itself (an ERROR, a DISCONNECT's RECEIPT)
  moves to CLOSING, lets go of what it holds, flushes its backlog and asks the
  transport to close; the transport's report that the connection is gone then
  moves it to CLOSED.  A connection lost while connected detaches a resumable
  session first, so that the client may take it up again
  (:mod:`~stompbroker.protocol.resume.part`).  Letting go is safe to repeat:
  both ways pass through it.
- SEND, ACK and delivery pass through several parts per message, a call or an
  attribute hop each where the mixins this replaced had none.  Measured with
  callgrind (instructions per message), composition costs under 1%, inside
  the spread between runs (about 0.6%): 143 120 against 142 400 with the
  mixins on ``benchmarks.queue_parts path --frames stompbench`` (same run,
  ``PYTHONHASHSEED=0``), and 147 850 against 149 700 per message fanned out
  to 10 (``benchmarks.fanout_cost``).  Subscriptions bind the output's write
  methods once, and ``_handle`` reads ``receipts`` once per batch of frames.
  Giving the parts what they use instead of the session costs a call per SEND
  (:func:`~stompbroker.protocol.send_reading.read_send`) and a hop to the
  state per frame: 143 890 against 142 880 on the queue path, 150 380
  against 149 340 per message fanned out to 10 (under 0.8%).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from zope.interface import implementer

from stompbroker.interfaces import ConnectionDescription, IBroker, IConnection, ISessionTransport
from stompbroker.protocol.config import SLOW_CONSUMER_POLICIES, WRITE, SessionConfig
from stompbroker.protocol.encoder import encode, encode_unnegotiated, error_frame
from stompbroker.protocol.errors import (
    AuthorizationPending,
    LoginFailed,
    MalformedFrame,
    ProtocolError,
    ShuttingDown,
    UnexpectedFrame,
    UnknownCommand,
    VersionMismatch,
)
from stompbroker.protocol.frames import CLIENT_COMMANDS, Frame
from stompbroker.protocol.login import CONTROL_PREFIX, Login
from stompbroker.protocol.negotiation import (
    BY_LOGIN,
    connected_frame,
    negotiate_heartbeat,
    negotiate_version,
)
from stompbroker.protocol.parser import FrameParser
from stompbroker.protocol.parts import Clock
from stompbroker.protocol.reading import ReadPauses
from stompbroker.protocol.receipts import Receipts
from stompbroker.protocol.resume.directory_lookup import Waiting
from stompbroker.protocol.resume.part import Resume
from stompbroker.protocol.send_reading import read_send
from stompbroker.protocol.slow_consumer import SlowConsumer
from stompbroker.protocol.states import (
    TRANSITIONS,
    Event,
    SessionState,
    SessionStateError,
    State,
)
from stompbroker.protocol.subscriptions import TEMP_QUEUE_PREFIX, Subscriptions
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
    "UNSUBSCRIBED_HEADER",
]

#: The header of the last MESSAGE of a subscription the application ended.
UNSUBSCRIBED_HEADER = "stompbroker-unsubscribed"

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
        "subscriptions",
        "timers",
        "version",
        "_clock",
        "_handling",
        "_life",
        "_on_closed",
        "_parser",
        "_reading",
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
        #: Where the session is in its life; its parts read it.
        self._life = SessionState()
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
        #: Why reading from the socket is paused, and when the client was last heard.
        self._reading = ReadPauses(transport, clock, self._may_read_again)
        life = self._life
        reading = self._reading
        fail = self._fail
        #: Where frames go: the transport, or the backlog of a slow consumer.
        self.output: SlowConsumer = SlowConsumer(
            self,
            self.subscribers,
            self.describe,
            broker,
            transport,
            clock,
            config,
            life,
            reading,
            fail,
        )
        #: RECEIPTs in order, frames held meanwhile, and the write window.
        self.receipts = Receipts(
            self.send_frame,
            fail,
            life,
            reading,
            WriteWindow(reading, config),
            config,
            self._handle_released,
        )
        #: Heart-beats, the connect and frame timeouts.
        self.timers = Timers(clock, config, reading, self.output.beat, fail, self._dead)
        #: Who the client is, and its staying logged in.
        self.login = Login(
            transport.credentials, clock, peer, config, life, fail, self.receipts.when_stored
        )
        #: The client's subscriptions and ack ids.
        self.subscriptions = Subscriptions(self, broker, self.output, self.login, config)
        #: Resumable sessions: CONNECT's token, detaching, taking up again.
        self.resume = Resume(
            config.resumption,
            life,
            self.subscriptions,
            self.login,
            self.output,
            fail,
            self._close,
            Waiting(self._start_waiting, self.login.wait_on, self._let_in),
        )
        #: The broker-unique id sent in CONNECTED; empty until then.
        self.session_id: str = ""
        #: The version negotiated; 1.2's rules until CONNECT says otherwise.
        self.version: str = "1.2"
        #: ``(send_ms, receive_ms)`` negotiated; none before CONNECT, nor for 1.0.
        self.heartbeat: tuple[int, int] = (0, 0)
        #: The CONNECT frame's ``client-id``, which scopes durable subscription names.
        self.client_id: str | None = None
        #: The error that ended the session, if one did; adapters log it.
        self.error: ProtocolError | None = None
        #: Whether the broker has admitted the connection and not yet let it go.
        self._registered = False
        #: Called with this session once its connection is gone (graceful stop).
        self._on_closed: Callable[[Any], None] | None = None

    @property
    def state(self) -> State:
        """Where the session is in its life (see :data:`TRANSITIONS`)."""
        return self._life.state

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
            info=None if identity is None else identity.info,
        )

    def subscribers(self) -> tuple[Any, ...]:
        """:returns: this connection's subscriptions now (:meth:`IConnection.subscribers`)."""
        return self.subscriptions.values()

    @property
    def identity(self) -> Any:
        """Who the client logged in as (see :class:`~stompbroker.protocol.login.Login`)."""
        return self.login.identity

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
        self.timers.start_connect_timer()

    def connection_lost(self) -> None:
        """
        The connection is gone, for whatever reason: let go of everything it
        held, or keep it for the client's return if it asked for that.
        """
        if self._life.state is _CONNECTED:
            self.resume.detach()
        self._life.move(Event.CONNECTION_LOST)
        self._release()
        self.output.forget()
        on_closed, self._on_closed = self._on_closed, None
        if on_closed is not None:
            on_closed(self)

    def shut_down(self, on_closed: Callable[[Any], None]) -> None:
        """
        The broker is stopping: tell the client with an ERROR, then close.

        :param on_closed: called with the session once the connection is gone,
            after what was written to it has been flushed.
        """
        self._on_closed = on_closed
        self.resume.leave()
        self.fail(
            ShuttingDown("broker shutting down", "the broker is stopping; connect again later")
        )

    def end_subscription(self, subscription_id: str, reason: str) -> bool:
        """:meth:`~stompbroker.interfaces.IConnection.end_subscription`."""
        subscription = self.subscriptions.by_id.get(subscription_id)
        if subscription is None or self._life.ending():
            return False
        self.subscriptions.unsubscribe(Frame("UNSUBSCRIBE", (("id", subscription_id),)))
        self.send_frame(
            Frame(
                "MESSAGE",
                (
                    ("subscription", subscription_id),
                    ("message-id", f"unsubscribed-{self.session_id}-{subscription_id}"),
                    ("destination", subscription.destination),
                    (UNSUBSCRIBED_HEADER, reason or "by the application"),
                ),
            )
        )
        self.output.flush()
        return True

    def fail(self, error: ProtocolError) -> None:
        """End the session with an ERROR for a fault the transport found itself."""
        if not self._life.ending():
            self._fail(error)

    def _fail(self, error: ProtocolError, event: Event = Event.ERROR) -> None:
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
        self._close(event)

    def _close(self, event: Event) -> None:
        """End the session: let go of everything, flush, and ask the transport to close."""
        self._life.move(event)
        self.receipts.drop_held()
        self._release()
        self.output.flush()
        self._transport.close()

    def _release(self) -> None:
        """Drop subscriptions, timers and the broker's record of us; safe to repeat."""
        self.timers.stop()
        self.output.stop()
        self.login.stop()
        self.resume.end()
        self.subscriptions.drop_all()
        if self._registered:
            self._registered = False
            self.broker.close_connection(self)

    def _dead(self, error: ProtocolError) -> None:
        """The client is silent past its heart-beats: the network is gone, not its wish."""
        # A resumable session waits for the client.
        self.resume.detach()
        self._fail(error)

    def receive_data(self, data: bytes) -> None:
        """
        Handle bytes from the client.

        :param data: any chunk of the byte stream.
        """
        state = self._life.state
        if state is _CLOSING or state is _CLOSED:
            return
        self._reading.heard(self._clock.seconds())
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
        life = self._life
        state = life.state
        handlers = HANDLERS[state]
        receipts = self.receipts
        try:
            for position, frame in enumerate(frames):
                if life.state is not state:
                    state = life.state
                    handlers = HANDLERS[state]
                handler = handlers.get(frame.command)
                try:
                    if handler is None:
                        self._reject(frame)
                    handler(self, frame)  # type: ignore[misc]
                except AuthorizationPending as pending:
                    # The application decides this frame's right over HTTP.
                    receipts.await_answer(frames[position:])
                    answer: Any = pending.answer
                    answer.addCallback(self._authorization_answered)
                    return
                except ProtocolError as error:
                    if error.receipt_id is None:
                        error.receipt_id = frame.get("receipt")
                    receipts.fail_in_order(error)
                    return
                if receipts.held is not None:
                    receipts.hold(frames[position + 1 :])
                    return
                if life.state is not _CONNECTED:
                    return
        finally:
            self._handling = handling
        fault = self._parser.error
        if fault is not None:
            self.receipts.fail_in_order(fault)

    def _handle_released(self, frames: list[Frame]) -> None:
        """
        The replies that held frames are out: handle them, unless this runs
        inside the handler that asked (it was stored at once), whose loop goes
        on by itself.
        """
        if frames or not self._handling:
            self._handle(frames)

    def _authorization_answered(self, result: Any) -> None:
        """The application answered an access check: handle what was held, if nothing else will."""
        if self._handling or self._life.state is not _CONNECTED:
            # To be taken by whoever runs now.
            return
        frames = self.receipts.take_answered()
        if frames is not None:
            self._handle(frames)

    def keep_alive(self) -> None:
        """
        The client showed life without sending bytes (a WebSocket pong, say).

        It counts as heard from for the heart-beat check, exactly as data does.
        """
        self._reading.heard(self._clock.seconds())

    # -- reading -------------------------------------------------------------------

    def pause_reading(self, reason: str = _BY_BROKER) -> None:
        """
        The broker asks: read no more from this client (memory, or a slow subscriber).

        :param reason: why; reading resumes once every reason is gone (a rate limit
            pauses for ``rate`` while memory may pause for the broker).
        """
        self._reading.pause(reason)

    def resume_reading(self, reason: str = _BY_BROKER) -> None:
        """The broker asks: read from this client again, as far as ``reason`` goes."""
        self._reading.resume(reason)

    def _may_read_again(self) -> bool:
        """:returns: whether reading resumes once no reason is left (not while ending)."""
        if self._life.ending():
            return False
        # A frame begun waited on the session, not on the client.
        self.timers.restart_frame_clock(self._clock.seconds())
        return True

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
        if self._life.state is State.AWAITING_CONNECT:
            raise UnexpectedFrame(
                "expected CONNECT",
                f"the first frame must be CONNECT or STOMP, got {command}",
            )
        raise UnexpectedFrame("already connected", f"{command} received on a connected session")

    # -- CONNECT ---------------------------------------------------------------------

    def _on_connect(self, frame: Frame) -> None:
        """CONNECT (or STOMP): the version, the heart-beats, then the login."""
        config = self.config
        version = negotiate_version(frame.get("accept-version"), config.versions)
        self.version = version
        self._parser.use(version)
        if version != "1.0":
            self.heartbeat = negotiate_heartbeat(
                frame.get("heart-beat"), config.heartbeat, config.heartbeat_min
            )
        self.client_id = frame.get("client-id")
        self.subscriptions.negotiated(version, self.client_id)
        hosted = self.broker.select_host(self, frame.get("host"))
        vhost = "/"
        if hosted is not None:
            vhost = hosted.vhost
            # A virtual host: its view of the broker, and its access rules.
            self.broker = hosted
            self.config = config = hosted.session_config(config)
            self.subscriptions.use(hosted, config)
        if config.resumption is not None:
            self.resume.read(frame, version)
        authenticator = config.authenticator
        if authenticator is None:
            if not self.resume.wait_for_resumed():
                self._open()
            return
        self._life.move(Event.LOGIN_STARTED)
        # Frames that came with the CONNECT wait for the answer.
        self.receipts.start_holding()
        login = self.login.authenticate(authenticator, frame, vhost)
        login.addCallbacks(self._logged_in, self._login_refused, errbackArgs=(frame,))
        if self._life.state is State.AUTHENTICATING:
            # No answer yet (a password is being checked): keep the wait, to
            # cancel it if the client goes, and read nothing more meanwhile.
            self.login.wait_on(login)
            self._reading.pause(BY_LOGIN)

    def _logged_in(self, identity: Any) -> None:
        """The authenticator let the client in: answer CONNECTED, then handle what waited."""
        self.login.wait_on(None)
        if self._life.state is not State.AUTHENTICATING:
            return
        self.login.accept(identity)
        if not self.resume.wait_for_resumed():
            self._let_in()

    def _login_refused(self, failure: Any, frame: Frame) -> None:
        """
        The authenticator refused the client (after its delay), or the wait was cancelled.

        The client gets "login failed" and nothing more (the authenticator has
        logged why), then the connection closes.
        """
        self.login.wait_on(None)
        if self._life.state is not State.AUTHENTICATING:
            return
        error = failure.value
        if not isinstance(error, LoginFailed):
            error = LoginFailed()
        if error.receipt_id is None:
            error.receipt_id = frame.get("receipt")
        self._fail(error, Event.LOGIN_REFUSED)

    def _start_waiting(self) -> None:
        """CONNECT waits for the cluster's answer: hold what follows, read nothing more."""
        self._life.move(Event.LOGIN_STARTED)
        self.receipts.start_holding()
        self._reading.pause(BY_LOGIN)

    def _let_in(self) -> None:
        """The client is in (its token looked up in the cluster): CONNECTED, then what waited."""
        held = self.receipts.take_held()
        self._reading.resume(BY_LOGIN)
        self._open()
        # A resumed session that cannot be made again has failed in _open.
        if not self._handling and self.error is None:
            self._handle(held)

    def _open(self) -> None:
        """Answer a CONNECT whose client is let in: CONNECTED, heart-beats, no more timeout."""
        self.session_id = self.broker.new_session_id()
        self.timers.stop_connect_timer()
        self._life.move(Event.LOGIN_ACCEPTED)
        extra, resumed = self.resume.headers(self.session_id)
        self.subscriptions.keep_recent(self.resume.recent_writer())
        self.send_frame(
            connected_frame(
                self.version, self.session_id, self.config.server_name, self.heartbeat, extra
            )
        )
        self.timers.start_heartbeats(self.heartbeat)
        if resumed is not None:
            self.resume.resume(resumed)

    # -- SEND and transactions ---------------------------------------------------------

    def _on_send(self, frame: Frame) -> None:
        destination, headers, transaction, receipt, reply_to, lines = read_send(frame)
        if destination.startswith(CONTROL_PREFIX):
            self.login.on_control(frame, destination)
            return
        access = self.config.access
        if access is not None:
            identity = self.login.identity
            if "," in destination:
                # A composite destination: the right is needed on every part.
                for part in destination.split(","):
                    access.check(identity, WRITE, part.strip(" \t"))
            else:
                access.check(identity, WRITE, destination)
        if reply_to is not None and reply_to.startswith(TEMP_QUEUE_PREFIX):
            self.subscriptions.subscribe_to_replies(reply_to)
        self.messages_received += 1
        waiting = self.broker.send(
            destination, headers, frame.body, connection=self, transaction=transaction, lines=lines
        )
        if waiting is not None:
            self.receipts.when_stored(waiting, frame, len(frame.body))
        elif receipt is not None:
            self.receipts.send_receipt(receipt)

    def _on_begin(self, frame: Frame) -> None:
        # A transaction starts, and is committed, once what came before is stored.
        if self.receipts.after_replies(frame):
            return
        self.broker.begin(self, frame.required("transaction"))
        self.receipts.receipt(frame)

    def _on_commit(self, frame: Frame) -> None:
        if self.receipts.after_replies(frame):
            return
        waiting = self.broker.commit(self, frame.required("transaction"))
        self.receipts.when_stored(waiting, frame)

    def _on_abort(self, frame: Frame) -> None:
        self.broker.abort(self, frame.required("transaction"))
        self.receipts.receipt(frame)

    # -- subscriptions -------------------------------------------------------------------

    def _on_subscribe(self, frame: Frame) -> None:
        """SUBSCRIBE: a subscription given to the broker, live once its RECEIPT is out."""
        subscriptions = self.subscriptions
        subscription = subscriptions.new(frame)
        receipt = frame.get("receipt")
        if receipt is None:
            subscriptions.add(subscription)
            return
        # Clients treat a subscription as live once its RECEIPT is in, and some
        # read frames in that order: what it is sent before then (messages
        # waiting in its queue) waits for the RECEIPT.
        release = subscription.hold_writes()
        subscriptions.add(subscription)
        self.receipts.send_receipt(receipt, release)

    def _on_unsubscribe(self, frame: Frame) -> None:
        self.subscriptions.unsubscribe(frame)
        self.receipts.receipt(frame)

    def _on_ack(self, frame: Frame) -> None:
        subscription, message_id, transaction, receipt = self.subscriptions.ack_names(frame)
        waiting = self.broker.ack(
            self, message_id, subscriber=subscription, transaction=transaction
        )
        if waiting is None:
            # Nothing to store, the common case: answer at once (as
            # Receipts.when_stored would, in two calls and a third scan).
            if receipt is not None:
                self.receipts.send_receipt(receipt)
            return
        self.receipts.when_stored(waiting, frame)

    def _on_nack(self, frame: Frame) -> None:
        requeue = frame.get("requeue", "true")
        if requeue not in ("true", "false"):
            raise MalformedFrame(
                "invalid requeue header", f"requeue must be true or false, got {requeue!r}"
            )
        subscription, message_id = self.subscriptions.acknowledged(frame)
        waiting = self.broker.nack(
            self,
            message_id,
            subscriber=subscription,
            requeue=requeue == "true",
            transaction=frame.get("transaction"),
        )
        self.receipts.when_stored(waiting, frame)

    # -- DISCONNECT ---------------------------------------------------------------------

    def _on_disconnect(self, frame: Frame) -> None:
        """
        STOMP 1.2, "DISCONNECT": once every earlier receipt is out, its own goes
        out, then the connection closes once the transport has flushed it.
        """
        if not self.receipts.after_replies(frame):
            self.receipts.receipt(frame)
            self._close(Event.DISCONNECT)


#: Which commands each state accepts, and the method that handles each: each
#: sequences the parts a frame concerns, which read it with narrow arguments.
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
