"""
RECEIPT frames, in order, and the frames a session holds while it waits for the
broker's store.

Theory of operation: a SEND (or COMMIT) whose message the broker must store
first, and an ACK or NACK that settles stored messages, get back something to
wait on (a Deferred, though this module never names Twisted).  Its RECEIPT
waits for it, and so does every RECEIPT after it, so that receipts keep the
order of the frames they answer: each waits as a :class:`_Reply` in the
session's queue of replies until those before it are out.  The session goes
on handling the client's next frames meanwhile, within the write window of
:mod:`stompbroker.protocol.write_window`.

An ERROR keeps that order too: one for a frame handled while earlier receipts
wait (:meth:`Receipts.fail_in_order`), and one for a store write that
failed, goes out once every RECEIPT before it is out; from the moment it is
known the session handles and reads nothing more, and the connection closes
after it.  Later frames already handled get no RECEIPT.

Some frames are handled only once every reply before them is out: BEGIN,
COMMIT and DISCONNECT (:meth:`Receipts.after_replies`), and a token
renewal without receipt; and a frame whose right the application is still
deciding over HTTP (``AuthorizationPending``), handled again once it has.
Frames that arrive meanwhile are held; past
``max_held_bytes`` of them, the session stops reading.  The same hold keeps
the frames that came with a CONNECT while the authenticator decides.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from attrs import define

from stompbroker.protocol.config import SessionConfig
from stompbroker.protocol.errors import ProtocolError
from stompbroker.protocol.frames import Frame
from stompbroker.protocol.parts import Failing, Reading, StateView
from stompbroker.protocol.states import State
from stompbroker.protocol.write_window import WriteWindow

#: Why a session has stopped reading: it holds ``max_held_bytes`` of frames it
#: cannot handle yet.
BY_HELD = "held"

#: ... or an ERROR waits behind earlier receipts, and the session is ending.
BY_ERROR = "error"

_CONNECTED = State.CONNECTED


@define(slots=True)
class _Reply:
    """
    A RECEIPT in the session's queue of replies, which go out in order.

    :ivar receipt: the receipt id, or ``None`` for a frame that asked for none.
    :ivar done: whether what it waits for (storing a persistent message) is done.
    :ivar then: called once the RECEIPT is out (a subscription's first messages).
    :ivar size: the bytes it counts in the write window.
    :ivar fault: the ERROR that goes out in its place, ending the session.
    """

    receipt: str | None
    done: bool = False
    then: Callable[[], None] | None = None
    size: int = 0
    fault: ProtocolError | None = None


class Receipts:
    """
    The session's receipts and held frames, and its window of pending store
    writes (:class:`~stompbroker.protocol.write_window.WriteWindow`).

    :param send_frame: writes a RECEIPT to the client.
    :param fail: ends the session with an ERROR.
    :param life: the session's state, read: replies go out only while connected.
    :param reading: the session's reading, paused while too much is held or an
        ERROR waits its turn.
    :param window: the session's write window.
    :param config: the listener's settings (``max_held_bytes``).
    :param released: given the frames held, once the replies they waited for
        are out, for the session to handle.

    A SEND's RECEIPT passes here: one call from the session (what that costs
    per message, measured, is in :mod:`~stompbroker.protocol.session`).
    """

    __slots__ = (
        "held",
        "window",
        "_config",
        "_fail",
        "_held_bytes",
        "_life",
        "_reading",
        "_released",
        "_replies",
        "_send_frame",
    )

    def __init__(
        self,
        send_frame: Callable[[Frame], None],
        fail: Failing,
        life: StateView,
        reading: Reading,
        window: WriteWindow,
        config: SessionConfig,
        released: Callable[[list[Frame]], None],
    ) -> None:
        self._send_frame = send_frame
        self._fail = fail
        self._life = life
        self._reading = reading
        self._config = config
        self._released = released
        self.window = window
        #: Replies waiting, in order, for a persistent message to be stored.
        #: Made by the first reply that waits (a deque is about 700 bytes, and
        #: most sessions never wait for the store).
        self._replies: deque[_Reply] | None = None
        #: Frames received but not handled while the session waits for the
        #: store (or a login); ``None`` when it is not waiting.
        self.held: deque[Frame] | None = None
        self._held_bytes = 0

    def receipt(self, frame: Frame) -> None:
        """Answer a frame whose effect is done, if it asked for a receipt."""
        receipt = frame.get("receipt")
        if receipt is not None:
            self.send_receipt(receipt)

    def send_receipt(self, receipt: str, then: Callable[[], None] | None = None) -> None:
        """
        :param then: called right after the RECEIPT is written, which may be later
            when an earlier RECEIPT waits for the store.
        """
        replies = self._replies
        if replies:
            # An earlier RECEIPT waits for the store: this one goes out after it.
            replies.append(_Reply(receipt, done=True, then=then))
            return
        self._send_frame(Frame("RECEIPT", (("receipt-id", receipt),)))
        if then is not None:
            then()

    def when_stored(self, waiting: Any, frame: Frame, size: int = 0, hold: bool = False) -> None:
        """
        Answer a frame whose effect the broker is writing to its store.

        :param waiting: what the broker returned: ``None`` if it writes nothing,
            otherwise a Deferred that fires once the writes are durable.
        :param size: the bytes it counts in the write window (a SEND's body).
        :param hold: without a receipt, handle no further frame until then (a
            token renewal: later frames are judged with the new rights).
        """
        if waiting is None:
            self.receipt(frame)
            return
        reply = _Reply(frame.get("receipt"), size=size)
        self._waiting().append(reply)
        self.window.started(size)
        if hold and reply.receipt is None and self.held is None:
            self.start_holding()
        waiting.addCallbacks(
            self._stored, self._not_stored, callbackArgs=(reply,), errbackArgs=(reply, frame)
        )

    def _waiting(self) -> deque[_Reply]:
        """:returns: the queue of replies, made the first time one waits."""
        replies = self._replies
        if replies is None:
            replies = self._replies = deque()
        return replies

    def after_replies(self, frame: Frame) -> bool:
        """
        Hold a frame that must be handled only once every earlier reply is out
        (every earlier store write done): it is handled again then.

        :returns: whether it was held.
        """
        if not self._replies:
            return False
        self.start_holding((frame,))
        return True

    def await_answer(self, frames: list[Frame]) -> None:
        """
        An access check waits for the application's answer (``--auth http:URL``):
        hold the frame that asked and those after it, to be handled again once
        it comes (:meth:`take_answered`), when the check finds the answer remembered.
        """
        if self.held is None:
            self.start_holding()
        self.hold(frames)

    def take_answered(self) -> list[Frame] | None:
        """
        The application answered an access check: :returns: the frames held, to
        handle now, or ``None`` if they are taken already or wait for receipts
        still (the last receipt hands them to the session).
        """
        if self.held is None or self._replies:
            return None
        return self.take_held()

    def _stored(self, result: Any, reply: _Reply) -> None:
        """A store write finished: send the replies it held up, and go on if they held frames."""
        reply.done = True
        self.window.ended(reply.size)
        if self._life.state is _CONNECTED:
            self._send_replies()

    def _not_stored(self, failure: Any, reply: _Reply, frame: Frame) -> None:
        """
        A persistent message could not be stored: the client gets an ERROR, not a
        RECEIPT, once the receipts before it are out; nothing more is handled.
        """
        reply.done = True
        self.window.ended(reply.size)
        if self._life.state is not _CONNECTED:
            return
        error = failure.value
        if not isinstance(error, ProtocolError):
            error = ProtocolError("message not stored", str(error))
        if error.receipt_id is None:
            error.receipt_id = frame.get("receipt")
        reply.fault = error
        self._halt()
        self._send_replies()

    def fail_in_order(self, error: ProtocolError) -> None:
        """End the session with an ERROR, after the receipts that wait before it."""
        if not self._replies:
            self._fail(error)
            return
        self._waiting().append(_Reply(None, done=True, fault=error))
        self._halt()

    def _halt(self) -> None:
        """An ERROR waits its turn: handle and read nothing more meanwhile."""
        if self.held is None:
            self.start_holding()
        self._reading.pause(BY_ERROR)

    def _send_replies(self) -> None:
        """Send the replies at the head of the queue that are done; then handle what was held."""
        replies = self._replies
        while replies and replies[0].done:
            done = replies.popleft()
            if done.fault is not None:
                self._fail(done.fault)
                return
            if done.receipt is not None:
                self._send_frame(Frame("RECEIPT", (("receipt-id", done.receipt),)))
            if done.then is not None:
                done.then()
                if self._life.state is not _CONNECTED:
                    return
        if not replies and self.held is not None:
            self._released(self.take_held())

    def hold(self, frames: list[Frame]) -> None:
        """
        Keep frames for later, while the session waits (for the store, or a login).

        Once they come to more than ``max_held_bytes``, read nothing more from
        the client until they have been handled.
        """
        assert self.held is not None
        for frame in frames:
            self.held.append(frame)
            self._held_bytes += len(frame.body) + len(frame.command)
            for name, value in frame.headers:
                self._held_bytes += len(name) + len(value) + 2
        if self._held_bytes > self._config.max_held_bytes:
            self._reading.pause(BY_HELD)

    def start_holding(self, frames: tuple[Frame, ...] = ()) -> None:
        """Handle no more frames until :meth:`take_held`; keep them, ``frames`` first."""
        self.held = deque(frames)

    def take_held(self) -> list[Frame]:
        """
        Stop holding, and read again if holding had stopped reading: whoever takes
        the frames (a store write, a login) is about to handle them.

        :returns: the frames held, in order, to handle now.
        """
        held, self.held = self.held, None
        self._held_bytes = 0
        self._reading.resume(BY_HELD)
        return list(held or ())

    def drop_held(self) -> None:
        """The session is closing: what it held will never be handled."""
        self.held = None
