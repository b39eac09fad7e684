"""
What a session keeps for a client whose socket cannot take more yet.

While the transport's buffer is full, a session writes into a :class:`Backlog`
instead, and sends it, in order, once the transport has drained.  Two kinds of
bytes wait there:

- **topic messages** to ``auto``-ack subscriptions, the only thing that keeps
  coming to a client that does not read (the broker stops its queue
  subscriptions), and the only thing a slow-consumer policy may drop
  (:meth:`Backlog.drop_oldest`);
- **everything else** (receipts, errors, queue messages, heart-beats), which is
  never dropped.  Little of it comes while a client is behind, unless the
  client sends frames whose answers it does not read; the session then stops
  reading from it.

Each kind's bytes are counted, so the session can hold each to its limit.
Dropping the oldest topic message is O(1): it is blanked in place and skipped
when the backlog is sent; blanked entries are swept out once they outnumber the
live ones, so that a client that never reads cannot grow the backlog with them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Any

#: Blanked entries tolerated before a sweep, whatever the live count.
_SWEEP_AFTER = 64


class Backlog:
    """
    Bytes waiting for a client, in order, topic messages apart.

    :ivar active: whether the session writes here rather than to the transport.
    :ivar full: whether the transport has asked for no more writes and not yet
        for more (between its ``pauseProducing`` and ``resumeProducing``).
    :ivar grace: bytes the session may still write straight to the full transport.
    :ivar closing: the timer that closes a client disconnected for slowness, if any.
    :ivar advised: whether the client was warned in this episode (see
        :mod:`~stompbroker.protocol.advisory`).
    :ivar advising: the timer that publishes the operators' advisory, if any.
    :ivar message_bytes: bytes of topic messages waiting.
    :ivar other_bytes: bytes of everything else waiting.
    """

    __slots__ = (
        "active",
        "full",
        "grace",
        "closing",
        "advised",
        "advising",
        "message_bytes",
        "other_bytes",
        "_entries",
        "_messages",
        "_blanks",
    )

    def __init__(self) -> None:
        self.active = False
        self.full = False
        self.grace = 0
        self.closing: Any = None
        self.advised = False
        self.advising: Any = None
        self.message_bytes = 0
        self.other_bytes = 0
        #: ``[data, is_message]`` in write order; ``data`` is ``None`` once dropped.
        self._entries: deque[list] = deque()
        #: The entries of topic messages not dropped, oldest first.
        self._messages: deque[list] = deque()
        self._blanks = 0

    def __len__(self) -> int:
        """:returns: how many writes wait (dropped ones excluded)."""
        return len(self._entries) - self._blanks

    def keep(self, data: bytes) -> int:
        """
        Keep bytes that must not be lost.

        :returns: the bytes of that kind now waiting.
        """
        self._entries.append([data, False])
        self.other_bytes += len(data)
        return self.other_bytes

    def keep_first(self, data: bytes) -> None:
        """Keep bytes that must not be lost, ahead of everything waiting (an advisory)."""
        self._entries.appendleft([data, False])
        self.other_bytes += len(data)

    def keep_message(self, data: bytes) -> int:
        """
        Keep one topic message, which a policy may drop.

        :returns: the bytes of topic messages now waiting.
        """
        entry = [data, True]
        self._entries.append(entry)
        self._messages.append(entry)
        self.message_bytes += len(data)
        return self.message_bytes

    @property
    def message_count(self) -> int:
        """How many topic messages wait (dropped ones excluded)."""
        return len(self._messages)

    def drop_oldest(self, limit: int, keep: int = 0) -> int:
        """
        Drop topic messages, oldest first, until at most ``limit`` bytes of them wait.

        :param keep: the newest messages never dropped, whatever their size.
        :returns: how many were dropped.
        """
        dropped = 0
        messages = self._messages
        while self.message_bytes > limit and len(messages) > keep:
            entry = messages.popleft()
            self.message_bytes -= len(entry[0])
            entry[0] = None
            dropped += 1
        self._blanks += dropped
        if self._blanks > _SWEEP_AFTER and self._blanks > len(self._entries) // 2:
            self._entries = deque(entry for entry in self._entries if entry[0] is not None)
            self._blanks = 0
        return dropped

    def drain(self) -> Iterator[bytes]:
        """
        Take the waiting bytes, in order, one write at a time.

        Each is taken as it is yielded, so a caller that stops early (the
        transport is full again) leaves the rest waiting.
        """
        entries = self._entries
        while entries:
            data, is_message = entries.popleft()
            if data is None:
                self._blanks -= 1
                continue
            if is_message:
                self._messages.popleft()
                self.message_bytes -= len(data)
            else:
                self.other_bytes -= len(data)
            yield data

    def clear(self) -> None:
        """Forget everything waiting (the connection is gone)."""
        self._entries.clear()
        self._messages.clear()
        self.message_bytes = self.other_bytes = self._blanks = 0
