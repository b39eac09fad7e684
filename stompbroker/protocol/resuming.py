"""
The session's part in resumable sessions: what CONNECT asks, what CONNECTED
answers, what a session leaves behind when its connection goes, and how a
resumed one picks it up.  The bookkeeping itself (tokens, the window, the
buffer) is :mod:`~stompbroker.protocol.resumption`.

- CONNECT with ``resume-token`` (any value, empty included) asks for a
  resumable session; CONNECTED then carries ``resume-token`` (a new one every
  time) and ``resumed:true`` or ``resumed:false``, and ``resume-gap:true`` when
  the resumed session's buffer overflowed.
- A resumable session that loses its connection while connected, or misses
  its heart-beats, detaches (:meth:`ResumeMixin._detach`): its ``auto``-ack
  topic subscriptions stay in the broker and write into the buffer; every
  other subscription (queues, client-ack and durable topic subscriptions) is
  given back to the broker at once, so its unacknowledged messages return to
  their queue for any consumer, as when any connection closes.  Its open
  transactions are aborted, as today.
- On resume (:meth:`ResumeMixin._resume`) the session subscribes again with
  the same headers (ids, ack modes, selectors, windows), holds what the new
  subscriptions get, writes what the buffer kept, then lets the held flow go:
  missed messages first, in order, then the live ones, none twice.  Queue
  subscriptions get from their queue what is there, messages delivered before
  marked ``redelivered:true``.

A session that never asked pays one slot and one ``is None`` test per
connection loss; the delivery path is not touched (a detached subscription's
writes are diverted, as :meth:`SessionSubscription.hold_writes` does).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stompbroker.protocol.errors import ProtocolError
from stompbroker.protocol.frames import Frame
from stompbroker.protocol.parts import SessionPart
from stompbroker.protocol.resumption import Detached, resubscribe_headers
from stompbroker.protocol.states import Event, State

#: The CONNECT header that asks for a resumable session, and the CONNECTED one with its token.
RESUME_TOKEN = "resume-token"


class ResumeMixin(SessionPart):
    """
    The session's resumption.  Mixed into
    :class:`~stompbroker.protocol.session.StompSession`, as its other parts are.
    """

    __slots__ = ()

    #: The session's slots this part owns.
    SLOTS: tuple[str, ...] = ("resume_token",)

    resume_token: str | None
    # Of the session's other parts.
    identity: Any
    version: str
    subscriptions: dict[str, Any]
    _numbered: dict[str, Any]
    _new_subscription: Callable[[Frame], Any]
    _add_subscription: Callable[[Any], None]
    write_message: Callable[[bytes], None]
    frames_sent: int
    bytes_sent: int

    def _init_resume(self) -> None:
        #: Before CONNECTED: the token CONNECT presented ("" to ask for a new
        #: session); after it: this session's own token.  ``None`` while the
        #: session is not resumable.
        self.resume_token = None

    def _login_name(self) -> str:
        identity = self.identity
        return "" if identity is None else str(identity.name)

    def _resume_headers(self) -> tuple[tuple[tuple[str, str], ...], Detached | None]:
        """
        Issue this session's token, and claim the session CONNECT named, if any.

        :returns: CONNECTED's extra headers, and the record to resume from.
        """
        presented = self.resume_token
        book = self.config.resumption
        if presented is None or book is None:
            self.resume_token = None
            return (), None
        login = self._login_name()
        record = book.claim(presented, login, self.version) if presented else None
        self.resume_token = book.issue(login, self)
        headers: tuple[tuple[str, str], ...] = (
            (RESUME_TOKEN, self.resume_token),
            ("resumed", "true" if record is not None else "false"),
        )
        if record is not None and record.buffer.gap:
            headers += (("resume-gap", "true"),)
        return headers, record

    def _resume(self, record: Detached) -> None:
        """
        Take up a detached session: its subscriptions again, what it missed,
        then the live flow.
        """
        releases = []
        try:
            for headers in record.subscriptions:
                subscription = self._new_subscription(Frame("SUBSCRIBE", tuple(headers.items())))
                releases.append(subscription.hold_writes())
                self._add_subscription(subscription)
        except ProtocolError as error:
            record.release()
            self._fail(error)
            return
        # The new subscriptions are in place (and hold what they get) before the
        # old ones leave, so that no message falls between them.
        record.release()
        write = self.write_message
        count = 0
        for data in record.buffer.take():
            self.bytes_sent += len(data)
            write(data)
            count += 1
        self.frames_sent += count
        for release in releases:
            release()

    def _detach(self) -> None:
        """
        The connection is gone (or dead): if the client asked for a resumable
        session, keep it for the window.  Called before the session lets go of
        its subscriptions, which this takes.
        """
        token = self.resume_token
        book = self.config.resumption
        if token is None or book is None or self.state is not State.CONNECTED:
            return
        self.resume_token = None
        buffer = book.new_buffer()
        kept = []
        again = []
        broker = self.broker
        subscriptions, self.subscriptions = self.subscriptions, {}
        self._numbered = {}
        for subscription in subscriptions.values():
            if subscription.headers:
                again.append(
                    resubscribe_headers(subscription.headers, subscription.last_stream_offset)
                )
            if subscription.collects_while_detached:
                subscription.divert(buffer.append)
                kept.append(subscription)
            else:
                broker.unsubscribe(subscription)

        def release() -> None:
            for subscription in kept:
                broker.unsubscribe(subscription)

        book.detach(Detached(token, self._login_name(), self.version, again, buffer, release))

    def _end_resumable(self) -> None:
        """The session ends for good (DISCONNECT, an ERROR): its token is void."""
        token, self.resume_token = self.resume_token, None
        book = self.config.resumption
        if token is not None and book is not None:
            book.forget(token, self)

    def take_over(self) -> None:
        """
        A client resumes this session while it still looks connected (the client
        noticed the connection dead before the broker did): detach it now and
        close the old connection.
        """
        self._detach()
        self._close(Event.ERROR)

    _close: Callable[[Event], None]
