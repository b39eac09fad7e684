"""
Recovery at start: rebuilding queues and durable subscriptions from the message
store, and telling whoever waits when that is done.

The broker opens its store in ``startService`` and asks it what it holds
(:meth:`~stompbroker.broker.store.base.IMessageStore.recover`, which reads in
the store's writer thread).  A broker whose queues page
(:mod:`stompbroker.broker.queueing.paging`) asks for an index, not the messages:
each key's first read-ahead of messages, and how many follow, counted from the
store's ``(queue, sequence)`` index without reading their rows; so a restart
takes seconds and little memory whatever the backlog.  :func:`rebuild` puts it
back where it was: each durable subscription's queue in the topic tree with its
backlog, each ``/queue/`` with its messages, in their original order and
without writing them again, and what is left on disk as the queue's paged part,
which it reads as it drains.  A message that had been delivered comes back with its delivery count,
so that its next delivery says ``redelivered:true``, and a NACKed message that
waited for its redelivery (:mod:`stompbroker.broker.queueing.backoff`) waits
until its stored due time, aside; messages that expired while
the broker was down are expired (dropped or dead-lettered, through the store)
once everything is back, so that a dead-letter queue gets them after what it
held already.  Persistent scheduled messages go back into the engine's scheduler,
due when they were due (the broker arms its timer once recovery is done), and
persistent retained messages back to their topics (expired ones are forgotten,
in the store too).

Clients must not get in before that: :class:`Readiness` remembers how recovery
ended and answers :meth:`~stompbroker.broker.service.Broker.when_ready`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from stompbroker.broker.engine.engine_interface import EngineUnavailable
from stompbroker.broker.queueing.paging import message_from_record
from stompbroker.broker.queueing.priorities import DEFAULT_PRIORITY, parse_priority, stored_priority
from stompbroker.broker.routing.destinations import QUEUE_PREFIX
from stompbroker.broker.store.base import (
    PagedRange,
    RecoveredState,
    ScheduledRecord,
    StoredMessage,
)
from stompbroker.broker.store.journal import parse_durable_key
from stompbroker.logs import logger
from stompbroker.protocol.message import Message

log = logger("stompbroker.broker")


class Rebuilt(Protocol):
    """
    What :func:`rebuild` fills: the in-process engine's queues, durable
    subscriptions, scheduled and retained messages (its parts, not the
    :class:`~stompbroker.broker.engine.engine_interface.IEngine` the broker sees).
    """

    clock: Any
    journal: Any
    topics: Any
    durable: dict[tuple[str, str], Any]
    scheduled: Any
    retained: Any

    def new_queue(self, destination: str, store_key: str | None = None) -> Any:
        """:returns: a local queue, registered nowhere."""

    def queue(self, destination: str) -> Any:
        """:returns: the queue of a ``/queue/`` destination, made on first use."""


class Readiness:
    """
    Whether recovery has ended, and how; and who waits for it.

    :ivar outcome: ``None`` until recovery has ended, then ``True`` or its Failure.
    """

    def __init__(self) -> None:
        self.outcome: bool | Failure | None = None
        self._waiters: list[Deferred[None]] = []

    def when_ready(self) -> Deferred[None]:
        """
        :returns: a Deferred that fires once recovery has ended, or fails with
            what stopped it.
        """
        waiter: Deferred[None] = Deferred()
        if self.outcome is None:
            self._waiters.append(waiter)
        elif isinstance(self.outcome, Failure):
            waiter.errback(self.outcome)
        else:
            waiter.callback(None)
        return waiter

    def ended(self, outcome: Any) -> None:
        """
        Recovery has ended: remember how, and tell whoever waits.

        :param outcome: a Failure if it failed; anything else means it succeeded.
        """
        if isinstance(outcome, Failure) and not self._waiters:
            # Nobody to hand it to yet: said here; a waiter (twistd's start) says it itself.
            if outcome.check(EngineUnavailable):
                log.critical("cannot start the engine: {error}", error=str(outcome.value))
            else:
                log.critical(
                    "cannot recover persistent messages from the message store: {error}",
                    error=str(outcome.value),
                )
        self.outcome = outcome if isinstance(outcome, Failure) else True
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if isinstance(outcome, Failure):
                waiter.errback(outcome)
            else:
                waiter.callback(None)


def rebuild(engine: Rebuilt, state: RecoveredState) -> None:
    """
    Refill queues and rebuild durable subscriptions from what the store holds.

    :param engine: the engine to rebuild them in, empty but for what clients did
        before it was ready (nothing, when the broker waits as it should).
    :param state: what the store holds.
    """
    expired: list[tuple[Any, Message]] = []
    now = engine.clock.seconds()
    restored = 0
    for subscription in state.subscriptions:
        durable = parse_durable_key(subscription.name)
        if durable is None:
            log.warn(
                "ignoring stored subscription {name}: not a durable subscription key",
                name=subscription.name,
            )
            continue
        queue = engine.new_queue(subscription.destination, subscription.name)
        engine.durable[durable] = queue
        engine.topics.add(subscription.destination, queue)
        backlog = state.backlogs.get(subscription.name, ())
        restored += _refill(queue, backlog, now, expired)
        restored += _left_on_disk(queue, state.paged.get(subscription.name))
    for key, records in state.queues.items():
        if not key.startswith(QUEUE_PREFIX):
            log.warn(
                "ignoring {count} stored messages under {key}: no queue or durable"
                " subscription has that key",
                count=len(records),
                key=key,
            )
            continue
        queue = engine.queue(key)
        restored += _refill(queue, records, now, expired)
        restored += _left_on_disk(queue, state.paged.get(key))
    for queue, message in expired:
        queue.expire(message)
    scheduled = _reschedule(engine, state.scheduled)
    retained = _retain(engine, state.retained, now)
    log.info(
        "recovered {messages} persistent messages ({expired} expired) in {queues}"
        " queues and {subscriptions} durable subscriptions",
        messages=restored,
        expired=len(expired),
        queues=len(state.queues),
        subscriptions=len(engine.durable),
    )
    if scheduled or retained:
        log.info(
            "recovered {scheduled} scheduled and {retained} retained persistent messages",
            scheduled=scheduled,
            retained=retained,
        )


def _reschedule(engine: Rebuilt, records: Iterable[ScheduledRecord]) -> int:
    """
    Put stored scheduled messages back in the engine's scheduler, due when they were due.

    :returns: how many there were.
    """
    scheduler = engine.scheduled
    count = 0
    for record in records:
        count += 1
        if scheduler is None:
            continue
        message = Message(
            record.destination,
            record.message_id,
            record.headers,
            record.body,
            0.0,
            0,
            True,
            DEFAULT_PRIORITY,
        )
        scheduler.restore(
            record.message_id, message, record.due, record.period, record.remaining, record.fired
        )
    return count


def _retain(engine: Rebuilt, records: Iterable[StoredMessage], now: float) -> int:
    """
    Give stored retained messages back to their topics; forget the expired ones.

    :returns: how many were given back.
    """
    retained = engine.retained
    count = 0
    for record in records:
        if retained is None:
            continue
        if record.expires and record.expires <= now:
            if engine.journal is not None:
                engine.journal.unretain(record.queue)
            continue
        retained.set(
            Message(
                record.destination,
                record.message_id,
                record.headers,
                record.body,
                record.expires,
                0,
                True,
                parse_priority(stored_priority(record.headers)),
            )
        )
        count += 1
    return count


def _refill(
    queue: Any,
    records: Iterable[StoredMessage],
    now: float,
    expired: list[tuple[Any, Message]],
) -> int:
    """
    Enqueue stored messages again, in order, and collect those that have expired.

    :returns: how many records there were.
    """
    count = 0
    for record in records:
        count += 1
        message = message_from_record(record)
        if message.expires and message.expires <= now:
            expired.append((queue, message))
        elif record.due > now:
            # A NACKed message waits out what is left of its back-off.
            queue.hold(message, record.due, stored=True)
        else:
            queue.enqueue(message)
    return count


def _left_on_disk(queue: Any, left: PagedRange | None) -> int:
    """
    Tell a queue what recovery left on disk past its head, to page in as it drains.

    :returns: how many messages that is.
    """
    if left is None:
        return 0
    queue.restore_paged(left.count, left.size, left.after)
    return left.count
