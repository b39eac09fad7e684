"""
Resumable sessions, the bookkeeping: tokens, the resume window, and the bounded
buffer of what an absent client missed.  Pure, sans I/O: time comes from an
injected clock (``seconds`` and ``callLater``), so it is tested on ``task.Clock``.

Theory of operation:

- A client asks for a resumable session by sending ``resume-token`` on CONNECT
  (empty the first time).  Its CONNECTED carries a fresh token
  (:func:`new_token`, 128 random bits), which the :class:`ResumeBook` files
  under the session while it is connected.  Clients that do not ask cost
  nothing: no token, no entry, and their session ends with their connection.
- When a resumable session loses its connection (or its heart-beats), it
  *detaches* (:meth:`ResumeBook.detach`): a :class:`Detached` record keeps what
  the client subscribed to, and its ``auto``-ack topic subscriptions stay in the
  broker, writing into its :class:`ResumeBuffer` instead of a socket.  The
  buffer also holds what was written lately before that, which a dead network
  may have swallowed: the resuming client says what it got last, and gets
  what followed.  The record
  lives for the window; then :meth:`Detached.release` gives its subscriptions
  back to the broker.  Expiry is one timer for the whole book: the window is
  the same for every record, so records expire in the order they were filed.
- A CONNECT presenting the token, by the same login and in the same protocol
  version, within the window, *claims* the record (:meth:`ResumeBook.claim`);
  anything else (an unknown or expired token, another user's) is answered as a
  fresh session, without telling which.  A token whose session is still
  connected (the client noticed the drop before the broker did) takes that
  session over: it is detached on the spot, then claimed.
- Streams (``/stream/NAME``) resume by subscribing again from the offset after
  the last one delivered (:func:`resubscribe_headers`); the session supplies
  that offset when its stream subscriptions know it.
- In a cluster, the book files a small record of each of its sessions with
  the engine's :class:`~stompbroker.interfaces.IResumeDirectory` (its
  ``directory``), and hands a session over to the node its client resumes on
  (:meth:`ResumeBook.hand_over`); see :mod:`~stompbroker.protocol.resume.session_records`.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

from attrs import define, field

from stompbroker.protocol.encoder import message_prefix
from stompbroker.protocol.resume.buffer import ResumeBuffer
from stompbroker.protocol.resume.session_records import (
    Handover,
    Last,
    SessionRecord,
    signature,
    token_key,
)

#: Random bytes in a token: 128 bits.
TOKEN_BYTES = 16

#: Default seconds a detached session waits for its client (``--resume-window``).
DEFAULT_WINDOW = 120.0
#: Default bytes of missed messages kept per detached session (``--resume-buffer``).
DEFAULT_BUFFER = 1024 * 1024

#: Destinations that keep a log and resume by offset rather than by buffer.
STREAM_PREFIX = "/stream/"
#: The SUBSCRIBE header that says where in a stream to start (RabbitMQ's name).
STREAM_OFFSET_HEADER = "x-stream-offset"

#: SUBSCRIBE headers not repeated when a subscription is made again on resume.
_NOT_REPEATED = frozenset({"receipt"})


def new_token() -> str:
    """:returns: a new resume token: 128 random bits, URL-safe text."""
    return secrets.token_urlsafe(TOKEN_BYTES)


def resubscribe_headers(
    headers: dict[str, str], last_stream_offset: int | None = None
) -> dict[str, str]:
    """
    The SUBSCRIBE headers that make a subscription again on resume.

    :param headers: the headers of the client's SUBSCRIBE.
    :param last_stream_offset: for a stream subscription, the offset of the
        last message delivered to it: the new one starts right after it, so
        nothing is missed and nothing is delivered twice.
    :returns: the same headers, without a ``receipt`` (the client asked for
        that one already).
    """
    again = {name: value for name, value in headers.items() if name not in _NOT_REPEATED}
    if last_stream_offset is not None:
        again[STREAM_OFFSET_HEADER] = f"offset={last_stream_offset + 1}"
    return again


@define(eq=False)
class Detached:
    """
    What a resumable session left behind when its connection went.

    :ivar token: the token that claims it (never logged: not in the repr).
    :ivar login: who the session belonged to (``""`` without authentication).
    :ivar version: the STOMP version the kept frames are encoded in.
    :ivar subscriptions: the headers to subscribe again with, in the order the
        client subscribed.
    :ivar buffer: the messages sent lately, and those missed meanwhile.
    :ivar mark: the ordinal in ``buffer`` of the first message missed.
    :ivar release: gives the subscriptions still collecting into ``buffer``
        back to the broker; called once, when the record is claimed or expires.
    :ivar expires: when the window closes, in clock seconds; set by the book.
    :ivar session: the session's id (its CONNECTED ``session``), by which
        operators know it (:meth:`ResumeBook.sessions`, :meth:`ResumeBook.end`).
    :ivar since: when it was detached, in clock seconds; set by the book.
    """

    token: str = field(repr=False)
    login: str
    version: str
    subscriptions: list[dict[str, str]]
    buffer: ResumeBuffer
    release: Callable[[], None] = field(repr=False)
    mark: int = 0
    expires: float = 0.0
    session: str = ""
    since: float = 0.0

    @property
    def gap(self) -> bool:
        """Whether messages the client missed while away were dropped already."""
        return self.buffer.first > self.mark


def missed(record: Detached, last: Last | None) -> tuple[list[bytes], bool]:
    """
    :param last: ``(subscription, message-id)`` of the last message the
        resuming client says it got (CONNECT's ``resume-last-*``), or ``None``.
    :returns: the frames of ``record`` the client has not had, and whether
        some it should have had are lost (see :meth:`ResumeBuffer.replay`).
    """
    buffer = record.buffer
    if last is None:
        return buffer.replay(None, record.mark)
    found = buffer.find(message_prefix(last[0], record.version), last[1])
    if found is not None:
        return buffer.replay(found, record.mark)
    # A frame no longer kept, or none of ours: what it had is unknown, and
    # when frames were dropped the client may have missed them.
    frames, gap = buffer.replay(None, record.mark)
    return frames, gap or buffer.first > 0


class ResumeBook:
    """
    Every resumable session of a broker process, connected or detached.

    One book is shared by all listeners (a client may drop over WebSocket and
    come back over TCP).

    :param clock: ``seconds`` and ``callLater``.
    :param window: seconds a detached session waits for its client.
    :param buffer_limit: bytes of missed messages kept per detached session.

    :ivar resumed: sessions resumed, since the book was made.
    :ivar refused: resume tokens refused: unknown, expired, another login's or
        another protocol version's (the CONNECTED said ``resumed:false``).
    :ivar expired: detached sessions whose window closed without their client.
    :ivar gaps: sessions resumed with ``resume-gap:true``.
    :ivar ended: detached sessions an operator ended (:meth:`end`).
    :ivar shed_frames: frames dropped early from resume buffers for memory (:meth:`shed`).
    :ivar directory: the cluster's
        :class:`~stompbroker.interfaces.IResumeDirectory`, set by an engine
        shared by several nodes; ``None`` on one node.
    """

    def __init__(
        self, clock: Any, window: float = DEFAULT_WINDOW, buffer_limit: int = DEFAULT_BUFFER
    ) -> None:
        self.window = window
        self.buffer_limit = buffer_limit
        self._clock = clock
        #: token -> (login, session) of connected resumable sessions.
        self._live: dict[str, tuple[str, Any]] = {}
        #: token -> record, in the order filed, which is the order they expire.
        self._detached: dict[str, Detached] = {}
        self._timer: Any = None
        #: token -> the buffer of a connected resumable session (:meth:`new_buffer`).
        self._recent: dict[str, ResumeBuffer] = {}
        self.resumed = 0
        self.refused = 0
        self.expired = 0
        self.gaps = 0
        self.ended = 0
        self.shed_frames = 0
        self.directory: Any = None
        #: For the directory: token_key(token) -> token, of every token above,
        #: and the signature of the subscriptions last filed, by token.
        self._keys: dict[str, str] = {}
        self._filed: dict[str, Any] = {}

    @property
    def detached(self) -> int:
        """How many sessions wait for their client."""
        return len(self._detached)

    @property
    def buffered_bytes(self) -> int:
        """Bytes of missed messages the detached sessions hold."""
        return sum(record.buffer.size for record in self._detached.values())

    def issue(self, login: str, session: Any) -> str:
        """
        File a connected resumable session.

        :param session: has ``take_over()``, which detaches it now (see :meth:`claim`).
        :returns: its token, for its CONNECTED.
        """
        token = new_token()
        self._live[token] = (login, session)
        if self.directory is not None:
            self._keys[token_key(token)] = token
            self._file_live(token, login, session)
        return token

    def forget(self, token: str, session: Any) -> None:
        """``session`` ended for good (DISCONNECT, an error): its token is void."""
        live = self._live.get(token)
        if live is not None and live[1] is session:
            del self._live[token]
            self._recent.pop(token, None)
            self._unfile(token)

    def leave(self, token: str, session: Any) -> None:
        """
        The broker stops while ``session`` is connected: in a cluster its
        record stays in the directory, filed afresh (its streams' offsets as
        they are now), so that its client resumes on another node, told
        ``resume-gap:true`` (what this node kept goes with it), until the
        record expires one window after this node's last renewal.  On one node
        the session ends as :meth:`forget` ends it.
        """
        live = self._live.get(token)
        if live is None or live[1] is not session:
            return
        if self.directory is None:
            self.forget(token, session)
            return
        del self._live[token]
        self._recent.pop(token, None)
        self._file_live(token, live[0], session)
        self._filed.pop(token, None)
        self._keys.pop(token_key(token), None)

    def new_buffer(self, token: str | None = None) -> ResumeBuffer:
        """
        :param token: the token of the connected session the buffer is for,
            whose buffer is then counted (:attr:`connected_bytes`) until the
            session detaches or ends.
        :returns: an empty buffer of this book's size, for a resumable session.
        """
        buffer = ResumeBuffer(self.buffer_limit)
        if token is not None:
            self._recent[token] = buffer
        return buffer

    def detach(self, record: Detached) -> None:
        """Keep a session that lost its connection, for the window."""
        self._live.pop(record.token, None)
        self._recent.pop(record.token, None)
        record.since = self._clock.seconds()
        record.expires = record.since + self.window
        self._detached[record.token] = record
        if self.directory is not None:
            key = token_key(record.token)
            self._keys[key] = record.token
            self._filed.pop(record.token, None)
            self.directory.file(
                key,
                SessionRecord(record.login, record.version, tuple(record.subscriptions)),
            )
        if self._timer is None:
            self._timer = self._clock.callLater(self.window, self._expire)

    def claim(self, token: str, login: str, version: str) -> Detached | None:
        """
        A CONNECT presented ``token``: take its session, if it may.

        :returns: the record, no longer the book's; or ``None`` for a token that
            is unknown, expired, another login's, or from a session of another
            protocol version (whose kept frames the client could not read).
        """
        live = self._live.get(token)
        if live is not None and live[0] == login:
            live[1].take_over()
        record = self._detached.get(token)
        if record is None or record.login != login:
            self.refused += 1
            return None
        if record.version != version or record.expires <= self._clock.seconds():
            # The record is of no use any more (or about to expire): let it go.
            del self._detached[token]
            self._unfile(token)
            record.release()
            self.refused += 1
            if record.version == version:
                self.expired += 1
            return None
        del self._detached[token]
        self.resumed += 1
        self._unfile(token)
        return record

    def hand_over(self, key: str, last: Last | None) -> Handover | None:
        """
        Another node resumes the session filed under ``key`` (it took the record
        from the directory, checking login and version): give it up.  A session
        that still looks connected is taken over first, as on one node.

        :param last: what the client says it got last (see :func:`missed`).
        :returns: what the client missed and its subscriptions now, or ``None``
            for a session this book no longer keeps.
        """
        token = self._keys.get(key)
        if token is None:
            return None
        live = self._live.get(token)
        if live is not None:
            live[1].take_over()
        record = self._detached.pop(token, None)
        self._unfile(token)
        if record is None:
            return None
        frames, gap = missed(record, last)
        record.release()
        return Handover(tuple(record.subscriptions), tuple(frames), gap)

    def refresh(self) -> None:
        """
        File again the records of the connected sessions whose subscriptions
        changed (or whose streams moved on) since they were filed: called by
        the directory about once a second, so that a burst of SUBSCRIBEs costs
        one write, and none while nothing changes.
        """
        filed = self._filed
        for token, (login, session) in self._live.items():
            if filed.get(token) != signature(session.subscriptions):
                self._file_live(token, login, session)

    def _file_live(self, token: str, login: str, session: Any) -> None:
        self._filed[token] = signature(session.subscriptions)
        self.directory.file(
            token_key(token),
            SessionRecord(login, session.version, tuple(session.resume_subscriptions())),
        )

    def _unfile(self, token: str) -> None:
        """``token``'s session is no longer this book's: its record goes."""
        if self.directory is None:
            return
        key = token_key(token)
        self._filed.pop(token, None)
        if self._keys.pop(key, None) is not None:
            self.directory.drop(key)

    def close(self) -> None:
        """The broker stops: let every detached session go."""
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
        records, self._detached = self._detached, {}
        for token, record in records.items():
            self._unfile(token)
            record.release()

    def _expire(self) -> None:
        """Let go of the records whose window has closed; wait for the next one."""
        self._timer = None
        now = self._clock.seconds()
        detached = self._detached
        while detached:
            token, record = next(iter(detached.items()))
            if record.expires > now:
                self._timer = self._clock.callLater(record.expires - now, self._expire)
                return
            del detached[token]
            self._unfile(token)
            record.release()
            self.expired += 1

    # -- what operators see and do (stompbroker.stats, stompbroker.broker.sessions) --

    @property
    def connected(self) -> int:
        """How many resumable sessions are connected."""
        return len(self._live)

    @property
    def connected_bytes(self) -> int:
        """Bytes the connected resumable sessions keep of what they were sent lately."""
        return sum(buffer.size for buffer in self._recent.values())

    def held_bytes(self) -> int:
        """:returns: bytes held in every resume buffer, connected and detached."""
        return self.connected_bytes + self.buffered_bytes

    def sessions(self) -> list[Detached]:
        """:returns: the detached sessions, the soonest to expire first."""
        return list(self._detached.values())

    def end(self, session: str) -> Detached | None:
        """
        End a detached session for good: its token is void, its subscriptions
        are given back to the broker.

        :param session: its session id.
        :returns: the record it was, or ``None`` if no detached session has that id.
        """
        for token, record in self._detached.items():
            if record.session == session:
                del self._detached[token]
                self._unfile(token)
                record.release()
                self.ended += 1
                return record
        return None

    def shed(self) -> int:
        """
        Memory is short: drop the older half of every detached session's
        buffer (their clients are away, and are told ``resume-gap:true`` if
        they come back for what went); when detached sessions hold nothing,
        the older half of every connected session's buffer, which only a
        connection dying now would have needed.  Called on each memory sample
        while memory is over the high mark, so that buffers halve until it
        falls, rather than hold publishers back.

        :returns: the bytes dropped.
        """
        buffers = [record.buffer for record in self._detached.values() if record.buffer.size]
        if not buffers:
            buffers = [buffer for buffer in self._recent.values() if buffer.size]
        freed = 0
        for buffer in buffers:
            kept = len(buffer)
            freed += buffer.shrink(buffer.size // 2)
            self.shed_frames += kept - len(buffer)
        return freed
