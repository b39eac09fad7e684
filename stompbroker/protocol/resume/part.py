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
takes the session's record from the directory, the client's frames held and
its socket not read meanwhile, as while a password is checked
(:meth:`Resume.wait_for_resumed`): a session kept here is then claimed
as above; one kept by a dead node is made again from the record, with
``resume-gap:true``; one kept by another live node is subscribed again to its
topics (their messages held), then handed over by that node (the frames
missed, the subscriptions' latest headers), and written as above, the held
frames the handover also carried left out (:mod:`.records`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from stompbroker.interfaces import IBroker
from stompbroker.protocol.config import SessionConfig
from stompbroker.protocol.errors import ProtocolError
from stompbroker.protocol.frames import Frame
from stompbroker.protocol.negotiation import BY_LOGIN
from stompbroker.protocol.parts import Failing
from stompbroker.protocol.resume.records import (
    Elsewhere,
    Handover,
    Taken,
    frame_identity,
    subscription_id,
    token_key,
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

#: What the directory said of a presented token: nothing is kept (``_found``).
_NOWHERE = "nowhere"
#: ... the session is this node's: claim it from the book as on one node.
_HERE = "here"


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

    __slots__ = ("resume_token", "_found", "_recent", "_resume_last", "_session")

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
        #: What the cluster's directory said of the presented token (``None``:
        #: not asked): ``_NOWHERE``, ``_HERE`` or an :class:`Elsewhere`.
        self._found: Any = None

    def read(self, frame: Frame) -> None:
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
        self._session.output.write_message(data)

    def recent_writer(self) -> Callable[[bytes], None] | None:
        """:returns: where auto-ack topic messages go while resumable, or ``None``."""
        return None if self._recent is None else self._write_recent

    def _made_again(self, headers: dict[str, str]) -> Any:
        """:returns: a subscription made from a record's headers, not yet given to the broker."""
        return self._session.subscriptions.new(Frame("SUBSCRIBE", tuple(headers.items())))

    def _login_name(self) -> str:
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
        login = self._login_name()
        found, self._found = self._found, None
        record: Detached | Elsewhere | None = found if isinstance(found, Elsewhere) else None
        if presented and (found is None or found is _HERE):
            record = book.claim(presented, login, self._session.version)
        elif found is _NOWHERE:
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
            frames come with the session (:meth:`_resume_elsewhere`).
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
            self._resume_elsewhere(record)
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
        self._write_replayed(frames)
        for release in releases:
            release()

    def _write_replayed(self, frames: list[bytes]) -> None:
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
                self._login_name(),
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

    # -- on another node of a cluster -------------------------------------------

    def wait_for_resumed(self) -> bool:
        """
        Before CONNECTED: ask the cluster's directory about the presented token.

        :returns: ``True`` when the session now waits for the answer (its
            client's frames held, its socket not read, as while a login is
            checked); then :meth:`_let_in` follows the answer.
        """
        book = self._session.config.resumption
        if (
            not self.resume_token
            or book is None
            or book.directory is None
            or self._found is not None
            or not book.directory.available()
        ):
            return False
        if self._session.state is State.AWAITING_CONNECT:
            self._session._transition(Event.LOGIN_STARTED)
            self._session.receipts.start_holding()
            self._session._pause_reading(BY_LOGIN)
        taking = book.directory.take(
            token_key(self.resume_token),
            self._login_name(),
            self._session.version,
        )
        self._await(taking, self._taken)
        return True

    def _await(self, answer: Any, then: Callable[[Any], None]) -> None:
        """Wait for the directory's ``answer`` (cancelled, as a login is, if the client goes)."""
        self._session.login.wait_on(answer)
        answer.addCallbacks(self._answered, self._not_answered, callbackArgs=(then,))

    def _answered(self, result: Any, then: Callable[[Any], None]) -> None:
        self._session.login.wait_on(None)
        if self._session.state is State.AUTHENTICATING:
            then(result)

    def _not_answered(self, failure: Any) -> None:
        """The directory could not answer (its server went): resume here if we can."""
        self._session.login.wait_on(None)
        if self._session.state is State.AUTHENTICATING:
            self._found = _HERE
            self._session._let_in()

    def _taken(self, taken: Taken | None) -> None:
        if taken is None:
            self._found = _NOWHERE
        elif taken.here:
            self._found = _HERE
        elif not taken.alive:
            self._found = Elsewhere(taken.record.subscriptions)
        else:
            self._hand_over(taken)
            return
        self._session._let_in()

    def _hand_over(self, taken: Taken) -> None:
        """
        The session is another live node's: subscribe again to its topics,
        holding what they get, then ask that node for the session.  The new
        subscriptions are in place before the old ones go, and the request
        goes after every message published here before them, so none falls
        between (docs/cluster.md).
        """
        book: Any = self._session.config.resumption
        made: dict[str, tuple[Any, list[bytes]]] = {}
        try:
            for headers in taken.record.subscriptions:
                subscription = self._session.subscriptions.new(
                    Frame("SUBSCRIBE", tuple(headers.items()))
                )
                if not subscription.collects_while_detached:
                    continue
                held: list[bytes] = []
                subscription.divert(held.append)
                self._session.subscriptions.add(subscription)
                made[subscription.subscription_id] = (subscription, held)
        except ProtocolError:
            # Refused here (access rights, say): CONNECTED answers as from the
            # record, and _resume_elsewhere fails as a resume on one node does.
            for subscription, _ in made.values():
                self._unmake(subscription)
            # The keeping node lets go of its copy too: nobody can claim it now.
            book.directory.hand_over(taken.node, token_key(str(self.resume_token)), None)
            self._found = Elsewhere(taken.record.subscriptions)
            self._session._let_in()
            return
        key = token_key(str(self.resume_token))
        asked = book.directory.hand_over(taken.node, key, self._resume_last)
        self._await(asked, lambda handover: self._handed_over(taken, made, handover))

    def _handed_over(
        self, taken: Taken, made: dict[str, tuple[Any, list[bytes]]], handover: Handover | None
    ) -> None:
        if handover is None:
            # The node did not answer in time, or no longer had the session:
            # what it held is lost to the client, which is told so.
            self._found = Elsewhere(taken.record.subscriptions, made=made)
        else:
            self._found = Elsewhere(handover.subscriptions, handover.frames, handover.gap, made)
        self._session._let_in()

    def _resume_elsewhere(self, elsewhere: Elsewhere) -> None:
        """
        Take up a session from another node: the subscriptions not made yet,
        what it missed, then what the topics' subscriptions held that it did not
        carry, then the live flow.
        """
        made = elsewhere.made
        releases = []
        wanted = set()
        try:
            for headers in elsewhere.subscriptions:
                name = subscription_id(headers)
                wanted.add(name)
                if name in made:
                    continue
                subscription = self._session.subscriptions.new(
                    Frame("SUBSCRIBE", tuple(headers.items()))
                )
                releases.append(subscription.hold_writes())
                self._session.subscriptions.add(subscription)
        except ProtocolError as error:
            self._session._fail(error)
            return
        frames = list(elsewhere.frames)
        # Read the handover's frames for their ids only when something was held.
        seen = set()
        if any(held for _, held in made.values()):
            seen = {frame_identity(data) for data in frames}
        for name, (subscription, held) in made.items():
            if name not in wanted:
                # Unsubscribed on the old node after its record was filed.
                self._unmake(subscription)
                continue
            subscription.divert(self._write_recent)
            frames.extend(data for data in held if frame_identity(data) not in seen)
        self._write_replayed(frames)
        for release in releases:
            release()

    def _unmake(self, subscription: Any) -> None:
        """Give back a subscription made for a resume that did not need it."""
        self._session.subscriptions.discard(subscription)

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
