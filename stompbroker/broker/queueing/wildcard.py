"""
Wildcard consumers on queues (ActiveMQ's): one subscription to
``/queue/orders.>`` takes from every queue whose name matches, those that exist
and those made later, with one prefetch window for them all.

A :class:`WildcardConsumer` is one
:class:`~stompbroker.broker.queueing.delivery.Consumer` (a *member*) on each
matching queue, all of them sharing one dict of the messages held
unacknowledged: the queues' dispatch loops, which test ``len(consumer.unacked)
< consumer.window``, then see the window of the whole subscription and need no
change, so a queue without a wildcard consumer pays nothing for them.  Each
message still goes to one consumer, and keeps the destination of the queue it
was sent to.

The broker keeps the wildcard consumer where it keeps any consumer of a
connection, and settles with it as with one queue: it is its own ``queue``, and
hands what an ACK, NACK or a transaction's COMMIT settles to the queues the
messages came from (each message's ``destination`` names its queue).  Room
made in the shared window is offered to the member queues in turn, so that a
busy queue does not starve the others.

Which queues match is the engine's queue table's job
(:meth:`~stompbroker.broker.engine.queue_table.QueueTable.watch`): it attaches
the consumer to each matching queue it holds now, and to each it makes later.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from stompbroker.broker.queueing.delivery import Consumer
from stompbroker.protocol.message import Message

__all__ = ["WildcardConsumer", "in_flight"]


def in_flight(consumer: Consumer) -> int:
    """
    :returns: how many messages ``consumer`` holds unacknowledged of its own
        queue: a wildcard consumer's member shares its dict with the others.
    """
    own = consumer.own
    if own is None:
        return len(consumer.unacked)
    return sum(1 for message in consumer.unacked.values() if message.destination == own)


class WildcardConsumer:
    """
    One subscription on every ``/queue/`` destination its pattern matches.

    :param subscriber: the :class:`~stompbroker.interfaces.ISubscriber`.
    :param window: most messages held unacknowledged, over every queue.
    :param max_redeliveries: its limit on redeliveries; ``-1`` for none.
    :param selector: hand it only the messages this selects, on every queue.
    :param options: its consumer options (priority, exclusive) on every queue.

    :ivar members: queue destination -> this subscription's consumer there.
    """

    def __init__(
        self,
        subscriber: Any,
        window: int,
        max_redeliveries: int,
        selector: Any = None,
        options: Any = None,
    ) -> None:
        self.subscriber = subscriber
        self.destination: str = subscriber.destination
        #: What the members hold, and its settling: one window for them all.
        self._book = Consumer(subscriber, self, window, max_redeliveries)
        self.auto = self._book.auto
        self.cumulative = self._book.cumulative
        self.window = window
        self.max_redeliveries = max_redeliveries
        self.unacked = self._book.unacked
        self.selector = selector
        self.options = options
        self.members: dict[str, Consumer] = {}
        self._paused = False
        #: Where in :attr:`members` the next offer of room starts.
        self._next = 0
        #: Whether its window was full before the last settlement: only then
        #: can its queues hold messages they stopped offering for want of room
        #: (a queue offers each message as it comes while there is room).
        self._was_full = False

    def __repr__(self) -> str:
        return (
            f"<WildcardConsumer {self.destination!r} on {len(self.members)} queues,"
            f" holding {len(self.unacked)}/{self.window}>"
        )

    @property
    def queue(self) -> WildcardConsumer:
        """It settles its messages itself, as a queue settles a consumer's."""
        return self

    @property
    def paused(self) -> bool:
        """Whether its connection's socket is behind: none of its queues gives it anything."""
        return self._paused

    @paused.setter
    def paused(self, paused: bool) -> None:
        self._paused = paused
        for member in self.members.values():
            member.paused = paused

    # -- the queues it takes from ---------------------------------------------------

    def attach(self, queue: Any) -> None:
        """
        Take from ``queue`` too (a queue that matches, found or just made).

        :param queue: an :class:`~stompbroker.broker.engine.queue_interface.IQueue`.
        """
        existing = self.members.get(queue.destination)
        if existing is not None and existing in queue.consumers:
            return
        member = queue.add_consumer(
            self.subscriber,
            self.window,
            self.max_redeliveries,
            selector=self.selector,
            options=self.options,
            held=self.unacked,
        )
        member.paused = self._paused
        self.members[queue.destination] = member

    def close(self, release: Callable[[Any], None]) -> None:
        """
        Leave every queue: what it holds goes back to the queue it came from.

        :param release: the engine's ``release_queue``, for each queue it leaves.
        """
        members, self.members = self.members, {}
        for member in members.values():
            member.queue.remove_consumer(member)
            release(member.queue)

    # -- settling, as the broker settles with a queue -------------------------------------

    def settle(self, message_id: str) -> list[Message]:
        """:returns: what an ACK or NACK of ``message_id`` settles (see :class:`Consumer`)."""
        self._was_full = not self.auto and len(self.unacked) >= self.window
        return self._book.settle(message_id)

    def holds(self, message_id: str) -> bool:
        """:returns: whether the message is delivered to it and not settled."""
        return message_id in self.unacked

    def acknowledge(self, consumer: Any, messages: list[Message]) -> list[Any]:
        """Forget acknowledged messages, each on its queue; then offer the room to all."""
        written: list[Any] = []
        for member, mine in self._by_member(messages):
            # While it settles, the queue gives this consumer nothing, so that
            # the room made goes round (dispatch) rather than back to it.
            member.paused = True
            try:
                written.extend(member.queue.acknowledge(member, mine))
            finally:
                member.paused = self._paused
        if self._was_full:
            self.dispatch()
        return written

    def requeue(self, consumer: Any, messages: list[Message]) -> list[Any]:
        """
        Return messages to the heads of their queues for redelivery, then offer
        the room round (they may wait at a head their queue offered to nobody).
        """
        written: list[Any] = []
        for member, mine in self._by_member(messages):
            # While it settles, the queue gives this consumer nothing, so that
            # the room made goes round (dispatch) rather than back to it.
            member.paused = True
            try:
                written.extend(member.queue.requeue(member, mine))
            finally:
                member.paused = self._paused
        self.dispatch()
        return written

    def reject(self, messages: list[Message]) -> list[Any]:
        """Dead-letter messages refused for good, each from its queue."""
        written: list[Any] = []
        for member, mine in self._by_member(messages):
            # While it settles, the queue gives this consumer nothing, so that
            # the room made goes round (dispatch) rather than back to it.
            member.paused = True
            try:
                written.extend(member.queue.reject(mine))
            finally:
                member.paused = self._paused
        if self._was_full:
            self.dispatch()
        return written

    def dispatch(self) -> None:
        """
        Offer the room in its window to its queues that hold messages, in turn
        from the one after the last offered: a queue with nothing waiting needs
        no offer (a new message there is dispatched as it comes).
        """
        members = list(self.members.values())
        count = len(members)
        if not count or self._paused:
            return
        unacked = self.unacked
        window = self.window
        auto = self.auto
        index = self._next % count
        for _ in range(count):
            if not auto and len(unacked) >= window:
                break
            queue = members[index].queue
            index = index + 1 if index + 1 < count else 0
            if queue.pending:
                queue.dispatch()
        self._next = index

    def _by_member(self, messages: Iterable[Message]) -> list[tuple[Consumer, list[Message]]]:
        """:returns: the messages grouped by the member whose queue they came from."""
        groups: dict[str, list[Message]] = {}
        for message in messages:
            groups.setdefault(message.destination, []).append(message)
        members = self.members
        return [
            (members[destination], mine)
            for destination, mine in groups.items()
            if destination in members
        ]
