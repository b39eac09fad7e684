"""
What a shared queue's handle gives back to its stream when its node's consumers
leave: a consumer's unacknowledged messages, and, once the last has gone or the
handle is dropped, all the node read and holds.

A :class:`~stompbroker.broker.engine.redis.stream_queue.StreamQueue` holds one
:class:`QueueLeaving`.  While other local consumers remain, what a consumer that
left held is redelivered here (its counts kept in Redis too); a decided queue's
(:mod:`.dispatch`) is decided again among the nodes; the last consumer's
leaving puts everything back at the tail of the stream for the other nodes,
the NACKed messages that wait here for their redelivery with it.
"""

from __future__ import annotations

from typing import Any, Protocol

from stompbroker.broker.engine.redis.cluster_dispatch import ClusterDispatch
from stompbroker.broker.engine.redis.queue_settling import QueueSettling
from stompbroker.broker.queueing.delivery import Consumer
from stompbroker.broker.queueing.queues import WorkerQueue
from stompbroker.protocol.message import Message

__all__ = ["LeavingQueue", "QueueLeaving"]


class LeavingQueue(Protocol):
    """What :class:`QueueLeaving` needs of the queue that holds it."""

    local: WorkerQueue

    @property
    def consumers(self) -> list[Consumer]:
        """This node's consumers."""

    @property
    def pending(self) -> Any:
        """What this node has read and not handed out, in order."""


class QueueLeaving:
    """
    A shared queue's give-backs when consumers leave, or the handle is dropped.

    :param queue: the handle that holds it.
    :param settling: the handle's entries and their ending.
    :param cluster: the handle's :class:`~.dispatch.ClusterDispatch`, or ``None``.
    """

    __slots__ = ("_queue", "_settling", "_cluster")

    def __init__(
        self, queue: LeavingQueue, settling: QueueSettling, cluster: ClusterDispatch | None
    ) -> None:
        self._queue = queue
        self._settling = settling
        self._cluster = cluster

    def consumer_left(self, consumer: Consumer, returned: list[Message]) -> None:
        """
        A consumer left the local queue: what it held (``returned``) went to the
        other local consumers, or goes back to the stream if it was the last.
        """
        queue = self._queue
        settling = self._settling
        if queue.consumers:
            # Redelivered here: their counts are kept in Redis too.
            settling.record(returned)
        cluster = self._cluster
        if cluster is not None and cluster.grouped:
            # What it held is decided again, ahead of its groups' newer messages.
            leaving = not queue.consumers
            given = [*queue.pending, *(self.delayed() if leaving else ())]
            queue.pending.clear()
            settling.give_back_grouped(
                cluster, given, cluster.release([consumer]), leaving=leaving, held=leaving
            )
            return
        if cluster is not None:
            cluster.unregister(consumer)
            if cluster.active and queue.consumers:
                # What it held may be for other nodes' consumers now: decided again.
                settling.give_back(list(queue.pending))
                queue.pending.clear()
        if not queue.consumers:
            settling.give_back([*queue.pending, *self.delayed()])
            queue.pending.clear()
            if cluster is not None:
                settling.give_back_held(cluster)
                cluster.leave()

    def give_back_all(self) -> None:
        """
        The handle is dropped: what every local consumer holds, what waits to be
        handed out or redelivered here, and (deciding) what no consumer accepted,
        goes back to the stream; the consumers leave the cluster's registry.
        """
        queue = self._queue
        held: list[Message] = []
        for consumer in queue.consumers:
            held.extend(consumer.take_all())
        held.extend(queue.pending)
        held.extend(self.delayed())
        cluster = self._cluster
        settling = self._settling
        if cluster is not None and cluster.grouped:
            leavers = cluster.release(queue.consumers)
            settling.give_back_grouped(cluster, held, leavers, leaving=True, held=True)
            return
        settling.give_back(held)
        if cluster is not None:
            for consumer in queue.consumers:
                cluster.unregister(consumer)
            settling.give_back_held(cluster)
            cluster.leave()

    def delayed(self) -> list[Message]:
        """:returns: the NACKed messages waiting here for their redelivery, taken."""
        delayed = self._queue.local.delayed
        return [] if delayed is None else delayed.take_all()
