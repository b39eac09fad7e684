"""
Wildcard consumers on queues across nodes: the names of the cluster's queues,
and the nodes that watch them for a pattern.

Every ``/queue/`` a node sends to, or makes a handle for, is added to the set
``PREFIX:queues`` the first time this node meets it (one ``EVAL`` of
:data:`ADD_NAME` through the node's ordered writer, before the message's
``XADD``; once per queue per node, never per message).  When the name is new to
the set, the same script publishes it on the channel ``PREFIX:queues:new``.

A node that holds a wildcard consumer
(:class:`~stompbroker.broker.queueing.wildcard.WildcardConsumer`) reads the set
once at its SUBSCRIBE (``SMEMBERS``) and takes each notice: for every name its
pattern matches, it opens this node's handle on that queue's stream
(:class:`~stompbroker.broker.engine.redis.stream_queue.StreamQueue`), which the
queue table attaches the wildcard consumer to.  The node is subscribed to the
channel from its start, so a name added after the ``SMEMBERS`` comes as a
notice, and one added before is in its reply.  Notices lost while the pub/sub
connection was away are made up for by reading the set again (:meth:`reload`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from stompbroker.broker.engine.redis.scripts import load
from stompbroker.broker.routing.destinations import QUEUE_PREFIX
from stompbroker.broker.routing.syntax import matches
from stompbroker.logs import logger

__all__ = ["ADD_NAME", "QueueNames", "matching"]

log = logger("stompbroker.broker.engine.redis")

#: lua/add_queue_name.lua (what it takes and answers is said there).
ADD_NAME = load("add_queue_name")


def matching(pattern: str, names: Iterable[Any]) -> list[str]:
    """
    :param pattern: a ``/queue/`` pattern with a wildcard.
    :param names: queue destinations, as ``str`` or as Redis's ``bytes``.
    :returns: those ``pattern`` matches, as ``str``, in the order given, once each.
    """
    found: dict[str, None] = {}
    for name in names:
        text = name.decode() if isinstance(name, bytes) else name
        if text.startswith(QUEUE_PREFIX) and matches(pattern, text):
            found[text] = None
    return list(found)


class QueueNames:
    """
    This node's part of the cluster's set of queue names, and its wildcard consumers.

    :param engine: the :class:`~stompbroker.broker.engine.redis.engine.RedisEngine`
        (its ``writer``, ``client``, ``loop``, ``table`` and ``queue``).

    :ivar key: the set of every queue's name.
    :ivar channel: where a name new to the set is published.
    """

    __slots__ = ("key", "channel", "known", "_engine")

    def __init__(self, engine: Any) -> None:
        self._engine = engine
        self.key = engine.names.queue_names
        self.channel = engine.names.queue_names_channel
        #: The names this node has added to the set, or read from it.
        self.known: set[str] = set()

    def met(self, destination: str) -> None:
        """
        This node sends to ``destination`` or opens it: add its name to the set
        the first time (before whatever the writer sends next).
        """
        if destination not in self.known:
            self.known.add(destination)
            self._engine.writer.command("EVALSHA", ADD_NAME, 1, self.key, destination, self.channel)

    # -- wildcard consumers ------------------------------------------------------------

    def watch(self, pattern: str, watcher: Any) -> None:
        """
        Attach a wildcard consumer to every queue ``pattern`` matches: those this
        node holds at once, every other the set holds once Redis answers, and each
        new one as its notice comes (the queue table attaches it to the handles
        made from now on).
        """
        engine = self._engine
        engine.table.watch(pattern, watcher)
        self._read_for([watcher])

    def unwatch(self, watcher: Any) -> None:
        """Attach ``watcher`` to no more queues; unknown ones are ignored."""
        self._engine.table.unwatch(watcher)

    def _read_for(self, watchers: list[Any]) -> None:
        """Read the set (``SMEMBERS``), then open what each of ``watchers`` matches."""
        reading = self._engine.loop.create_task(self._read_names())
        reading.add_done_callback(lambda task: self._found(task, watchers))

    async def _read_names(self) -> set[Any]:
        names: set[Any] = await self._engine.client.smembers(self.key)
        return names

    def _found(self, task: Any, watchers: list[Any]) -> None:
        """The set's names came: open the queues each watcher still watching matches."""
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            log.warn(
                "reading the queues' names from Redis failed ({error}): a wildcard"
                " consumer takes from the queues this node holds, and from new ones",
                error=str(error),
            )
            return
        names = task.result()
        self.known.update(name.decode() if isinstance(name, bytes) else name for name in names)
        engine = self._engine
        for watcher in watchers:
            pattern = engine.table.watchers.get(watcher)
            if pattern is None:
                continue  # unsubscribed meanwhile
            for destination in matching(pattern, names):
                watcher.attach(engine.queue(destination))

    def notice(self, payload: bytes) -> None:
        """A node added a name to the set: open it here if a wildcard consumer matches it."""
        destination = payload.decode()
        self.known.add(destination)
        engine = self._engine
        watchers = engine.table.watchers
        if watchers and any(matching(pattern, (destination,)) for pattern in watchers.values()):
            # Made here, the handle is attached to every matching watcher by the table.
            engine.queue(destination)

    def reload(self) -> None:
        """Read the set again for every wildcard consumer (notices may have been lost)."""
        watchers = list(self._engine.table.watchers)
        if watchers:
            self._read_for(watchers)
