"""
Dead letters: where messages go that cannot be delivered, and what they say about it.

A message leaves circulation when a client refuses it for good (NACK with
``requeue:false``), when it has been redelivered as often as its subscription
allows, or when it expires under ``--expired dead-letter``.  It then goes to the
dead-letter queue of the destination it was sent to (``/queue/`` + the
``--dead-letter-prefix`` + its name, see
:func:`~stompbroker.broker.routing.destinations.dead_letter_destination`), as a copy
with a new ``message-id`` and headers saying where it came from and why
(:data:`DEAD_LETTER_HEADERS`).  A message that fails in a dead-letter queue is
discarded instead, so that nothing circulates for ever.

A persistent message kept in the store under a queue's key leaves that key for
its copy's in one atomic step (the journal's ``move``); any other message's copy
lives in memory only.  The policy here is the engine's to apply: it hands the
copy to the queue that :class:`DeadLetters` was made with, whatever keeps it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred

from stompbroker.broker.features.policies import Policies
from stompbroker.broker.flow.traffic import Traffic
from stompbroker.broker.queueing.delivery import DeliveryCounters, DeliveryPolicy
from stompbroker.broker.routing.destinations import dead_letter_destination, is_dead_letter_queue
from stompbroker.broker.routing.ids import Ids
from stompbroker.broker.routing.virtual_hosts import in_host_of
from stompbroker.broker.store.journal import Journal
from stompbroker.logs import logger
from stompbroker.protocol.message import Message

log = logger("stompbroker.broker")

#: Why a message was dead-lettered, as sent in the ``dead-letter-reason`` header.
REJECTED = "rejected"
DELIVERY_LIMIT = "delivery-limit"
EXPIRED = "expired"

#: ``(message, reason, store_key)``: ``store_key`` is the key of the queue the
#: message leaves when the store keeps it there, and ``None`` otherwise.  It
#: returns the store write it made (a Deferred), or ``None``.
DeadLetter = Callable[[Message, str, str | None], Any]

#: Headers a dead-lettered message gets, saying where it came from and why.
DEAD_LETTER_HEADERS = ("original-destination", "original-message-id", "dead-letter-reason")


class DeadLetters:
    """
    Moves failed messages to their dead-letter queues, and counts them.

    :param policy: the broker's delivery policy: the prefix, and what expiry does.
    :param counters: the broker-wide counters.
    :param traffic: the per-destination counters; a dead letter counts under the
        destination it was sent to.
    :param ids: gives each copy its ``message-id``.
    :param queue_of: ``destination -> queue``: the dead-letter queue, made on first use.
    :param journal: the :class:`~stompbroker.broker.store.journal.Journal` that keeps
        persistent messages, or ``None``.
    :param policies: the per-destination policies, whose ``dead-letter`` names
        a destination's dead-letter queue instead of the prefix.
    """

    def __init__(
        self,
        policy: DeliveryPolicy,
        counters: DeliveryCounters,
        traffic: Traffic,
        ids: Ids,
        queue_of: Callable[[str], Any],
        journal: Journal | None = None,
        policies: Policies | None = None,
    ) -> None:
        self._policy = policy
        self._counters = counters
        self._traffic = traffic
        self._ids = ids
        self._queue_of = queue_of
        self._journal = journal
        self._policies = policies

    def dead_letter(
        self, message: Message, reason: str, store_key: str | None = None
    ) -> Deferred[bool] | None:
        """
        Move a message to the dead-letter queue of the destination it was sent to;
        the ``dead_letter`` callable of every queue.

        :param reason: the ``dead-letter-reason``: ``rejected``, ``delivery-limit``
            or ``expired`` (see :mod:`stompbroker.broker.queueing.queues`).
        :param store_key: the key of the queue the message leaves, when the store
            keeps it there.
        :returns: the store write that moved (or, from a dead-letter queue,
            removed) the message, or ``None``.
        """
        prefix = self._policy.dead_letter_prefix
        journal = self._journal if message.persistent else None
        if is_dead_letter_queue(message.destination, prefix):
            return self._discard(message, journal, store_key)
        target = self._target(message.destination, prefix)
        if target == message.destination:
            # A policy's dead-letter queue is where this message failed.
            return self._discard(message, journal, store_key)
        headers = tuple(pair for pair in message.headers if pair[0] not in DEAD_LETTER_HEADERS)
        headers += (
            ("original-destination", message.destination),
            ("original-message-id", message.message_id),
            ("dead-letter-reason", reason),
        )
        self._counters.dead_lettered += 1
        self._traffic.count((message,), "messages_dead_lettered")
        log.debug(
            "dead-lettered {message_id} from {origin} to {target}: {reason}",
            message_id=message.message_id,
            origin=message.destination,
            target=target,
            reason=reason,
        )
        stored = journal is not None and store_key is not None
        copy = Message(
            target,
            self._ids.new_message_id(),
            headers,
            message.body,
            persistent=stored,
            priority=message.priority,
            group=message.group,
            closes_group=message.closes_group,
        )
        moved = None
        if journal is not None and store_key is not None:
            moved = journal.move(store_key, message.message_id, target, copy)
        self._queue_of(target).enqueue(copy)
        return moved

    def _target(self, destination: str, prefix: str) -> str:
        """:returns: the dead-letter queue of ``destination``: its policy's, or by the prefix."""
        if self._policies:
            settings = self._policies.settings_for(destination)
            if settings is not None and settings.dead_letter is not None:
                # Named as its virtual host's clients name it: it stays in that host.
                return in_host_of(destination, settings.dead_letter)
        return dead_letter_destination(destination, prefix)

    def _discard(
        self, message: Message, journal: Journal | None, store_key: str | None
    ) -> Deferred[bool] | None:
        """Drop a message that failed in a dead-letter queue: nothing circulates for ever."""
        self._counters.discarded += 1
        self._traffic.count((message,), "messages_dropped")
        if journal is not None and store_key is not None:
            return journal.remove(store_key, message.message_id)
        return None

    def expired(self, message: Message) -> None:
        """
        Count a message that expired before any queue took it (when it was routed),
        and drop or dead-letter it as ``--expired`` says.
        """
        self._counters.expired += 1
        self._traffic.count((message,), "messages_expired")
        if self._policy.expired == "dead-letter":
            self.dead_letter(message, EXPIRED)
