"""
A node's liveness in Redis, and what happens when another node's ends.

Each node keeps a key alive (``SET ... PX --node-timeout``, every third of it)
and looks, every half ``--node-timeout``, for queue entries held by nodes whose
key has expired, and takes them over for its own consumers
(:meth:`~stompbroker.broker.engine.redis.queues.StreamQueue.claim_from_dead`),
and has each queue compare the length of its own pending list with what it
holds (:meth:`~stompbroker.broker.engine.redis.queues.StreamQueue.check_pending`);
the same look trims the streams it knows for age and reads the registry of
durable subscriptions again.  ``GET /api/nodes`` lists the live keys.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred

from stompbroker.broker.engine.base import Node
from stompbroker.broker.engine.redis.connection import CONNECTION_ERRORS, RedisUnreachable, run
from stompbroker.broker.engine.redis.queues import StreamQueue
from stompbroker.logs import logger

__all__ = ["Liveness"]

log = logger("stompbroker.broker.engine.redis")


class Liveness:
    """
    This node's liveness key, the list of live nodes, and the look for dead ones.

    :param engine: the :class:`~stompbroker.broker.engine.redis.engine.RedisEngine`.
    """

    def __init__(self, engine: Any) -> None:
        self._engine = engine

    def _key(self) -> str:
        engine = self._engine
        key: str = engine.names.alive(engine.ids.node)
        return key

    async def announce(self) -> None:
        """Set this node's liveness key, waiting for Redis (at start)."""
        engine = self._engine
        await engine.client.set(self._key(), b"1", px=int(engine.node_timeout * 1000))

    def beat(self) -> None:
        """Keep this node's liveness key alive."""
        engine = self._engine
        engine.writer.command("SET", self._key(), b"1", "PX", int(engine.node_timeout * 1000))

    # A remote engine answers later: IEngine.nodes allows a Deferred.
    def nodes(self) -> Deferred[list[Node]]:
        """
        :returns: a Deferred firing with every node whose liveness key is in the
            server now (this one first), for ``GET /api/nodes``; a node killed
            drops out within ``--node-timeout``.
        """
        return run(self._engine.loop, self._live_nodes())

    async def _live_nodes(self) -> list[Node]:
        engine = self._engine
        prefix = engine.names.alive("")
        names = [
            (key.decode() if isinstance(key, bytes) else key)[len(prefix) :]
            async for key in engine.client.scan_iter(match=engine.names.nodes(), count=100)
        ]
        here = engine.ids.node
        ordered = sorted(names, key=lambda name: (name != here, name))
        return [Node(name, name == here, "redis") for name in ordered]

    def scan(self) -> None:
        """
        Look for what dead nodes held in the queues this node consumes from, and
        trim the streams it knows for age, and read the registry of durable
        subscriptions again.
        """
        engine = self._engine
        engine.redis_streams.trim()
        engine.durables.load().addErrback(self._failed, "the durable subscriptions")
        for queue in [*engine.queues.values(), *engine.durables.queues.values()]:
            if isinstance(queue, StreamQueue) and queue.consumers:
                queue.check_pending()
                claimed = run(engine.loop, queue.claim_from_dead())
                claimed.addErrback(self._failed, queue.destination)

    def _failed(self, failure: Any, destination: str) -> None:
        if failure.check(RedisUnreachable, *CONNECTION_ERRORS):
            return
        log.failure("claiming {queue} from dead nodes failed", failure, queue=destination)
