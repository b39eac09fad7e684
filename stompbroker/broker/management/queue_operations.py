"""
What an operator may do to the messages waiting in a queue: browse (peek at)
them, purge them, delete a queue or a durable subscription with them, move or
copy them to another destination, and send a dead-letter queue's messages back
to where they were first sent (their ``original-destination`` header, which
:mod:`stompbroker.broker.queueing.dead_letters` sets).

:class:`QueueOperations` is an object
:class:`~stompbroker.broker.management.operations.Management` holds (its
``queues``), apart from its listing and describing of connections and
destinations because these operations change what a queue holds, and share their
own checks (:func:`check_count`, :func:`check_target`) and the dead letters' way
back.  Only messages waiting for
a consumer are browsed, purged or moved: those delivered and not yet
acknowledged belong to their consumers until settled, as in RabbitMQ.

On an engine whose queues several nodes share
(:meth:`IEngine.shared_queues <stompbroker.broker.engine.engine_interface.IEngine.shared_queues>`),
browse, purge, move, copy, retry and delete of a ``/queue/`` ask the other
nodes and answer with a Deferred; on one process they answer at once.  Either way they
answer with a :class:`~stompbroker.broker.features.browsing.Waiting` (browse)
or an :class:`~stompbroker.broker.engine.shared_queues.Acted`, which name the
node that answered and the nodes that did not answer in time.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from twisted.internet.defer import Deferred

from stompbroker.broker.engine.queue_transfer import Transferred
from stompbroker.broker.engine.shared_queues import Acted, QueueConsumed
from stompbroker.broker.features.browsing import Waiting
from stompbroker.broker.management.records import InUse, InvalidRequest, UnknownDestination
from stompbroker.broker.queueing.dead_letters import DEAD_LETTER_HEADERS
from stompbroker.broker.queueing.delivery import DeliveryPolicy
from stompbroker.broker.routing.composite import SEPARATOR
from stompbroker.broker.routing.destinations import (
    QUEUE_PREFIX,
    REPLY_QUEUE_PREFIX,
    TOPIC_PREFIX,
    Kind,
    is_dead_letter_queue,
    validate_queue,
    validate_send_destination,
)
from stompbroker.broker.routing.syntax import is_wildcard, validate_destination
from stompbroker.broker.store.journal import parse_durable_key
from stompbroker.logs import logger
from stompbroker.protocol.errors import InvalidDestination
from stompbroker.protocol.frames import Headers
from stompbroker.protocol.message import Message

__all__ = [
    "MAX_COUNT",
    "MAX_MOVE",
    "QueueOperations",
    "check_count",
    "check_publish_target",
    "check_target",
]

# The operators' log keeps one namespace, whichever part of the management acts.
log = logger("stompbroker.broker.management.operations")

#: Who acts, in the log, when the caller does not say.
OPERATOR = "an operator"


def messages(count: int) -> str:
    """:returns: ``1 message``, ``40 messages``: a count for the log."""
    return f"{count} message" if count == 1 else f"{count} messages"


#: Most messages one browse may list (and a retry reads for its destinations).
MAX_COUNT = 10_000
#: Most messages one move, copy or retry may take: all a queue holds, in practice
#: (a paged queue's are read from the store a batch at a time).
MAX_MOVE = 1_000_000_000


def check_count(count: int, limit: int = MAX_COUNT) -> int:
    """
    :returns: ``count``, if it is between 1 and ``limit``.
    :raises InvalidRequest: otherwise.
    """
    if not 1 <= count <= limit:
        raise InvalidRequest(f"count must be between 1 and {limit}, got {count}")
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


#: Destinations of one connection, which a message published from outside cannot reach.
_CONNECTION_KINDS = (Kind.TEMP_QUEUE, Kind.REPLY_QUEUE)


def check_publish_target(destination: str) -> str:
    """
    Check where a publish may send a message: wherever a client's SEND may go
    (a ``/queue/``, a ``/topic/``, a ``/stream/``, a ``/user/`` destination),
    except the destinations of one connection (``/temp-queue/``, ``/reply-queue/``,
    which only that connection names) and composite ones (publish to each part).

    :raises InvalidRequest: for anything else, saying why.
    """
    if SEPARATOR in destination:
        raise InvalidRequest(
            f"{destination!r} is a composite destination; publish to each of its parts"
        )
    try:
        kind = validate_send_destination(destination)
    except InvalidDestination as error:
        raise InvalidRequest(error.detail) from None
    if kind in _CONNECTION_KINDS:
        raise InvalidRequest(
            f"{destination!r} is a destination of one connection, which only it may send to"
        )
    return destination


class QueueOperations:
    """
    What an operator may do to what waits in a queue.

    :param engine: the broker's :class:`~stompbroker.broker.engine.engine_interface.IEngine`,
        whose queues these are.
    :param policy: the broker's :class:`~stompbroker.broker.queueing.delivery.DeliveryPolicy`,
        which names its dead-letter queues.
    """

    def __init__(self, engine: Any, policy: DeliveryPolicy) -> None:
        self._engine = engine
        self._policy = policy

    def find(self, name: str) -> Any:
        """
        :returns: the queue of a ``/queue/``, ``/reply-queue/`` or durable name.
        :raises UnknownDestination: if there is none now.
        :raises InvalidRequest: for a topic or an unknown kind of name.
        """
        durable = parse_durable_key(name)
        if durable is not None:
            queue = self._engine.find_durable(durable)
        elif name.startswith((QUEUE_PREFIX, REPLY_QUEUE_PREFIX)):
            queue = self._engine.find_queue(name)
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

    def browse(self, name: str, count: int) -> Waiting | Deferred[Waiting]:
        """
        :returns: the first ``count`` messages waiting in a queue, left there
            (a Deferred of them for a queue several nodes share).
        :raises UnknownDestination: if there is no such queue now.
        :raises InvalidRequest: for a topic, or a count out of range.
        """
        check_count(count)
        shared = self._shared(name)
        if shared is not None:
            return self._found(shared, name, reading=True).addCallback(
                lambda exists: shared.browse(name, count) if exists else self._nothing_waits()
            )
        queue = self._find_dead_letters(name)
        if queue is None:
            return self._nothing_waits()
        found = queue.browse(count)
        node = self._node()
        if isinstance(found, Deferred):
            # A paged queue reads what memory does not hold from the store.
            return found.addCallback(lambda messages: Waiting(tuple(messages), node))
        return Waiting(tuple(found), node)

    def _nothing_waits(self) -> Waiting:
        return Waiting((), self._node())

    def _find_dead_letters(self, name: str) -> Any:
        """
        :returns: :meth:`find`'s queue, or ``None`` for a dead-letter queue that does
            not exist now: no message was dead-lettered there yet, or all were taken,
            which an operator reads as an empty queue, not as a mistake.
        """
        if self._is_dead_letter_queue(name) and self._engine.find_queue(name) is None:
            return None
        return self.find(name)

    def _node(self) -> str:
        node: str = self._engine.bookkeeping().ids.node
        return node

    def _shared(self, name: str) -> Any:
        """:returns: the engine's operations across nodes on a shared ``/queue/``, or ``None``."""
        if not name.startswith(QUEUE_PREFIX):
            return None
        return self._engine.shared_queues()

    def _found(self, shared: Any, name: str, *, reading: bool = False) -> Deferred[bool]:
        """
        :param reading: a browse or a retry, for which a dead-letter queue that is
            nowhere reads as empty (see :meth:`_find_dead_letters`).
        :returns: a Deferred of whether the queue exists on some node; it fails with
            :class:`UnknownDestination` for a queue nowhere, but in that case.
        """

        def check(exists: bool) -> bool:
            if not exists and not (reading and self._is_dead_letter_queue(name)):
                raise UnknownDestination(f"no queue {name!r} now (it holds no messages anywhere)")
            return exists

        found: Deferred[bool] = shared.exists(name).addCallback(check)
        return found

    def purge(self, name: str, *, operator: str = OPERATOR) -> Acted | Deferred[Acted]:
        """
        Discard what waits in a queue (persistent messages leave the store).

        :param operator: who asks, for the log (``alice at 10.0.0.5``).

        :returns: how many messages were discarded (a Deferred of it for a
            queue several nodes share).
        :raises UnknownDestination: if there is no such queue now.
        """
        shared = self._shared(name)
        if shared is not None:
            done = self._found(shared, name).addCallback(lambda _: shared.purge(name))
            return done.addCallback(self._log_purge, operator, name)
        return self._log_purge(Acted(self.find(name).purge(), self._node()), operator, name)

    @staticmethod
    def _log_purge(acted: Acted, operator: str, name: str) -> Acted:
        log.info(
            "{operator} purged {messages} from {name}{partly}",
            operator=operator,
            messages=messages(acted.count),
            name=name,
            partly=_partly(acted),
        )
        return acted

    def delete(self, name: str, *, operator: str = OPERATOR) -> int | Deferred[Acted]:
        """
        Delete a queue or a durable subscription, with what waits in it.

        :param operator: who asks, for the log.

        :returns: how many messages were discarded; for a queue several nodes
            share, a Deferred of what every node discarded (``complete`` false,
            and the queue not deleted, if a node holding its messages did not
            answer in time).
        :raises UnknownDestination: if there is no such queue now.
        :raises InUse: if someone consumes from it (on any node): close them (or
            their connections) first, so that no client loses messages it holds.
        """
        shared = self._shared(name)
        if shared is not None:
            done = self._found(shared, name).addCallback(lambda _: shared.delete(name))
            done.addErrback(_consumed)
            return done.addCallback(self._log_delete, operator, name)
        queue = self.find(name)
        if queue.consumers:
            raise InUse(
                f"{name!r} has {len(queue.consumers)} consumers; it can be deleted once they"
                " have unsubscribed (or their connections are closed)"
            )
        durable = parse_durable_key(name)
        if durable is not None:
            discarded = int(queue.depth())
            self._engine.remove_durable(durable)
        else:
            discarded = queue.purge()
            self._engine.delete_queue(queue)
        log.info(
            "{operator} deleted {name} ({messages})",
            operator=operator,
            name=name,
            messages=messages(discarded),
        )
        return discarded

    @staticmethod
    def _log_delete(acted: Acted, operator: str, name: str) -> Acted:
        log.info(
            "{operator} {deleted} {name} ({messages}){partly}",
            operator=operator,
            deleted="deleted" if acted.complete else "did not delete",
            name=name,
            messages=messages(acted.count),
            partly=_partly(acted),
        )
        return acted

    def move(
        self, name: str, to: str, count: int, copy: bool = False, *, operator: str = OPERATOR
    ) -> Acted | Deferred[Acted]:
        """
        Move (or copy) the first ``count`` waiting messages of a queue to the end
        of another queue, or publish them to a topic, each as a new message.

        :param operator: who asks, for the log.

        :returns: how many went (a Deferred of it for a queue several nodes share).
        :raises UnknownDestination: if there is no such queue now.
        :raises InvalidRequest: for a bad target or count, or a queue moved to itself.
        """
        check_count(count, MAX_MOVE)
        check_target(to)
        if to == name:
            raise InvalidRequest(f"{name!r} cannot be moved to itself")

        def route(message: Message) -> tuple[str, Headers]:
            return to, message.headers

        action = "copied" if copy else "moved"
        shared = self._shared(name)
        if shared is not None:
            done = self._found(shared, name).addCallback(
                lambda _: shared.transfer(name, count, route, copy)
            )
            return done.addCallback(self._log_move, operator, action, name, to)
        queue = self.find(name)
        transferred = self._engine.transfer(queue, count, route, copy)
        if isinstance(transferred, Deferred):
            # A paged queue: read from the store a batch at a time.
            return transferred.addCallback(
                lambda done: self._log_move(
                    Acted(done.moved, self._node()), operator, action, name, to
                )
            )
        return self._log_move(Acted(transferred.moved, self._node()), operator, action, name, to)

    @staticmethod
    def _log_move(acted: Acted, operator: str, action: str, name: str, to: str) -> Acted:
        log.info(
            "{operator} {action} {messages} from {name} to {to}{partly}",
            operator=operator,
            action=action,
            messages=messages(acted.count),
            name=name,
            to=to,
            partly=_partly(acted),
        )
        return acted

    def retry_targets(self, name: str, count: int) -> set[str] | Deferred[set[str]]:
        """
        :returns: where :meth:`retry` would send the first ``count`` messages of a
            dead-letter queue (the valid ``original-destination`` headers); a
            Deferred of them for a queue several nodes share.
        :raises UnknownDestination: if there is no such queue now.
        :raises InvalidRequest: if it is not a dead-letter queue.
        """
        self._check_dead_letter_queue(name)
        # The first MAX_COUNT say where a retry may send: one with another
        # origin further on stays (a retry's ``targets``), counted in ``left``.
        browsed = self.browse(name, min(count, MAX_COUNT))
        if isinstance(browsed, Deferred):
            return browsed.addCallback(_origins)
        return _origins(browsed)

    def retry(
        self,
        name: str,
        count: int,
        *,
        operator: str = OPERATOR,
        targets: Collection[str] | None = None,
    ) -> Acted | Deferred[Acted]:
        """
        Send the first ``count`` messages of a dead-letter queue back to the
        destinations they were first sent to (their ``original-destination``),
        without the dead-letter headers, as new messages.

        :param targets: where messages may go (those :meth:`retry_targets`
            named and the caller may write to); a message for elsewhere stays.
            ``None``: anywhere.
        :returns: how many went back, and (``left``) how many stayed (no valid
            ``original-destination``, or not among ``targets``); a Deferred of
            it for a queue several nodes share.
        :raises UnknownDestination: if there is no such queue now.
        :raises InvalidRequest: if it is not a dead-letter queue, or for a bad count.
        """
        check_count(count, MAX_MOVE)
        self._check_dead_letter_queue(name)
        route = _back_to_origin if targets is None else _back_to(frozenset(targets))
        shared = self._shared(name)
        if shared is not None:
            done = self._found(shared, name, reading=True).addCallback(
                lambda exists: (
                    shared.transfer(name, count, route, False) if exists else Acted(0, self._node())
                )
            )
            return done.addCallback(self._log_retry, operator, name)
        queue = self._find_dead_letters(name)
        if queue is None:
            return self._log_retry(Acted(0, self._node()), operator, name)
        transferred = self._engine.transfer(queue, count, route, False)
        if isinstance(transferred, Deferred):
            return transferred.addCallback(self._retried, operator, name)
        return self._retried(transferred, operator, name)

    def _retried(self, done: Transferred, operator: str, name: str) -> Acted:
        acted = Acted(done.moved, self._node(), left=done.considered - done.moved)
        return self._log_retry(acted, operator, name)

    @staticmethod
    def _log_retry(acted: Acted, operator: str, name: str) -> Acted:
        log.info(
            "{operator} sent {count} dead {noun} from {name} back{partly}",
            operator=operator,
            count=acted.count,
            noun="letter" if acted.count == 1 else "letters",
            name=name,
            partly=_partly(acted),
        )
        return acted

    def _is_dead_letter_queue(self, name: str) -> bool:
        return is_dead_letter_queue(name, self._policy.dead_letter_prefix)

    def _check_dead_letter_queue(self, name: str) -> None:
        prefix = self._policy.dead_letter_prefix
        if not self._is_dead_letter_queue(name):
            raise InvalidRequest(
                f"{name!r} is not a dead-letter queue (those are /queue/{prefix}NAME)"
            )


