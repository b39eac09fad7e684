"""
:class:`MemoryStore`: every promise of :class:`~stompbroker.broker.store.base.IMessageStore`
but surviving the process, for tests and for a broker run without a data directory.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

from attrs import evolve
from twisted.internet.defer import Deferred, fail, succeed
from zope.interface import implementer

from stompbroker.broker.store.base import (
    DurableSubscription,
    ExpiredPage,
    IMessageStore,
    MessageFields,
    RecoveredState,
    ScheduledRecord,
    StoredMessage,
    StoreNotOpen,
    _not_open,
    duplicate_error,
    stored_message,
)
from stompbroker.protocol.frames import Headers


@implementer(IMessageStore)
class MemoryStore:
    """
    A store that keeps everything in this process's memory.

    It keeps every promise of :class:`IMessageStore` except surviving the
    process: its Deferreds have fired by the time the call returns.
    """

    def __init__(self) -> None:
        self._open = False
        self._closed = False
        self._sequence = itertools.count(1)
        self._queues: dict[str, dict[str, StoredMessage]] = {}
        self._subscriptions: dict[str, DurableSubscription] = {}
        self._scheduled: dict[str, ScheduledRecord] = {}
        self._retained: dict[str, StoredMessage] = {}

    def open(self) -> None:
        """
        Make the store usable.

        :raises StoreNotOpen: if it was closed; a closed store stays closed.
        """
        if self._closed:
            raise StoreNotOpen("this message store has been closed; make a new one")
        self._open = True

    def close(self) -> Deferred[None]:
        """:returns: a fired Deferred; the contents are dropped."""
        self._open = False
        self._closed = True
        self._queues.clear()
        self._subscriptions.clear()
        self._scheduled.clear()
        self._retained.clear()
        return succeed(None)

    def recover(self, read_ahead: int = 0) -> Deferred[RecoveredState]:
        """:returns: a fired Deferred with the store's contents (:meth:`IMessageStore.recover`)."""
        if not self._open:
            return _not_open()
        for key in list(self._queues):
            self._forget_transient(key, lambda record: True)
        messages = sorted(
            (message for queue in self._queues.values() for message in queue.values()),
            key=lambda message: message.sequence,
        )
        return succeed(
            RecoveredState.from_records(
                messages,
                self._subscriptions.values(),
                self._scheduled.values(),
                self._retained.values(),
                read_ahead=read_ahead,
            )
        )

    def page(
        self, queue: str, after: int, first_id: str | None, limit: int
    ) -> Deferred[list[StoredMessage]]:
        """:returns: a fired Deferred with the records; see :meth:`IMessageStore.page`."""
        if not self._open:
            return _not_open()
        return succeed(list(itertools.islice(self._from(queue, after, first_id), limit)))

    def remove_after(self, queue: str, after: int, first_id: str | None) -> Deferred[None]:
        """:returns: a fired Deferred; see :meth:`IMessageStore.remove_after`."""
        if not self._open:
            return _not_open()
        messages = self._queues.get(queue, {})
        for record in list(self._from(queue, after, first_id)):
            del messages[record.message_id]
        if not messages:
            self._queues.pop(queue, None)
        return succeed(None)

    def expired(
        self, queue: str, after: int, first_id: str | None, now: float, limit: int
    ) -> Deferred[ExpiredPage]:
        """:returns: a fired Deferred with what has expired; see :meth:`IMessageStore.expired`."""
        if not self._open:
            return _not_open()
        start = self._start(queue, after, first_id)
        found = [r for r in self._from(queue, after, first_id) if r.expires]
        expired = [record for record in found if record.expires <= now]
        later = [record.expires for record in found if record.expires > now]
        return succeed(ExpiredPage(start, tuple(expired[:limit]), min(later, default=0.0)))

    def _start(self, queue: str, after: int, first_id: str | None) -> int:
        """:returns: the sequence :meth:`page` reads past: ``first_id``'s, resolved."""
        first = self._queues.get(queue, {}).get(first_id) if first_id is not None else None
        return first.sequence - 1 if first is not None else after

    def _from(self, queue: str, after: int, first_id: str | None) -> Iterator[StoredMessage]:
        """:returns: the key's records from where :meth:`page` reads, in sequence order."""
        start = self._start(queue, after, first_id)
        # A key's records are in the order added, which is their sequence order.
        return (r for r in self._queues.get(queue, {}).values() if r.sequence > start)

    def add(self, queue: str, message: MessageFields) -> Deferred[StoredMessage]:
        """:returns: a fired Deferred with the stored record; see :meth:`IMessageStore.add`."""
        if not self._open:
            return _not_open()
        messages = self._queues.setdefault(queue, {})
        if message.message_id in messages:
            return fail(duplicate_error(queue, message.message_id))
        record = stored_message(queue, next(self._sequence), message)
        messages[record.message_id] = record
        return succeed(record)

    def add_transient(self, queue: str, message: MessageFields) -> Deferred[None]:
        """:returns: a fired Deferred; see :meth:`IMessageStore.add_transient`."""
        if not self._open:
            return _not_open()
        messages = self._queues.setdefault(queue, {})
        if message.message_id not in messages:
            record = stored_message(queue, next(self._sequence), message, transient=True)
            messages[record.message_id] = record
        return succeed(None)

    def remove_transient(self, queue: str, through: int) -> Deferred[None]:
        """:returns: a fired Deferred; see :meth:`IMessageStore.remove_transient`."""
        if not self._open:
            return _not_open()
        self._forget_transient(queue, lambda record: record.sequence <= through)
        return succeed(None)

    def _forget_transient(self, queue: str, chosen: Callable[[StoredMessage], bool]) -> None:
        """Drop the key's transient records that ``chosen`` picks, and the key if it empties."""
        messages = self._queues.get(queue, {})
        for record in [r for r in messages.values() if r.transient and chosen(r)]:
            del messages[record.message_id]
        if not messages:
            self._queues.pop(queue, None)

    def remove(self, queue: str, message_id: str, *, lazy: bool = False) -> Deferred[None]:
        """:returns: a fired Deferred; see :meth:`IMessageStore.remove`."""
        if not self._open:
            return _not_open()
        messages = self._queues.get(queue)
        if messages is not None:
            messages.pop(message_id, None)
            if not messages:
                del self._queues[queue]
        return succeed(None)

    def mark_delivered(self, queue: str, message_id: str) -> Deferred[None]:
        """:returns: a fired Deferred; see :meth:`IMessageStore.mark_delivered`."""
        if not self._open:
            return _not_open()
        messages = self._queues.get(queue, {})
        record = messages.get(message_id)
        if record is not None:
            messages[message_id] = evolve(
                record,
                delivered=True,
                redelivery_count=record.redelivery_count + record.delivered,
                due=0.0,
            )
        return succeed(None)

    def delay(self, queue: str, message_id: str, due: float) -> Deferred[None]:
        """:returns: a fired Deferred; see :meth:`IMessageStore.delay`."""
        if not self._open:
            return _not_open()
        messages = self._queues.get(queue, {})
        record = messages.get(message_id)
        if record is not None:
            messages[message_id] = evolve(record, due=due)
        return succeed(None)

    def move(
        self, from_queue: str, message_id: str, to_queue: str, message: MessageFields
    ) -> Deferred[StoredMessage]:
        """:returns: a fired Deferred with the copy; see :meth:`IMessageStore.move`."""
        if not self._open:
            return _not_open()
        if message.message_id in self._queues.get(to_queue, {}):
            return fail(duplicate_error(to_queue, message.message_id))
        self.remove(from_queue, message_id)
        return self.add(to_queue, message)

    def add_subscription(
        self, name: str, destination: str, headers: Headers = ()
    ) -> Deferred[None]:
        """:returns: a fired Deferred; see :meth:`IMessageStore.add_subscription`."""
        if not self._open:
            return _not_open()
        pairs = tuple((key, value) for key, value in headers)
        self._subscriptions[name] = DurableSubscription(name, destination, pairs)
        return succeed(None)

    def remove_subscription(self, name: str) -> Deferred[None]:
        """:returns: a fired Deferred; see :meth:`IMessageStore.remove_subscription`."""
        if not self._open:
            return _not_open()
        self._subscriptions.pop(name, None)
        self._queues.pop(name, None)
        return succeed(None)

    def schedule(self, record: ScheduledRecord) -> Deferred[None]:
        """:returns: a fired Deferred; see :meth:`IMessageStore.schedule`."""
        if not self._open:
            return _not_open()
        self._scheduled[record.message_id] = record
        return succeed(None)

    def unschedule(self, message_id: str) -> Deferred[None]:
        """:returns: a fired Deferred; see :meth:`IMessageStore.unschedule`."""
        if not self._open:
            return _not_open()
        self._scheduled.pop(message_id, None)
        return succeed(None)

    def retain(self, topic: str, message: MessageFields) -> Deferred[None]:
        """:returns: a fired Deferred; see :meth:`IMessageStore.retain`."""
        if not self._open:
            return _not_open()
        self._retained.pop(topic, None)
        self._retained[topic] = stored_message(topic, next(self._sequence), message)
        return succeed(None)

    def unretain(self, topic: str) -> Deferred[None]:
        """:returns: a fired Deferred; see :meth:`IMessageStore.unretain`."""
        if not self._open:
            return _not_open()
        self._retained.pop(topic, None)
        return succeed(None)

    def disk_space(self) -> None:
        """:returns: ``None``: this store keeps nothing on disk, so no disk alarm watches it."""
        return None
