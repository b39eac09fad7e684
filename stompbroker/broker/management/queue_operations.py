"""
What an operator may do to the messages waiting in a queue: browse (peek at)
them, purge them, delete a queue or a durable subscription with them, move or
copy them to another destination, and send a dead-letter queue's messages back
to where they were first sent (their ``original-destination`` header, which
:mod:`stompbroker.broker.queueing.dead_letters` sets).

:class:`QueueOperations` is a mixin of
:class:`~stompbroker.broker.management.operations.Management`, apart from its listing and
describing of connections and destinations because these operations change what
a queue holds, and share their own checks (:func:`check_count`,
:func:`check_target`) and the dead letters' way back.  Only messages waiting for
a consumer are browsed, purged or moved: those delivered and not yet
acknowledged belong to their consumers until settled, as in RabbitMQ.
"""

from __future__ import annotations

from typing import Any

from stompbroker.broker.management.records import InUse, InvalidRequest, UnknownDestination
from stompbroker.broker.queueing.dead_letters import DEAD_LETTER_HEADERS
from stompbroker.broker.routing.destinations import (
    QUEUE_PREFIX,
    REPLY_QUEUE_PREFIX,
    TOPIC_PREFIX,
    is_dead_letter_queue,
    validate_queue,
)
from stompbroker.broker.routing.syntax import is_wildcard, validate_destination
from stompbroker.broker.store.journal import parse_durable_key
from stompbroker.logs import logger
from stompbroker.protocol.errors import InvalidDestination
from stompbroker.protocol.frames import Headers
from stompbroker.protocol.message import Message

__all__ = ["MAX_COUNT", "QueueOperations", "check_count", "check_target"]

# The operators' log keeps one namespace, whichever part of the management acts.
log = logger("stompbroker.broker.management.operations")

#: Most messages one browse, move or retry may take.
MAX_COUNT = 10_000


def check_count(count: int) -> int:
    """
    :returns: ``count``, if it is between 1 and :data:`MAX_COUNT`.
    :raises InvalidRequest: otherwise.
    """
    if not 1 <= count <= MAX_COUNT:
        raise InvalidRequest(f"count must be between 1 and {MAX_COUNT}, got {count}")
    return count


def check_target(destination: str) -> str:
    """
    Check where a move, copy or publish may send messages: a ``/queue/`` or a
    ``/topic/`` without wildcards.

    :raises InvalidRequest: for anything else, saying why.
    """
    try:
        if destination.startswith(QUEUE_PREFIX):
            validate_queue(destination)
        elif destination.startswith(TOPIC_PREFIX) and not is_wildcard(destination):
            validate_destination(destination)
        else:
            raise InvalidRequest(
                f"{destination!r} is not a /queue/ or /topic/ destination without wildcards"
            )
    except InvalidDestination as error:
        raise InvalidRequest(error.detail) from None
    return destination


