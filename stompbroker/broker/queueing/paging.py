"""
Paged queues: the store holds a queue's messages, memory a window of them.

A queue whose persistent messages a store keeps (a ``/queue/`` destination, a
durable topic subscription) holds its messages in memory only while the
broker's queues together stay within a memory budget (:class:`PagingBudget`,
``--queue-memory``).  Past it, a queue that already holds its read-ahead
(``--read-ahead`` messages) in memory stops taking messages into memory: it
*pages*.  From then on each message that arrives stays in the store only,
counted in the queue's :class:`PagedPart`: how many, how many body bytes, and
where in the store the part starts (the first paged-out message's id until the
first read, then the store sequence read up to).  No per-message index: a paged
message costs memory nothing.

A persistent message is in the store already (the broker files it before it
enqueues it).  A non-persistent one the queue files itself, marked *transient*
(``IMessageStore.add_transient``): nobody waits for that write, its RECEIPT
never did, and a restart drops it, as RabbitMQ drops transient messages it paged
out.  Both kinds share the store's one sequence, so the paged part is one run
of the queue's key in the order messages came, whatever their kinds.

As consumers drain the queue's memory, the queue asks the store for the next
page (an indexed range read by ``(key, sequence)``, in the store's writer
thread), in order, and hands what comes back out as if it had just arrived; the
page's transient rows then leave the store (one range delete), since memory is
where a non-persistent message lives.  When a read gives fewer messages than it
asked for while nothing was paged out meanwhile, the part on disk is empty and
the queue stops paging.

Messages of the part that expire while it waits are found by a sweep of the
store's expiry index (:mod:`~stompbroker.broker.queueing.paged_expiry`), not
when their page is read: the part is counted down, and they are dropped or
dead-lettered as any expired message.

A message of a higher priority than any the part on disk holds does not wait
behind it: it stays in memory (up to a few read-aheads), where the queue's
priority order puts it before the paged part.

Pure logic: no I/O, no reactor; the queue sequences the read and its result.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from attrs import define

from stompbroker.broker.queueing.groups import stored_group
from stompbroker.broker.queueing.priorities import parse_priority, stored_priority
from stompbroker.protocol.message import Message

__all__ = [
    "MESSAGE_OVERHEAD",
    "PagedPart",
    "PagingBudget",
    "message_from_record",
    "resident_size",
]

#: Bytes a message waiting in memory costs besides its body (the Message, its
#: headers tuple, its id): tracemalloc counts about 530 for a 1 KiB message
#: with three headers; rounded up, as headers vary.
MESSAGE_OVERHEAD = 600


def resident_size(message: Message) -> int:
    """:returns: the bytes a message is counted for in the budget while it waits in memory."""
    return len(message.body) + MESSAGE_OVERHEAD


@define
class PagingBudget:
    """
    The memory the store's queues may hold their messages in, shared by them.

    :ivar limit: bytes (:func:`resident_size`) of messages the queues
        hold in memory together before one that holds ``read_ahead`` messages pages.
    :ivar read_ahead: messages a queue keeps in memory at least, and reads per page.
    :ivar used: bytes counted in now: each queue adds what it takes into memory and
        takes out what it hands out, and gives back its whole share when its
        memory empties, which corrects what the count missed (redeliveries).
    """

    limit: int
    read_ahead: int = 1000
    used: int = 0

    def __attrs_post_init__(self) -> None:
        if self.limit < 0:
            raise ValueError(f"the queue memory budget must be >= 0, not {self.limit}")
        if self.read_ahead < 1:
            raise ValueError(f"the read-ahead must be >= 1 message, not {self.read_ahead}")

    def full(self, held: int) -> bool:
        """
        :param held: how many messages the asking queue holds in memory.
        :returns: whether a queue that holds ``held`` messages must page its next one.
        """
        return self.used > self.limit and held >= self.read_ahead


@define
class PagedPart:
    """
    The part of one queue that is on disk only: a count and a place in the store.

    :ivar count: how many messages the part holds (as the queue counted them in:
        a removal the queue did not see is corrected at the last page).
    :ivar size: their body bytes.
    :ivar after: the store sequence the queue has read up to; the part is
        every message of the queue's key past it.
    :ivar first_id: until the first read, the id of the first message paged out:
        the part starts there (its sequence is the store's to know).
    :ivar reading: whether a read of the part is in flight (a page, the expiry
        sweep's, a move's): one at a time, so that none reads what another takes.
    :ivar paged_since: messages paged out since that page was asked for: a short
        page then does not mean that the part is empty.
    :ivar transient: how many of ``count`` are non-persistent (transient rows,
        which a restart drops).
    :ivar top: the highest priority the part may hold: a message of a higher
        one can go before it, in memory (the highest, 9, for a part recovery
        counted without reading it).
    :ivar jumped: messages of a priority above the part that stayed in memory
        while it paged: stored in its range, so a page must leave them out.
    """

    count: int = 0
    size: int = 0
    after: int = 0
    first_id: str | None = None
    reading: bool = False
    paged_since: int = 0
    transient: int = 0
    top: int = -1
    jumped: int = 0

    def page_out(self, message: Message) -> None:
        """Count in a message that the store keeps and memory does not."""
        if message.priority > self.top:
            self.top = message.priority
        if not message.persistent:
            self.transient += 1
        self.count += 1
        self.size += len(message.body)
        self.paged_since += 1

    def asked(self) -> None:
        """A page has been asked for."""
        self.reading = True
        self.paged_since = 0

    def came(self, records: list[Any], asked: int, others: Collection[str] = ()) -> bool:
        """
        A page has come: count it out and move past it.

        :param records: the :class:`~stompbroker.broker.store.base.StoredMessage`
            records read, in sequence order.
        :param asked: how many were asked for.
        :param others: ids of records that memory holds (the tail, messages of
            a priority above the part): stored in the part's range, not counted in it.
        :returns: whether the part is now empty (the queue stops paging).
        """
        self.reading = False
        for record in records:
            if record.message_id in others:
                continue
            self.count -= 1
            self.size -= len(record.body)
            self.transient -= record.transient
        if records:
            self.after = records[-1].sequence
            self.first_id = None
        if self.count <= 0 or (len(records) < asked and not self.paged_since):
            # Read to the end: a count that erred high (an add that failed) is put right.
            self.count = self.size = self.transient = 0
            return True
        self.size = max(self.size, 0)
        self.transient = max(self.transient, 0)
        return False

    def taken(self, records: list[Any], start: int | None) -> None:
        """
        Count out messages of the part that others took from disk: the expiry
        sweep expired them, an operator's move moved them.

        :param start: the sequence the part starts past, if the store found
            where ``first_id`` is: the message it names may be among those taken.
        """
        for record in records:
            self.count -= 1
            self.size -= len(record.body)
            self.transient -= record.transient
        self.count = max(self.count, 0)
        self.size = max(self.size, 0)
        self.transient = max(self.transient, 0)
        if self.first_id is not None and start is not None:
            self.after, self.first_id = start, None

    def waiting(self) -> int:
        """:returns: how many messages wait here, on disk."""
        return self.count

    def waiting_bytes(self) -> int:
        """:returns: their body bytes."""
        return self.size


def message_from_record(record: Any) -> Message:
    """
    Make the message a stored record holds again, as the router made it from its SEND.

    :param record: a :class:`~stompbroker.broker.store.base.StoredMessage`.
    :returns: the message (persistent unless the record is transient), whose
        redelivery count counts a delivery the store recorded, so that its next
        delivery says ``redelivered:true``.
    """
    message = Message(
        record.destination,
        record.message_id,
        record.headers,
        record.body,
        record.expires,
        record.redeliveries,
        not record.transient,
        # Derived from the stored headers, as the router derived it from the SEND's.
        parse_priority(stored_priority(record.headers)),
    )
    message.group, message.closes_group = stored_group(record.headers)
    return message
