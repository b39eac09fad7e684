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
:class:`~stompbroker.broker.queues.WorkerQueue` takes hands its dispatch to a
:class:`~stompbroker.broker.dispatch.FeatureDispatch`, which keeps a
:class:`GroupAssignments` and, for each grouped message taken from the head of
``pending``, asks :meth:`GroupAssignments.route`:

- ``(consumer, first)``: deliver to ``consumer``, with :func:`first_for_consumer`
  applied when ``first``;
- :data:`WAIT`: the owner is full: the message is put aside, as one that no
  consumer's selector takes, and goes back to the head of the queue, in its
  place, when the dispatch ends; the dispatch carries on with the messages
  behind it, which may be of other groups (a full consumer does not stall the
  groups of others), and puts aside every later message of the same group too,
  so that a group's order holds;
- ``None``: no consumer has room; the message stays at the head.

So a group's waiting messages never leave ``pending``: depth, browsing, purge,
expiry and the store see them as any other.  A message that comes back (NACK,
a lost connection) goes to the head of the queue as any other, and so to its
group's owner before the group's later messages, as ActiveMQ redelivers.  When
a consumer leaves, :meth:`GroupAssignments.release` forgets its groups; the
messages it held go back to the head, and the next of each group picks a new
owner (first-for-consumer again).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Final, Generic, TypeVar

from attrs import evolve

from stompbroker.protocol.errors import MalformedFrame
from stompbroker.protocol.message import Message

__all__ = [
    "FIRST_FOR_CONSUMER_HEADER",
    "GROUP_HEADER",
    "WAIT",
    "SEQUENCE_HEADER",
    "GroupAssignments",
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

#: :meth:`GroupAssignments.route`'s answer when the message must wait for its group's owner.
WAIT: Final = "wait"

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

    Consumers are opaque here (they need only be hashable), and whether one has
    room is asked of the caller.
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

    def route(
        self,
        group: str,
        has_room: Callable[[_C], bool],
        choose: Callable[[], _C | None],
        *,
        closes: bool = False,
    ) -> tuple[_C, bool] | str | None:
        """
        Decide where a message of a group goes.

        :param group: the message's group.
        :param has_room: whether the owner may take this message now (room, and
            its selector, if any, selects it).
        :param choose: picks a consumer for a group without an owner, or returns
            ``None``; called only then.
        :param closes: the message's ``JMSXGroupSeq`` is -1: the group forgets its
            owner once the message is handed out.
        :returns: ``(consumer, first)`` to deliver it now (``first`` when the group
            just became the consumer's); :data:`WAIT` if its owner cannot take it
            now; ``None`` if the group has no owner and ``choose`` found nobody.
        """
        owner = self._owners.get(group)
        if owner is not None:
            if not has_room(owner):
                return WAIT
            if closes:
                self.forget(group)
            return owner, False
        chosen = choose()
        if chosen is None:
            return None
        if not closes:
            self._owners[group] = chosen
            self._groups.setdefault(chosen, {})[group] = None
        return chosen, True

    def release(self, consumer: _C) -> frozenset[str]:
        """
        Forget a consumer that left: its groups will pick new owners.

        :returns: the groups it owned.
        """
        groups = self._groups.pop(consumer, {})
        for group in groups:
            del self._owners[group]
        return frozenset(groups)

    def forget(self, group: str) -> None:
        """
        Drop a group's owner (the group is closed, or must move): its next message
        picks an owner afresh.  A no-op for a group without one.
        """
        if group not in self._owners:
            return
        owner = self._owners.pop(group)
        groups = self._groups[owner]
        del groups[group]
        if not groups:
            del self._groups[owner]
