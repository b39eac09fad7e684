"""
The session's part in resumable sessions: what CONNECT asks, what CONNECTED
answers, what a session leaves behind when its connection goes, and how a
resumed one picks it up.  The bookkeeping itself (tokens, the window, the
buffer) is :mod:`~stompbroker.protocol.resume.registry`.

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

from stompbroker.interfaces import IBroker
from stompbroker.protocol.config import SessionConfig
from stompbroker.protocol.errors import ProtocolError
from stompbroker.protocol.frames import Frame
from stompbroker.protocol.parts import Failing
from stompbroker.protocol.resume.cluster import HERE, NOWHERE, DirectoryLookup
from stompbroker.protocol.resume.records import (
    Elsewhere,
)
from stompbroker.protocol.resume.registry import (
    Detached,
    ResumeBuffer,
    missed,
    resubscribe_headers,
)
from stompbroker.protocol.states import Event, State

if TYPE_CHECKING:
    from stompbroker.protocol.login import Login
    from stompbroker.protocol.receipts import Receipts
    from stompbroker.protocol.slow_consumer import SlowConsumer
    from stompbroker.protocol.subscriptions import Subscriptions

#: The CONNECT header that asks for a resumable session, and the CONNECTED one with its token.
RESUME_TOKEN = "resume-token"
#: The CONNECT headers that say which topic MESSAGE the resuming client got last.
LAST_SUBSCRIPTION = "resume-last-subscription"
LAST_MESSAGE_ID = "resume-last-message-id"


#: What a resumed session is given: the record, and the frames to write.
Resumption = tuple[Detached | Elsewhere, list[bytes]]


class ResumeOwner(Failing, Protocol):
    """What :class:`Resume` needs of the session it makes resumable."""

    @property
    def config(self) -> SessionConfig: ...

    @property
    def version(self) -> str: ...

    @property
    def identity(self) -> Any: ...

    @property
    def session_id(self) -> str: ...

    @property
    def broker(self) -> IBroker: ...

    @property
    def subscriptions(self) -> Subscriptions: ...

    @property
    def receipts(self) -> Receipts: ...

    def _transition(self, event: Event) -> None: ...

    def _pause_reading(self, reason: str) -> None: ...

    def _let_in(self) -> None:
        """The client is in: CONNECTED, then the frames that waited."""

    @property
    def login(self) -> Login:
        """Keeps the cluster's answer awaited before CONNECTED, as a login's, to cancel it."""

    def _close(self, event: Event) -> None:
        """End the session without an ERROR (its client is back elsewhere)."""

    @property
    def output(self) -> SlowConsumer:
        """Where what a resumed client missed is written."""


class Resume:
    """
    The session's resumption (see the module docstring).

    :param session: what it makes resumable (:class:`ResumeOwner`).

    A session that never asked pays this object, its four ``None``s, and
    one ``is None`` test per SUBSCRIBE and per connection loss.
    """

    __slots__ = ("resume_token", "_directory", "_recent", "_resume_last", "_session")

    def __init__(self, session: ResumeOwner) -> None:
        self._session = session
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
        self._directory = DirectoryLookup(self, session)

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

    def read(self, frame: Frame) -> None:
        """Read CONNECT's resumption headers (only when the broker resumes sessions)."""
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
        self._session.output.write_message(data)

    def recent_writer(self) -> Callable[[bytes], None] | None:
        """:returns: where auto-ack topic messages go while resumable, or ``None``."""
        return None if self._recent is None else self.write_recent

    def login_name(self) -> str:
        identity = self._session.identity
        return "" if identity is None else str(identity.name)

    def headers(self) -> tuple[tuple[tuple[str, str], ...], Resumption | None]:
        """
        Issue this session's token, and claim the session CONNECT named, if any.

        :returns: CONNECTED's extra headers, and what to resume from.
        """
        presented = self.resume_token
        book = self._session.config.resumption
        if presented is None or book is None:
            self.resume_token = None
            return (), None
        login = self.login_name()
        found = self._directory.take_found()
        record: Detached | Elsewhere | None = found if isinstance(found, Elsewhere) else None
        if presented and (found is None or found is HERE):
            record = book.claim(presented, login, self._session.version)
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
                subscription = self._session.subscriptions.new(
                    Frame("SUBSCRIBE", tuple(headers.items()))
                )
                releases.append(subscription.hold_writes())
                self._session.subscriptions.add(subscription)
        except ProtocolError as error:
            record.release()
            self._session._fail(error)
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
        self._session.output.write_messages(b"".join(frames), len(frames))

    def detach(self) -> None:
        """
        The connection is gone (or dead): if the client asked for a resumable
        session, keep it for the window.  Called before the session lets go of
        its subscriptions, which this takes.
        """
        token = self.resume_token
        book = self._session.config.resumption
        if token is None or book is None or self._session.state is not State.CONNECTED:
            return
        self.resume_token = None
        buffer = self._recent if self._recent is not None else book.new_buffer()
        self._recent = None
        kept = []
        again = []
        broker = self._session.broker
        for subscription in self._session.subscriptions.take_all():
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
                self.login_name(),
                self._session.version,
                again,
                buffer,
                release,
                buffer.appended,
                session=self._session.session_id,
            )
        )

    # -- what the book asks of a connected resumable session -------------------

    @property
    def version(self) -> str:
        """The session's protocol version, filed with its record."""
        return self._session.version

    @property
    def subscriptions(self) -> Subscriptions:
        """The session's subscriptions, whose change the book files again."""
        return self._session.subscriptions

    def take_over(self) -> None:
        """
        A client resumes this session while it still looks connected (the client
        noticed the connection dead before the broker did): detach it now and
        close the old connection.
        """
        if self._session.state is not State.CONNECTED:
            return
        self.detach()
        self._session._close(Event.ERROR)

    def resume_subscriptions(self) -> list[dict[str, str]]:
        """:returns: the headers that would make this session's subscriptions again now."""
        return [
            resubscribe_headers(subscription.headers, subscription.last_stream_offset)
            for subscription in self._session.subscriptions.values()
            if subscription.headers
        ]

    def leave(self) -> None:
        """The broker stops: in a cluster the session may go on elsewhere (``ResumeBook.leave``)."""
        token, self.resume_token = self.resume_token, None
        book = self._session.config.resumption
        if token is not None and book is not None and self._session.state is State.CONNECTED:
            book.leave(token, self)
        elif token is not None and book is not None:
            book.forget(token, self)

    def end(self) -> None:
        """The session ends for good (DISCONNECT, an ERROR): its token is void."""
        token, self.resume_token = self.resume_token, None
        book = self._session.config.resumption
        if token is not None and book is not None:
            book.forget(token, self)
