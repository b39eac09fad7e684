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
"""

from __future__ import annotations

import secrets
from collections import deque
from collections.abc import Callable
from typing import Any

from attrs import define, field

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


class ResumeBuffer:
    """
    The latest MESSAGE frames of a resumable session's ``auto``-ack topic
    subscriptions, encoded as they were (or would have been) written, oldest
    first, bounded in bytes.

    While the client is connected it holds what was written to its socket
    lately: what a dead network swallows before the broker notices (a
    heart-beat later) is still here, and the client's ``resume-last-*``
    headers say where its copy ends (:meth:`replay`).  Once the session is
    detached it holds what the client misses.  Past ``limit`` the oldest frames
    are dropped; :meth:`replay` says when a client's resumption needed one of them.

    :ivar size: bytes kept.
    :ivar appended: frames ever appended: the ordinal of the next one.
    :ivar frames: the frames kept, oldest first.  The session's delivery path
        does :meth:`append`'s work inline (one call less per message); it
        calls :meth:`trim` past ``limit``.
    """

    __slots__ = ("limit", "size", "appended", "frames")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self.appended = 0
        self.frames: deque[bytes] = deque()

    def __len__(self) -> int:
        return len(self.frames)

    @property
    def first(self) -> int:
        """The ordinal of the oldest frame kept (:attr:`appended` when none is)."""
        return self.appended - len(self.frames)

    def append(self, data: bytes) -> None:
        """Keep one frame; drop the oldest ones while more than ``limit`` bytes are kept."""
        self.frames.append(data)
        self.appended += 1
        self.size += len(data)
        if self.size > self.limit:
            self.trim()

    def trim(self) -> None:
        """
        Drop the oldest frames until at most seven eighths of ``limit`` bytes
        are kept: room for a run of appends before the next trim, so that a
        busy session trims once per many messages, not on each.
        """
        self.shrink(self.limit - self.limit // 8)

    def shrink(self, target: int) -> int:
        """
        Drop the oldest frames until at most ``target`` bytes are kept.

        :returns: the bytes dropped.
        """
        frames = self.frames
        before = self.size
        while self.size > target and frames:
            self.size -= len(frames.popleft())
        return before - self.size

    def find(self, prefix: bytes, message_id: str) -> int | None:
        """
        :param prefix: the start of the subscription's MESSAGE frames
            (:func:`~stompbroker.protocol.encoder.message_prefix`).
        :returns: the ordinal of the newest frame kept of that subscription
            with that ``message-id``, or ``None``.
        """
        needle = b"\nmessage-id:" + message_id.encode("utf-8") + b"\n"
        frames = self.frames
        for back in range(len(frames) - 1, -1, -1):
            data = frames[back]
            if data.startswith(prefix):
                head = data.find(b"\n\n")
                if needle in data[: head + 1]:
                    return self.first + back
        return None

    def replay(self, last: int | None, mark: int) -> tuple[list[bytes], bool]:
        """
        What a resumed client must get, and whether some of it is lost.

        :param last: the ordinal of the last frame the client says it got
            (:meth:`find`); ``None`` when it did not say, or named a frame no
            longer kept.
        :param mark: the ordinal of the first frame appended after the
            connection was lost.
        :returns: the frames after ``last`` (after ``mark`` when the client did
            not say), oldest first; and ``True`` when frames that belong there
            were dropped.
        """
        start = mark if last is None else last + 1
        first = self.first
        frames = list(self.frames)[max(start - first, 0) :]
        return frames, start < first


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
        return token

    def forget(self, token: str, session: Any) -> None:
        """``session`` ended for good (DISCONNECT, an error): its token is void."""
        live = self._live.get(token)
        if live is not None and live[1] is session:
            del self._live[token]
            self._recent.pop(token, None)

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
            record.release()
            self.refused += 1
            if record.version == version:
                self.expired += 1
            return None
        del self._detached[token]
        self.resumed += 1
        return record

    def close(self) -> None:
        """The broker stops: let every detached session go."""
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
        records, self._detached = self._detached, {}
        for record in records.values():
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
