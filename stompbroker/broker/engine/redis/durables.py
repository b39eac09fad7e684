"""
Durable topic subscriptions shared by every node: a stream each, and a registry
every node mirrors.

- **The registry** is the hash ``PREFIX:durables``, a durable subscription's key
  (:func:`~stompbroker.broker.store.journal.durable_key`) -> its topic pattern.
  Every node keeps a copy (:class:`Durables`): read at start, kept up to date by
  the notices nodes publish on ``PREFIX:c`` when they add or remove one, and
  read again every half ``--node-timeout`` in case a notice was missed (the
  pub/sub connection was away).
- **The backlog** of each durable subscription is the stream
  ``PREFIX:{d:KEY}`` with the one consumer group of every stream, so the client
  may come back on any node: that node's
  :class:`~stompbroker.broker.engine.redis.stream_queue.StreamQueue` (made with the
  subscription's name) reads it as a queue's.
- **Writing**: the node a topic message is SENT to ``XADD``\\ s it to the stream
  of every durable subscription its copy of the registry matches, once, in the
  pipeline that publishes it to the other nodes (a persistent one before its
  RECEIPT); the nodes that receive it from pub/sub do not, so each durable
  subscription gets each message once whichever node its client is on, or
  whether it is on any.

A durable subscription is live cluster-wide once the other nodes have its
notice (one pub/sub hop after the SUBSCRIBE), or at the latest at their next
reading of the registry.
"""

from __future__ import annotations

import json
from typing import Any

from twisted.internet.defer import Deferred

from stompbroker.broker.engine.durable_rules import reusable_durable, unknown_durable
from stompbroker.broker.engine.redis.stream_queue import StreamQueue
from stompbroker.broker.routing.topic_tree import SubscriptionTree
from stompbroker.broker.store.journal import parse_durable_key
from stompbroker.logs import logger

__all__ = ["Durables"]

log = logger("stompbroker.broker.engine.redis")


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class Durables:
    """
    This node's copy of the registry of durable subscriptions, and the tree that
    matches a topic to their streams.

    :param engine: the :class:`~stompbroker.broker.engine.redis.engine.RedisEngine`;
        its ``durable`` dict holds a :class:`StreamQueue` for every durable
        subscription of the cluster.
    """

    def __init__(self, engine: Any) -> None:
        self._engine = engine
        self._names = engine.names
        self.queues: dict[tuple[str, str], StreamQueue] = engine.durable
        #: Topic pattern -> the streams of the durable subscriptions on it.
        self.tree: SubscriptionTree[StreamQueue] = SubscriptionTree()
        #: Grows with every change this node makes, so that a reading of the
        #: registry sent before a change does not undo it.
        self._changes = 0

    def streams(self, destination: str) -> tuple[StreamQueue, ...]:
        """:returns: the durable subscriptions a message sent to ``destination`` goes to."""
        return self.tree.match(destination)

    # -- this node's copy --------------------------------------------------------------

    def _learn(self, durable: tuple[str, str], pattern: str) -> StreamQueue:
        queue = self.queues.get(durable)
        if queue is not None:
            if queue.destination == pattern:
                return queue
            self._forget(durable)
        queue = self.queues[durable] = StreamQueue(pattern, self._engine, durable)
        self.tree.add(pattern, queue)
        return queue

    def _forget(self, durable: tuple[str, str]) -> StreamQueue | None:
        queue = self.queues.pop(durable, None)
        if queue is not None:
            self.tree.remove(queue.destination, queue)
            queue.close()
        return queue

    def notice(self, payload: bytes) -> None:
        """Apply another node's notice of a durable subscription added or removed."""
        try:
            change, key, pattern = json.loads(payload)
            durable = parse_durable_key(key)
        except ValueError:
            log.warn("ignored a malformed durable subscription notice")
            return
        if durable is None:
            return
        if change == "+":
            self._learn(durable, pattern)
        else:
            queue = self.queues.get(durable)
            if queue is not None and not queue.consumers:
                self._forget(durable)

    def load(self) -> Deferred[None]:
        """
        Read the registry (after this node's earlier writes, through the writer)
        and make this node's copy the same, unless this node changed it meanwhile.
        """
        changes = self._changes
        read: Deferred[Any] = self._engine.writer.command_waited("HGETALL", self._names.durables)
        read.addCallback(self._loaded, changes)
        return read

    def _loaded(self, reply: Any, changes: int) -> None:
        if isinstance(reply, list):
            reply = dict(zip(reply[::2], reply[1::2], strict=True))
        found: dict[tuple[str, str], str] = {}
        for key, pattern in (reply or {}).items():
            durable = parse_durable_key(_text(key))
            if durable is not None:
                found[durable] = _text(pattern)
        for durable, pattern in found.items():
            self._learn(durable, pattern)
        if changes != self._changes:
            return
        for durable in [d for d, q in self.queues.items() if d not in found and not q.consumers]:
            self._forget(durable)

    # -- what clients do ---------------------------------------------------------------

    def subscribe(self, durable: tuple[str, str], pattern: str) -> StreamQueue:
        """
        Find or make a durable subscription; one subscribed again on another
        pattern starts afresh (as JMS does), unless it is consumed on this node.

        :raises DuplicateSubscription: if it is consumed here on another pattern.
        """
        queue: StreamQueue | None = reusable_durable(self.queues, durable, pattern, self.remove)
        if queue is not None:
            return queue
        self._changes += 1
        queue = self._learn(durable, pattern)
        writer = self._engine.writer
        writer.command("HSET", self._names.durables, queue.key, pattern)
        writer.command("PUBLISH", self._names.control, json.dumps(["+", queue.key, pattern]))
        log.info(
            "created durable subscription {name} on {pattern}", name=durable[1], pattern=pattern
        )
        return queue

    def remove(self, durable: tuple[str, str]) -> Deferred[Any]:
        """
        Delete a durable subscription and its backlog, on every node.

        :returns: a Deferred that fires once Redis has the removal (it never fails:
            a failure is logged).
        :raises UnknownSubscription: if there is none.
        """
        queue = self._forget(durable)
        if queue is None:
            raise unknown_durable(durable)
        self._changes += 1
        writer = self._engine.writer
        writer.command("HDEL", self._names.durables, queue.key)
        writer.command("DEL", queue.stream)
        removed: Deferred[Any] = writer.command_waited(
            "PUBLISH", self._names.control, json.dumps(["-", queue.key, queue.destination])
        )
        removed.addErrback(self._not_removed, durable)
        log.info(
            "removed durable subscription {name} on {pattern}",
            name=durable[1],
            pattern=queue.destination,
        )
        return removed

    def _not_removed(self, failure: Any, durable: tuple[str, str]) -> None:
        log.warn(
            "the removal of durable subscription {name} waits for Redis: {error}",
            name=durable[1],
            error=failure.getErrorMessage(),
        )

    def close(self) -> None:
        """Drop this node's handles (the subscriptions live on in Redis)."""
        for queue in self.queues.values():
            queue.close()
