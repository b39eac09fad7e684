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
The router reads the headers once per SEND with :func:`parse_group` (only for
a SEND that has ``JMSXGroupID``) and keeps the result on the message (its
``group`` and ``closes_group``); a message rebuilt from the store gets them back
from its stored headers (:func:`stored_group`).  The first grouped message a
:class:`~stompbroker.broker.queueing.queues.WorkerQueue` takes hands its dispatch to a
:class:`~stompbroker.broker.queueing.dispatch.FeatureDispatch`, which keeps the owners in
a :class:`GroupAssignments`, and swaps the queue's ``pending`` for a
:class:`GroupedPending`: the queue's order as before (``main``), plus one *line*
per group whose owner is full.

- A grouped message taken from ``main`` whose group has an owner goes to it if
  it has room and the group has no line; otherwise it joins the end of the
  group's line.  So a full owner stalls neither the groups of others nor the
  dispatch: every message costs the same whatever waits, and a group keeps its
  order.
- A dispatch first serves the lines of owners that have room again, oldest
  first, taking turns among an owner's groups.
- A message that comes back (NACK, a lost connection) goes to the head of its
  group's line if it has one, else to the head of ``main``: ahead of the
  group's later messages either way, as ActiveMQ redelivers.
- When a consumer leaves, :meth:`GroupAssignments.release` forgets its groups
  and their lines go back to the head of ``main`` (its unacknowledged messages
  then go ahead of them); the next message of each group picks a new owner,
  first-for-consumer again.

The lines are part of ``pending`` for everything but the dispatch: its length
(a queue's depth), iteration (browsing, the expiry sweep, management's
browse, move and purge) and ``clear`` see them.  The store keeps them as any
waiting message.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterable, Iterator, Mapping
from typing import Any, Generic, TypeVar

from attrs import evolve

from stompbroker.broker.queueing.priorities import DEFAULT_PRIORITY, PendingMessages
from stompbroker.protocol.errors import MalformedFrame
from stompbroker.protocol.message import Message

