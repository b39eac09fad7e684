"""
A queue's dispatch when its consumers ask for more than round-robin: selectors.

:class:`~stompbroker.broker.queues.WorkerQueue` hands messages out in its own
inlined round-robin loop.  Once one of its consumers has a selector, the queue
makes a :class:`FeatureDispatch` and hands its ``dispatch`` over to it, until no
such consumer is left; a queue whose consumers ask for nothing special never
makes one, and pays one attribute test per dispatch for the possibility.

Theory of operation
-------------------
The loop takes messages from the head of ``pending`` and gives each to the next
consumer in round-robin order that has room and whose selector (if any) selects
it.  A message that no consumer with room selects is put aside, and the loop
carries on with the next one, so it never blocks the messages behind it; what was
put aside goes back to the head, in its order, when the loop ends.  The loop
ends when nothing is pending, when no consumer has room (the queue is then
*stalled*, as in the plain loop), or when :data:`SCAN_LIMIT` messages have been
put aside in one dispatch: that bound keeps a dispatch cheap when many messages
wait that nobody selects, at the price that a message more than
:data:`SCAN_LIMIT` places behind such messages waits until some of them are
taken (by a consumer that selects them, or by expiry).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from stompbroker.broker.selectors import message_properties
from stompbroker.protocol.message import Message

if TYPE_CHECKING:
    from stompbroker.broker.delivery import Consumer
    from stompbroker.broker.queues import WorkerQueue

#: Most messages one dispatch puts aside because no consumer with room selects them.
SCAN_LIMIT = 1000


def needs_features(queue: WorkerQueue) -> bool:
    """:returns: whether any consumer of ``queue`` asks for more than round-robin."""
    return any(consumer.selector is not None for consumer in queue.consumers)


class FeatureDispatch:
    """
    The dispatch of one queue whose consumers use selectors.

    :param queue: the queue it dispatches for.
    """

    __slots__ = ("queue",)

    def __init__(self, queue: WorkerQueue) -> None:
        self.queue = queue

    def dispatch(self) -> None:
        """
        Hand pending messages to consumers with room that select them, round-robin.

        Expired messages met are expired, never delivered.  Re-entrant calls
        return at once, as the plain loop's do.
        """
        queue = self.queue
        if queue._dispatching:
            return
        queue._dispatching = True
        queue._stalled = False
        pending = queue.pending
        aside: list[Message] = []
        try:
            while pending and queue.consumers:
                message = pending.popleft()
                if message.expires and message.expires <= queue._clock.seconds():
                    queue.expire(message)
                    continue
                consumer = self._choose(message)
                if consumer is None:
                    aside.append(message)
                    if len(aside) >= SCAN_LIMIT:
                        return
                    continue
                if consumer is False:
                    pending.appendleft(message)
                    queue._stalled = True
                    return
                self._hand(consumer, message)
        finally:
            if aside:
                pending.extendleft(reversed(aside))
            queue._dispatching = False

    def _hand(self, consumer: Consumer, message: Message) -> None:
        """
        Deliver one pending message to ``consumer``, counting it and marking it in
        the store: what the plain loop of ``WorkerQueue.dispatch`` does inline.
        """
        queue = self.queue
        queue._counters.delivered += 1
        queue._traffic.delivered(message, consumer.auto)
        journal = queue.journal
        if message.persistent and journal is not None:
            if consumer.auto:
                recorded = journal.remove(queue.store_key, message.message_id)
            else:
                recorded = journal.delivered(queue.store_key, message.message_id)
            consumer.deliver(message, recorded)
        else:
            consumer.deliver(message)

    def _choose(self, message: Message) -> Consumer | Literal[False] | None:
        """
        Pick the consumer for ``message``, moving the round-robin on.

        :returns: the consumer; ``None`` if some consumers have room but none of
            them selects the message; ``False`` if no consumer has room.
        """
        queue = self.queue
        consumers = queue.consumers
        count = len(consumers)
        index = queue._next if queue._next < count else 0
        room = False
        properties: dict[str, str] | None = None
        for _ in range(count):
            consumer = consumers[index]
            index = index + 1 if index + 1 < count else 0
            if not consumer.has_room():
                continue
            room = True
            selector = consumer.selector
            if selector is not None:
                if properties is None:
                    properties = message_properties(message)
                if not selector.matches(properties):
                    continue
            queue._next = index
            return consumer
        return None if room else False

