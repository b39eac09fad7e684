"""
The management's purge, move, copy and dead-letter retry of a ``/queue/``
shared by every node: they act on every message that waits, in any of its
streams (its priority lanes, its returned stream, the nodes' own streams of it:
:mod:`.queue_sources`) or read ahead (not yet handed out) by any node
(docs/cluster.md, "Management across nodes").

A message waits when it is in one of the queue's streams and no live node has
handed it to a consumer: an entry no node has read, one a dead node holds (it
goes to a consumer once claimed), or one a live node read ahead.  Only a node
knows which of the entries it holds it has handed out, so the node that answers:

1. asks every live node holding entries of the queue's streams or having
   consumers of it (and itself) to *give back* what it read ahead (``XADD`` at
   the tail of the lane of its priority, ``XACK``/``XDEL`` of the old entry)
   and to read nothing more of the queue until told to :data:`RESUME` (at most
   :data:`~.control.HOLD` seconds): from then on, every entry a live node holds
   was handed to a consumer, and is not waiting;
2. acts on each stream in pages of :data:`PAGE` entries, each page one script
   that, entry by entry, checks that nobody but a dead node holds it
   (``XPENDING stream nodes ID ID 1``) before it acts: :data:`PURGE` deletes
   it (``XDEL``; and ``XACK`` of a dead node's), :data:`MOVE`
   (:mod:`.queue_moves`) adds the new message the node made of it to the
   target's lane of its priority (``XADD``) and deletes it;
3. tells the nodes to read on.

A delete (:meth:`ClusterQueueActions.delete`) is refused while any node has a
consumer of the queue (its consumer registry, :mod:`.consumer_registry`, is not
empty); otherwise it purges as above and, only when every node holding entries
answered, runs :data:`DELETE`: the queue's stream, priority lanes and the
nodes' own streams found are deleted (unless a consumer registered meanwhile),
and the nodes are told :data:`~.control.DELETED` instead of to read on, so
that each drops its handle.

A node that does not answer within :data:`~.control.ANSWER_TIMEOUT` keeps what
it holds (the scripts skip a live node's entries): the answer names it
(``missing``), and counts only what was acted on.  A copy changes nothing, so it
gives nothing back: it copies what a browse would show
(:meth:`~.control.ControlChannel.snapshot`), each copy a SEND to its target.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred, gatherResults, succeed

from stompbroker.broker.engine.redis.connection import RedisUnreachable, run
from stompbroker.broker.engine.redis.control import DELETED, GIVE_BACK, HOLD, RESUME
from stompbroker.broker.engine.redis.keys import byte_counter, lane_streams, registry_key
from stompbroker.broker.engine.redis.queue_moves import (
    MOVE,
    PAGE,
    QueueMoves,
    Route,
    new_message,
)
from stompbroker.broker.engine.redis.queue_sources import QueueSources, find_sources
from stompbroker.broker.engine.redis.scripts import load, run_script
from stompbroker.broker.engine.redis.stream_queue import StreamQueue
from stompbroker.broker.engine.shared_queues import Acted, QueueConsumed
from stompbroker.broker.features.browsing import Waiting
from stompbroker.broker.routing.destinations import TOPIC_PREFIX
from stompbroker.protocol.errors import LimitExceeded

__all__ = ["DELETE", "MOVE", "PAGE", "PURGE", "ClusterQueueActions", "new_message"]

#: lua/purge_page.lua (what it takes and answers is said there).
PURGE = load("purge_page")
#: lua/delete_queue.lua (what it takes and answers is said there).
DELETE = load("delete_queue")


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class ClusterQueueActions:
    """
    Purge, move, copy and retry on a ``/queue/`` across every node.

    :param engine: the :class:`~stompbroker.broker.engine.redis.engine.RedisEngine`.
    """

    def __init__(self, engine: Any) -> None:
        self._engine = engine
        self._moves = QueueMoves(engine)

    def exists(self, destination: str) -> Deferred[bool]:
        """:returns: whether ``destination`` has messages in Redis, consumers, or a handle here."""
        return run(self._engine.loop, self._exists(destination))

    async def _exists(self, destination: str) -> bool:
        engine = self._engine
        if destination in engine.queues:
            return True
        prefix = engine.names.prefix
        keys = lane_streams(prefix, destination)
        keys.append(registry_key(prefix, destination))
        return bool(await engine.client.exists(*keys))

    def browse(self, destination: str, count: int) -> Deferred[Waiting]:
        """:returns: the first ``count`` messages waiting, cluster-wide, highest priority first."""
        return run(self._engine.loop, self._browse(destination, count))

    async def _browse(self, destination: str, count: int) -> Waiting:
        waiting = (await self._engine.control.snapshot(destination, count)).waiting
        return Waiting(waiting.messages[:count], waiting.node, waiting.missing)

    def purge(self, destination: str) -> Deferred[Acted]:
        """Discard every message waiting in ``destination``'s queue, cluster-wide."""

        async def purge(found: QueueSources, missing: tuple[str, ...]) -> tuple[int, int]:
            return await self._purge_all(found), 0

        return run(self._engine.loop, self._held(destination, purge))

    def delete(self, destination: str) -> Deferred[Acted]:
        """
        Delete ``destination``'s queue cluster-wide, with every message it holds.

        :returns: a Deferred of what was discarded; ``complete`` false (and the
            queue still there, less what was purged) when a node holding entries
            did not answer in time.  It fails with :class:`QueueConsumed` while
            any node has a consumer of the queue.
        """
        return run(self._engine.loop, self._deleted(destination))

    async def _deleted(self, destination: str) -> Acted:
        engine = self._engine
        registry = registry_key(engine.names.prefix, destination)
        consumers = int(await engine.client.hlen(registry))
        if consumers:
            raise QueueConsumed(destination, consumers)

        async def purge_and_delete(
            found: QueueSources, missing: tuple[str, ...]
        ) -> tuple[int, int]:
            purged = await self._purge_all(found)
            if missing:
                return purged, 0
            prefix = engine.names.prefix
            keys = [registry]
            streams = lane_streams(prefix, destination)
            streams += [source.stream for source in (*found.returned, *found.own)]
            for stream in streams:
                keys += [stream, byte_counter(stream)]
            held = int(await run_script(engine.client, DELETE, len(keys), *keys))
            if held < 0:
                raise QueueConsumed(destination, int(await engine.client.hlen(registry)))
            return purged + held, 0

        return await self._held(destination, purge_and_delete, deleting=True)

    def transfer(self, destination: str, count: int, route: Route, copy: bool) -> Deferred[Acted]:
        """
        Move (or copy) the first ``count`` waiting messages, highest priority
        first, where ``route`` says (see
        :meth:`IEngine.transfer <stompbroker.broker.engine.engine_interface.IEngine.transfer>`).

        :returns: what was done; ``left`` counts the messages ``route`` left.
        """
        if copy:
            return run(self._engine.loop, self._copy(destination, count, route))

        async def move(found: QueueSources, missing: tuple[str, ...]) -> tuple[int, int]:
            return await self._moves.move(found, count, route)

        return run(self._engine.loop, self._held(destination, move))

    # -- the steps ------------------------------------------------------------------------

    async def _held(self, destination: str, act: Any, *, deleting: bool = False) -> Acted:
        """
        Have every node give back what it read ahead of ``destination`` and hold
        its reading, run ``act(sources, missing nodes)``, then let them read on
        (or, ``deleting`` and none missing, drop their handles).
        """
        engine = self._engine
        asked = await find_sources(engine, destination)
        mine = engine.queues.get(destination)
        if isinstance(mine, StreamQueue):
            await mine.give_back_quietly(HOLD)
        finish = RESUME
        try:
            answers = await engine.control.ask(GIVE_BACK, destination, set(asked.others))
            missing = tuple(sorted(asked.others - set(answers)))
            # This node's give-back first: the scripts run on another connection.
            await engine.writer.command_waited("PING").asFuture(engine.loop)
            # What was given back may be in lanes that were empty before.
            found = await find_sources(engine, destination)
            dead = tuple(sorted(set(asked.dead) | set(found.dead)))
            found = QueueSources(found.sources, found.others, dead)
            count, left = await act(found, missing)
            if deleting and not missing:
                finish = DELETED
        finally:
            if isinstance(mine, StreamQueue):
                engine.control.ended(mine, deleted=finish == DELETED)
            engine.control.tell(finish, destination)
        return Acted(count, engine.ids.node, missing, left)

    async def _purge_all(self, found: QueueSources) -> int:
        """Purge every stream the queue's messages wait in; :returns: how many went."""
        purged = 0
        for source in found.sources:
            purged += await self._purge_stream(source.stream, found.dead)
        return purged

    async def _purge_stream(self, stream: str, dead: tuple[str, ...]) -> int:
        engine = self._engine
        start, purged = "-", 0
        while True:
            reply = await run_script(
                engine.client,
                PURGE,
                2,
                stream,
                byte_counter(stream),
                engine.names.group,
                start,
                PAGE,
                *dead,
            )
            purged += int(reply[0])
            if int(reply[2]) < PAGE:
                return purged
            start = "(" + _text(reply[1])

    async def _copy(self, destination: str, count: int, route: Route) -> Acted:
        """
        Copy what a browse shows, each copy sent to its target as a SEND there
        would be: into its priority's lane, under the target's policy (byte
        count, limits).  A copy the target's ``reject-publish`` refuses is not counted.
        """
        engine = self._engine
        waiting = (await engine.control.snapshot(destination, count)).waiting
        left = 0
        sent: list[Deferred[Any]] = []
        for message in waiting.messages[:count]:
            target = route(message)
            if target is None:
                left += 1
                continue
            new = new_message(message, *target, engine.books.ids.new_message_id())
            if new.destination.startswith(TOPIC_PREFIX):
                self._moves.sent(new)
                sent.append(succeed(None))
                continue
            kept = engine.keep(new) if new.persistent else None
            published = engine.publish_queue(new)
            sent.append(_either(kept, published))
        results = await gatherResults(
            [d.addCallbacks(lambda _: True, _refused) for d in sent]
        ).asFuture(engine.loop)
        return Acted(sum(results), waiting.node, waiting.missing, left)


def _either(kept: Deferred[None] | None, published: Deferred[None] | None) -> Deferred[None]:
    """:returns: what a copy's SEND waits on: the store's write, the limit's check, or nothing."""
    return kept or published or succeed(None)


def _refused(failure: Any) -> bool:
    """A copy the target refused (``reject-publish``, Redis away): not counted."""
    failure.trap(LimitExceeded, RedisUnreachable)
    return False
