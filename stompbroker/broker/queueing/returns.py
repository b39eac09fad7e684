"""
What comes back to a worker queue
(:class:`~stompbroker.broker.queueing.queues.WorkerQueue`): the messages a
consumer NACKs, refuses for good, or held when it left.

A returning message goes back to the head of the queue as a copy whose
``redeliveries`` is one higher, in the order it was delivered; one that has been
redelivered as often as its consumer allows is dead-lettered instead
(``delivery-limit``), and one refused for good is dead-lettered at once
(``rejected``).  When the consumer has a redelivery back-off
(:mod:`stompbroker.broker.queueing.backoff`) the copies wait aside, in the
queue's ``delayed`` (a :class:`~stompbroker.broker.queueing.delayed.DelayedMessages`
made on the first of them), until their time comes; what a consumer held when it
left comes back at once.

These are functions of the queue they are given, as
:mod:`~stompbroker.broker.queueing.limits` and
:mod:`~stompbroker.broker.queueing.dispatch` act on it: none is on the path of
a message that is delivered and acknowledged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attrs import evolve

from stompbroker.broker.queueing.dead_letters import DELIVERY_LIMIT, REJECTED
from stompbroker.broker.queueing.delayed import DelayedMessages
from stompbroker.broker.queueing.delivery import Consumer
from stompbroker.protocol.message import Message

if TYPE_CHECKING:
    from stompbroker.broker.queueing.queues import WorkerQueue

__all__ = ["hold", "put_back", "reject"]


def put_back(
    queue: WorkerQueue, consumer: Consumer, messages: list[Message], backoff: Any
) -> list[Any]:
    """
    Return messages for redelivery, in the order given, after ``backoff``'s
    delay unless ``None``.

    Each comes back as a copy with ``redeliveries`` one higher, except one that
    has been redelivered as often as ``consumer`` allows: that one is
    dead-lettered.  The copies go to the head of the queue, or, when ``backoff``
    (a :class:`~stompbroker.broker.queueing.backoff.Backoff`) makes them wait,
    aside until their time comes (:func:`hold`).

    :param consumer: the consumer that held them; its limit applies.
    :param messages: in delivery order.
    :returns: the store writes that dead-lettering made (Deferreds).
    """
    limit = consumer.max_redeliveries
    returning = []
    written = []
    for message in messages:
        if 0 <= limit <= message.redeliveries:
            moved = queue.dead_letter(message, DELIVERY_LIMIT)
            if moved is not None:
                written.append(moved)
        else:
            returning.append(evolve(message, redeliveries=message.redeliveries + 1))
    if returning:
        queue._counters.redelivered += len(returning)
        if backoff is not None and backoff.delay_ms:
            returning = _hold_back(queue, returning, backoff)
        queue.pending.extendleft(reversed(returning))
    # Even when every message was dead-lettered, the consumer has room again.
    queue.dispatch()
    return written


def _hold_back(queue: WorkerQueue, messages: list[Message], backoff: Any) -> list[Message]:
    """
    Put returning messages aside for their back-off, but for those of a
    message group: they go back at once, for a group's later messages must not
    overtake them (:mod:`stompbroker.broker.queueing.groups`).

    :returns: the messages that go back at once.
    """
    now = queue._clock.seconds()
    at_once = []
    for message in messages:
        if message.group is None:
            hold(queue, message, now + backoff.delay(message.redeliveries))
        else:
            at_once.append(message)
    return at_once


def hold(queue: WorkerQueue, message: Message, due: float, *, stored: bool = False) -> None:
    """
    Keep a message aside until ``due`` (the clock's seconds), then give it
    back to the head of the queue; the store keeps the due time of a
    persistent one, so that its wait outlives a restart.

    :param message: a message returned for redelivery, or recovered from the store.
    :param due: when it may be delivered again.
    :param stored: the store has this due time already (recovery).
    """
    if queue.delayed is None:
        queue.delayed = DelayedMessages(queue._clock, queue._release)
    queue.delayed.hold(message, due)
    if message.persistent and queue.journal is not None and not stored:
        queue.journal.delay(queue.store_key, message.message_id, due)


def reject(queue: WorkerQueue, messages: list[Message]) -> list[Any]:
    """
    Dead-letter messages a consumer refused for good (NACK ``requeue:false``).

    :param messages: what the NACK settled.
    :returns: the store writes that dead-lettering made (Deferreds).
    """
    written = []
    for message in messages:
        moved = queue.dead_letter(message, REJECTED)
        if moved is not None:
            written.append(moved)
    queue.dispatch()
    return written
