"""
The parts every engine is assembled from for what belongs to this process:
its :class:`Bookkeeping` (ids and counters) and its :class:`TopicFanout` (the
topic subscriptions of its connections, and the fan-out of a message to them).

The local engine routes every topic message through the fan-out; the redis
engine routes what is sent here and what comes from other nodes through the
same one, so a subscriber sees one behaviour whichever engine runs.

The fan-out's :meth:`TopicFanout.publish` is the per-message path of a topic
SEND.  An engine hands the router that bound method itself
(:meth:`IEngine.publish_topic <stompbroker.broker.engine.engine_interface.IEngine.publish_topic>`
is the fan-out's on the local engine), so holding the tree in a part of its own
costs a topic SEND no call; the redis engine's own ``publish_topic`` calls it
once, where it called the local engine's method before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from attrs import frozen

from stompbroker.broker.features.selecting import SelectingSubscriber
from stompbroker.broker.features.user_destinations import UserInbox
from stompbroker.broker.flow.traffic import TopicTree, Traffic
from stompbroker.broker.queueing.dead_letters import DeadLetters
from stompbroker.broker.queueing.delivery import DeliveryCounters
from stompbroker.broker.queueing.queues import WorkerQueue
from stompbroker.broker.routing.ids import Ids
from stompbroker.protocol.message import Message

__all__ = ["Bookkeeping", "TopicFanout", "TopicSubscriptions"]


@frozen
class Bookkeeping:
    """
    What this process counts and names, whatever the engine.

    :ivar ids: message ids, session ids, reply queue names; the node token in them.
    :ivar traffic: the per-destination counters (and the queues alive, for gauges).
    :ivar counters: the broker-wide delivery counters.
    """

    ids: Ids
    traffic: Traffic
    counters: DeliveryCounters

    @classmethod
    def of(
        cls,
        ids: Ids | None = None,
        traffic: Traffic | None = None,
        counters: DeliveryCounters | None = None,
    ) -> Bookkeeping:
        """:returns: bookkeeping with the parts given, and new ones for the others."""
        return cls(
            ids if ids is not None else Ids(),
            traffic if traffic is not None else Traffic(),
            counters if counters is not None else DeliveryCounters(),
        )


@frozen
class TopicSubscriptions:
    """
    The subscriptions a topic message would reach in this process now.

    :ivar members: ``(queue, subscription)`` in the order the tree matches them:
        ``queue`` is true for the queue
        (:class:`~stompbroker.broker.engine.engine_interface.IQueue`) of a subscription with
        client acknowledgement or a durable name, false for a direct
        (``ack:auto``) subscriber, as the tree holds it.
    """

    members: tuple[tuple[bool, Any], ...]

    @property
    def queues(self) -> list[Any]:
        """The subscriptions' queues."""
        return [member for queue, member in self.members if queue]

    @property
    def direct(self) -> list[Any]:
        """The direct subscribers."""
        return [member for queue, member in self.members if not queue]

    def __bool__(self) -> bool:
        return bool(self.members)


class TopicFanout:
    """
    This process's topic subscriptions, and the fan-out of a message to them.

    :param clock: ``seconds()``, for expiry.
    :param books: the process's :class:`Bookkeeping`.
    :param dead_letters: where an expired message goes (as the policy says).
    :param new_queue: ``pattern -> queue``: a new local queue, registered nowhere,
        for a subscription with client acknowledgement.

    :ivar tree: the :class:`~stompbroker.broker.flow.traffic.TopicTree`: direct
        subscribers, and the queues of the others.
    """

    __slots__ = ("tree", "_clock", "_traffic", "_expired", "_selecting", "_new_queue")

    def __init__(
        self,
        clock: Any,
        books: Bookkeeping,
        dead_letters: DeadLetters,
        new_queue: Callable[[str], Any],
    ) -> None:
        self._clock = clock
        self._new_queue = new_queue
        self._traffic = books.traffic
        self._expired = dead_letters.expired
        # Selecting subscribers and user inboxes count their own deliveries
        # (their queues do), as queues do.
        self.tree: TopicTree = TopicTree(
            (WorkerQueue, SelectingSubscriber, UserInbox), books.traffic
        )
        #: What stands in the tree for a subscriber or queue with a selector.
        self._selecting: dict[Any, SelectingSubscriber] = {}

    def publish(self, message: Message) -> None:
        """
        Deliver a message sent to a topic to every subscription it matches now.

        Counted once per SEND, not per delivery (see :mod:`stompbroker.broker.flow.traffic`).
        A message that has expired already is expired here, not delivered.
        """
        traffic_of = self._traffic
        traffic = traffic_of.destinations.get(message.destination)
        if traffic is None:
            traffic = traffic_of.of(message.destination)
        size = len(message.body)
        traffic.messages_in += 1
        traffic.bytes_in += size
        if message.expires and message.expires <= self._clock.seconds():
            self._expired(message)
            return
        topics = self.tree
        matches = topics.match(message.destination)
        for subscriber in matches:
            subscriber.deliver(message)
        direct = topics.direct(matches) if topics.queues else len(matches)
        if direct:
            traffic.messages_delivered += direct
            traffic.messages_acked += direct
            traffic.bytes_out += direct * size
            traffic_of.routed_directly(message.destination, traffic, message)

    def add(self, pattern: str, subscriber: Any, selector: Any = None) -> None:
        """
        Deliver what topics matching ``pattern`` get to ``subscriber`` (a direct
        subscriber, or a subscription's queue).

        :param selector: deliver only what this
            :class:`~stompbroker.broker.features.selectors.Selector` selects; a
            direct subscriber's selecting stand-in counts in the traffic, a
            queue counts its own deliveries.
        """
        if selector is not None:
            traffic = None if isinstance(subscriber, WorkerQueue) else self._traffic
            selecting = self._selecting[subscriber] = SelectingSubscriber(
                subscriber, selector, traffic
            )
            self.tree.add(pattern, selecting)
            return
        self.tree.add(pattern, subscriber)

    def remove(self, pattern: str, subscriber: Any) -> None:
        """Undo :meth:`add`; an unknown subscriber is ignored."""
        self.tree.remove(pattern, self._selecting.pop(subscriber, subscriber))

    def subscription_queue(self, pattern: str, selector: Any = None) -> Any:
        """
        :param selector: collect only what this
            :class:`~stompbroker.broker.features.selectors.Selector` selects.
        :returns: a new queue that collects what topics matching ``pattern`` get.
        """
        queue = self._new_queue(pattern)
        self.add(pattern, queue, selector)
        return queue

    def remove_subscription_queue(self, queue: Any) -> None:
        """Delete a queue of :meth:`subscription_queue` and what it holds."""
        self.remove(queue.destination, queue)
        queue.close()

    def subscriptions(self, destination: str) -> TopicSubscriptions:
        """:returns: the subscriptions a message sent to ``destination`` would reach now."""
        return TopicSubscriptions(
            tuple(
                (isinstance(subscriber, WorkerQueue), subscriber)
                for subscriber in self.tree.match(destination)
            )
        )

    def mark_gap(self) -> int:
        """
        Topic messages for this process may have been lost (its link to the
        other nodes was down): tell every topic subscription here
        (:meth:`~stompbroker.interfaces.ISubscriber.mark_gap`).

        :returns: how many subscriptions were told now.
        """
        told: int = sum(member.mark_gap() for member in self.tree.members())
        return told

    def report_deliveries(self, pattern: str | None = None) -> None:
        """Tell direct subscriptions what they were sent (:meth:`Traffic.report_deliveries`)."""
        self._traffic.report_deliveries(self.tree, pattern)
