"""
This node's handles on the queues shared by every node: making one when a
``/queue/`` is first used here, dropping it when its last consumer leaves (the
queue lives on in Redis), asking every node what waits in one, and the
management's actions across the nodes.

The :class:`~stompbroker.broker.engine.redis.engine.RedisEngine` holds one
:class:`QueueHandles` and answers these IEngine methods through it, so that the
engine reads as its parts and what binds them, and the questions about a
shared queue (as opposed to a temporary queue, which the local queue table
answers alone) sit together.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred

from stompbroker.broker.engine.redis.connection import run
from stompbroker.broker.engine.redis.control import Snapshot
from stompbroker.broker.engine.redis.queue_actions import ClusterQueueActions
from stompbroker.broker.engine.redis.stream_queue import StreamQueue
from stompbroker.broker.features.browsing import Waiting

__all__ = ["QueueHandles"]


class QueueHandles:
    """
    The making, releasing and questioning of this node's shared queues' handles.

    :param engine: the :class:`~stompbroker.broker.engine.redis.engine.RedisEngine`
        that holds it; its parts are read when asked (some are made after this).
    """

    __slots__ = ("_engine", "_actions")

    def __init__(self, engine: Any) -> None:
        self._engine = engine
        #: The management's purge, move, copy and retry across nodes (:meth:`shared_queues`).
        self._actions: ClusterQueueActions | None = None

    def stream_queue(self, destination: str) -> StreamQueue:
        """:returns: a new handle on a queue's stream, whose name the cluster's set then holds."""
        queue_names = self._engine.queue_names
        if destination not in queue_names.known:
            queue_names.met(destination)
        return StreamQueue(destination, self._engine)

    def waiting(self, queue: Any) -> Waiting | Deferred[Waiting]:
        """
        :returns: for a ``/queue/``, a Deferred firing with what waits in it
            cluster-wide (:mod:`.control`); for a temporary queue or a durable
            subscription's backlog, what this node holds of it.
        """
        engine = self._engine
        if not isinstance(queue, StreamQueue) or queue.durable is not None:
            return Waiting(tuple(queue.pending), engine.ids.node)
        snapshot: Deferred[Snapshot] = run(engine.loop, engine.control.snapshot(queue.destination))
        return snapshot.addCallback(_waiting)

    def shared_queues(self) -> ClusterQueueActions:
        """:returns: the management's operations on queues across nodes (:mod:`.queue_actions`)."""
        if self._actions is None:
            self._actions = ClusterQueueActions(self._engine)
        return self._actions

    def release_queue(self, queue: Any) -> None:
        """
        A consumer has left: drop this node's handle when it has no consumers left
        (the queue lives on in Redis).
        """
        if isinstance(queue, StreamQueue):
            if not queue.consumers:
                if queue.durable is None:
                    self._engine.queues.pop(queue.destination, None)
                queue.close()
            return
        self._engine.table.release(queue)


def _waiting(snapshot: Snapshot) -> Waiting:
    return snapshot.waiting
