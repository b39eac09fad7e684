"""
Worker queues: messages wait in order, and each goes to one consumer.

Pure logic with an injected clock (``seconds`` and ``callLater``): no I/O, no
reactor import, tested with ``twisted.internet.task.Clock``.

Theory of operation
-------------------
A :class:`WorkerQueue` holds its pending messages in a deque and its
:class:`~stompbroker.broker.queueing.delivery.Consumer` objects in a list.  Whenever
something can change who gets what (a message arrives, a consumer arrives or
acknowledges, messages come back), :meth:`WorkerQueue.dispatch` hands pending
messages out, head first, round-robin among the consumers whose window has room:
the consumer after the one last served is asked first.  So each consumer sees its
messages in queue order, and a consumer with a full window is skipped until it
acknowledges.

Messages that come back (NACK, UNSUBSCRIBE, a lost connection) go to the head of
the queue in the order they were delivered, each as a copy whose
``redeliveries`` is one higher; a message that has been redelivered as often as
the returning consumer allows goes to the dead-letter queue instead.  A NACKed
message whose consumer has a redelivery back-off
(:mod:`stompbroker.broker.queueing.backoff`) waits aside instead
(:attr:`WorkerQueue.delayed`, made on the first such NACK) and goes back to the
head when its time comes; what a consumer held when it left comes back at once.

Expiry is checked when a message reaches the head of the queue, so an expired
message is never delivered.  Messages that expire while nobody consumes are
found by a sweep (:mod:`stompbroker.broker.queueing.expiry_sweep`, an object the queue holds),
and those paged out to the store by a sweep of the store
(:mod:`stompbroker.broker.queueing.paged_expiry`, another).

Every change of a message's state is one method (:meth:`~WorkerQueue.enqueue`,
:meth:`~WorkerQueue.dispatch`, :meth:`~WorkerQueue.acknowledge`,
:meth:`~WorkerQueue.requeue`, :meth:`~WorkerQueue.dead_letter`,
:meth:`~WorkerQueue.expire`), which is where a message store hooks in; so is
what comes back (:meth:`~WorkerQueue.requeue`, :meth:`~WorkerQueue.reject`,
:meth:`~WorkerQueue.hold`, a consumer that leaves) and what the queue discards
(:meth:`~WorkerQueue.purge`, :meth:`~WorkerQueue.drop`, :meth:`~WorkerQueue.close`).

What a queue does not decide: where dead letters go.  It hands them, with a
reason and its store key, to the ``dead_letter`` callable it was made with.

Persistent messages
-------------------
A queue whose messages the store keeps (a ``/queue/`` destination, a durable
topic subscription) has a ``journal`` and a ``store_key``.  The broker files a
persistent message before it enqueues it; from then on the queue tells the
journal what becomes of it: handed to a consumer (``mark_delivered``, or
``remove`` for ``auto``, which counts as acknowledged on delivery), acknowledged
or expired (``remove``), dead-lettered (``move``, which the ``dead_letter``
callable does).  A message going back to the queue needs no write: its delivery
mark already says that its next delivery is a redelivery.  Non-persistent
messages, and queues without a journal, skip all of this with one test; a
paged queue files a non-persistent message itself, as a transient row the
store keeps only until the message's page is read back
(:mod:`~stompbroker.broker.queueing.paging`).

The consumer writes a persistent message to its client only once the store has
recorded the delivery (see :meth:`Consumer.deliver`), so that no client sees a
message that a crash would bring back unmarked.  The methods that settle
messages (:meth:`~WorkerQueue.acknowledge`, :meth:`~WorkerQueue.requeue`,
:meth:`~WorkerQueue.reject`) return the store writes they caused, for the
client's RECEIPT to wait on.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Callable, Iterator
from itertools import islice
from typing import Any

from attrs import evolve
from twisted.internet.defer import Deferred
from zope.interface import implementer

from stompbroker.broker.engine.engine_interface import IQueue
from stompbroker.broker.features.selectors import Selector
from stompbroker.broker.flow.traffic import Traffic
from stompbroker.broker.queueing.dead_letters import DELIVERY_LIMIT, EXPIRED, REJECTED, DeadLetter
from stompbroker.broker.queueing.delayed import DelayedMessages
from stompbroker.broker.queueing.delivery import Consumer, DeliveryCounters, DeliveryPolicy
from stompbroker.broker.queueing.dispatch import PLAIN_OPTIONS, FeatureDispatch
from stompbroker.broker.queueing.expiry_sweep import ExpirySweep
from stompbroker.broker.queueing.groups import GroupAssignments, GroupedPending
from stompbroker.broker.queueing.limits import QueueLimits
from stompbroker.broker.queueing.paged_expiry import PagedExpiry
from stompbroker.broker.queueing.paging import (
    MESSAGE_OVERHEAD,
    PagedPart,
    PagingBudget,
    message_from_record,
    resident_size,
)
from stompbroker.broker.queueing.priorities import (
    DEFAULT_PRIORITY,
    HIGHEST_PRIORITY,
    PendingMessages,
)
from stompbroker.logs import logger
from stompbroker.protocol.frames import Headers
from stompbroker.protocol.message import Message

log = logger("stompbroker.broker")

#: Seconds before a queue asks again for a page the store could not read.
PAGE_RETRY = 1.0
#: Read-aheads a paged queue holds at most in memory for consumers that can
#: take none of what memory holds (selectors, message groups).
SCAN_PAGES = 4


@implementer(IQueue)
class WorkerQueue:
    """
    One queue: ``/queue/NAME``, a temporary queue, or a topic subscription's own.

    :param destination: the queue's destination, or for a topic subscription's
        queue the subscription's pattern.
    :param clock: ``seconds()`` and ``callLater()``; a reactor or a ``task.Clock``.
    :param policy: the broker's :class:`DeliveryPolicy`.
    :param counters: the broker-wide :class:`DeliveryCounters` to count in.
    :param dead_letter: called with ``(message, reason, store_key)`` for each
        message that must leave the queue for a dead-letter queue; it counts what
        it does.
    :param sweep_interval: least time in seconds between two sweeps for expired
        messages.
    :param journal: the :class:`~stompbroker.broker.store.journal.Journal` that keeps
        this queue's persistent messages, or ``None`` if the store keeps none of them.
    :param store_key: this queue's key in the store; required with ``journal``.
    :param traffic: the broker's :class:`~stompbroker.broker.flow.traffic.Traffic`
        counters, which hold the queue while it lives and count, per destination,
        what it does with messages; a queue of its own counts in counters of its own.
    :param owner: the queue its consumers settle with (ACK, NACK, a resumed
        consumer's dispatch): this one by default; the engine's queue that holds
        this one as its local state otherwise (a redis engine's stream queue).
    :param left: called with each message that leaves for good other than by an
        acknowledgement (expired, dead-lettered), for an owner that must settle
        it elsewhere too; ``None`` for none.
    :param paging: the :class:`~stompbroker.broker.queueing.paging.PagingBudget`
        its messages share with the other queues of the store, past which it
        keeps them on disk only (:mod:`~stompbroker.broker.queueing.paging`);
        ``None`` (or no ``journal``) keeps them all in memory.
    """

    __slots__ = (
        "destination",
        "pending",
        "consumers",
        "_clock",
        "_policy",
        "_counters",
        "_dead_letter",
        "_next",
        "_dispatching",
        "_stalled",
        "journal",
        "store_key",
        "_traffic",
        "_features",
        "expiry",
        "_owner",
        "_left",
        "delayed",
        "limits",
        "paging",
        "paged",
        "_resident",
        "paged_expiry",
    )

    #: Its messages are all here: an offer of room needs no reading first.
    reads_ahead = False

    def __init__(
        self,
        destination: str,
        clock: Any,
        policy: DeliveryPolicy,
        counters: DeliveryCounters,
        dead_letter: DeadLetter,
        sweep_interval: float = 1.0,
        journal: Any = None,
        store_key: str | None = None,
        traffic: Traffic | None = None,
        owner: Any = None,
        left: Callable[[Message], None] | None = None,
        paging: PagingBudget | None = None,
    ) -> None:
        if journal is not None and store_key is None:
            raise ValueError("a queue with a journal needs a store_key")
        self.destination = destination
        self.journal = journal
        self.store_key = store_key if journal is not None else None
        #: A deque until a message of other than the default priority comes.
        self.pending: Any = deque()
        self.consumers: list[Consumer] = []
        self._clock = clock
        self._policy = policy
        self._counters = counters
        self._dead_letter = dead_letter
        #: Index in ``consumers`` of the one to ask first for the next message.
        self._next = 0
        self._dispatching = False
        #: Whether the last dispatch stopped because no consumer had room: a new
        #: message then cannot be handed out either, and is only appended.
        #: Whatever makes room (an ACK, NACK, a resumed or new consumer) dispatches.
        self._stalled = False
        #: Finds the messages that expire while nobody consumes.
        self.expiry = ExpirySweep(clock, self._pending, self.expire, sweep_interval)
        self._traffic = traffic if traffic is not None else Traffic()
        self._traffic.queues.add(self)
        #: The :class:`~stompbroker.broker.queueing.dispatch.FeatureDispatch` while one is needed.
        self._features: FeatureDispatch | None = None
        self._owner = owner if owner is not None else self
        self._left = left
        #: The NACKed messages that wait for their redelivery, from the first one on.
        self.delayed: DelayedMessages | None = None
        #: The :class:`~stompbroker.broker.queueing.limits.QueueLimits` of the
        #: policy in force, while one limits this queue.
        self.limits: QueueLimits | None = None
        #: The memory budget it pages by, if it pages.
        self.paging = paging if journal is not None else None
        #: Its part on disk only, while it has one.
        self.paged: PagedPart | None = None
        #: Bytes it counts in ``paging.used`` now.
        self._resident = 0
        #: Finds the messages that expire on disk while it pages.
        self.paged_expiry = (
            PagedExpiry(
                clock,
                self._paged_part,
                functools.partial(journal.expired, store_key),
                self.in_memory,
                self.expire,
                self.dispatch,
                functools.partial(journal.remove, store_key),
                sweep_interval,
            )
            if self.paging is not None
            else None
        )

    def __repr__(self) -> str:
        return (
            f"<WorkerQueue {self.destination!r}: {len(self.pending)} pending,"
            f" {len(self.consumers)} consumers>"
        )

    def _pending(self) -> Any:
        return self.pending

    def _paged_part(self) -> PagedPart | None:
        return self.paged

    def in_memory(self) -> Iterator[Message]:
        """:returns: every message memory holds: pending, held by consumers, delayed."""
        yield from self.pending
        for consumer in self.consumers:
            yield from consumer.unacked.values()
        if self.delayed is not None:
            yield from self.delayed

    def is_idle(self) -> bool:
        """:returns: whether the queue holds nothing and nobody consumes from it."""
        return not self.pending and not self.consumers and not self.delayed and self.paged is None

    def depth(self) -> int:
        """:returns: how many messages wait: in memory, and paged out to the store."""
        paged = self.paged
        return len(self.pending) + (paged.count if paged is not None else 0)

    # -- management -----------------------------------------------------------

    def browse(self, count: int) -> list[Message] | Deferred[list[Message]]:
        """
        :returns: the first ``count`` pending messages, left in place; a Deferred
            of them if some must be read from the store (a paged queue: one range
            read of what memory does not hold, copies the queue does not keep).
        """
        in_memory = list(islice(self.pending, count))
        paged = self.paged
        if paged is None or len(in_memory) >= count or self.journal is None:
            return in_memory
        assert self.store_key is not None
        wanted = min(count - len(in_memory), paged.count)
        if not wanted:
            return in_memory
        read = self.journal.page(self.store_key, paged.after, paged.first_id, wanted)

        def browsed(records: list[Any]) -> list[Message]:
            ids = self._held_past_the_part(paged)
            stored = [message_from_record(r) for r in records if r.message_id not in ids]
            return (in_memory + stored)[:count]

        browsing: Deferred[list[Message]] = read.addCallback(browsed)
        return browsing

    def purge(self) -> int:
        """
        Discard every pending message (and every one waiting for a redelivery
        back-off), counted discarded; persistent ones leave the store.

        :returns: how many were discarded.
        """
        purged = list(self.pending)
        self.pending.clear()
        if self.delayed is not None:
            purged.extend(self.delayed.take_all())
        on_disk = self._drop_paged()
        self.forget_resident()
        self._counters.discarded += len(purged) + on_disk
        self._traffic.count(purged, "messages_dropped")
        if self.journal is not None:
            for message in purged:
                if message.persistent:
                    self.journal.remove(self.store_key, message.message_id)
        return len(purged) + on_disk

    def _drop_paged(self) -> int:
        """
        Forget the queue's part on disk (:mod:`~stompbroker.broker.queueing.paging`),
        in the store too (its transient rows with the rest).

        :returns: how many messages the store held only.
        """
        paged = self.paged
        if paged is None:
            return 0
        self.paged = None
        if self.journal is not None and self.store_key is not None:
            self.journal.remove_paged(self.store_key, paged.after, paged.first_id)
        return paged.count

    def drop(self, message: Message) -> None:
        """
        Discard a message taken from the queue (overflow's ``drop-head``), counted
        dropped; a persistent one leaves the store.
        """
        self._counters.discarded += 1
        self._traffic.count((message,), "messages_dropped")
        if message.persistent and self.journal is not None:
            self.journal.remove(self.store_key, message.message_id)
        if self._left is not None:
            self._left(message)

    # -- consumers ------------------------------------------------------------

    def add_consumer(
        self,
        subscriber: Any,
        window: int,
        max_redeliveries: int,
        *,
        selector: Selector | None = None,
        options: Any = None,
        held: dict[str, Message] | None = None,
    ) -> Consumer:
        """
        Start handing messages to a subscriber.

        :param subscriber: an :class:`~stompbroker.interfaces.ISubscriber`.
        :param window: most messages it may hold unacknowledged.
        :param max_redeliveries: its limit on redeliveries; ``-1`` for none.
        :param selector: hand it only the messages this selects.
        :param options: its :class:`~stompbroker.broker.queueing.consumer_choice.ConsumerOptions`
            (priority, exclusive), or ``None`` for none.
        :param held: the messages it holds, shared with the other queues of a
            wildcard consumer (:mod:`stompbroker.broker.queueing.wildcard`); ``None``
            for its own.
        :returns: its :class:`Consumer`, for acknowledgements.
        """
        consumer = Consumer(subscriber, self._owner, window, max_redeliveries, held)
        consumer.selector, consumer.options = selector, options
        self.consumers.append(consumer)
        self._features = self._consumer_added(consumer)
        self.dispatch()
        return consumer

    def remove_consumer(self, consumer: Consumer) -> None:
        """
        Stop handing messages to a consumer; what it holds goes back to the queue.

        :param consumer: one of this queue's consumers, or one it dropped when closed.
        """
        if consumer not in self.consumers:
            return
        index = self.consumers.index(consumer)
        del self.consumers[index]
        if index < self._next:
            self._next -= 1
        if self._next >= len(self.consumers):
            self._next = 0
        if self._features is not None:
            self._features = self._features.removed(consumer)
        # At once: a consumer that leaves says nothing against the messages it held.
        self._put_back(consumer, consumer.take_all(), None)

    def needs_features(self) -> bool:
        """
        :returns: whether the queue must dispatch through a :class:`FeatureDispatch`:
            a consumer has a selector or options, or the queue's feature dispatch
            holds what must outlast its consumers.
        """
        features = self._features
        if features is not None and (features.choice.single_active or features.groups is not None):
            return True
        return any(
            consumer.selector is not None or consumer.options is not None
            for consumer in self.consumers
        )

    def _consumer_added(self, consumer: Consumer) -> FeatureDispatch | None:
        """
        Account for a consumer that the queue has just appended to its consumers.

        The SUBSCRIBE that finds the queue without consumers declares it
        single-active (``x-single-active-consumer``) or not; later ones cannot
        change that (see :mod:`stompbroker.broker.queueing.consumer_choice`).

        :returns: the queue's feature dispatch from now on, or ``None`` for the plain loop.
        """
        features = self._features
        options = consumer.options
        if features is None:
            if not self.needs_features():
                return None
            features = FeatureDispatch(self, exclude=consumer)
        if options is not None and options.single_active and len(self.consumers) == 1:
            features.choice.single_active = True
        features.choice.add(consumer, options or PLAIN_OPTIONS)
        features.selecting = features.selecting or consumer.selector is not None
        return features

    def _grouped(self) -> FeatureDispatch:
        """
        Make the queue dispatch by message groups from now on: it takes a grouped message.

        Its ``pending`` becomes a :class:`~stompbroker.broker.queueing.groups.GroupedPending`.

        :returns: the queue's feature dispatch.
        """
        features = self._features
        if features is None:
            features = FeatureDispatch(self)
        if features.groups is None:
            features.groups = GroupAssignments()
            self.pending = GroupedPending(self.pending)
        return features

    def declare_single_active(self, single_active: bool) -> None:
        """
        Make the queue single-active or not as declared elsewhere: a cluster's one
        shared declaration (:mod:`stompbroker.broker.engine.redis.consumer_registry`),
        which replaces what the local first SUBSCRIBE would declare.  Dispatches
        again when that changes who may take messages.
        """
        features = self._features
        if features is None:
            if not single_active:
                return
            features = self._features = FeatureDispatch(self)
        if features.choice.single_active != single_active:
            features.choice.declare(single_active)
            self.dispatch()

    def assign_owner(self, group: str, consumer: Consumer) -> bool:
        """
        Make ``consumer`` the owner of ``group`` in the queue, as a cluster decided
        (:mod:`stompbroker.broker.engine.redis.cluster_dispatch`), unless the group has an
        owner here already or the consumer left.

        :returns: whether it became the owner now (its next message of the group is
            the first for it).
        """
        features = self._features = self._grouped()
        groups: GroupAssignments[Consumer] = features.groups  # type: ignore[assignment]
        if groups.owner(group) is not None or consumer not in features.choice:
            return False
        groups.assign(group, consumer)
        return True

    # -- the state changes of a message ------------------------------------------

    def enqueue(self, message: Message) -> None:
        """
        Add a message at the tail, and deliver it if a consumer has room.

        :param message: a routed message.
        """
        self._counters.enqueued += 1
        paging = self.paging
        if paging is not None:
            if self.paged is None and (
                paging.used <= paging.limit or len(self.pending) < paging.read_ahead
            ):
                # Room in memory (PagingBudget.full and _count_in, inlined: this
                # runs for each message a queue of the store takes).
                size = len(message.body) + MESSAGE_OVERHEAD
                paging.used += size
                self._resident += size
            elif self._page_out(message):
                if self.limits is not None:
                    self.limits.trim(self, message)
                return
        if message.priority != DEFAULT_PRIORITY and type(self.pending) is deque:
            # The first message of another priority: ten levels from now on.
            self.pending = PendingMessages(items=self.pending)
        if message.group is not None:
            self._features = self._grouped()
        self.pending.append(message)
        if self.limits is not None:
            self.limits.trim(self, message)
        if self.consumers and not self._stalled:
            self.dispatch()
        if message.expires and self.pending:
            self.expiry.watch(message.expires)

    #: Topic fan-out reaches a subscription's queue as it reaches any subscriber.
    deliver = enqueue

    def count_deliveries(self, count: int, tails: dict[str, int]) -> None:
        """Nothing to count: a queue counts its deliveries as it hands messages out."""

    def mark_gap(self) -> int:
        """
        Tell each consumer's subscription of a gap in what reached this queue
        (:meth:`ISubscriber.mark_gap`); its next MESSAGE may be one the queue
        held from before the gap.

        :returns: how many were told now.
        """
        return sum(consumer.subscriber.mark_gap() for consumer in self.consumers)

    def publish(self, message: Message) -> None:
        """
        Enqueue a message sent to this queue (not one that comes to it from a topic,
        a dead letter or the store), counting it in.

        :param message: a routed message.
        """
        # The queue's own destination string, for the message to hold while it
        # waits: one object per queue, not one per waiting message.
        if self.limits is not None:
            self.limits.admit(self, message)
        message.destination = self.destination
        self._traffic.published(message)
        self.enqueue(message)

    def deliver_copies(self, body: bytes, headers: Headers, message_ids: Iterator[str]) -> int:
        """
        Give every consumer with room a copy of its own of a message, ahead of
        what is pending: a status for each subscriber, as stompserver sent its
        ``/queue/monitor`` messages, rather than one message for one of them.

        Each copy counts as a message in and delivered here, as if it had been
        sent to the queue (docs/monitoring.md, ``/queue/monitor``); one delivered
        with client acknowledgement is held until acknowledged, as any message.
        The copies are not persistent and do not count in the queue's enqueued
        and delivered totals, which are what clients sent.

        :param body: the payload of every copy.
        :param headers: their headers.
        :param message_ids: gives each copy's ``message-id``.
        :returns: how many copies were handed out.
        """
        traffic = self._traffic
        handed = 0
        for consumer in list(self.consumers):
            if consumer.has_room():
                message = Message(self.destination, next(message_ids), headers, body)
                traffic.published(message)
                traffic.delivered(message, consumer.auto)
                consumer.deliver(message)
                handed += 1
        return handed

    def dispatch(self) -> None:
        """
        Hand pending messages, head first, to consumers with room, round-robin.

        Expired messages met at the head are expired, never delivered.  A call
        made while a dispatch is running (a consumer acknowledging from inside a
        delivery) returns at once: the running loop sees the change.
        """
        if self._features is not None:
            self._features.dispatch()
            if self.paging is not None and (self._resident or self.paged is not None):
                self._dispatched()
            return
        if self._dispatching:
            return
        self._dispatching = True
        self._stalled = False
        try:
            pending = self.pending
            consumers = self.consumers
            paging = self.paging
            while pending and consumers:
                count = len(consumers)
                index = self._next
                if index >= count:
                    index = 0
                for _ in range(count):
                    consumer = consumers[index]
                    # Consumer.has_room, inlined: this loop runs per delivery.
                    if not consumer.paused and (
                        consumer.auto or len(consumer.unacked) < consumer.window
                    ):
                        break
                    index += 1
                    if index == count:
                        index = 0
                else:
                    self._stalled = True
                    return
                message = pending.popleft()
                if message.expires and message.expires <= self._clock.seconds():
                    self.expire(message)
                    continue
                self._next = index + 1 if index + 1 < count else 0
                self._counters.delivered += 1
                self._traffic.delivered(message, consumer.auto)
                resident = self._resident
                if resident and paging is not None:
                    # It leaves memory: out of the budget (inline: this loop runs per delivery).
                    size = len(message.body) + MESSAGE_OVERHEAD
                    if size > resident:
                        size = resident
                    self._resident = resident - size
                    paging.used -= size
                if message.persistent and self.journal is not None:
                    if consumer.auto:
                        recorded = self.journal.remove(self.store_key, message.message_id)
                    else:
                        recorded = self.journal.delivered(self.store_key, message.message_id)
                    consumer.deliver(message, recorded)
                else:
                    consumer.deliver(message)
        finally:
            self._dispatching = False
            if self.paging is not None and (self._resident or self.paged is not None):
                self._dispatched()

    # -- paging (see stompbroker.broker.queueing.paging) -----------------------------

    def _page_out(self, message: Message) -> bool:
        """
        A message comes to a queue whose budget is spent, or that pages already:
        keep it on disk only (a persistent one is in the store already, a
        non-persistent one is filed there now, transient), unless its priority
        puts it before the paged part.

        :returns: whether the message stays out of ``pending``.
        """
        paged = self.paged
        paging = self.paging
        assert paging is not None
        if paged is None:
            self.paged = paged = PagedPart(first_id=message.message_id)
            log.info(
                "queue {destination} pages: {count} messages in memory, the next on disk",
                destination=self.destination,
                count=len(self.pending),
            )
        elif message.priority > paged.top and len(self.pending) < paging.read_ahead * SCAN_PAGES:
            # Above every priority on disk: memory's priority order is the
            # queue's, and the message goes before the paged part.
            paged.jumped += 1
            self._count_in(message)
            return False
        if not message.persistent:
            # Nobody waits for this write: a non-persistent SEND's RECEIPT never did.
            assert self.journal is not None and self.store_key is not None
            self.journal.add_transient(self.store_key, message)
        paged.page_out(message)
        if message.expires:
            self._watch_paged(message.expires)
        return True

    def _watch_paged(self, expires: float) -> None:
        """A paged-out message expires: have the part swept for it."""
        assert self.paged_expiry is not None
        self.paged_expiry.watch(expires)

    def _count_in(self, message: Message) -> None:
        """A message stays in memory: count it in the budget."""
        assert self.paging is not None
        size = resident_size(message)
        self.paging.used += size
        self._resident += size

    def forget_resident(self) -> None:
        """Memory has been emptied at once (a purge, a close): give the budget back its share."""
        if self.paging is not None:
            self.paging.used -= self._resident
        self._resident = 0

    def _dispatched(self) -> None:
        """
        After a dispatch: give the budget back what an empty memory no longer
        holds, and ask for the next page once the read-ahead runs low, or while
        a consumer with room finds nothing it can take in memory (a selector, a
        group another consumer owns), up to :data:`SCAN_PAGES` read-aheads.
        """
        paging = self.paging
        assert paging is not None
        if not self.pending and self._resident:
            paging.used -= self._resident
            self._resident = 0
        paged = self.paged
        if paged is None or paged.reading:
            return
        if paged.count <= 0:
            self._unpage()
            self.dispatch()
            return
        held = len(self.pending)
        if held > paging.read_ahead // 2:
            # Enough in memory, unless a consumer with room can take none of it
            # (a selector, groups others own): it scans forward a few pages.
            if held >= paging.read_ahead * SCAN_PAGES or not (
                self._features is not None and self._stalled_with_room()
            ):
                return
        assert self.journal is not None and self.store_key is not None
        asked = min(paging.read_ahead, paged.count)
        paged.asked()
        page = self.journal.page(self.store_key, paged.after, paged.first_id, asked)
        page.addCallbacks(self._page_came, self._page_failed, (paged, asked), None, (paged,))

    def _unpage(self) -> None:
        """The part on disk is empty: paging ends."""
        self.paged = None
        log.info("queue {destination} holds all it has in memory", destination=self.destination)

    def _stalled_with_room(self) -> bool:
        """:returns: whether a consumer has room that what memory holds cannot fill."""
        return any(consumer.has_room() for consumer in self.consumers)

    def _page_came(self, records: list[Any], paged: PagedPart, asked: int) -> None:
        """A page has come: in a later turn, so that a store that answers at once recurses not."""
        self._clock.callLater(0, self._take_page, records, paged, asked)

    def _page_failed(self, failure: Any, paged: PagedPart) -> None:
        paged.reading = False
        if self.journal is not None and self.journal.stopping:
            # The store closes with the broker: nobody waits for the page.
            return
        log.error(
            "queue {destination} could not read its next page from the store: {error};"
            " trying again in {retry} s",
            destination=self.destination,
            error=str(failure.value),
            retry=PAGE_RETRY,
        )
        self._clock.callLater(PAGE_RETRY, self.dispatch)

    def _take_page(self, records: list[Any], paged: PagedPart, asked: int) -> None:
        """
        Put a page's messages in memory as if they had just arrived (they were
        counted in when they did); its transient rows leave the store, since a
        non-persistent message lives in memory.
        """
        if self.paged is not paged:
            # Purged, or closed, while the page was read.
            return
        held = self._held_past_the_part(paged)
        empty = paged.came(records, asked, held)
        if held:
            # Those of a priority above the part (and a count that erred high
            # reads on into them) are in memory.
            records = [record for record in records if record.message_id not in held]
        now = self._clock.seconds()
        transient_through = 0
        for record in records:
            if record.transient:
                transient_through = record.sequence
            message = message_from_record(record)
            if message.expires and message.expires <= now:
                self.expire(message)
            elif record.due > now:
                self.hold(message, record.due, stored=True)
            else:
                self._take(message)
        if transient_through:
            assert self.journal is not None and self.store_key is not None
            self.journal.remove_transient(self.store_key, transient_through)
        if empty:
            self._unpage()
        self.dispatch()

    def _held_past_the_part(self, paged: PagedPart) -> set[str]:
        """:returns: the ids of what memory holds that is stored in the part's range."""
        if not paged.jumped:
            return set()
        return {message.message_id for message in self.in_memory()}

    def _take(self, message: Message) -> None:
        """Put a message that was counted in already at the tail of memory."""
        if message.priority != DEFAULT_PRIORITY and type(self.pending) is deque:
            self.pending = PendingMessages(items=self.pending)
        if message.group is not None:
            self._features = self._grouped()
        self.pending.append(message)
        if self.paging is not None:
            self._count_in(message)
        if message.expires:
            self.expiry.watch(message.expires)

    def restore_paged(self, count: int, size: int, after: int) -> None:
        """
        Recovery left messages on disk: page them in as the queue drains.

        :param count: how many there are.
        :param size: their body bytes (an estimate is fine: it is corrected as they come).
        :param after: the store sequence of the last message recovery read for this queue.
        """
        if count and self.paging is not None:
            self.paged = PagedPart(count=count, size=size, after=after, top=HIGHEST_PRIORITY)
            # What expired while the broker was down goes without waiting for a consumer.
            self._watch_paged(self._clock.seconds())

    def acknowledge(self, consumer: Consumer, messages: list[Message]) -> list[Any]:
        """
        Forget messages a consumer has acknowledged, and give it more.

        :param consumer: the consumer that held them.
        :param messages: what its ACK settled (see :meth:`Consumer.settle`).
        :returns: the store's removals of the persistent ones (Deferreds).
        """
        self._counters.acknowledged += len(messages)
        self._traffic.acked(messages)
        written = []
        journal = self.journal
        if journal is not None:
            for message in messages:
                if message.persistent:
                    written.append(journal.remove(self.store_key, message.message_id, lazy=True))
        self.dispatch()
        return written

    def requeue(self, consumer: Consumer, messages: list[Message]) -> list[Any]:
        """
        Return messages a consumer NACKed, in the order given, for redelivery
        after its back-off (:meth:`_put_back`).

        :returns: the store writes that dead-lettering made (Deferreds).
        """
        return self._put_back(consumer, messages, consumer.backoff)

    def _put_back(self, consumer: Consumer, messages: list[Message], backoff: Any) -> list[Any]:
        """
        Return messages for redelivery, in the order given, after ``backoff``'s
        delay unless ``None``.

        Each comes back as a copy with ``redeliveries`` one higher, except one that
        has been redelivered as often as ``consumer`` allows: that one is
        dead-lettered.  The copies go to the head of the queue, or, when ``backoff``
        (a :class:`~stompbroker.broker.queueing.backoff.Backoff`) makes them wait,
        aside until their time comes (:meth:`hold`).

        :param consumer: the consumer that held them; its limit applies.
        :param messages: in delivery order.
        :returns: the store writes that dead-lettering made (Deferreds).
        """
        limit = consumer.max_redeliveries
        returning = []
        written = []
        for message in messages:
            if 0 <= limit <= message.redeliveries:
                moved = self.dead_letter(message, DELIVERY_LIMIT)
                if moved is not None:
                    written.append(moved)
            else:
                returning.append(evolve(message, redeliveries=message.redeliveries + 1))
        if returning:
            self._counters.redelivered += len(returning)
            if backoff is not None and backoff.delay_ms:
                returning = self._hold_back(returning, backoff)
            self.pending.extendleft(reversed(returning))
        # Even when every message was dead-lettered, the consumer has room again.
        self.dispatch()
        return written

    def _hold_back(self, messages: list[Message], backoff: Any) -> list[Message]:
        """
        Put returning messages aside for their back-off, but for those of a
        message group: they go back at once, for a group's later messages must not
        overtake them (:mod:`stompbroker.broker.queueing.groups`).

        :returns: the messages that go back at once.
        """
        now = self._clock.seconds()
        at_once = []
        for message in messages:
            if message.group is None:
                self.hold(message, now + backoff.delay(message.redeliveries))
            else:
                at_once.append(message)
        return at_once

    def hold(self, message: Message, due: float, *, stored: bool = False) -> None:
        """
        Keep a message aside until ``due`` (the clock's seconds), then give it
        back to the head of the queue; the store keeps the due time of a
        persistent one, so that its wait outlives a restart.

        :param message: a message returned for redelivery, or recovered from the store.
        :param due: when it may be delivered again.
        :param stored: the store has this due time already (recovery).
        """
        if self.delayed is None:
            self.delayed = DelayedMessages(self._clock, self._release)
        self.delayed.hold(message, due)
        if message.persistent and self.journal is not None and not stored:
            self.journal.delay(self.store_key, message.message_id, due)

    def _release(self, messages: list[Message]) -> None:
        """Delayed messages whose time has come: at the head, in due order."""
        self.pending.extendleft(reversed(messages))
        self.dispatch()

    def reject(self, messages: list[Message]) -> list[Any]:
        """
        Dead-letter messages a consumer refused for good (NACK ``requeue:false``).

        :param messages: what the NACK settled.
        :returns: the store writes that dead-lettering made (Deferreds).
        """
        written = []
        for message in messages:
            moved = self.dead_letter(message, REJECTED)
            if moved is not None:
                written.append(moved)
        self.dispatch()
        return written

    def dead_letter(self, message: Message, reason: str) -> Any:
        """
        Take a message out of circulation for good, through the ``dead_letter`` callable.

        :param message: the message.
        :param reason: one of :mod:`~stompbroker.broker.queueing.dead_letters`' reasons.
        :returns: what the callable returns: the store write, or ``None``.
        """
        if self._left is not None:
            self._left(message)
        return self._dead_letter(message, reason, self.store_key)

    def expire(self, message: Message) -> None:
        """
        Count an expired message, and drop or dead-letter it as the policy says.

        :param message: a message taken from the queue whose expiry has passed.
        """
        self._counters.expired += 1
        self._traffic.count((message,), "messages_expired")
        if self._policy.expired == "dead-letter":
            self.dead_letter(message, EXPIRED)
            return
        if message.persistent and self.journal is not None:
            self.journal.remove(self.store_key, message.message_id)
        if self._left is not None:
            self._left(message)

    def close(self) -> None:
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
            for consumer in self.consumers
        ]
        on_disk = self._drop_paged()
        self._counters.discarded += len(self.pending) + sum(map(len, held)) + on_disk
        self._traffic.count(self.pending, "messages_dropped")
        for messages in held:
            self._traffic.count(messages, "messages_dropped")
        self._traffic.queues.discard(self)
        for consumer in self.consumers:
            consumer.take_all()
        self.consumers.clear()
        self.pending.clear()
        self.forget_resident()
        self.expiry.cancel()
        if self.paged_expiry is not None:
            self.paged_expiry.cancel()
        if self.delayed is not None:
            delayed = self.delayed.take_all()
            self._counters.discarded += len(delayed)
            self._traffic.count(delayed, "messages_dropped")
