"""
Where persistent messages live between SEND and ACK: the message store.

A worker queue (or a durable topic subscription) keeps its messages in memory
for delivery; for the ones that must survive a crash it also tells a store, at a
few well-defined moments:

- :meth:`IMessageStore.add` when a persistent message is enqueued; its Deferred
  fires once the record is durable, and only then may the broker answer the
  SEND's receipt;
- :meth:`IMessageStore.mark_delivered` when the message is handed to a consumer,
  so that after a crash it comes back with ``redelivered:true``;
- :meth:`IMessageStore.remove` when it is acknowledged or expires;
- :meth:`IMessageStore.move` when it is dead-lettered: the message leaves its
  key and the dead-letter copy the broker makes of it joins another, in one
  atomic step;
- :meth:`IMessageStore.add_subscription` and
  :meth:`IMessageStore.remove_subscription` when a durable subscription is
  created or dropped;
- :meth:`IMessageStore.schedule` and :meth:`IMessageStore.unschedule` when a
  persistent message is scheduled for later delivery, fires again later, or has
  fired for the last time (:mod:`stompbroker.broker.features.schedule_rules`);
- :meth:`IMessageStore.retain` and :meth:`IMessageStore.unretain` when a topic
  keeps a persistent message as its last value, or forgets it
  (:mod:`stompbroker.broker.features.retain_rules`);
- :meth:`IMessageStore.recover` once at start, to rebuild every queue and
  durable subscription in its original order, the schedule and the retained
  messages: with a read-ahead, only the head of each key and the size of the
  rest (:class:`PagedRange`);
- :meth:`IMessageStore.page` when a paged queue (one whose messages beyond its
  read-ahead the store alone holds, :mod:`stompbroker.broker.queueing.paging`)
  needs its next messages, :meth:`IMessageStore.expired` when it sweeps them
  for expired ones, and :meth:`IMessageStore.remove_after` when it is purged;
- :meth:`IMessageStore.add_transient` when a paged queue keeps a
  non-persistent message on disk instead of in memory, and
  :meth:`IMessageStore.remove_transient` once a page has brought such messages
  back into memory.  Transient messages never outlive the broker:
  :meth:`IMessageStore.recover` drops them first.

Messages are filed under a *key*: a queue's destination (``/queue/orders``) or a
durable subscription's name.  Both share one namespace, so the broker must name
durable subscriptions so that they cannot be mistaken for queues.  A message
that goes to several durable subscriptions is stored once under each.

This module holds the interface, the records and the errors;
:mod:`stompbroker.broker.store.memory` keeps everything in memory (for tests,
and for a broker that runs without a data directory), and
:mod:`stompbroker.broker.store.sqlite` is the durable one.  Every operation
returns a Deferred so that callers do not care which one they talk to.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from attrs import field, frozen
from twisted.internet.defer import Deferred, fail
from zope.interface import Interface

from stompbroker.protocol.frames import Headers


class StoreError(Exception):
    """The message store cannot do what was asked; the message says what to do about it."""


class StoreLocked(StoreError):
    """Another broker (or another store in this process) is using the data directory."""


class StoreDamaged(StoreError):
    """The database in the data directory is not a readable stompbroker store."""


class StoreIncompatible(StoreError):
    """The database was written by a newer stompbroker, with a schema this one cannot read."""


class StoreUnavailable(StoreError):
    """The data directory cannot be created, opened or written (permissions, not a directory)."""


class StoreWriteFailed(StoreError):
    """A group of writes could not be committed (disk full, I/O error); none of it is durable."""


class StoreFull(StoreWriteFailed):
    """
    The data directory's disk is full: a write that needs more space was refused.

    Writes that free space (removals, delivery marks) are still made; the store
    takes writes that need space again once there is room (see
    :mod:`stompbroker.broker.store.disk_space`).
    """


class StoreNotOpen(StoreError):
    """An operation was asked of a store that has not been opened, or has been closed."""


class DuplicateMessage(StoreError):
    """A key already holds a message with that id; the store was left unchanged."""


class MessageFields(Protocol):
    """
    What :meth:`IMessageStore.add` needs of a message: fields that
    :class:`stompbroker.protocol.message.Message` and :class:`StoredMessage` both carry.
    """

    @property
    def destination(self) -> str: ...

    @property
    def message_id(self) -> str: ...

    @property
    def headers(self) -> Headers: ...

    @property
    def body(self) -> bytes: ...

    @property
    def expires(self) -> float: ...


@frozen
class StoredMessage:
    """
    One message as the store holds it, under one key.

    Its fields are named as those of :class:`stompbroker.protocol.message.Message`, so turning
    one into the other is a matter of passing them along; see :attr:`redeliveries`.

    :ivar queue: the key it is filed under: a queue destination or a durable
        subscription name.
    :ivar sequence: store-wide, assigned when it was added (or moved); recovery
        returns messages in this order.
    :ivar message_id: the broker-unique ``message-id``; unique within a key.
    :ivar destination: where it was sent, e.g. ``/topic/prices`` for a durable
        subscription's copy.
    :ivar headers: the SEND's user headers, in wire order.
    :ivar body: the payload.
    :ivar expires: when it expires, in the broker clock's seconds; ``0.0`` means
        never.  The store never drops expired messages itself: the broker does,
        and tells it with :meth:`IMessageStore.remove`.
    :ivar delivered: whether it has been handed to a consumer at least once, so
        that its next delivery carries ``redelivered:true``.
    :ivar redelivery_count: how many deliveries followed the first one.
    :ivar due: when a NACKed message may be delivered again, in the broker
        clock's seconds (:meth:`IMessageStore.delay`); ``0.0`` once delivered
        again, or if it never waited.
    :ivar transient: a non-persistent message a paged queue keeps on disk
        for want of memory (:meth:`IMessageStore.add_transient`): it does not
        survive a restart.
    """

    queue: str
    sequence: int
    message_id: str
    destination: str
    headers: Headers
    body: bytes
    expires: float = 0.0
    delivered: bool = False
    redelivery_count: int = 0
    due: float = 0.0
    transient: bool = False

    @property
    def redeliveries(self) -> int:
        """
        How many times the message has gone back to its queue for another delivery,
        counting the crash that interrupted a delivery: what
        :attr:`stompbroker.protocol.message.Message.redeliveries` counts.  More than 0
        means its next delivery carries ``redelivered:true``.
        """
        return self.redelivery_count + self.delivered


@frozen
class DurableSubscription:
    """
    A durable topic subscription, kept so that it outlives its client and the broker.

    :ivar name: its key; its backlog is filed under the same key.
    :ivar destination: the topic pattern it subscribes to.
    :ivar headers: what the broker needs to recreate it (``selector``, ``ack``, ...).
    """

    name: str
    destination: str
    headers: Headers = ()


@frozen
class ScheduledRecord:
    """
    One persistent scheduled message as the store holds it, keyed by its ``message_id``.

    Times are in ms since the epoch (wall time), so that a message is due at the
    same time after a restart.

    :ivar message_id: the message-id the broker gave the SEND: the schedule's key.
    :ivar destination: where it goes when due.
    :ivar headers: the SEND's headers, scheduling headers included.
    :ivar body: the payload.
    :ivar due: its next delivery.
    :ivar period: ms between deliveries; 0 if it does not repeat.
    :ivar remaining: deliveries after the next; -1 for no end.
    :ivar fired: deliveries so far.
    """

    message_id: str
    destination: str
    headers: Headers
    body: bytes
    due: int
    period: int = 0
    remaining: int = 0
    fired: int = 0


@frozen
class PagedRange:
    """
    What recovery left on disk of one key: the messages past those it read.

    :ivar count: how many.
    :ivar size: their body bytes, estimated from the messages read (the
        count comes from an index; the sizes would need every row read).
    :ivar after: the sequence of the last message read: the range is the key's
        messages past it.
    """

    count: int
    size: int
    after: int


@frozen
class ExpiredPage:
    """
    What :meth:`IMessageStore.expired` found of a key's paged range.

    :ivar start: the sequence the range starts past, ``first_id`` resolved: a
        reader that asked from ``first_id`` reads past this from now on (the
        message ``first_id`` names may be among those expired).
    :ivar records: the expired messages, oldest first.
    :ivar next_expiry: the earliest expiry of the key's messages past ``start``
        that have not expired, or ``0.0`` if none has one.
    """

    start: int
    records: tuple[StoredMessage, ...]
    next_expiry: float = 0.0


@frozen
class RecoveredState:
    """
    Everything a store holds, as :meth:`IMessageStore.recover` returns it.

    :ivar queues: each key that is not a durable subscription and holds messages,
        mapped to its messages in sequence order; keys come in the order of their
        oldest message.
    :ivar subscriptions: the durable subscriptions, in the order they were created.
    :ivar backlogs: every durable subscription's name mapped to its messages in
        sequence order (an empty tuple when it has none).
    :ivar scheduled: the persistent scheduled messages, in the order scheduled.
    :ivar retained: the persistent retained messages, in the order retained;
        each one's ``queue`` is the topic that retains it.
    :ivar paged: for a recovery with a read-ahead, each key that holds more
        messages than it mapped to what it left on disk.
    """

    queues: Mapping[str, tuple[StoredMessage, ...]]
    subscriptions: tuple[DurableSubscription, ...]
    backlogs: Mapping[str, tuple[StoredMessage, ...]]
    scheduled: tuple[ScheduledRecord, ...] = ()
    retained: tuple[StoredMessage, ...] = ()
    paged: Mapping[str, PagedRange] = field(factory=dict)

    @classmethod
    def from_records(
        cls,
        messages: Iterable[StoredMessage],
        subscriptions: Iterable[DurableSubscription],
        scheduled: Iterable[ScheduledRecord] = (),
        retained: Iterable[StoredMessage] = (),
        paged: Mapping[str, PagedRange] | None = None,
        read_ahead: int = 0,
    ) -> RecoveredState:
        """
        Sort a store's contents into queues and backlogs.

        :param messages: every stored message, in sequence order.
        :param subscriptions: every durable subscription, in creation order.
        :param scheduled: every scheduled message, in the order scheduled.
        :param retained: every retained message, in the order retained.
        :param paged: what a recovery with a read-ahead left on disk, by key.
        :param read_ahead: keep at most this many messages of each key, and
            count the rest in :attr:`paged` (0 keeps them all).
        :returns: the state, with each key's messages in the order given.
        """
        subscriptions = tuple(subscriptions)
        backlogs: dict[str, list[StoredMessage]] = {s.name: [] for s in subscriptions}
        queues: dict[str, list[StoredMessage]] = {}
        for message in messages:
            backlog = backlogs.get(message.queue)
            if backlog is None:
                backlog = queues.setdefault(message.queue, [])
            backlog.append(message)
        ranges = dict(paged or {})
        if read_ahead:
            for found in (*queues.values(), *backlogs.values()):
                if len(found) > read_ahead:
                    rest = found[read_ahead:]
                    del found[read_ahead:]
                    ranges[rest[0].queue] = PagedRange(
                        len(rest), sum(len(m.body) for m in rest), found[-1].sequence
                    )
        return cls(
            queues={key: tuple(found) for key, found in queues.items()},
            subscriptions=subscriptions,
            backlogs={key: tuple(found) for key, found in backlogs.items()},
            scheduled=tuple(scheduled),
            retained=tuple(retained),
            paged=ranges,
        )


def stored_message(
    queue: str, sequence: int, message: MessageFields, *, transient: bool = False
) -> StoredMessage:
    """
    Make the record :meth:`IMessageStore.add` (or ``add_transient``) files.

    :returns: an undelivered :class:`StoredMessage` with ``message``'s fields.
    """
    headers = message.headers
    return StoredMessage(
        queue,
        sequence,
        message.message_id,
        message.destination,
        # A message's pairs are a tuple already (and immutable): copied, they
        # cost a generator per persistent SEND.
        headers if type(headers) is tuple else tuple((name, value) for name, value in headers),
        bytes(message.body),
        message.expires,
        transient=transient,
    )


class IMessageStore(Interface):
    """
    Durable (or not) storage for persistent messages and durable subscriptions.

    Every operation but :meth:`open` returns a Deferred and takes effect in the
    order the operations were called.  An operation on a store that is not open
    fails with :class:`StoreNotOpen`.  Removing, marking or moving a message the
    key does not hold is not an error: it may have been removed already, and the
    broker's memory is what decides.
    """

    def open():  # type: ignore[no-untyped-def]
        """
        Claim the store, before the broker serves anyone.

        This is synchronous on purpose: it runs at start-up, and a store that
        cannot be used must stop the start with an error rather than leave an
        empty broker running.

        :raises StoreLocked: if another broker uses it.
        :raises StoreDamaged: if it holds something that is not a readable store.
        :raises StoreIncompatible: if a newer version wrote it.
        :raises StoreUnavailable: if it cannot be created or written.
        """

    def close():  # type: ignore[no-untyped-def]
        """
        Write what is pending, then release the store.

        :returns: a Deferred that fires once everything called before is durable
            and the store is released; later operations fail with
            :class:`StoreNotOpen`.
        """

    def recover(read_ahead=0):  # type: ignore[no-untyped-def]
        """
        Read back what the store holds, after every operation called before,
        having first dropped every transient message (:meth:`add_transient`),
        unread: a non-persistent message does not survive a restart.

        :param read_ahead: read at most this many messages of each key, and only
            count the rest (:attr:`RecoveredState.paged`); 0 reads every message.
        :returns: a Deferred firing with a :class:`RecoveredState`, or failing
            with a :class:`StoreError` if the store cannot be read.
        """

    def page(queue, after, first_id, limit):  # type: ignore[no-untyped-def]
        """
        Read the next messages of a key, after every operation called before.

        :param after: read past this sequence...
        :param first_id: ...or, if not ``None``, from the message with this id on
            (past ``after`` if the key no longer holds it).
        :param limit: most messages to read.
        :returns: a Deferred firing with a list of :class:`StoredMessage`, in
            sequence order.
        """

    def expired(queue, after, first_id, now, limit):  # type: ignore[no-untyped-def]
        """
        Find the messages of a key's paged range (where :meth:`page` would read
        on) that have expired by ``now``, after every operation called before; the
        broker expires them (:meth:`remove` or :meth:`move` each, as it expires
        any message), so this leaves them in place.

        :param limit: most messages to return: the oldest that have expired.
        :returns: a Deferred firing with an :class:`ExpiredPage`.
        """

    def remove_after(queue, after, first_id):  # type: ignore[no-untyped-def]
        """
        Forget every message of a key from where :meth:`page` would read on.

        :returns: a Deferred firing with ``None`` once the removal is durable.
        """

    def add_transient(queue, message):  # type: ignore[no-untyped-def]
        """
        File a non-persistent message under a key, marked transient: a paged
        queue keeps it on disk rather than in memory, in its place in the key's
        order, until :meth:`page` reads it back.

        Nobody waits for it (a non-persistent message's RECEIPT never waits for
        the disk), so it starts no commit of its own and is never fsynced for
        itself: it rides with the next commit, as a lazy :meth:`remove` does.

        :returns: a Deferred firing with ``None`` once it is written.
        """

    def remove_transient(queue, through):  # type: ignore[no-untyped-def]
        """
        Forget a key's transient messages up to the sequence ``through``: a page
        that read them back has put them in memory, where a non-persistent
        message lives.  One statement, lazy as an ACK's removal.

        :returns: a Deferred firing with ``None`` once the removal is written.
        """

    def add(queue, message):  # type: ignore[no-untyped-def]
        """
        File a message under a key.

        :param queue: the key: a queue destination or a durable subscription name.
        :param message: anything with ``destination``, ``message_id``, ``headers``,
            ``body`` and ``expires`` (see :class:`MessageFields`), such as a
            :class:`stompbroker.protocol.message.Message`.
        :returns: a Deferred firing with the :class:`StoredMessage` once it is as
            durable as the store promises; only then may the SEND be acknowledged.
            It fails with :class:`DuplicateMessage` if the key holds that id.
        """

    def remove(queue, message_id, *, lazy=False):  # type: ignore[no-untyped-def]
        """
        Forget a message: it was acknowledged or has expired.

        :param lazy: nobody needs the removal soon (an ACK's): the store may
            hold it for a commit that others start, within its own latency
            bound (``batch_delay`` for the SQLite store).
        :returns: a Deferred firing with ``None`` once the removal is durable:
            at once if the message's own add is not written yet (the SQLite
            store then never writes it, and nothing can bring it back).
        """

    def mark_delivered(queue, message_id):  # type: ignore[no-untyped-def]
        """
        Record one delivery of a message to a consumer.

        The first delivery sets :attr:`StoredMessage.delivered`; each later one
        adds one to :attr:`StoredMessage.redelivery_count`.

        :returns: a Deferred firing with ``None`` once the mark is durable: at
            once if the message's own add is not written yet (the SQLite store
            then writes the mark with it: both become durable, or neither).
        """

    def delay(queue, message_id, due):  # type: ignore[no-untyped-def]
        """
        Record that a message waits for its redelivery until ``due`` (a NACK's
        back-off), so that it waits as long after a restart.  Its next
        :meth:`mark_delivered` sets the due time back to ``0.0``.

        :returns: a Deferred firing with ``None`` once the due time is durable.
        """

    def move(from_queue, message_id, to_queue, message):  # type: ignore[no-untyped-def]
        """
        Dead-letter a message: remove it from one key and add its dead-letter copy
        to another, in one atomic step.

        The broker makes a new message for the dead-letter queue (its own id and
        destination, headers saying whence and why); that is what ``message`` is.
        It is filed as :meth:`add` files it, at the end of ``to_queue`` with a
        clean delivery record, even if ``from_queue`` no longer holds
        ``message_id``.

        :param from_queue: the key the failed message is filed under.
        :param message_id: its id there.
        :param to_queue: the dead-letter queue's key.
        :param message: the dead-letter copy (see :class:`MessageFields`).
        :returns: a Deferred firing with the copy's :class:`StoredMessage` once
            the move is durable; it fails with :class:`DuplicateMessage`, leaving
            both keys unchanged, if ``to_queue`` already holds the copy's id.
        """

    def add_subscription(name, destination, headers=()):  # type: ignore[no-untyped-def]
        """
        Record a durable subscription, or update the destination and headers of
        one with that name (its backlog and place in the order stay).

        :returns: a Deferred firing with ``None`` once it is durable.
        """

    def remove_subscription(name):  # type: ignore[no-untyped-def]
        """
        Drop a durable subscription and its whole backlog, in one atomic step.

        :returns: a Deferred firing with ``None`` once it is durable.
        """

    def schedule(record):  # type: ignore[no-untyped-def]
        """
        Keep a scheduled message, or update the schedule of the one with its
        ``message_id`` (after a delivery of a repeating one).

        :param record: a :class:`ScheduledRecord`.
        :returns: a Deferred firing with ``None`` once it is durable; only then
            may the SEND be acknowledged.
        """

    def unschedule(message_id):  # type: ignore[no-untyped-def]
        """
        Forget a scheduled message: its last delivery has gone out.

        :returns: a Deferred firing with ``None`` once the removal is durable.
        """

    def retain(topic, message):  # type: ignore[no-untyped-def]
        """
        Keep a message as a topic's retained message, replacing the one before.

        :param topic: the topic, as the broker names it (one spelling of it).
        :param message: see :class:`MessageFields`.
        :returns: a Deferred firing with ``None`` once it is durable.
        """

    def unretain(topic):  # type: ignore[no-untyped-def]
        """
        Forget a topic's retained message, if it has one.

        :returns: a Deferred firing with ``None`` once the removal is durable.
        """

    def disk_space():  # type: ignore[no-untyped-def]
        """
        What the disk alarm (``--disk-free-limit``) watches; called on a timer.

        :returns: a :class:`~stompbroker.broker.store.disk_space.DiskSpace`, the
            room left for the store, or ``None`` for a store on no disk (or one
            not open now).
        """


def _not_open() -> Deferred:
    """:returns: a failed Deferred for an operation on a store that is not open."""
    return fail(StoreNotOpen("the message store is not open"))


def duplicate_error(queue: str, message_id: str) -> DuplicateMessage:
    """:returns: the error for a second message with one id under one key."""
    return DuplicateMessage(f"{queue!r} already holds a message with id {message_id!r}")
