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
  (:meth:`ResumeBook.hand_over`); see :mod:`~stompbroker.protocol.resume_records`.
"""

from __future__ import annotations

import secrets
from collections import deque
from collections.abc import Callable
from typing import Any

from attrs import define, field

from stompbroker.protocol.encoder import message_prefix
from stompbroker.protocol.resume_records import (
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
        frames = self.frames
        target = self.limit - self.limit // 8
        while self.size > target and frames:
            self.size -= len(frames.popleft())

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
    """

    token: str = field(repr=False)
    login: str
    version: str
    subscriptions: list[dict[str, str]]
    buffer: ResumeBuffer
    release: Callable[[], None] = field(repr=False)
    mark: int = 0
    expires: float = 0.0


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
            self._unfile(token)

    def new_buffer(self) -> ResumeBuffer:
        """:returns: an empty buffer of this book's size, for a resumable session."""
        return ResumeBuffer(self.buffer_limit)

    def detach(self, record: Detached) -> None:
        """Keep a session that lost its connection, for the window."""
        self._live.pop(record.token, None)
        record.expires = self._clock.seconds() + self.window
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
            return None
        if record.version != version or record.expires <= self._clock.seconds():
            # The record is of no use any more (or about to expire): let it go.
            del self._detached[token]
            self._unfile(token)
            record.release()
            return None
        del self._detached[token]
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
