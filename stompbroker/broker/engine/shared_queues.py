"""
What the management's purge, move, copy and dead-letter retry of a ``/queue/``
answer when the queue is shared by several nodes
(:meth:`IEngine.shared_queues <stompbroker.broker.engine.engine_interface.IEngine.shared_queues>`):
how many messages they took, which node answered, and which nodes holding
messages of the queue did not answer in time.

Apart from the engines because the management reads it whatever the engine:
the local engine's operations answer with the same record, complete, naming
this process.
"""

from __future__ import annotations

from attrs import frozen

__all__ = ["Acted", "QueueConsumed"]


@frozen
class Acted:
    """
    What an operation on the messages waiting in a queue did.

    :ivar count: how many messages it purged, moved, copied or sent back.
    :ivar node: the node that answered (its node token).
    :ivar missing: nodes that held messages of the queue read ahead and did not
        answer in time: what they hold was not acted on.
    :ivar left: of a dead-letter retry, how many messages stayed (no usable
        ``original-destination``, or a destination the caller may not write to).
    """

    count: int
    node: str
    missing: tuple[str, ...] = ()
    left: int = 0

    @property
    def complete(self) -> bool:
        """Whether every node holding messages of the queue answered."""
        return not self.missing


class QueueConsumed(Exception):
    """
    A delete of a queue that a node of the cluster has consumers of (the
    management answers it as :class:`~stompbroker.broker.management.records.InUse`).

    :ivar destination: the queue.
    :ivar consumers: how many consumers the nodes have registered.
    """

    def __init__(self, destination: str, consumers: int) -> None:
        super().__init__(destination, consumers)
        self.destination = destination
        self.consumers = consumers
