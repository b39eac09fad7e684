"""
The session's part in resumable sessions: what CONNECT asks, what CONNECTED
answers, what a session leaves behind when its connection goes, and how a
resumed one picks it up.  The bookkeeping itself (tokens, the window, the
buffer) is :mod:`~stompbroker.protocol.resume.resume_book`.

- CONNECT with ``resume-token`` (any value, empty included) asks for a
  resumable session; CONNECTED then carries ``resume-token`` (a new one every
  time) and ``resumed:true`` or ``resumed:false``, and ``resume-gap:true`` when
  the resumed session's buffer overflowed.
- A resumable session that loses its connection while connected, or misses
  its heart-beats, detaches (:meth:`Resume.detach`): its ``auto``-ack
  topic subscriptions stay in the broker and write into the buffer; every
  other subscription (queues, client-ack and durable topic subscriptions) is
  given back to the broker at once, so its unacknowledged messages return to
  their queue for any consumer, as when any connection closes.  Its open
  transactions are aborted, as today.
- On resume (:meth:`Resume.resume`) the session subscribes again with
  the same headers (ids, ack modes, selectors, windows), holds what the new
  subscriptions get, writes what the buffer kept, then lets the held flow go:
  missed messages first, in order, then the live ones, none twice.  Queue
  subscriptions get from their queue what is there, messages delivered before
  marked ``redelivered:true``.

A session that never asked pays one small object and one ``is None`` test
per connection loss; the delivery path is not touched (a detached subscription's
writes are diverted, as :meth:`SessionSubscription.hold_writes` does).

In a cluster (the book has a ``directory``), a CONNECT with a token first
asks the cluster's directory where the session is (:mod:`.cluster`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from stompbroker.protocol.errors import ProtocolError
from stompbroker.protocol.frames import Frame
from stompbroker.protocol.parts import Failing, Identified, StateView
from stompbroker.protocol.resume.directory_lookup import HERE, NOWHERE, DirectoryLookup, Waiting
from stompbroker.protocol.resume.resume_book import (
    Detached,
    ResumeBook,
    ResumeBuffer,
    missed,
    resubscribe_headers,
)
from stompbroker.protocol.resume.session_records import (
    Elsewhere,
)
from stompbroker.protocol.states import Event, State

if TYPE_CHECKING:
    from stompbroker.protocol.subscriptions import Subscriptions

#: The CONNECT header that asks for a resumable session, and the CONNECTED one with its token.
RESUME_TOKEN = "resume-token"
#: The CONNECT headers that say which topic MESSAGE the resuming client got last.
LAST_SUBSCRIPTION = "resume-last-subscription"
LAST_MESSAGE_ID = "resume-last-message-id"


#: What a resumed session is given: the record, and the frames to write.
Resumption = tuple[Detached | Elsewhere, list[bytes]]


class Replaying(Protocol):
    """Where a resumable session's topic messages are written (the session's output)."""

    def write_message(self, data: bytes) -> None: ...

    def write_messages(self, data: bytes, count: int) -> None: ...


class Resume:
    """
    The session's resumption (see the module docstring).

    :param book: the broker's resumable sessions (``SessionConfig.resumption``),
        or ``None`` when it resumes none.
    :param life: the session's state, read: only a connected session detaches.
    :param subscriptions: the session's subscriptions, taken on detaching and
        made again on resuming.
    :param login: who the client is, whose sessions it may resume.
    :param output: where what a resumed client missed is written.
    :param fail: ends the session with an ERROR (a resume that cannot be made).
    :param close: ends the session without an ERROR (its client is back elsewhere).
    :param waiting: how the session waits for the cluster's answer before CONNECTED.

    A session that never asked pays this object, its four ``None``s, and
    one ``is None`` test per SUBSCRIBE and per connection loss.
    """

    __slots__ = (
        "resume_token",
        "_book",
        "_close",
        "_directory",
        "_fail",
        "_life",
        "_login",
        "_output",
        "_recent",
        "_resume_last",
        "_session_id",
        "_subscriptions",
        "_version",
    )

    def __init__(
        self,
        book: ResumeBook | None,
        life: StateView,
        subscriptions: Subscriptions,
        login: Identified,
        output: Replaying,
        fail: Failing,
        close: Callable[[Event], None],
        waiting: Waiting,
    ) -> None:
        self._book = book
        self._life = life
        self._subscriptions = subscriptions
        self._login = login
        self._output = output
        self._fail = fail
        self._close = close
        #: The version CONNECT negotiated, and the id CONNECTED gave.
        self._version = "1.2"
        self._session_id = ""
        #: Before CONNECTED: the token CONNECT presented ("" to ask for a new
        #: session); after it: this session's own token.  ``None`` while the
        #: session is not resumable.
        self.resume_token: str | None = None
        #: ``(subscription, message-id)`` of the last topic MESSAGE the
        #: resuming client says it got, from CONNECT.
        self._resume_last: tuple[str | None, str] | None = None
        #: What this resumable session's auto-ack topic subscriptions wrote
        #: lately; ``None`` while the session is not resumable.
        self._recent: ResumeBuffer | None = None
        #: Asks the cluster's directory about a presented token.
        self._directory = DirectoryLookup(self, book, life, subscriptions, fail, waiting)

    @property
    def last(self) -> tuple[str | None, str] | None:
        """``(subscription, message-id)`` of the last topic MESSAGE the client says it got."""
        return self._resume_last

    def wait_for_resumed(self) -> bool:
        """
        Before CONNECTED: ask the cluster's directory about the presented token.

        :returns: whether the session now waits for the answer (see
            :meth:`DirectoryLookup.wait`).
        """
        return self._directory.wait()

    def read(self, frame: Frame, version: str) -> None:
        """
        Read CONNECT's resumption headers (only when the broker resumes sessions).

        :param version: the version CONNECT negotiated.
        """
        self._version = version
        self.resume_token = frame.get(RESUME_TOKEN)
        last = frame.get(LAST_MESSAGE_ID)
        if last is not None:
            self._resume_last = (frame.get(LAST_SUBSCRIPTION), last)

    def write_recent(self, data: bytes) -> None:
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
        self._output.write_message(data)

    def recent_writer(self) -> Callable[[bytes], None] | None:
        """:returns: where auto-ack topic messages go while resumable, or ``None``."""
        return None if self._recent is None else self.write_recent

    def login_name(self) -> str:
        identity = self._login.identity
        return "" if identity is None else str(identity.name)

    def headers(self, session_id: str) -> tuple[tuple[tuple[str, str], ...], Resumption | None]:
        """
        Issue this session's token, and claim the session CONNECT named, if any.

        :param session_id: the id CONNECTED gives the session.
        :returns: CONNECTED's extra headers, and what to resume from.
        """
        self._session_id = session_id
        presented = self.resume_token
        book = self._book
        if presented is None or book is None:
            self.resume_token = None
            return (), None
        login = self.login_name()
        found = self._directory.take_found()
        record: Detached | Elsewhere | None = found if isinstance(found, Elsewhere) else None
        if presented and (found is None or found is HERE):
            record = book.claim(presented, login, self._version)
        elif found is NOWHERE:
            book.refused += 1
        elif record is not None:
            book.resumed += 1
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

    def _missed(self, record: Detached | Elsewhere) -> tuple[list[bytes], bool]:
        """
        :returns: the frames the resuming client has not had, and whether some
            it should have had are lost (see :func:`missed`); another node's
            frames come with the session (:meth:`DirectoryLookup.resume_elsewhere`).
        """
        if isinstance(record, Elsewhere):
            return [], record.gap
        return missed(record, self._resume_last)

    def resume(self, resumption: Resumption) -> None:
        """
        Take up a detached session: its subscriptions again, what it missed,
        then the live flow.
        """
        record, frames = resumption
        if isinstance(record, Elsewhere):
            self._directory.resume_elsewhere(record)
            return
        releases = []
        try:
            for headers in record.subscriptions:
                subscription = self._subscriptions.new(Frame("SUBSCRIBE", tuple(headers.items())))
                releases.append(subscription.hold_writes())
                self._subscriptions.add(subscription)
        except ProtocolError as error:
            record.release()
            self._fail(error)
            return
        # The new subscriptions are in place (and hold what they get) before the
        # old ones leave, so that no message falls between them.
        record.release()
        self.write_replayed(frames)
        for release in releases:
            release()

    def write_replayed(self, frames: list[bytes]) -> None:
        """
        Write what a resumed client missed: each frame kept again, should this
        connection drop too, and all of them in one write (a resume that waited
        for the cluster runs outside a read, where each write would be a send).
        """
        if not frames:
            return
        recent: Any = self._recent
        for data in frames:
            recent.append(data)
        self._output.write_messages(b"".join(frames), len(frames))

    def detach(self) -> None:
        """
        The connection is gone (or dead): if the client asked for a resumable
        session, keep it for the window.  Called before the session lets go of
        its subscriptions, which this takes.
        """
        token = self.resume_token
        book = self._book
        if token is None or book is None or self._life.state is not State.CONNECTED:
            return
        self.resume_token = None
        buffer = self._recent if self._recent is not None else book.new_buffer()
        self._recent = None
        kept = []
        again = []
        subscriptions = self._subscriptions
        for subscription in self._subscriptions.take_all():
            if subscription.headers:
                again.append(
                    resubscribe_headers(subscription.headers, subscription.last_stream_offset)
                )
            if subscription.collects_while_detached:
                subscription.divert(buffer.append)
                subscriptions.hold_away(subscription)
                kept.append(subscription)
            else:
                subscriptions.discard(subscription)

        def release() -> None:
            for subscription in kept:
                subscriptions.discard(subscription)

        book.detach(
            Detached(
                token,
                self.login_name(),
                self._version,
                again,
                buffer,
                release,
                buffer.appended,
                session=self._session_id,
            )
        )

    # -- what the book asks of a connected resumable session -------------------

    @property
    def version(self) -> str:
        """The session's protocol version, filed with its record."""
        return self._version

    @property
    def subscriptions(self) -> Subscriptions:
        """The session's subscriptions, whose change the book files again."""
        return self._subscriptions

    def take_over(self) -> None:
        """
        A client resumes this session while it still looks connected (the client
        noticed the connection dead before the broker did): detach it now and
        close the old connection.
        """
        if self._life.state is not State.CONNECTED:
            return
        self.detach()
        self._close(Event.ERROR)

    def resume_subscriptions(self) -> list[dict[str, str]]:
        """:returns: the headers that would make this session's subscriptions again now."""
        return [
            resubscribe_headers(subscription.headers, subscription.last_stream_offset)
            for subscription in self._subscriptions.values()
            if subscription.headers
        ]

    def leave(self) -> None:
        """The broker stops: in a cluster the session may go on elsewhere (``ResumeBook.leave``)."""
        token, self.resume_token = self.resume_token, None
        book = self._book
        if token is not None and book is not None and self._life.state is State.CONNECTED:
            book.leave(token, self)
        elif token is not None and book is not None:
            book.forget(token, self)

    def end(self) -> None:
        """The session ends for good (DISCONNECT, an ERROR): its token is void."""
        token, self.resume_token = self.resume_token, None
        book = self._book
        if token is not None and book is not None:
            book.forget(token, self)
