"""
What waits in a queue shared by every node, seen from any node: the messages
of its stream that no live node has handed to a consumer.

A queue's stream holds every message not yet settled: those no node has read,
those a node has read ahead for its consumers and not handed out yet, and those
delivered and not acknowledged (which belong to their consumers, as on one
node, and are not *waiting*).  Redis knows which entries a node has read (the
group's pending list, ``XPENDING``) but not which of them it has handed out:
only that node does.  So the node that answers a browse:

1. asks Redis which nodes hold entries of the stream (``XPENDING`` summary);
   entries held by a node whose liveness key has expired are waiting (they go
   back to consumers when claimed);
2. asks each live node that holds some, on the control channel
   ``PREFIX:ctl`` (pub/sub), for the message-ids it has read ahead of that
   queue and not handed out; each answers on ``PREFIX:ctl:NODE`` (the asker's).
   A node that does not answer within :data:`ANSWER_TIMEOUT` is named in the
   result (``complete`` false): what it holds is neither shown nor counted as
   waiting;
3. reads the pending list (``XPENDING ... - +``) and the stream (``XRANGE``, in
   pages of :data:`PAGE`), and keeps, in stream order, the entries nobody
   holds, those dead nodes hold, and those read ahead.

No node is asked when no live node other than the answering one holds an
entry: the common case of a queue nobody consumes from costs ``XPENDING`` and
the ``XRANGE`` pages.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from attrs import frozen
from redis.exceptions import ResponseError

from stompbroker.broker.engine.redis.codec import decode
from stompbroker.broker.engine.redis.queues import StreamQueue
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
    What waits in a queue, cluster-wide, with where it is in the stream.

    :ivar waiting: the waiting messages, in stream order, and who answered.
    :ivar entries: their stream entry ids, in the same order.
    """

    waiting: Waiting
    entries: tuple[bytes, ...]


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
        prefix = engine.names.prefix
        self._prefix = prefix
        self.requests = f"{prefix}:ctl"
        self.answers = f"{prefix}:ctl:{engine.ids.node}"
        #: request id -> (nodes still to answer, answers so far, the future to set).
        self._asked: dict[str, tuple[set[str], dict[str, set[str]], asyncio.Future[None]]] = {}

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
        ahead: list[str] = []
        if queue is not None:
            held = queue.give_back_for(HOLD) if kind == GIVE_BACK else queue.pending
            ahead = [message.message_id for message in held]
        answer = json.dumps({"id": request_id, "node": engine.ids.node, "ahead": ahead})
        # Through the writer, after the give-back's writes: once the asker has
        # the answer, Redis has what was given back.
        engine.writer.command("PUBLISH", f"{self._prefix}:ctl:{asker}", answer)

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

    async def snapshot(self, destination: str) -> Snapshot:
        """
        :returns: what waits in ``destination``'s queue, cluster-wide.
        """
        engine = self._engine
        client = engine.client
        names = engine.names
        me = engine.ids.node
        stream = names.queue(destination)
        summary = await pending_summary(client, stream, names.group)
        holding = {_text(holder["name"]) for holder in summary.get("consumers") or ()}
        live = {me} if me in holding else set()
        for name in holding - {me}:
            if await client.exists(names.alive(name)):
                live.add(name)
        others = live - {me}
        answers = await self.ask(HELD, destination, others)
        queue = engine.queues.get(destination)
        answers[me] = (
            {message.message_id for message in queue.pending}
            if isinstance(queue, StreamQueue)
            else set()
        )
        holders = await self._holders(stream)
        dead = set()
        for name in set(holders.values()) - set(answers):
            if not await client.exists(names.alive(name)):
                dead.add(name)
        entries = []
        start = "-"
        while True:
            page = await client.xrange(stream, min=start, max="+", count=PAGE)
            for entry_id, fields in page:
                if fields and b"m" in fields:
                    entries.append((entry_id, decode(fields[b"m"])[1]))
            if len(page) < PAGE:
                break
            start = "(" + _text(page[-1][0])
        kept = pick_waiting(entries, holders, answers, dead)
        missing = tuple(sorted(others - set(answers)))
        waiting = Waiting(tuple(message for _, message in kept), me, missing)
        return Snapshot(waiting, tuple(entry_id for entry_id, _ in kept))

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