__all__ = [
    "FIRST_FOR_CONSUMER_HEADER",
    "GROUP_HEADER",
    "SEQUENCE_HEADER",
    "GroupAssignments",
    "GroupedPending",
    "first_for_consumer",
    "stored_group",
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


_C = TypeVar("_C", bound=Hashable)


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


def stored_group(headers: Iterable[tuple[str, str]]) -> tuple[str | None, bool]:
    """
    :returns: what :func:`parse_group` reads from a stored message's headers
        (first of a repeated header winning), for a message the store gives back.
    """
    found: dict[str, str] = {}
    for name, value in headers:
        if name in (GROUP_HEADER, SEQUENCE_HEADER) and name not in found:
            found[name] = value
    return parse_group(found)


def first_for_consumer(message: Message) -> Message:
    """
    :returns: a copy of ``message`` that says it is the first of its group for the
        consumer (once, even if an earlier delivery marked it already); a copy,
        with its own (empty) wire cache, because the encoded bytes that the
        original caches must not carry the extra header to other subscribers,
        nor miss it here.
    """
    headers = tuple(pair for pair in message.headers if pair[0] != FIRST_FOR_CONSUMER_HEADER)
    return evolve(message, headers=headers + ((FIRST_FOR_CONSUMER_HEADER, "true"),), wire={})


class GroupAssignments(Generic[_C]):
    """
    One queue's groups: which consumer owns which.

    Consumers are opaque here: they need only be hashable.
    """

    __slots__ = ("_owners", "_groups")

    def __init__(self) -> None:
        self._owners: dict[str, _C] = {}
        #: consumer -> the groups it owns, in the order it got them.
        self._groups: dict[_C, dict[str, None]] = {}

    def __len__(self) -> int:
        """:returns: how many groups have an owner."""
        return len(self._owners)

    def owner(self, group: str) -> _C | None:
        """:returns: the consumer that owns ``group``, or ``None``."""
        return self._owners.get(group)

    def groups_of(self, consumer: _C) -> frozenset[str]:
        """:returns: the groups ``consumer`` owns."""
        return frozenset(self._groups.get(consumer, ()))

    def assign(self, group: str, consumer: _C) -> None:
        """Make ``consumer`` the owner of ``group``, which has none."""
        self._owners[group] = consumer
        self._groups.setdefault(consumer, {})[group] = None

    def forget(self, group: str) -> None:
        """
        Drop a group's owner (the group is closed, or must move): its next message
        picks an owner afresh.  A no-op for a group without one.
        """
        owner = self._owners.pop(group, None)
        if owner is None:
            return
        groups = self._groups[owner]
        del groups[group]
        if not groups:
            del self._groups[owner]

    def release(self, consumer: _C) -> frozenset[str]:
        """
        Forget a consumer that left: its groups will pick new owners.

        :returns: the groups it owned.
        """
        groups = self._groups.pop(consumer, {})
        for group in groups:
            del self._owners[group]
        return frozenset(groups)


class GroupedPending(Generic[_C]):
    """
    A grouped queue's waiting messages: the queue's order, and the lines of full owners.

    It has the container methods a :class:`~stompbroker.broker.queueing.queues.WorkerQueue`
    uses on its ``pending`` (``append``, ``extendleft``, ``extend``, ``clear``,
    iteration, ``len``, truth), so it replaces that container as is; the
    dispatch takes from :attr:`main` and the lines itself.

    :param main: the queue's pending container until now (a deque, or
        :class:`~stompbroker.broker.queueing.priorities.PendingMessages`), kept as :attr:`main`.

    :ivar main: the messages in the queue's order, not in a line.
    """

    __slots__ = ("main", "_lines", "_line_owner", "_by_owner", "_held")

    def __init__(self, main: Any) -> None:
        self.main = main
        #: group -> its line, oldest first.
        self._lines: dict[str, deque[Message]] = {}
        self._line_owner: dict[str, _C] = {}
        #: owner -> its groups that have lines, in the order they take turns.
        self._by_owner: dict[_C, dict[str, None]] = {}
        self._held = 0

    def __repr__(self) -> str:
        lines = len(self._lines)
        return f"<GroupedPending {len(self.main)} in order, {self._held} in {lines} lines>"

    def __len__(self) -> int:
        """:returns: how many messages wait, lines included."""
        return len(self.main) + self._held

    def __bool__(self) -> bool:
        return self._held > 0 or bool(self.main)

    def __iter__(self) -> Iterator[Message]:
        """The lines' messages (which came first), then the others in the queue's order."""
        for line in self._lines.values():
            yield from line
        yield from self.main

    @property
    def held(self) -> int:
        """How many messages wait in lines."""
        return self._held

    def append(self, message: Message) -> None:
        """Add a message at the tail; the first of another priority switches to ten levels."""
        main = self.main
        if message.priority != DEFAULT_PRIORITY and type(main) is deque:
            main = self.main = PendingMessages(items=main)
        main.append(message)

    def extend(self, messages: Iterable[Message]) -> None:
        """Append messages in order (the expiry sweep's survivors: their lines re-form)."""
        for message in messages:
            self.append(message)

    def appendleft(self, message: Message) -> None:
        """Put a returning message at the head of its group's line, or of the queue."""
        line = self._lines.get(message.group) if message.group is not None else None
        if line is None:
            self.main.appendleft(message)
        else:
            line.appendleft(message)
            self._held += 1

    def extendleft(self, messages: Iterable[Message]) -> None:
        """As :meth:`deque.extendleft`: pass ``reversed(messages)`` to keep their order."""
        for message in messages:
            self.appendleft(message)

    def clear(self) -> None:
        """Drop every message, lines included."""
        self.main.clear()
        self._lines.clear()
        self._line_owner.clear()
        self._by_owner.clear()
        self._held = 0

    def has_line(self, group: str) -> bool:
        """:returns: whether ``group`` has messages waiting for its owner."""
        return group in self._lines

    def hold(self, group: str, owner: _C, message: Message) -> None:
        """Put ``message`` at the end of ``group``'s line, for ``owner``."""
        line = self._lines.get(group)
        if line is None:
            line = self._lines[group] = deque()
            self._line_owner[group] = owner
            self._by_owner.setdefault(owner, {})[group] = None
        line.append(message)
        self._held += 1

    def owners(self) -> list[_C]:
        """:returns: the owners that have messages in lines."""
        return list(self._by_owner)

    def line_groups(self, owner: _C) -> list[str]:
        """:returns: the groups of ``owner`` that have lines."""
        return list(self._by_owner.get(owner, ()))

    def next_of(self, owner: _C) -> tuple[str, Message] | None:
        """:returns: the group whose turn it is among ``owner``'s lines, and its oldest message."""
        groups = self._by_owner.get(owner)
        if not groups:
            return None
        group = next(iter(groups))
        return group, self._lines[group][0]

    def take(self, group: str) -> Message:
        """Take the oldest message of ``group``'s line; the group's turn passes to the next."""
        line = self._lines[group]
        message = line.popleft()
        self._held -= 1
        owner = self._line_owner[group]
        groups = self._by_owner[owner]
        del groups[group]
        if line:
            groups[group] = None
        else:
            del self._lines[group], self._line_owner[group]
            if not groups:
                del self._by_owner[owner]
        return message

    def release(self, group: str) -> None:
        """Put ``group``'s line, if it has one, back at the head of the queue, in order."""
        line = self._lines.pop(group, None)
        if line is None:
            return
        owner = self._line_owner.pop(group)
        groups = self._by_owner[owner]
        del groups[group]
        if not groups:
            del self._by_owner[owner]
        self._held -= len(line)
        self.main.extendleft(reversed(line))
