"""
What the broker asks of the queues an engine hands out (:class:`IQueue`): one
queue's consumers, what goes in, what is settled, and what an operator may see
and take from it.

Apart from :class:`~stompbroker.broker.engine.engine_interface.IEngine` (which re-exports
it) because the queue is a contract of its own: the local
:class:`~stompbroker.broker.queueing.queues.WorkerQueue` implements it without being an
engine, and a remote engine's queue is a handle on a stream.  As in
:mod:`stompbroker.broker.engine.engine_interface`, each method says how an engine that keeps
its state in a shared Redis server would do it.
"""

from __future__ import annotations

from zope.interface import Attribute, Interface

__all__ = ["IQueue"]


class IQueue(Interface):
    """
    One queue, as an engine hands it out: ``/queue/NAME``, a temporary queue, or
    a topic subscription's own (client acknowledgement or a durable name).

    :class:`~stompbroker.broker.queueing.queues.WorkerQueue` is the local one.  A Redis
    engine's queue is a handle on a stream and its consumer group: it reads for
    its local consumers (``XREADGROUP ... COUNT`` the room in their windows,
    ``BLOCK`` while they have room and the stream is empty) and hands each
    message to one of them.
    """

    destination = Attribute(
        "The queue's destination, or for a topic subscription's queue its pattern."
    )
    consumers = Attribute(
        "The :class:`~stompbroker.broker.queueing.delivery.Consumer` objects taking from it"
        " in this process."
    )
    pending = Attribute(
        "The messages waiting here for a consumer with room, in order; for a remote"
        " queue, those read from the server and not yet handed out."
    )
    reads_ahead = Attribute(
        "Whether its messages wait elsewhere (a server) and are read as its consumers"
        " make room: a wildcard consumer offers room to such a queue even when"
        " :attr:`pending` is empty."
    )

    def add_consumer(  # type: ignore[no-untyped-def]
        subscriber, window, max_redeliveries, *, selector=None, options=None, held=None
    ):
        """
        Start handing messages to a subscriber of this process.

        Redis: start reading for it (the first local consumer starts the read loop).

        ``selector`` (a :class:`~stompbroker.broker.features.selectors.Selector`, or
        ``None``): hand the consumer only messages it selects; a message that no
        consumer with room selects waits without blocking those behind it
        (:mod:`stompbroker.broker.queueing.dispatch`).  Redis: a consumer group cannot
        skip an entry for one reader, so a remote engine either reads into a
        local look-ahead and applies the same rule there (entries nobody here
        selects are left pending for other processes, ``XCLAIM``-ed back), or
        refuses a selector on a queue with
        :class:`~stompbroker.protocol.errors.InvalidSelector`.

        ``options`` (a :class:`~stompbroker.broker.queueing.consumer_choice.ConsumerOptions`,
        or ``None`` for none): the consumer's priority, and whether it is
        exclusive or declares the queue single-active.  Redis: refused with
        :class:`~stompbroker.protocol.errors.NotSupported` (each node would choose
        among its own consumers only).

        ``held`` (a dict, or ``None`` for the consumer's own): what a wildcard
        consumer holds on all its queues (:mod:`stompbroker.broker.queueing.wildcard`),
        so that its one window bounds what each queue hands it (and, on Redis,
        reads for it).

        :returns: its :class:`~stompbroker.broker.queueing.delivery.Consumer`.
        """

    def remove_consumer(consumer):  # type: ignore[no-untyped-def]
        """
        Stop handing messages to a consumer; what it holds goes back for redelivery.

        Redis: what it holds is returned to the group's pending list for another
        consumer (``XCLAIM`` to a local one with room, or left for ``XAUTOCLAIM``).
        """

    def publish(message):  # type: ignore[no-untyped-def]
        """
        Take a message sent to this queue, counting it in (a temporary queue's SEND).

        Redis: ``XADD`` without waiting; local consumers are woken by their read.
        """

    def enqueue(message):  # type: ignore[no-untyped-def]
        """
        Take a message that comes from a topic, a dead letter or the store.

        Redis: as :meth:`publish`, uncounted.
        """

    def dispatch():  # type: ignore[no-untyped-def]
        """
        Hand pending messages to consumers with room; called when room is made
        (a consumer resumes).  Redis: read more for them.
        """

    def acknowledge(consumer, messages):  # type: ignore[no-untyped-def]
        """
        Forget messages a consumer has acknowledged.

        Redis: ``XACK`` (and ``XDEL``), which must be durable before the ACK's RECEIPT.

        :returns: a list of Deferreds, one per write that the ACK's RECEIPT waits
            for; empty when there is nothing to wait for (the local engine's
            non-persistent messages).
        """

    def requeue(consumer, messages):  # type: ignore[no-untyped-def]
        """
        Return messages for redelivery (NACK), or dead-letter those over the limit.

        Redis: nothing to write for redelivery (the entry stays pending in the group,
        its delivery count grows); a dead letter is an ``XADD`` to the
        dead-letter stream and an ``XACK`` here, in one ``MULTI``.

        :returns: as :meth:`acknowledge`, for the dead-letter moves.
        """

    def reject(messages):  # type: ignore[no-untyped-def]
        """
        Dead-letter messages refused for good (NACK ``requeue:false``).

        :returns: as :meth:`acknowledge`.
        """

    def deliver_copies(body, headers, message_ids):  # type: ignore[no-untyped-def]
        """
        Give each local consumer with room a copy of its own of a message (the
        ``/queue/monitor`` status), counted as in and delivered here.

        Redis: local only; nothing is written to the stream.

        :returns: how many copies were handed out.
        """

    def is_idle():  # type: ignore[no-untyped-def]
        """:returns: whether the queue holds nothing and nobody here consumes from it."""

    # -- management (stompbroker.broker.management.operations): rare, may wait on a server

    def browse(count):  # type: ignore[no-untyped-def]
        """
        Peek at the messages waiting for a consumer, head first, leaving them there.

        Redis: ``XRANGE`` after the group's last-delivered id, ``COUNT count``.

        :param count: most messages to return.
        :returns: a list of :class:`~stompbroker.protocol.message.Message`
            (locally), or a Deferred firing with one.
        """

    def purge():  # type: ignore[no-untyped-def]
        """
        Discard every message waiting for a consumer (not those delivered and not
        yet acknowledged, which their consumers settle), counting them discarded;
        persistent ones leave the store too.

        Redis: ``XTRIM`` (or ``XDEL`` of the unread entries) in one ``MULTI``.

        :returns: how many were discarded (locally), or a Deferred firing with it.
        """
