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

from stompbroker.protocol.encoder import message_prefix
from stompbroker.protocol.errors import ProtocolError
from stompbroker.protocol.frames import Frame
from stompbroker.protocol.parts import SessionPart
from stompbroker.protocol.resumption import Detached, ResumeBuffer, resubscribe_headers
from stompbroker.protocol.states import Event, State

#: The CONNECT header that asks for a resumable session, and the CONNECTED one with its token.
RESUME_TOKEN = "resume-token"
#: The CONNECT headers that say which topic MESSAGE the resuming client got last.
LAST_SUBSCRIPTION = "resume-last-subscription"
LAST_MESSAGE_ID = "resume-last-message-id"

#: What a resumed session is given: the record, and the frames to write.
Resumption = tuple[Detached, list[bytes]]


class ResumeMixin(SessionPart):
    """
    The session's resumption.  Mixed into
    :class:`~stompbroker.protocol.session.StompSession`, as its other parts are.
    """

    __slots__ = ()

    #: The session's slots this part owns.
    SLOTS: tuple[str, ...] = ("resume_token", "_resume_last", "_recent")

    resume_token: str | None
    _resume_last: tuple[str | None, str] | None
    _recent: ResumeBuffer | None
    # Of the session's other parts.
    identity: Any
    version: str
    subscriptions: dict[str, Any]
    _numbered: dict[str, Any]
    _new_subscription: Callable[[Frame], Any]
    _add_subscription: Callable[[Any], None]
    write_message: Callable[[bytes], None]
    _message_write: Callable[[bytes], None]
    _wrote: bool
    session_id: str
    frames_sent: int
    bytes_sent: int

    def _init_resume(self) -> None:
        #: Before CONNECTED: the token CONNECT presented ("" to ask for a new
        #: session); after it: this session's own token.  ``None`` while the
        #: session is not resumable.
        self.resume_token = None
        #: ``(subscription, message-id)`` of the last topic MESSAGE the
        #: resuming client says it got, from CONNECT.
        self._resume_last = None
        #: What this resumable session's auto-ack topic subscriptions wrote
        #: lately; ``None`` while the session is not resumable.
        self._recent = None

    def _read_resume(self, frame: Frame) -> None:
        """Read CONNECT's resumption headers (only when the broker resumes sessions)."""
        self.resume_token = frame.get(RESUME_TOKEN)
        last = frame.get(LAST_MESSAGE_ID)
        if last is not None:
            self._resume_last = (frame.get(LAST_SUBSCRIPTION), last)

    def _write_recent(self, data: bytes) -> None:
        """
        Write an auto-ack topic MESSAGE of a resumable session, keeping it a
        while: as :meth:`write_message`, which it stands in for.
        """
        # ResumeBuffer.append, inline: this is every delivery of the session.
        recent: Any = self._recent
        recent.frames.append(data)
        recent.appended += 1
        recent.size += len(data)
        if recent.size > recent.limit:
            recent.trim()
        self._wrote = True
        self._message_write(data)

    def _login_name(self) -> str:
        identity = self.identity
        return "" if identity is None else str(identity.name)

    def _resume_headers(self) -> tuple[tuple[tuple[str, str], ...], Resumption | None]:
        """
        Issue this session's token, and claim the session CONNECT named, if any.

        :returns: CONNECTED's extra headers, and what to resume from.
        """
        presented = self.resume_token
        book = self.config.resumption
        if presented is None or book is None:
            self.resume_token = None
            return (), None
        login = self._login_name()
        record = book.claim(presented, login, self.version) if presented else None
        self.resume_token = book.issue(login, self)
        self._recent = book.new_buffer(self.resume_token)
        headers: tuple[tuple[str, str], ...] = (
            (RESUME_TOKEN, self.resume_token),
            ("resumed", "true" if record is not None else "false"),
        )
        if record is None:
            return headers, None
        frames, gap = self._missed(record)
        if gap:
            book.gaps += 1
            headers += (("resume-gap", "true"),)
        return headers, (record, frames)

    def _missed(self, record: Detached) -> tuple[list[bytes], bool]:
        """
        :returns: the frames the resuming client has not had, and whether some
            it should have had are lost (see :meth:`ResumeBuffer.replay`).
        """
        buffer = record.buffer
        last = self._resume_last
        if last is None:
            return buffer.replay(None, record.mark)
        found = buffer.find(message_prefix(last[0], record.version), last[1])
        if found is not None:
            return buffer.replay(found, record.mark)
        # A frame no longer kept, or none of ours: what it had is unknown, and
        # when frames were dropped the client may have missed them.
        frames, gap = buffer.replay(None, record.mark)
        return frames, gap or buffer.first > 0

    def _resume(self, resumption: Resumption) -> None:
        """
        Take up a detached session: its subscriptions again, what it missed,
        then the live flow.
        """
        record, frames = resumption
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
        # Kept again as they go, should this connection drop too.
        write = self._write_recent
        count = 0
        for data in frames:
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
        buffer = self._recent if self._recent is not None else book.new_buffer()
        self._recent = None
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

        book.detach(
            Detached(
                token,
                self._login_name(),
                self.version,
                again,
                buffer,
                release,
                buffer.appended,
                session=self.session_id,
            )
        )

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
        if self.state is not State.CONNECTED:
            return
        self._detach()
        self._close(Event.ERROR)

    _close: Callable[[Event], None]
