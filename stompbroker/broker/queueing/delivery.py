"""
Delivery bookkeeping: the broker's delivery policy, its counters, and consumers.

A :class:`Consumer` is one subscription's place on a queue: its window (how many
messages it may hold unacknowledged) and the messages it holds.
:meth:`Consumer.has_room` is the one place that decides whether a consumer gets
more: not while its window is full, and not while its connection's socket
cannot keep up (:attr:`Consumer.paused`, set by the broker when the transport
pauses the session).  A paused consumer's messages wait in its queue, where
other consumers with room may take them, instead of piling up in a transport
buffer.

Acknowledgement modes (STOMP 1.2, "SUBSCRIBE ack Header"):

- ``auto``: a message counts as acknowledged once it is written to the client,
  so the consumer holds nothing and its window never fills (at-most-once).
- ``client``: an ACK or NACK settles that message and every earlier one the
  consumer holds (cumulative).
- ``client-individual``: an ACK or NACK settles that message alone.

A message is in flight to a consumer at most once at a time (a queue hands it
to one consumer, a topic subscription has its own queue), so its ``message-id``
names it among what the consumer holds.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from typing import Any, cast

from attrs import Attribute, define, field, frozen
from attrs.validators import ge, in_

from stompbroker.broker.queueing.backoff import Backoff
from stompbroker.protocol.message import Message

#: What happens to an expired message: dropped, or moved to a dead-letter queue.
EXPIRED_ACTIONS = ("drop", "dead-letter")


def _valid_prefix(instance: Any, attribute: Attribute, value: str) -> None:
    """A dead-letter prefix is part of one queue name: non-empty, without ``/``."""
    if not isinstance(value, str) or not value or "/" in value:
        raise ValueError(f"{attribute.name} must be non-empty text without '/', got {value!r}")


@frozen
class DeliveryPolicy:
    """
    Broker-wide delivery settings; each is a twistd option.

    :ivar prefetch: the window of a client-ack subscription that asks for none
        (``--prefetch``): most messages it holds unacknowledged.
    :ivar max_redeliveries: how many times a message may be redelivered before it
        is dead-lettered (``--max-redeliveries``); ``-1`` for no limit.  A
        subscription may set its own with ``max-redeliveries``.
    :ivar dead_letter_prefix: put between ``/queue/`` and a destination's name to
        name its dead-letter queue (``--dead-letter-prefix``).
    :ivar expired: ``drop`` or ``dead-letter`` expired messages (``--expired``).
    :ivar ttl: time to live in ms of messages that set no expiry (``--ttl``); 0
        for none.
    :ivar backoff: how long a NACKed message waits before its redelivery
        (``--redelivery-delay``, ``--redelivery-multiplier``,
        ``--redelivery-max-delay``); a subscription may set its own.
    """

    prefetch: int = field(default=1000, validator=ge(1))
    max_redeliveries: int = field(default=6, validator=ge(-1))
    dead_letter_prefix: str = field(default="DLQ.", validator=_valid_prefix)
    expired: str = field(default="drop", validator=in_(EXPIRED_ACTIONS))
    ttl: int = field(default=0, validator=ge(0))
    backoff: Backoff = Backoff()


@define
class DeliveryCounters:
    """
    Broker-wide counts of what happened to queued messages, for statistics.

    :ivar enqueued: messages put on a queue (topic subscriptions' queues included).
    :ivar delivered: deliveries from queues, redeliveries included.
    :ivar acknowledged: messages acknowledged by a client.
    :ivar redelivered: messages returned to their queue for another delivery.
    :ivar dead_lettered: messages moved to a dead-letter queue.
    :ivar expired: messages that expired before delivery.
    :ivar discarded: messages thrown away: failed in a dead-letter queue, sent to a
        reply queue that no longer exists, or left in a queue that was deleted.
    :ivar dropped: topic messages a slow ``auto``-ack subscriber never got: dropped
        by the ``drop-oldest`` policy, or discarded with a subscriber disconnected
        by the ``disconnect`` policy.
    :ivar slow_disconnects: subscribers disconnected for being too slow.
    :ivar foreign_acks: acknowledgements that ended nothing because another node
        had taken over their messages (redis engine, after this node's liveness
        lapsed); that node redelivers them.
    """

    enqueued: int = 0
    delivered: int = 0
    acknowledged: int = 0
    redelivered: int = 0
    dead_lettered: int = 0
    expired: int = 0
    discarded: int = 0
    dropped: int = 0
    slow_disconnects: int = 0
    foreign_acks: int = 0


class Consumer:
    """
    One subscriber on one queue.

    :param subscriber: the :class:`~stompbroker.interfaces.ISubscriber`.
    :param queue: the :class:`~stompbroker.broker.queueing.queues.WorkerQueue` it takes from.
    :param window: most messages held unacknowledged (ignored for ``auto``).
    :param max_redeliveries: its limit on redeliveries; ``-1`` for none.
    :param held: the dict of messages held unacknowledged, shared with the other
        members of a wildcard consumer (:mod:`stompbroker.broker.queueing.wildcard`)
        so that one window counts what they all hold; ``None`` for its own.
    """

    __slots__ = (
        "subscriber",
        "queue",
        "auto",
        "cumulative",
        "window",
        "max_redeliveries",
        "unacked",
        "paused",
        "unwritten",
        "selector",
        "options",
        "backoff",
        "own",
    )

    def __init__(
        self,
        subscriber: Any,
        queue: Any,
        window: int,
        max_redeliveries: int,
        held: dict[str, Message] | None = None,
    ) -> None:
        self.subscriber = subscriber
        self.queue = queue
        self.auto = subscriber.ack_mode == "auto"
        self.cumulative = subscriber.ack_mode == "client"
        self.window = window
        self.max_redeliveries = max_redeliveries
        #: message-id -> message, in delivery order.  ``client`` mode settles
        #: from the oldest, which an OrderedDict pops in O(1); a plain dict,
        #: cheaper to fill and to pop by key, serves every other mode.
        self.unacked: dict[str, Message] = (
            held if held is not None else OrderedDict() if self.cumulative else {}
        )
        #: With a shared ``held``: the destination of the queue whose messages
        #: are this consumer's own (what :meth:`take_all` takes); ``None`` otherwise.
        self.own: str | None = None if held is None else queue.destination
        #: Whether its connection's socket is behind: it gets nothing until resumed.
        self.paused = False
        #: Messages handed over but not yet written, each with whether it may be
        #: written now, in delivery order; ``None`` when there are none.
        self.unwritten: deque[list[Any]] | None = None
        #: The :class:`~stompbroker.broker.features.selectors.Selector` of the messages it
        #: takes, or ``None`` for all (see :mod:`stompbroker.broker.queueing.dispatch`).
        self.selector: Any = None
        #: Its :class:`~stompbroker.broker.queueing.consumer_choice.ConsumerOptions`
        #: (priority, exclusive) when it asked for any; ``None`` otherwise.
        self.options: Any = None
        #: Its :class:`~stompbroker.broker.queueing.backoff.Backoff`: how long a
        #: message it NACKs waits before its redelivery; ``None`` for no wait.
        self.backoff: Any = None

    def has_room(self) -> bool:
        """
        :returns: whether the consumer may be given another message now: its
            connection keeps up, and (unless ``auto``) its window has room.
        """
        return not self.paused and (self.auto or len(self.unacked) < self.window)

    def deliver(self, message: Message, recorded: Any = None) -> None:
        """
        Hand a message to the subscriber, keeping it until settled unless ``auto``.

        :param message: a message the queue has chosen this consumer for.
        :param recorded: for a persistent message, the Deferred of the store's
            record of this delivery (a delivery mark, or for ``auto`` the
            removal): the message is written to the subscriber once it fires, and
            no message goes before one handed over earlier.
        """
        if not self.auto:
            self.unacked[message.message_id] = message
        unwritten = self.unwritten
        if recorded is None and unwritten is None:
            self.subscriber.deliver(message)
            return
        entry = [message, recorded is None]
        if unwritten is None:
            unwritten = self.unwritten = deque()
        unwritten.append(entry)
        if recorded is not None:
            recorded.addCallback(self._recorded, entry)

    def _recorded(self, result: Any, entry: list[Any]) -> None:
        """A delivery is recorded: write what may be written now, in order."""
        entry[1] = True
        unwritten = self.unwritten
        if unwritten is None:
            # Taken back (unsubscribed, or its queue closed) meanwhile.
            return
        while unwritten and unwritten[0][1]:
            self.subscriber.deliver(unwritten.popleft()[0])
        if not unwritten and self.unwritten is unwritten:
            self.unwritten = None

    def holds(self, message_id: str) -> bool:
        """:returns: whether the message is delivered to this consumer and not settled."""
        return message_id in self.unacked

    def settle(self, message_id: str) -> list[Message]:
        """
        Take the messages an ACK or NACK of ``message_id`` settles.

        :param message_id: a message this consumer may hold.
        :returns: in ``client`` mode that message and every one delivered before it;
            otherwise that message alone; nothing if the consumer does not hold it
            (any more).
        """
        unacked = self.unacked
        if not self.cumulative:
            message = unacked.pop(message_id, None)
            return [] if message is None else [message]
        if message_id not in unacked:
            return []
        ordered = cast("OrderedDict[str, Message]", unacked)
        settled = []
        while True:
            key, message = ordered.popitem(last=False)
            settled.append(message)
            if key == message_id:
                return settled

    def take_all(self) -> list[Message]:
        """
        :returns: every message held, in delivery order (for ``auto``, those not
            written yet); the consumer then holds none, and writes none of them.
        """
        own = self.own
        if own is not None and not self.auto:
            # A wildcard consumer's member: the shared dict keeps the others'.
            unacked = self.unacked
            messages = [message for message in unacked.values() if message.destination == own]
            for message in messages:
                del unacked[message.message_id]
            self.unwritten = None
            return messages
        messages = list(self.unacked.values())
        if self.auto and self.unwritten:
            messages = [entry[0] for entry in self.unwritten]
        self.unacked.clear()
        self.unwritten = None
        return messages

    def __repr__(self) -> str:
        return f"<Consumer {self.subscriber!r} holding {len(self.unacked)}/{self.window}>"
