"""
Message groups: every message of a group goes to one consumer of the queue, in order.

Headers (SEND), as ActiveMQ and Artemis take them from STOMP clients:

- ``JMSXGroupID``: the group.  The first message of a group that a queue hands
  out picks a consumer (the queue's usual choice: round-robin, priorities,
  exclusive); from then on that consumer, the group's *owner*, gets all of the
  group's messages, in the order they were sent, until it leaves.  Then the
  group moves to the next consumer chosen, with the unacknowledged messages
  redelivered first.
- ``JMSXGroupSeq``: the message's number in its group.  ``-1`` closes the group:
  that message still goes to the owner, and the next message of the group picks
  an owner afresh.  Other values are not checked (JMS numbers from 1).
- ``JMSXGroupFirstForConsumer:true`` is added (as ActiveMQ adds it) to the first
  message of a group that a consumer receives, including after the group moved
  to it, so that the consumer can reset what it keeps per group.

How it plugs in
---------------
The router reads the headers once per SEND with :func:`parse_group` and keeps
the result on the message (``group: str | None`` and ``closes_group: bool``
fields of :class:`~stompbroker.protocol.message.Message`, persisted with it).  A
:class:`~stompbroker.broker.queues.WorkerQueue` whose messages have groups keeps
a :class:`GroupAssignments` and, in dispatch:

1. first delivers messages that were held for owners that have room again:
   ``while (held := groups.pop_held(has_room)): deliver(*held)``;
2. then, for a message taken from the head of ``pending`` with a group, calls
   ``groups.route(group, message, has_room, choose, closes=...)`` where
   ``choose`` is the queue's usual pick (``ConsumerChoice.next(has_room)``):

   - ``(consumer, first)``: deliver to ``consumer``, with
     :func:`first_for_consumer` applied when ``first``;
   - :data:`HELD`: the owner is full, so the group took the message into its
     own line; carry on with the next pending message, which may be of another
     group (a full consumer does not stall the groups of others);
   - ``None``: no consumer has room; put the message back at the head and stop.

3. when a consumer leaves, ``groups.release(consumer)`` forgets its groups and
   returns their held messages, which go back to the head of ``pending`` before
   the consumer's unacknowledged ones are requeued on top of them (those are older).

Held messages stay in memory only; the store keeps them under the queue as
before (they are pending there), so a restart puts them back in the queue.  The
expiry sweep does not see them; the queue's expiry check at delivery still
drops an expired one.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable, Iterator, Mapping
from typing import Final, Generic, TypeVar

from attrs import evolve

from stompbroker.protocol.errors import MalformedFrame
from stompbroker.protocol.message import Message

__all__ = [
    "FIRST_FOR_CONSUMER_HEADER",
    "GROUP_HEADER",
    "HELD",
    "SEQUENCE_HEADER",
    "GroupAssignments",
    "first_for_consumer",
    "parse_group",
]

#: SEND header naming a message's group.
GROUP_HEADER = "JMSXGroupID"
#: SEND header numbering a message in its group; -1 closes the group.
SEQUENCE_HEADER = "JMSXGroupSeq"
#: MESSAGE header on the first message of a group a consumer receives.
FIRST_FOR_CONSUMER_HEADER = "JMSXGroupFirstForConsumer"
#: The sequence number that closes a group.
CLOSING_SEQUENCE = -1

#: :meth:`GroupAssignments.route`'s answer when the message waits in its group's line.
HELD: Final = "held"

_C = TypeVar("_C", bound=Hashable)
_M = TypeVar("_M")


def parse_group(headers: Mapping[str, str]) -> tuple[str | None, bool]:
    """
    Read a SEND's group headers.

    :param headers: the frame's headers, first of a repeated header winning.
    :returns: ``(group, closes)``: the group, or ``None`` for a message in none
        (``JMSXGroupSeq`` alone means nothing); and whether its ``JMSXGroupSeq``
        is ``-1``.
    :raises MalformedFrame: for an empty ``JMSXGroupID`` or a ``JMSXGroupSeq``
        that is not an integer.
    """
    group = headers.get(GROUP_HEADER)
    if group is None:
        return None, False
    if not group:
        raise MalformedFrame(
            f"empty {GROUP_HEADER} header",
            f"{GROUP_HEADER} names a message group and must not be empty; leave it out"
            " for a message in no group.",
        )
    sequence = headers.get(SEQUENCE_HEADER)
    if sequence is None:
        return group, False
    digits = sequence[1:] if sequence[:1] == "-" else sequence
    if not (digits.isascii() and digits.isdigit()):
        raise MalformedFrame(
            f"invalid {SEQUENCE_HEADER} header",
            f"{SEQUENCE_HEADER} must be an integer (-1 closes the group), got {sequence!r}",
        )
    return group, int(sequence) == CLOSING_SEQUENCE


def first_for_consumer(message: Message) -> Message:
    """
    :returns: a copy of ``message`` that says it is the first of its group for the
        consumer; a copy, with its own (empty) wire cache, because the encoded bytes
        that the original caches must not carry the extra header to other
        subscribers, nor miss it here.
    """
    return evolve(
        message,
        headers=message.headers + ((FIRST_FOR_CONSUMER_HEADER, "true"),),
        wire={},
    )


class GroupAssignments(Generic[_C, _M]):
    """
    One queue's groups: who owns which, and the messages waiting for a full owner.

    Consumers and messages are opaque here: consumers need only be hashable, and
    whether one has room is asked of the caller.
    """

    __slots__ = ("_owners", "_groups", "_held")

    def __init__(self) -> None:
        self._owners: dict[str, _C] = {}
        #: consumer -> the groups it owns, in the order it got them (a dict, for a
        #: deterministic order of the messages :meth:`release` returns).
        self._groups: dict[_C, dict[str, None]] = {}
        #: group -> its held messages, oldest first, each with whether it closes the group.
        self._held: dict[str, deque[tuple[_M, bool]]] = {}

    def __len__(self) -> int:
        """:returns: how many groups have an owner."""
        return len(self._owners)

    @property
    def held_count(self) -> int:
        """How many messages wait for their group's owner to have room."""
        return sum(map(len, self._held.values()))

    def held_messages(self) -> Iterator[_M]:
        """The held messages, group by group, oldest first within a group (for browsing)."""
        for line in self._held.values():
            for message, _ in line:
                yield message

    def owner(self, group: str) -> _C | None:
        """:returns: the consumer that owns ``group``, or ``None``."""
        return self._owners.get(group)

    def groups_of(self, consumer: _C) -> frozenset[str]:
        """:returns: the groups ``consumer`` owns."""
        return frozenset(self._groups.get(consumer, ()))

    def route(
        self,
        group: str,
        message: _M,
        has_room: Callable[[_C], bool],
        choose: Callable[[], _C | None],
        *,
        closes: bool = False,
    ) -> tuple[_C, bool] | str | None:
        """
        Decide where a message of a group goes.

        :param group: the message's group.
        :param message: the message, kept in the group's line if it must wait.
        :param has_room: whether a consumer may take a message now.
        :param choose: picks a consumer with room for a group without an owner, or
            returns ``None``; called only then.
        :param closes: the message's ``JMSXGroupSeq`` is -1: the group forgets its
            owner once the message is handed out.
        :returns: ``(consumer, first)`` to deliver it now (``first`` when the group
            just became the consumer's); :data:`HELD` if it waits in its group's line
            (the owner is full, or older messages of the group wait already); ``None``
            if the group has no owner and no consumer has room (the message stays
            in the queue).
        """
        owner = self._owners.get(group)
        if owner is not None:
            line = self._held.get(group)
            if line is None and has_room(owner):
                if closes:
                    self._forget(group)
                return owner, False
            if line is None:
                line = self._held[group] = deque()
            line.append((message, closes))
            return HELD
        chosen = choose()
        if chosen is None:
            return None
        if not closes:
            self._owners[group] = chosen
            self._groups.setdefault(chosen, {})[group] = None
        return chosen, True

    def pop_held(self, has_room: Callable[[_C], bool]) -> tuple[_M, _C] | None:
        """
        Take the oldest held message of a group whose owner has room again.

        :returns: ``(message, owner)`` to deliver (never the first for its owner), or
            ``None`` if no held message can go now.
        """
        for group, line in self._held.items():
            owner = self._owners[group]
            if has_room(owner):
                message, closes = line.popleft()
                if not line:
                    del self._held[group]
                    if closes:
                        self._forget(group)
                return message, owner
        return None

    def release(self, consumer: _C) -> list[_M]:
        """
        Forget a consumer that left: its groups will pick new owners.

        :returns: the messages its groups held, group by group in the order it got
            them and oldest first within each group, to go back to the head of the
            queue (behind the consumer's unacknowledged messages, which are older).
        """
        returned: list[_M] = []
        for group in self._groups.pop(consumer, ()):
            del self._owners[group]
            line = self._held.pop(group, None)
            if line is not None:
                returned.extend(message for message, _ in line)
        return returned

    def _forget(self, group: str) -> None:
        """Drop a closed group's owner."""
        owner = self._owners.pop(group)
        groups = self._groups[owner]
        del groups[group]
        if not groups:
            del self._groups[owner]
