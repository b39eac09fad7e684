"""
What waits in a queue shared by every node, seen from any node: the messages
of its streams (its priority lanes, its returned stream and the nodes' own
streams of it: :mod:`.queue_sources`) that no live node has handed to a consumer.

A queue's streams hold every message not yet settled: those no node has read,
those a node has read ahead for its consumers and not handed out yet, and those
delivered and not acknowledged (which belong to their consumers, as on one
node, and are not *waiting*).  Redis knows which entries a node has read (the
group's pending lists, ``XPENDING``) but not which of them it has handed out:
only that node does.  So the node that answers a browse:

1. finds the queue's streams and the nodes that hold entries of them or have
   consumers of the queue (:func:`~.queue_sources.find_sources`); entries held
   by a node whose liveness key has expired are waiting (they go back to
   consumers when claimed);
2. asks each such live node, on the control channel ``PREFIX:ctl``
   (pub/sub), for the message-ids it has read ahead of that queue and not
   handed out (and, deciding, holds for no consumer); each answers on
   ``PREFIX:ctl:NODE`` (the asker's).  A node that does not answer within
   :data:`ANSWER_TIMEOUT` is named in the result (``complete`` false): what it
   holds is neither shown nor counted as waiting;
3. reads each stream's pending list (``XPENDING ... - +``) and entries
   (``XRANGE``, in pages of :data:`PAGE`), keeps the entries nobody holds,
   those dead nodes hold, and those read ahead, and orders them as one node
   hands them out: highest priority first; within one, in the queue's order,
   wherever they wait (by the id each first had in its lane: field ``i`` of an
   entry moved to a node's own stream or given back to a lane's tail,
   :func:`~.queue_sources.original_order`); what waits in a grouped queue's
   returned stream first of all, in its order (the deciding node reads it
   before any lane).

No node is asked when no live node other than the answering one holds an
entry or has a consumer: the common case of a queue nobody consumes from costs
the look-up of its streams and the ``XRANGE`` pages.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from attrs import frozen
from redis.exceptions import ResponseError

from stompbroker.broker.engine.redis.codec import decode
from stompbroker.broker.engine.redis.queue_sources import (
    RETURNED_FIRST,
    entry_order,
    find_sources,
    original_order,
)
from stompbroker.broker.engine.redis.stream_queue import StreamQueue
from stompbroker.broker.features.browsing import Waiting
from stompbroker.logs import logger
from stompbroker.protocol.message import Message

__all__ = [
    "ANSWER_TIMEOUT",
    "DELETED",
    "ControlChannel",
    "Snapshot",
    "pending_summary",
    "pick_waiting",
    "waiting_here",
]

log = logger("stompbroker.broker.engine.redis")

#: Seconds the answering node waits for the other nodes' answers.
ANSWER_TIMEOUT = 2.0
#: Entries one ``XRANGE`` reads.
PAGE = 500
#: What a node is asked: the ids it read ahead.
HELD = "held"
#: What a node is asked: give back what it read ahead and read nothing for a
#: while (:data:`HOLD` seconds at most), since the asker acts on the stream.
GIVE_BACK = "give-back"
#: What a node is told (no answer): the asker is done with the stream.
RESUME = "resume"
#: What a node is told (no answer): the asker deleted the queue; a node whose
#: handle of it has no consumer drops it (else it reads on, as for :data:`RESUME`).
DELETED = "deleted"
#: The longest a node reads nothing of a queue after giving back for another
#: node's purge or move, should that node never say it is done.
HOLD = 30.0


@frozen
class Snapshot:
    """
    What waits in a queue, cluster-wide, with where it is in Redis.

    :ivar waiting: the waiting messages, highest priority first, and who answered.
    :ivar entries: their streams and entry ids, in the same order.
    """

    waiting: Waiting
    entries: tuple[tuple[str, bytes], ...]


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


async def pending_summary(client: Any, stream: str, group: str) -> Any:
    """:returns: the ``XPENDING`` summary of ``stream``'s group (empty without one)."""
    try:
        return await client.xpending(stream, group)
    except ResponseError as error:
        if "NOGROUP" not in str(error):
            raise
        return {}


