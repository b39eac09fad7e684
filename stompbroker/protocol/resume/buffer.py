"""
The bounded buffer of a resumable session's latest MESSAGE frames: what a dead
network swallowed before the broker noticed, and what an absent client missed
(see :mod:`stompbroker.protocol.resume.resume_book`).  Pure: bytes in, bytes out.
"""

from __future__ import annotations

from collections import deque

__all__ = ["ResumeBuffer"]


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
