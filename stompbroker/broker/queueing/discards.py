"""
What a worker queue (:class:`~stompbroker.broker.queueing.queues.WorkerQueue`)
discards: every pending message at once (a purge), a message pushed out by a
policy's overflow (``drop-head``), and all it holds when it is closed.

What is discarded counts in the broker's ``discarded`` total and as dropped in
the queue's traffic counters, and a persistent message leaves the store with
it.  These are functions of the queue they are given, as
:mod:`~stompbroker.broker.queueing.limits` and
:mod:`~stompbroker.broker.queueing.dispatch` act on it: none is on the path of
a message that is delivered and acknowledged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from stompbroker.protocol.message import Message

if TYPE_CHECKING:
    from stompbroker.broker.queueing.queues import WorkerQueue

__all__ = ["close", "drop", "purge"]


def purge(queue: WorkerQueue) -> int:
    """
    Discard every pending message (and every one waiting for a redelivery
    back-off), counted discarded; persistent ones leave the store.

    :returns: how many were discarded.
    """
    purged = list(queue.pending)
    queue.pending.clear()
    if queue.delayed is not None:
        purged.extend(queue.delayed.take_all())
    on_disk = _drop_paged(queue)
    queue.forget_resident()
    queue._counters.discarded += len(purged) + on_disk
    queue._traffic.count(purged, "messages_dropped")
    if queue.journal is not None:
        for message in purged:
            if message.persistent:
                queue.journal.remove(queue.store_key, message.message_id)
    return len(purged) + on_disk


def _drop_paged(queue: WorkerQueue) -> int:
    """
    Forget the queue's part on disk (:mod:`~stompbroker.broker.queueing.paging`),
    in the store too (its transient rows with the rest).

    :returns: how many messages the store held only.
    """
    paged = queue.paged
    if paged is None:
        return 0
    queue.paged = None
    if queue.journal is not None and queue.store_key is not None:
        queue.journal.remove_paged(queue.store_key, paged.after, paged.first_id)
    return paged.count


def drop(queue: WorkerQueue, message: Message) -> None:
    """
    Discard a message taken from the queue (overflow's ``drop-head``), counted
    dropped; a persistent one leaves the store.
    """
    queue._counters.discarded += 1
    queue._traffic.count((message,), "messages_dropped")
    if message.persistent and queue.journal is not None:
        queue.journal.remove(queue.store_key, message.message_id)
    if queue._left is not None:
        queue._left(message)


def close(queue: WorkerQueue) -> None:
    """
    Delete the queue: discard what it holds, drop its consumers, stop its sweep.

    Used for queues that end with their owner: a topic subscription's own queue,
    a temporary queue, a durable subscription that is removed (whose backlog
    the broker drops from the store with the subscription), an idle queue
    (which holds nothing).
    """
    # A wildcard consumer's member holds only its own of what it shares.
    held = [
        list(consumer.unacked.values()) if consumer.own is None else consumer.take_all()
        for consumer in queue.consumers
    ]
    on_disk = _drop_paged(queue)
    queue._counters.discarded += len(queue.pending) + sum(map(len, held)) + on_disk
    queue._traffic.count(queue.pending, "messages_dropped")
    for messages in held:
        queue._traffic.count(messages, "messages_dropped")
    queue._traffic.queues.discard(queue)
    for consumer in queue.consumers:
        consumer.take_all()
    queue.consumers.clear()
    queue.pending.clear()
    queue.forget_resident()
    queue.expiry.cancel()
    if queue.paged_expiry is not None:
        queue.paged_expiry.cancel()
    if queue.delayed is not None:
        delayed = queue.delayed.take_all()
        queue._counters.discarded += len(delayed)
        queue._traffic.count(delayed, "messages_dropped")
