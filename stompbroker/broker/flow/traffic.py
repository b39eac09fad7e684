"""
Traffic counters: what the broker's routing paths count, per destination, for statistics.

The broker and its queues add to these counters as messages move, and
:mod:`stompbroker.stats.model` reads them when it takes a snapshot; nothing else
reads them, and counting never logs, raises or allocates on the common paths.

Theory of operation
-------------------
- Counters are keyed by the destination a message was sent to (its
  ``destination``), and only ever grow: readers take differences between two
  readings.  A destination's :class:`DestinationTraffic` is one slotted object,
  found with one dict lookup; counting is additions on its attributes.
- A SEND to a topic is counted once, not once per delivery: the messages
  delivered are the number of subscriptions the tree matched, their bytes that
  number times the body's length.  Subscriptions that take from a queue of their
  own (client acknowledgements, durable names) are queues in the tree and count
  their deliveries themselves, when they hand a message out; so that routing can
  tell them apart without looking at every match, :class:`TopicTree` counts the
  queues it holds, and while it holds none every match is a direct delivery.
- The connections of direct topic subscriptions count the frames and bytes
  they were sent without any work per delivery: a SEND notes, per destination,
  one more message and the length of each encoded tail its subscribers share
  (:meth:`Traffic.routed_directly`), and the subscriptions are told in batches
  (:meth:`Traffic.report_deliveries`): whenever statistics are read, and just
  before a direct subscription matching the destination is added or removed, so
  that the subscriptions the tree matches are always those the noted messages
  went to.
- ``producers`` needs distinct connections per interval, for readers that each
  read at their own pace.  While someone samples (:attr:`Traffic.sampling`),
  each SEND stamps its connection with the current *generation*; a reader starts
  a new generation whenever it reads, counts the connections stamped since its
  previous reading, and drops the stamps no reader needs any more.
- Nobody reading, nobody forgets: a broker without statistics keeps at most
  :data:`UNREAD_LIMIT` destinations' counters, and starts afresh beyond.
- :attr:`Traffic.queues` holds every queue alive, for the gauges (depth, in
  flight, consumers) that readers compute from the queues themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from stompbroker.broker.flow.counter_names import FLOW_COUNTERS
from stompbroker.broker.routing.topic_tree import SubscriptionTree
from stompbroker.protocol.message import Message

if TYPE_CHECKING:
    from stompbroker.broker.engine.engine_interface import IQueue

#: Destinations counted while nobody samples, before the counters start afresh.
UNREAD_LIMIT = 10000


class DestinationTraffic:
    """
    What happened to the messages sent to one destination, since the broker started.

    Each attribute named in :data:`~stompbroker.broker.flow.counter_names.FLOW_COUNTERS`
    is a count that only grows (the export's
    :class:`~stompbroker.stats.schema.DestinationRecord` says what each counts).

    :ivar producers: connection -> the generation of its latest SEND here
        (``None`` stands for Python code publishing in the broker's process).
    :ivar unreported_messages: messages routed to direct subscriptions whose
        connections have not been told yet (see the module notes).
    :ivar unreported_tails: escaping style -> bytes of those messages' encoded tails.
    """

    __slots__ = FLOW_COUNTERS + ("producers", "unreported_messages", "unreported_tails")

    def __init__(self) -> None:
        self.messages_in = 0
        self.messages_delivered = 0
        self.messages_acked = 0
        self.messages_nacked = 0
        self.messages_redelivered = 0
        self.messages_expired = 0
        self.messages_dead_lettered = 0
        self.messages_dropped = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.messages_duplicate = 0
        self.producers: dict[Any, int] = {}
        self.unreported_messages = 0
        self.unreported_tails: dict[str, int] = {}

    def totals(self) -> tuple[int, ...]:
        """:returns: the counters, in the order of :data:`FLOW_COUNTERS`."""
        return (
            self.messages_in,
            self.messages_delivered,
            self.messages_acked,
            self.messages_nacked,
            self.messages_redelivered,
            self.messages_expired,
            self.messages_dead_lettered,
            self.messages_dropped,
            self.bytes_in,
            self.bytes_out,
            self.messages_duplicate,
        )

    def producers_since(self, generation: int) -> int:
        """:returns: how many connections have sent here since ``generation`` began."""
        return sum(
            1
            for connection, stamp in self.producers.items()
            if stamp >= generation and connection is not None
        )


class Traffic:
    """
    The broker's traffic counters: per destination, and connection churn.

    :ivar destinations: destination -> its :class:`DestinationTraffic`.
    :ivar generation: the stamp SENDs give their connection now (see the module notes).
    :ivar connections_opened: connections admitted since the broker started.
    :ivar connections_closed: admitted connections that have closed since.
    :ivar queues: every queue alive, whatever its kind.
    :ivar sampling: whether a reader samples these counters (and so forgets
        what it no longer needs); SENDs stamp producers only then.
    :ivar unreported: destinations whose direct deliveries are not yet reported
        to their subscriptions.
    """

    __slots__ = (
        "destinations",
        "generation",
        "connections_opened",
        "connections_closed",
        "queues",
        "sampling",
        "unreported",
    )

    def __init__(self) -> None:
        self.destinations: dict[str, DestinationTraffic] = {}
        self.unreported: dict[str, DestinationTraffic] = {}
        self.generation = 0
        self.sampling = False
        self.connections_opened = 0
        self.connections_closed = 0
        self.queues: set[IQueue] = set()

    def of(self, destination: str) -> DestinationTraffic:
        """:returns: the counters of ``destination``, made on first use."""
        traffic = self.destinations.get(destination)
        if traffic is None:
            if not self.sampling and len(self.destinations) >= UNREAD_LIMIT:
                self.destinations.clear()
                self.unreported.clear()
            traffic = self.destinations[destination] = DestinationTraffic()
        return traffic

    def published(self, message: Message) -> None:
        """Count a message sent to a queue, as the queue takes it."""
        traffic = self.destinations.get(message.destination) or self.of(message.destination)
        traffic.messages_in += 1
        traffic.bytes_in += len(message.body)

    def delivered(self, message: Message, auto: bool) -> None:
        """
        Count one delivery from a queue.

        :param auto: whether the consumer acknowledges automatically, which
            counts as acknowledged once written.
        """
        traffic = self.destinations.get(message.destination)
        if traffic is None:
            traffic = self.of(message.destination)
        traffic.messages_delivered += 1
        traffic.bytes_out += len(message.body)
        if auto:
            traffic.messages_acked += 1
        if message.redeliveries:
            traffic.messages_redelivered += 1

    def routed_directly(
        self, destination: str, counted: DestinationTraffic, message: Message
    ) -> None:
        """
        Note a topic SEND that reached direct subscriptions, for their connections'
        frames and bytes out, which :meth:`report_deliveries` tells them later.

        :param counted: the counters of ``destination``.
        :param message: the message, its tails encoded by the deliveries.
        """
        if not counted.unreported_messages:
            self.unreported[destination] = counted
        counted.unreported_messages += 1
        message.add_tail_sizes(counted.unreported_tails)

    def report_deliveries(self, topics: SubscriptionTree[Any], pattern: str | None = None) -> None:
        """
        Tell direct topic subscriptions what was delivered to them since they were last told.

        Each subscriber the tree matches is told, through
        :meth:`~stompbroker.interfaces.ISubscriber.count_deliveries`, how many
        messages it was sent and the bytes of their tails by escaping style.

        :param topics: the topic tree, as it was when those messages were routed.
        :param pattern: report only destinations this pattern matches (a
            subscription to it is about to change); every destination by default.
        """
        if not self.unreported:
            return
        probe: SubscriptionTree[bool] | None = None
        if pattern is not None:
            probe = SubscriptionTree(max_cache_size=0)
            probe.add(pattern, True)
        for destination, counted in list(self.unreported.items()):
            if probe is not None and not probe.match(destination):
                continue
            del self.unreported[destination]
            count, tails = counted.unreported_messages, counted.unreported_tails
            counted.unreported_messages, counted.unreported_tails = 0, {}
            for subscriber in topics.match(destination):
                subscriber.count_deliveries(count, tails)

    def acked(self, messages: Iterable[Message]) -> None:
        """
        Count acknowledged messages: :meth:`count` of ``messages_acked``,
        spelled out, as it runs once per message a client acknowledges.
        """
        destinations = self.destinations
        for message in messages:
            traffic = destinations.get(message.destination)
            if traffic is None:
                traffic = self.of(message.destination)
            traffic.messages_acked += 1

    def count(self, messages: Iterable[Message], counter: str) -> None:
        """
        Add one to a counter of each message's destination, for the rarer events
        (acknowledgements, NACKs, expiry, dead letters, drops).

        :param messages: the messages it happened to.
        :param counter: one of :data:`FLOW_COUNTERS`.
        """
        for message in messages:
            traffic = self.of(message.destination)
            setattr(traffic, counter, getattr(traffic, counter) + 1)

    def new_generation(self) -> int:
        """
        Start a new generation of producer stamps.

        :returns: the generation that starts now.
        """
        self.generation += 1
        return self.generation


class TopicTree(SubscriptionTree[Any]):
    """
    The broker's topic subscriptions: a :class:`SubscriptionTree` that counts the
    queues registered in it, so that routing knows when every match it finds is a
    direct delivery (see the module notes).

    :param queue_type: the class of queues
        (:class:`~stompbroker.broker.queueing.queues.WorkerQueue`; a parameter because the
        queues count in this module's counters, so it cannot import theirs), or a
        tuple of the classes of everything that counts its own deliveries.
    :param traffic: the counters whose direct deliveries are reported to the
        subscriptions a change is about to affect; ``None`` for none.
    :ivar queues: how many registrations are of a ``queue_type``.
    """

    __slots__ = ("queues", "_queue_type", "_traffic")

    def __init__(self, queue_type: type | tuple[type, ...], traffic: Traffic | None = None) -> None:
        super().__init__()
        self.queues = 0
        self._queue_type = queue_type
        self._traffic = traffic

    def add(self, pattern: str, subscriber: Any) -> None:
        """As :meth:`SubscriptionTree.add`, counting queues."""
        self._change(super().add, pattern, subscriber)

    def remove(self, pattern: str, subscriber: Any) -> None:
        """As :meth:`SubscriptionTree.remove`, counting queues."""
        self._change(super().remove, pattern, subscriber)

    def _change(self, change: Callable[[str, Any], None], pattern: str, subscriber: Any) -> None:
        """Report direct deliveries the change affects, make it, and count queues."""
        is_queue = isinstance(subscriber, self._queue_type)
        if not is_queue and self._traffic is not None:
            self._traffic.report_deliveries(self, pattern)
        before = len(self)
        change(pattern, subscriber)
        if is_queue:
            self.queues += len(self) - before

    def direct(self, matches: tuple[Any, ...]) -> int:
        """
        :param matches: what :meth:`match` returned.
        :returns: how many of them are delivered to directly, not through a queue.
        """
        if not self.queues:
            return len(matches)
        return sum(1 for subscriber in matches if not isinstance(subscriber, self._queue_type))
