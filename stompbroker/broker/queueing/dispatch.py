"""
A queue's dispatch when its consumers or messages ask for more than round-robin:
selectors, consumer priorities, exclusive consumers, message groups.

:class:`~stompbroker.broker.queueing.queues.WorkerQueue` hands messages out in its own
inlined round-robin loop.  Once one of its consumers has a selector or consumer
options (:mod:`stompbroker.broker.queueing.consumer_choice`), or a message with a group
(:mod:`stompbroker.broker.queueing.groups`) arrives, the queue makes a
:class:`FeatureDispatch` and hands its ``dispatch`` over to it.  It keeps it while
a consumer asks for more; a queue declared single-active, or that has carried a
grouped message, keeps it for as long as the queue lives (the declaration and
the groups' owners must outlast any one consumer).  A queue whose consumers and
messages ask for nothing special never makes one, and pays one attribute test
per dispatch, and one per message it takes (its group), for the possibility.

Theory of operation
-------------------
The loop takes messages from the head of ``pending`` and picks a consumer for
each with the queue's :class:`~stompbroker.broker.queueing.consumer_choice.ConsumerChoice`:
the exclusive consumer while there is one, otherwise the next in round-robin
order within the highest priority that has a consumer with room; with
selectors, among those whose selector selects the message.  A message of a
group goes to the group's owner (:class:`~stompbroker.broker.queueing.groups.GroupAssignments`);
when the owner is full, or the group has messages waiting already, it joins the
group's line in the queue's :class:`~stompbroker.broker.queueing.groups.GroupedPending`,
which the dispatch serves first, to owners that have room again.

A message that no consumer with room takes (no selector selects it) is put
aside, and the loop carries on with the next one, so it never blocks the
messages behind it.  What was put aside goes back to the head, in its order,
when the loop ends.  The loop ends when nothing is pending, when no consumer
that may take messages has room (the queue is then *stalled*, as in the plain
loop), or when :data:`SCAN_LIMIT` messages have been put aside in one dispatch:
that bound keeps a dispatch cheap when many messages wait that nobody selects,
at the price that a message more than :data:`SCAN_LIMIT` places behind such
messages waits until some of them are taken (by a consumer that selects them,
or by expiry).  Messages waiting for a group's owner are never put aside: a
line costs one append per message, whatever the length of the queue.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from stompbroker.broker.features.selectors import message_properties
from stompbroker.broker.queueing.consumer_choice import ConsumerChoice, ConsumerOptions
from stompbroker.broker.queueing.delivery import Consumer
from stompbroker.broker.queueing.groups import GroupAssignments, GroupedPending, first_for_consumer
from stompbroker.protocol.message import Message

if TYPE_CHECKING:
    from stompbroker.broker.queueing.queues import WorkerQueue

#: Most messages one dispatch puts aside because no consumer with room takes them.
SCAN_LIMIT = 1000

#: The options of a consumer that asked for none.
PLAIN_OPTIONS = ConsumerOptions()
#: What :meth:`FeatureDispatch._pick_grouped` says of a message it put in its group's line.
_HELD: Final = "held"
_has_room = Consumer.has_room


class FeatureDispatch:
    """
    The dispatch of one queue whose consumers or messages use features.

    :param queue: the queue it dispatches for.
    :param exclude: a consumer of the queue to leave out for now (the caller adds
        it with its options).

    :ivar choice: the queue's consumers by priority, and who is exclusive.
    :ivar groups: the owners of the queue's message groups, once it has had a
        grouped message; ``None`` before.
    :ivar selecting: whether any consumer has a selector.
    """

    __slots__ = ("queue", "choice", "groups", "selecting")

    def __init__(self, queue: WorkerQueue, exclude: Consumer | None = None) -> None:
        self.queue = queue
        self.choice: ConsumerChoice[Consumer] = ConsumerChoice()
        self.groups: GroupAssignments[Consumer] | None = None
        self.selecting = False
        for consumer in queue.consumers:
            if consumer is not exclude:
                self.choice.add(consumer, consumer.options or PLAIN_OPTIONS)
                self.selecting = self.selecting or consumer.selector is not None

    def removed(self, consumer: Consumer) -> FeatureDispatch | None:
        """
        Forget a consumer that left the queue: it is no longer chosen, and its
        groups will pick new owners.

        :returns: the queue's feature dispatch from now on, or ``None`` for the plain loop.
        """
        self.choice.remove(consumer)
        if self.groups is not None:
            for group in self.groups.release(consumer):
                self.queue.pending.release(group)
        self.selecting = any(c.selector is not None for c in self.queue.consumers)
        return self if self.queue.needs_features() else None

    def dispatch(self) -> None:
        """
        Hand pending messages to the consumers that may take them, as the module says.

        Expired messages met are expired, never delivered.  Re-entrant calls
        return at once, as the plain loop's do.
        """
        queue = self.queue
        if queue._dispatching:
            return
        queue._dispatching = True
        queue._stalled = False
        pending = queue.pending
        lines: GroupedPending[Consumer] | None = None
        if self.groups is not None:
            lines = pending
            pending = lines.main
        aside: list[Message] = []
        try:
            if lines is not None and lines.held:
                self._serve_lines(lines)
            while pending and queue.consumers:
                message = pending.popleft()
                if message.expires and message.expires <= queue._clock.seconds():
                    queue.expire(message)
                    continue
                if lines is not None and message.group is not None:
                    consumer, first = self._pick_grouped(message, lines)
                    if consumer is _HELD:
                        continue
                else:
                    consumer, first = self._choose(message), False
                if consumer is not None:
                    self._hand(consumer, first_for_consumer(message) if first else message)
                    continue
                if not self._any_room():
                    pending.appendleft(message)
                    queue._stalled = True
                    return
                aside.append(message)
                if len(aside) >= SCAN_LIMIT:
                    return
            if lines is not None and lines.held:
                # Owners may have made room (an ACK from inside a delivery) meanwhile.
                self._serve_lines(lines)
        finally:
            if aside:
                pending.extendleft(reversed(aside))
            queue._dispatching = False

    def _pick_grouped(self, message: Message, lines: GroupedPending[Consumer]) -> tuple[Any, bool]:
        """
        Choose the consumer for a grouped message taken from the queue's order.

        :returns: its owner, or for a group without one the consumer chosen (and
            ``True``: the first of the group for it), or ``None`` if nobody has
            room; :data:`_HELD` when the message joined its group's line (or went
            back to the head of the queue with it, when the group moves).
        """
        groups: GroupAssignments[Consumer] = self.groups  # type: ignore[assignment]
        group: str = message.group  # type: ignore[assignment]
        owner = groups.owner(group)
        if owner is not None and self.choice.is_exclusive and owner is not self.choice.active:
            # An exclusive consumer took over: the group, and its line, move to it.
            groups.forget(group)
            if lines.has_line(group):
                lines.hold(group, owner, message)
                lines.release(group)
                return _HELD, False
            owner = None
        if owner is not None:
            if lines.has_line(group) or not self._takes(owner, message):
                lines.hold(group, owner, message)
                return _HELD, False
            if message.closes_group:
                groups.forget(group)
            return owner, False
        chosen = self._choose(message)
        if chosen is not None and not message.closes_group:
            groups.assign(group, chosen)
        return chosen, True

    def _serve_lines(self, lines: GroupedPending[Consumer]) -> None:
        """Hand the messages waiting in groups' lines to their owners while they have room."""
        groups: GroupAssignments[Consumer] = self.groups  # type: ignore[assignment]
        choice = self.choice
        for owner in lines.owners():
            if choice.is_exclusive and owner is not choice.active:
                # An exclusive consumer took over: these groups move to it.
                for group in lines.line_groups(owner):
                    groups.forget(group)
                    lines.release(group)
                continue
            while owner.has_room():
                turn = lines.next_of(owner)
                if turn is None:
                    break
                group, message = turn
                if not self._takes(owner, message):
                    # Its selector does not take the head of this group: wait.
                    break
                lines.take(group)
                if message.closes_group:
                    groups.forget(group)
                    lines.release(group)
                self._hand(owner, message)

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

    def _takes(self, consumer: Consumer, message: Message) -> bool:
        """:returns: whether ``consumer`` may take ``message`` now: room, and its selector."""
        if not consumer.has_room():
            return False
        selector = consumer.selector
        return selector is None or selector.matches(message_properties(message))

    def _choose(self, message: Message) -> Consumer | None:
        """
        Pick the consumer for ``message``, moving the round-robin on.

        :returns: the consumer; ``None`` if none that may take messages now has
            room and (with selectors) selects it.
        """
        if not self.selecting:
            return self.choice.next(_has_room)
        properties = message_properties(message)

        def takes(consumer: Consumer) -> bool:
            if not consumer.has_room():
                return False
            selector = consumer.selector
            return selector is None or selector.matches(properties)

        return self.choice.next(takes)

    def _any_room(self) -> bool:
        """:returns: whether a consumer that may take messages now has room."""
        if self.choice.is_exclusive:
            active = self.choice.active
            return active is not None and active.has_room()
        return any(consumer.has_room() for consumer in self.queue.consumers)
