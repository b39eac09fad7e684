"""
A queue's dispatch when its consumers or messages ask for more than round-robin:
selectors, consumer priorities, exclusive consumers, message groups.

:class:`~stompbroker.broker.queues.WorkerQueue` hands messages out in its own
inlined round-robin loop.  Once one of its consumers has a selector or consumer
options (:mod:`stompbroker.broker.consumer_choice`), or a message with a group
(:mod:`stompbroker.broker.groups`) arrives, the queue makes a
:class:`FeatureDispatch` and hands its ``dispatch`` over to it.  It keeps it while
a consumer asks for more; a queue declared single-active, or that has carried a
grouped message, keeps it for as long as the queue lives (the declaration and
the groups' owners must outlast any one consumer).  A queue whose consumers and
messages ask for nothing special never makes one, and pays one attribute test
per dispatch, and one per message it takes, for the possibility.

Theory of operation
-------------------
The loop takes messages from the head of ``pending`` and picks a consumer for
each with the queue's :class:`~stompbroker.broker.consumer_choice.ConsumerChoice`:
the exclusive consumer while there is one, otherwise the next in round-robin
order within the highest priority that has a consumer with room; with
selectors, among those whose selector selects the message.  A message of a
group goes to the group's owner (:class:`~stompbroker.broker.groups.GroupAssignments`).

A message that no consumer with room takes (no selector selects it, or its
group's owner is full) is put aside, and the loop carries on with the next one,
so it never blocks the messages behind it; once a group has a message aside,
its later messages in the same pass are put aside too, so that a group keeps its
order.  What was put aside goes back to the head, in its order, when the loop
ends.  The loop ends when nothing is pending, when no consumer that may take
messages has room (the queue is then *stalled*, as in the plain loop), or when
:data:`SCAN_LIMIT` messages have been put aside in one dispatch: that bound
keeps a dispatch cheap when many messages wait that nobody takes, at the price
that a message more than :data:`SCAN_LIMIT` places behind such messages waits
until some of them are taken (by a consumer that selects them, or by expiry).
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from stompbroker.broker.consumer_choice import ConsumerChoice, ConsumerOptions
from stompbroker.broker.delivery import Consumer
from stompbroker.broker.groups import GroupAssignments, first_for_consumer
from stompbroker.broker.selectors import message_properties
from stompbroker.protocol.message import Message

if TYPE_CHECKING:
    from stompbroker.broker.queues import WorkerQueue

#: Most messages one dispatch puts aside because no consumer with room takes them.
SCAN_LIMIT = 1000

_PLAIN = ConsumerOptions()
_has_room = Consumer.has_room


def needs_features(queue: WorkerQueue) -> bool:
    """
    :returns: whether ``queue`` must dispatch through a :class:`FeatureDispatch`:
        a consumer has a selector or options, or the queue's feature dispatch
        holds what must outlast its consumers.
    """
    features = queue._features
    if features is not None and (features.choice.single_active or features.groups is not None):
        return True
    return any(
        consumer.selector is not None or consumer.options is not None
        for consumer in queue.consumers
    )


def consumer_added(queue: WorkerQueue, consumer: Consumer) -> FeatureDispatch | None:
    """
    Account for a consumer that ``queue`` has just appended to its consumers.

    The SUBSCRIBE that finds the queue without consumers declares it
    single-active (``x-single-active-consumer``) or not; later ones cannot
    change that (see :mod:`stompbroker.broker.consumer_choice`).

    :returns: the queue's feature dispatch from now on, or ``None`` for the plain loop.
    """
    features = queue._features
    options = consumer.options
    if features is None:
        if not needs_features(queue):
            return None
        features = FeatureDispatch(queue, exclude=consumer)
    if options is not None and options.single_active and len(queue.consumers) == 1:
        features.choice.single_active = True
    features.choice.add(consumer, options or _PLAIN)
    features.blocked = None
    features.selecting = features.selecting or consumer.selector is not None
    return features


def grouped(queue: WorkerQueue, message: Message) -> bool:
    """
    Make ``queue`` dispatch by message groups from now on: a grouped message arrives.

    :returns: whether the feature dispatch took the message (:meth:`FeatureDispatch.arrived`);
        ``False`` for the queue to append it and dispatch as usual.
    """
    features = queue._features
    if features is None:
        features = queue._features = FeatureDispatch(queue)
    if features.groups is None:
        features.groups = GroupAssignments()
    return features.arrived(message)


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

    __slots__ = ("queue", "choice", "groups", "selecting", "blocked", "reentered")

    def __init__(self, queue: WorkerQueue, exclude: Consumer | None = None) -> None:
        self.queue = queue
        self.choice: ConsumerChoice[Consumer] = ConsumerChoice()
        self.groups: GroupAssignments[Consumer] | None = None
        self.selecting = False
        #: While the queue is blocked (see :meth:`arrived`), the groups that have
        #: messages waiting; ``None`` otherwise.
        self.blocked: set[str] | None = None
        #: Whether a dispatch was asked for while one ran.
        self.reentered = False
        for consumer in queue.consumers:
            if consumer is not exclude:
                self.choice.add(consumer, consumer.options or _PLAIN)
                self.selecting = self.selecting or consumer.selector is not None

    def removed(self, consumer: Consumer) -> FeatureDispatch | None:
        """
        Forget a consumer that left the queue: it is no longer chosen, and its
        groups will pick new owners.

        :returns: the queue's feature dispatch from now on, or ``None`` for the plain loop.
        """
        self.choice.remove(consumer)
        self.blocked = None
        if self.groups is not None:
            self.groups.release(consumer)
        self.selecting = any(c.selector is not None for c in self.queue.consumers)
        return self if needs_features(self.queue) else None

    def dispatch(self) -> None:
        """
        Hand pending messages to the consumers that may take them, as the module says.

        Expired messages met are expired, never delivered.  Re-entrant calls
        return at once, as the plain loop's do.
        """
        queue = self.queue
        self.blocked = None
        if queue._dispatching:
            self.reentered = True
            return
        queue._dispatching = True
        queue._stalled = False
        self.reentered = False
        pending = queue.pending
        aside: list[Message] = []
        waiting: set[str] = set()
        try:
            while pending and queue.consumers:
                message = pending.popleft()
                if message.expires and message.expires <= queue._clock.seconds():
                    queue.expire(message)
                    continue
                consumer, first = self._pick(message, waiting)
                if consumer is not None:
                    self._hand(consumer, first_for_consumer(message) if first else message)
                    continue
                if not self._any_room():
                    pending.appendleft(message)
                    queue._stalled = True
                    return
                if message.group is not None:
                    waiting.add(message.group)
                aside.append(message)
                if len(aside) >= SCAN_LIMIT:
                    return
            if aside and not self.reentered and self.groups is not None:
                # Everything left waits for a consumer that cannot take it now.
                self.blocked = waiting
        finally:
            if aside:
                pending.extendleft(reversed(aside))
            queue._dispatching = False

    def arrived(self, message: Message) -> bool:
        """
        Take a grouped message that has just arrived, without a dispatch, while
        the queue is *blocked*: its last dispatch left only messages that wait for
        consumers that cannot take them, and nothing has made room since (whatever
        makes room dispatches, which ends that state).  Only the new message can
        go then, so only it is looked at: a pass over everything waiting, on every
        arrival, would cost the length of the queue per message.

        :returns: whether it took the message (delivered it, or queued it to wait);
            ``False`` for the queue to append it and dispatch as usual.
        """
        blocked = self.blocked
        queue = self.queue
        if blocked is None or queue._dispatching or message.expires:
            return False
        consumer, first = self._pick(message, blocked)
        if consumer is not None:
            queue._dispatching = True
            try:
                self._hand(consumer, first_for_consumer(message) if first else message)
            finally:
                queue._dispatching = False
            return True
        queue.pending.append(message)
        if not self._any_room():
            self.blocked = None
            queue._stalled = True
        else:
            blocked.add(message.group)  # type: ignore[arg-type]
        return True

    def _pick(self, message: Message, waiting: set[str]) -> tuple[Consumer | None, bool]:
        """
        Choose the consumer for ``message``, by its group if it has one.

        :param waiting: the groups that have a message put aside in this pass:
            their later messages must not overtake it.
        :returns: the consumer, or ``None`` if none takes the message now; and
            whether it is the first message of its group for that consumer.
        """
        group = message.group
        groups = self.groups
        if group is None or groups is None:
            return self._choose(message), False
        if group in waiting:
            return None, False
        if self.choice.is_exclusive and groups.owner(group) is not self.choice.active:
            # An exclusive consumer took over: the group moves to it.
            groups.forget(group)
        routed = groups.route(
            group,
            partial(self._takes, message=message),
            partial(self._choose, message),
            closes=message.closes_group,
        )
        if isinstance(routed, tuple):
            return routed
        return None, False

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