class QueueOperations:
    """
    What an operator may do to what waits in a queue.

    :ivar broker: the :class:`~stompbroker.broker.service.Broker`.
    """

    broker: Any
    _engine: Any

    def _queue(self, name: str) -> Any:
        """
        :returns: the queue of a ``/queue/``, ``/reply-queue/`` or durable name.
        :raises UnknownDestination: if there is none now.
        :raises InvalidRequest: for a topic or an unknown kind of name.
        """
        durable = parse_durable_key(name)
        if durable is not None:
            queue = self._engine.durable.get(durable)
        elif name.startswith((QUEUE_PREFIX, REPLY_QUEUE_PREFIX)):
            queue = self._engine.queues.get(name)
        elif name.startswith(TOPIC_PREFIX):
            raise InvalidRequest(
                f"{name!r} is a topic, which holds no messages: its subscriptions' queues do"
                " (durable ones are listed by their durable: names)"
            )
        else:
            raise InvalidRequest(
                f"{name!r} is not a /queue/, /reply-queue/ or durable: destination"
            )
        if queue is None:
            raise UnknownDestination(
                f"no queue {name!r} now (a queue exists while it holds messages or has consumers)"
            )
        return queue

    def browse(self, name: str, count: int) -> list[Message]:
        """
        :returns: the first ``count`` messages waiting in a queue, left there.
        :raises UnknownDestination: if there is no such queue now.
        :raises InvalidRequest: for a topic, or a count out of range.
        """
        check_count(count)
        return list(self._queue(name).browse(count))

    def purge(self, name: str) -> int:
        """
        Discard what waits in a queue (persistent messages leave the store).

        :returns: how many messages were discarded.
        :raises UnknownDestination: if there is no such queue now.
        """
        queue = self._queue(name)
        purged: int = queue.purge()
        log.info("an operator purged {count} messages from {name}", count=purged, name=name)
        return purged

    def delete(self, name: str) -> int:
        """
        Delete a queue or a durable subscription, with what waits in it.

        :returns: how many messages were discarded.
        :raises UnknownDestination: if there is no such queue now.
        :raises InUse: if someone consumes from it: close them (or their
            connections) first, so that no client loses messages it holds.
        """
        queue = self._queue(name)
        if queue.consumers:
            raise InUse(
                f"{name!r} has {len(queue.consumers)} consumers; it can be deleted once they"
                " have unsubscribed (or their connections are closed)"
            )
        durable = parse_durable_key(name)
        if durable is not None:
            discarded = len(queue.pending)
            self._engine.remove_durable(durable)
        else:
            discarded = queue.purge()
            self._engine.delete_queue(queue)
        log.info("an operator deleted {name} ({count} messages)", name=name, count=discarded)
        return discarded

    def move(self, name: str, to: str, count: int, copy: bool = False) -> int:
        """
        Move (or copy) the first ``count`` waiting messages of a queue to the end
        of another queue, or publish them to a topic, each as a new message.

        :returns: how many went.
        :raises UnknownDestination: if there is no such queue now.
        :raises InvalidRequest: for a bad target or count, or a queue moved to itself.
        """
        check_count(count)
        check_target(to)
        queue = self._queue(name)
        if to == name:
            raise InvalidRequest(f"{name!r} cannot be moved to itself")
        moved: int = self._engine.transfer(
            queue, count, lambda message: (to, message.headers), copy
        )
        log.info(
            "an operator {action} {count} messages from {name} to {to}",
            action="copied" if copy else "moved",
            count=moved,
            name=name,
            to=to,
        )
        return moved

    def retry_targets(self, name: str, count: int) -> set[str]:
        """
        :returns: where :meth:`retry` would send the first ``count`` messages of a
            dead-letter queue (the valid ``original-destination`` headers).
        :raises UnknownDestination: if there is no such queue now.
        :raises InvalidRequest: if it is not a dead-letter queue.
        """
        self._dead_letter_queue(name)
        targets = set()
        for message in self.browse(name, count):
            origin = _origin(message)
            if origin is not None:
                targets.add(origin)
        return targets

    def retry(self, name: str, count: int) -> tuple[int, int]:
        """
        Send the first ``count`` messages of a dead-letter queue back to the
        destinations they were first sent to (their ``original-destination``),
        without the dead-letter headers, as new messages.

        :returns: how many went back, and how many stayed (no valid
            ``original-destination``).
        :raises UnknownDestination: if there is no such queue now.
        :raises InvalidRequest: if it is not a dead-letter queue, or for a bad count.
        """
        check_count(count)
        queue = self._dead_letter_queue(name)
        considered = min(count, len(queue.pending))
        moved: int = self._engine.transfer(queue, count, _back_to_origin, False)
        log.info("an operator sent {count} dead letters from {name} back", count=moved, name=name)
        return moved, considered - moved

    def _dead_letter_queue(self, name: str) -> Any:
        prefix = self.broker.policy.dead_letter_prefix
        if not is_dead_letter_queue(name, prefix):
            raise InvalidRequest(
                f"{name!r} is not a dead-letter queue (those are /queue/{prefix}NAME)"
            )
        return self._queue(name)


def _origin(message: Message) -> str | None:
    """:returns: a dead letter's valid ``original-destination``, or ``None``."""
    for header, value in message.headers:
        if header == "original-destination":
            try:
                return check_target(value)
            except InvalidRequest:
                return None
    return None


def _back_to_origin(message: Message) -> tuple[str, Headers] | None:
    """Route a dead letter back where it came from, without the dead-letter headers."""
    origin = _origin(message)
    if origin is None:
        return None
    headers = tuple(pair for pair in message.headers if pair[0] not in DEAD_LETTER_HEADERS)
    return origin, headers
