"""
Retained messages: a topic's last value, handed to each new subscriber first (Apollo's convention).

Headers:

- SEND ``retain:set`` (or ``retain:true``, which Apollo's manual uses in its
  example) to a ``/topic/``: besides being published as usual, the message becomes
  the topic's retained message, replacing the one before.
- SEND ``retain:remove``: the topic forgets its retained message; the SEND itself
  is published as usual (so current subscribers see the removal, as they saw the
  value).
- MESSAGE ``retained:true``: on the copy a new subscription receives when it
  starts, before anything published after it.  That copy drops ``retain`` (it is
  an instruction to the broker, not part of the value).

A SUBSCRIBE with a wildcard gets the retained message of every topic it matches,
oldest retained first.  Retained messages live in memory; a persistent one is
also kept in the message store and comes back after a restart
(:mod:`stompbroker.broker.features.retaining`).  An expired one is dropped when next
looked at.

How it plugs in
---------------
The router, on a SEND to a topic, reads :func:`parse_retain` (which refuses
``retain`` on a queue) and calls :meth:`RetainedMessages.set` or
:meth:`~RetainedMessages.remove` before fanning out.  When a topic subscription
starts, the broker delivers :func:`as_retained` of each message
:meth:`~RetainedMessages.matching` returns to that subscription alone, before
registering it in the subscription tree (so that nothing published meanwhile
overtakes it; the broker is single-threaded, so "before" is one call).  Durable
subscriptions get retained messages when created, not when they resume.
"""

from __future__ import annotations

from attrs import evolve

from stompbroker.broker.routing.destinations import TOPIC_PREFIX
from stompbroker.broker.routing.syntax import (
    is_wildcard,
    validate_destination,
    validate_pattern,
)
from stompbroker.broker.routing.topic_tree import SubscriptionTree
from stompbroker.protocol.errors import LimitExceeded, MalformedFrame, NotSupported
from stompbroker.protocol.message import Message

__all__ = [
    "DEFAULT_MAX_TOPICS",
    "REMOVE",
    "RETAINED_HEADER",
    "RETAIN_HEADER",
    "SET",
    "RetainedMessages",
    "as_retained",
    "parse_retain",
]

#: SEND header asking a topic to keep or forget its last value.
RETAIN_HEADER = "retain"
#: MESSAGE header on the retained copy a new subscriber receives.
RETAINED_HEADER = "retained"
#: What ``retain`` asks for.
SET = "set"
REMOVE = "remove"
_ACTIONS = {"set": SET, "true": SET, "remove": REMOVE}

#: Default bound on how many topics may hold a retained message at once.
DEFAULT_MAX_TOPICS = 100_000


def parse_retain(value: str | None, destination: str) -> str | None:
    """
    Read a SEND's ``retain`` header.

    :param value: the header's value, or ``None`` if absent.
    :param destination: the SEND's destination.
    :returns: :data:`SET`, :data:`REMOVE`, or ``None`` for a SEND without ``retain``.
    :raises MalformedFrame: for a value other than ``set``, ``true`` or ``remove``.
    :raises NotSupported: for ``retain`` on anything but a topic.
    """
    if value is None:
        return None
    action = _ACTIONS.get(value)
    if action is None:
        raise MalformedFrame(
            "invalid retain header",
            f"retain must be set (or true) to keep the message as the topic's last value,"
            f" or remove to forget it; got {value!r}",
        )
    if not destination.startswith(TOPIC_PREFIX):
        raise NotSupported(
            "retain is for topics only",
            f"{destination!r} is not a topic; only /topic/ destinations retain a last value.",
        )
    return action


def as_retained(message: Message) -> Message:
    """
    :returns: the copy a new subscriber receives: ``retained:true``, without
        ``retain``, with its own wire cache (the original's encoded bytes lack the
        header).
    """
    headers = tuple(pair for pair in message.headers if pair[0] != RETAIN_HEADER)
    return evolve(message, headers=(*headers, (RETAINED_HEADER, "true")), wire={})


class RetainedMessages:
    """
    The retained message of each topic that has one.

    Destinations are matched with the subscription tree's own rules (``/`` and
    ``.`` are one separator, ``*``, ``#`` and ``>`` wildcards): the topics are
    registered in a :class:`~stompbroker.broker.routing.topic_tree.SubscriptionTree` as
    exact patterns, so an exact subscription finds its topic with one lookup in
    any spelling; a wildcard subscription is tested against each retained topic
    (subscribing is rare next to publishing, and retained topics are few).

    :param max_topics: most topics holding a retained message at once.
    """

    __slots__ = ("_messages", "_topics", "_max_topics")

    def __init__(self, *, max_topics: int = DEFAULT_MAX_TOPICS) -> None:
        #: destination as first retained -> message; insertion order is retention order.
        self._messages: dict[str, Message] = {}
        #: destination -> itself, found by any spelling of it.
        self._topics: SubscriptionTree[str] = SubscriptionTree(max_cache_size=0)
        self._max_topics = max_topics

    def __len__(self) -> int:
        return len(self._messages)

    def get(self, destination: str) -> Message | None:
        """:returns: the topic's retained message, in any spelling of the topic, or ``None``."""
        found = self._topics.match(destination)
        return self._messages[found[0]] if found else None

    def set(self, message: Message) -> None:
        """
        Keep a message as its topic's last value, replacing the one before.

        :raises InvalidDestination: if the message's destination is not one topic.
        :raises LimitExceeded: if ``max_topics`` topics hold one already and this
            topic does not.
        """
        destination = message.destination
        validate_destination(destination)
        previous = self._topics.match(destination)
        if previous:
            self._forget(previous[0])
        elif len(self._messages) >= self._max_topics:
            raise LimitExceeded(
                "too many retained messages",
                f"{self._max_topics} topics hold a retained message already; send"
                " retain:remove to some, or ask for a higher limit.",
            )
        self._messages[destination] = message
        self._topics.add(destination, destination)

    def remove(self, destination: str) -> Message | None:
        """
        Forget a topic's retained message.

        :returns: the message forgotten, or ``None`` if the topic had none.
        """
        found = self._topics.match(destination)
        if not found:
            return None
        return self._forget(found[0])

    def matching(self, pattern: str, now: float | None = None) -> list[Message]:
        """
        The retained messages a new subscription to ``pattern`` receives.

        :param pattern: the subscription's destination, wildcards allowed.
        :param now: the broker clock's time: expired messages are dropped, not returned.
        :returns: the messages, oldest retained first.
        :raises InvalidDestination: if ``pattern`` is not a valid pattern.
        """
        validate_pattern(pattern)
        if is_wildcard(pattern):
            probe: SubscriptionTree[bool] = SubscriptionTree(max_cache_size=0)
            probe.add(pattern, True)
            found = [topic for topic in self._messages if probe.match(topic)]
        else:
            found = list(self._topics.match(pattern))
        messages = []
        for topic in found:
            message = self._messages[topic]
            if now is not None and 0.0 < message.expires <= now:
                self._forget(topic)
            else:
                messages.append(message)
        return messages

    def _forget(self, topic: str) -> Message:
        """Drop a topic, stored under exactly this spelling."""
        self._topics.remove(topic, topic)
        return self._messages.pop(topic)