def _partly(acted: Acted) -> str:
    """:returns: what the log adds for nodes that did not answer."""
    if acted.complete:
        return ""
    return f" (not what nodes {', '.join(acted.missing)} hold: they did not answer)"


def _origins(waiting: Waiting) -> set[str]:
    """:returns: the valid ``original-destination`` headers of what waits."""
    targets = set()
    for message in waiting.messages:
        origin = _origin(message)
        if origin is not None:
            targets.add(origin)
    return targets


def _origin(message: Message) -> str | None:
    """:returns: a dead letter's valid ``original-destination``, or ``None``."""
    for header, value in message.headers:
        if header == "original-destination":
            try:
                return check_target(value)
            except InvalidRequest:
                return None
    return None


def _back_to(
    targets: frozenset[str],
) -> Callable[[Message], tuple[str, Headers] | None]:
    """:returns: :func:`_back_to_origin`, for dead letters whose origin is among ``targets``."""

    def route(message: Message) -> tuple[str, Headers] | None:
        origin = _origin(message)
        return _back_to_origin(message) if origin in targets else None

    return route


def _back_to_origin(message: Message) -> tuple[str, Headers] | None:
    """Route a dead letter back where it came from, without the dead-letter headers."""
    origin = _origin(message)
    if origin is None:
        return None
    headers = tuple(pair for pair in message.headers if pair[0] not in DEAD_LETTER_HEADERS)
    return origin, headers


def _consumed(failure: Any) -> None:
    """Turn the engine's refusal of a consumed queue into :class:`InUse`."""
    failure.trap(QueueConsumed)
    error = failure.value
    raise InUse(
        f"{error.destination!r} has {error.consumers} consumers on the cluster's nodes; it can"
        " be deleted once they have unsubscribed (or their connections are closed)"
    )