def pick_waiting(
    entries: list[tuple[bytes, Message]],
    holders: dict[bytes, str],
    read_ahead: dict[str, set[str]],
    dead: set[str],
) -> list[tuple[bytes, Message]]:
    """
    Keep the entries that wait for a consumer.

    :param entries: ``(entry id, message)`` of the stream, in order.
    :param holders: entry id -> the node whose pending list has it.
    :param read_ahead: node -> the message-ids it read ahead and did not hand
        out, for every live node that answered (and the answering one).
    :param dead: the nodes holding entries whose liveness key has expired.
    :returns: those of ``entries`` nobody holds, a dead node holds, or a node
        read ahead, in order.
    """
    kept = []
    for entry_id, message in entries:
        holder = holders.get(entry_id)
        if holder is None or holder in dead:
            kept.append((entry_id, message))
        elif message.message_id in read_ahead.get(holder, ()):
            kept.append((entry_id, message))
    return kept


class ControlChannel:
    """
    The nodes' requests to each other about the queues they read, and what
    waits in a queue cluster-wide (:meth:`snapshot`).

    :param engine: the :class:`~stompbroker.broker.engine.redis.engine.RedisEngine`;
        its listener hands this node's two channels to :meth:`requested` and
        :meth:`answered`.
    """

    def __init__(self, engine: Any) -> None:
        self._engine = engine
        self._names = engine.names
        self.requests = engine.names.requests
        self.answers = engine.names.answers(engine.ids.node)
        #: request id -> (nodes still to answer, answers so far, the future to set).
        self._asked: dict[str, tuple[set[str], dict[str, set[str]], asyncio.Future[None]]] = {}
        #: The give-backs waiting for a read under way, kept until done.
        self._giving: set[asyncio.Task[None]] = set()

    # -- the other nodes' requests -----------------------------------------------------

    def requested(self, payload: bytes) -> None:
        """Answer another node's request about a queue this node may read."""
        engine = self._engine
        try:
            request = json.loads(payload)
            asker, request_id, kind, destination = (
                request["from"],
                request["id"],
                request["op"],
                request["destination"],
            )
            if kind not in (HELD, GIVE_BACK, RESUME, DELETED):
                raise ValueError(kind)
        except (ValueError, KeyError, TypeError):
            log.warn("ignored a malformed control request")
            return
        if asker == engine.ids.node:
            return
        queue = engine.queues.get(destination)
        if not isinstance(queue, StreamQueue):
            queue = None
        if kind in (RESUME, DELETED):
            if queue is not None:
                self.ended(queue, deleted=kind == DELETED)
            return
        if queue is not None and kind == GIVE_BACK:
            # Once the read under way has taken or held what it claimed.
            task = engine.loop.create_task(self._give_back(queue, asker, request_id))
            self._giving.add(task)
            task.add_done_callback(self._giving.discard)
            return
        held = waiting_here(queue) if queue is not None else []
        self._answer(asker, request_id, held)

    async def _give_back(self, queue: StreamQueue, asker: str, request_id: str) -> None:
        """Give back what this node holds of ``queue`` for ``asker``, then answer."""
        self._answer(asker, request_id, await queue.give_back_quietly(HOLD))

    def _answer(self, asker: str, request_id: str, held: list[Message]) -> None:
        """Tell ``asker`` the message-ids this node read ahead (or gave back)."""
        engine = self._engine
        ahead = [message.message_id for message in held]
        answer = json.dumps({"id": request_id, "node": engine.ids.node, "ahead": ahead})
        # Through the writer, after the give-back's writes: once the asker has
        # the answer, Redis has what was given back.
        engine.writer.command("PUBLISH", self._names.answers(asker), answer)

    def ended(self, queue: StreamQueue, *, deleted: bool) -> None:
        """
        Another node (or this one) is done with ``queue``'s stream: read on; or,
        when it deleted the queue, drop this node's handle if no consumer uses it
        (what it read ahead was given back and deleted with the stream).
        """
        if deleted and not queue.consumers:
            queue.purge()
            self._engine.delete_queue(queue)
            return
        queue.resume()

    def tell(self, kind: str, destination: str) -> None:
        """Tell every node something about a queue that needs no answer (:data:`RESUME`...)."""
        engine = self._engine
        request = {
            "id": uuid.uuid4().hex,
            "from": engine.ids.node,
            "op": kind,
            "destination": destination,
        }
        engine.writer.command("PUBLISH", self.requests, json.dumps(request))

    def answered(self, payload: bytes) -> None:
        """Take another node's answer to this node's request."""
        try:
            answer = json.loads(payload)
            request_id, node, ahead = answer["id"], answer["node"], answer["ahead"]
        except (ValueError, KeyError, TypeError):
            log.warn("ignored a malformed control answer")
            return
        asked = self._asked.get(request_id)
        if asked is None:
            return
        waiting, answers, done = asked
        answers[node] = set(ahead)
        waiting.discard(node)
        if not waiting and not done.done():
            done.set_result(None)

    async def ask(self, kind: str, destination: str, nodes: set[str]) -> dict[str, set[str]]:
        """
        Ask ``nodes`` about ``destination``'s queue, and wait for their answers
        (at most :data:`ANSWER_TIMEOUT`).

        :returns: node -> the message-ids it read ahead, for those that answered.
        """
        if not nodes:
            return {}
        engine = self._engine
        request_id = uuid.uuid4().hex
        done: asyncio.Future[None] = engine.loop.create_future()
        answers: dict[str, set[str]] = {}
        self._asked[request_id] = (set(nodes), answers, done)
        request = {
            "id": request_id,
            "from": engine.ids.node,
            "op": kind,
            "destination": destination,
        }
        try:
            await engine.client.publish(self.requests, json.dumps(request))
            await asyncio.wait_for(asyncio.shield(done), ANSWER_TIMEOUT)
        except TimeoutError:
            pass
        finally:
            del self._asked[request_id]
        return answers

    # -- what waits ---------------------------------------------------------------------

    async def snapshot(self, destination: str, limit: int | None = None) -> Snapshot:
        """
        :param limit: how many messages the caller needs at most: the lower
            lanes are not read once the higher ones hold that many.
        :returns: what waits in ``destination``'s queue, cluster-wide, in the
            order one node would hand it out (highest priority first).
        """
        engine = self._engine
        me = engine.ids.node
        found = await find_sources(engine, destination)
        answers = await self.ask(HELD, destination, set(found.others))
        queue = engine.queues.get(destination)
        answers[me] = (
            {message.message_id for message in waiting_here(queue)}
            if isinstance(queue, StreamQueue)
            else set()
        )
        dead = set(found.dead)
        kept: list[tuple[tuple[int, int, int], str, bytes, Message]] = []
        for source in found.own:
            for entry_id, message, order in await self._waiting_in(source.stream, answers, dead):
                kept.append(((-message.priority, *order), source.stream, entry_id, message))
        for source in found.returned:
            # In stream order, as the deciding node reads it: what it gave back
            # to the tail (field i) comes after what it had not read.
            for entry_id, message, _ in await self._waiting_in(source.stream, answers, dead):
                order = entry_order(entry_id)
                kept.append(((RETURNED_FIRST, *order), source.stream, entry_id, message))
        for source in found.lanes:
            priority = source.priority or 0
            if limit is not None and sum(1 for k in kept if -k[0][0] >= priority) >= limit:
                break
            for entry_id, message, order in await self._waiting_in(source.stream, answers, dead):
                kept.append(((-priority, *order), source.stream, entry_id, message))
        kept.sort(key=lambda item: item[0])
        missing = tuple(sorted(found.others - set(answers)))
        waiting = Waiting(tuple(item[3] for item in kept), me, missing)
        return Snapshot(waiting, tuple((item[1], item[2]) for item in kept))

    async def _waiting_in(
        self, stream: str, answers: dict[str, set[str]], dead: set[str]
    ) -> list[tuple[bytes, Message, tuple[int, int]]]:
        """
        :returns: the entries of one stream that wait (:func:`pick_waiting`), in
            stream order, each with its place in the queue's order.
        """
        client = self._engine.client
        holders = await self._holders(stream)
        entries = []
        orders = {}
        start = "-"
        while True:
            page = await client.xrange(stream, min=start, max="+", count=PAGE)
            for entry_id, fields in page:
                if fields and b"m" in fields:
                    entries.append((entry_id, decode(fields[b"m"])[1]))
                    orders[entry_id] = original_order(entry_id, fields)
            if len(page) < PAGE:
                break
            start = "(" + _text(page[-1][0])
        waiting = pick_waiting(entries, holders, answers, dead)
        return [(entry_id, message, orders[entry_id]) for entry_id, message in waiting]

    async def _holders(self, stream: str) -> dict[bytes, str]:
        """:returns: entry id -> the node whose pending list has it, for the whole group."""
        engine = self._engine
        client = engine.client
        group = engine.names.group
        summary = await pending_summary(client, stream, group)
        if not summary.get("pending"):
            return {}
        rows = await client.xpending_range(
            stream, group, min="-", max="+", count=summary["pending"]
        )
        return {row["message_id"]: _text(row["consumer"]) for row in rows}


def waiting_here(queue: StreamQueue) -> list[Message]:
    """
    :returns: what this node holds of a queue and has not handed out: what it
        read ahead, and what it read, deciding, that no consumer accepts
        (:mod:`.dispatch`).
    """
    return [*queue.pending, *queue.undecided]
