"""
What a node has finished with in a queue's stream, remembered for a while, so
that an entry Redis hands it again is ended, not delivered again.

Redis can hand a node an entry it has finished with: after a restart from an
AOF written ``everysec``, the group's last-delivered id and pending list may be
those of up to a second earlier, so a read (``XREADGROUP ... >``) returns
entries already read, and the node's own pending list (read when it reconciles,
:meth:`~stompbroker.broker.engine.redis.stream_queue.StreamQueue.reconcile`) holds
entries whose ``XACK`` was lost, or is still queued in the writer.  Two records,
each of at least the last :data:`SETTLED_MEMORY` ids (oldest forgotten first):

- the **entries** the node ended without settling their message (given back
  to the stream, copies it would not deliver): Redis's id of the entry, with
  its stream for an entry of another of the queue's streams (a priority lane,
  the node's own);
- the **messages** it settled (acknowledged, dead-lettered, expired): the
  broker's message id, which their entries decode to, so that the entry
  handed out again, or a second copy of the message (a re-sent ``XADD``,
  under another entry id), is ended too.

Each record is two generations of a plain dict: ids go into the newer, and
when it holds :data:`SETTLED_MEMORY` it becomes the older and the one older
than it is forgotten at once.  So a record keeps between one and two times
that many ids, for one dict store an id, where an ``OrderedDict`` trimmed at
each id cost about ten times as much (its ``popitem(last=False)`` on a full
record): a node settles every message this way.

Pure: no Redis, no clock.
"""

from __future__ import annotations

from collections.abc import Hashable

__all__ = ["SETTLED_MEMORY", "RecentlySettled"]

#: How many entry ids, and as many message ids, a queue's record keeps: more
#: than a second of acknowledgements at the rates one node reaches
#: (docs/cluster.md, "Redis restarts"), at about 150 bytes each.
SETTLED_MEMORY = 20_000


class RecentlySettled:
    """
    The entries a node ended, and the messages its consumers acknowledged, of one queue.

    :param limit: how many of each it keeps at least (and at most twice as
        many); the oldest are forgotten first.
    :raises ValueError: for a limit under 1.
    """

    __slots__ = ("limit", "_entries", "_entries_before", "_messages", "_messages_before")

    def __init__(self, limit: int = SETTLED_MEMORY) -> None:
        if limit < 1:
            raise ValueError(f"a record of settled messages keeps 1 or more, got {limit}")
        self.limit = limit
        #: The newer and the older generation of each record.
        self._entries: dict[Hashable, None] = {}
        self._entries_before: dict[Hashable, None] = {}
        self._messages: dict[str, None] = {}
        self._messages_before: dict[str, None] = {}

    def __len__(self) -> int:
        """:returns: how many entry ids it holds."""
        return len(self._entries) + len(self._entries_before)

    def ended(self, entry_id: Hashable) -> None:
        """
        Remember that this node ended an entry (``XACK``/``XDEL`` queued).

        :param entry_id: its id, or ``(stream, id)`` (as the queue keys it).
        """
        entries = self._entries
        entries[entry_id] = None
        if len(entries) >= self.limit:
            self._entries_before, self._entries = entries, {}

    def acknowledged(self, message_id: str) -> None:
        """Remember that a consumer here acknowledged a message: every copy of it is done."""
        messages = self._messages
        messages[message_id] = None
        if len(messages) >= self.limit:
            self._messages_before, self._messages = messages, {}

    def knows(self, entry_id: Hashable, message_id: str | None = None) -> bool:
        """
        :returns: whether the entry was ended here, or its message acknowledged
            here: Redis handing it out again is a roll-back or a duplicate, to end.
        """
        return (
            entry_id in self._entries
            or entry_id in self._entries_before
            or (
                message_id is not None
                and (message_id in self._messages or message_id in self._messages_before)
            )
        )
