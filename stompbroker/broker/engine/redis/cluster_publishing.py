"""
Where a message sent to a node goes in the cluster: the redis engine's
``publish_*`` and ``keep`` (the IEngine methods the router calls for each SEND).

- a topic message is fanned out to this node's subscribers at once, and
  ``PUBLISH``\\ ed (in the writer's batches) for the other nodes; a
  non-persistent one is also added to the streams of the durable subscriptions
  it matches;
- a queue message is added to its queue's stream, or to the lane of its
  priority (:mod:`.lanes`), under the policy's limits (:mod:`.shared_limits`);
- a reply to another node's temporary queue goes to that node's own channel;
- a persistent message is added before it is acknowledged (:meth:`ClusterPublishing.keep`),
  and its RECEIPT waits for Redis.

It is its own object, held by the
:class:`~stompbroker.broker.engine.redis.engine.RedisEngine`, so that the hot
path of a SEND reads as one piece apart from the engine's life cycle and its
queues; the engine binds these methods as its own (no extra call per message).
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred

from stompbroker.broker.engine.redis.busy import FULL_TEXT, RedisFull
from stompbroker.broker.engine.redis.codec import encode, encode_entry
from stompbroker.broker.engine.redis.connection import RedisUnreachable
from stompbroker.broker.engine.redis.outage import unreachable_text
from stompbroker.broker.engine.redis.queue_credit import QueueCredit
from stompbroker.broker.engine.redis.shared_limits import SharedLimit, SharedLimits
from stompbroker.broker.engine.redis.streams import RedisStreams
from stompbroker.broker.engine.redis.topic_batches import batch_head, encode_message, pack
from stompbroker.broker.queueing.priorities import DEFAULT_PRIORITY
from stompbroker.broker.routing.destinations import QUEUE_PREFIX, REPLY_QUEUE_PREFIX
from stompbroker.protocol.message import Message

__all__ = ["ClusterPublishing"]


#: Most queues whose stream and limit are kept (``ClusterPublishing._streams``):
#: a node that sends to more looks them up again now and then.
MAX_STREAMS = 4096


def _nothing(result: Any) -> None:
    return None


class ClusterPublishing:
    """
    The routing of what is sent to this node, to this node's subscribers and to Redis.

    :param engine: the :class:`~stompbroker.broker.engine.redis.engine.RedisEngine`
        that holds it; its writer is read at each send (it is made when the engine opens).
    """

    def __init__(self, engine: Any) -> None:
        self._engine = engine
        self._clock = engine.clock
        self._outage = engine.outage
        self._fanout = engine.fanout
        self._node = engine.ids.node
        self._names = engine.names
        self._traffic = engine.traffic
        self._durables = engine.durables
        self._queue_names = engine.queue_names
        self._named = engine.queue_names.known
        self._lanes = engine.lanes
        self._limits: SharedLimits = engine.limits
        self._queues = engine.queues
        self._table = engine.table
        self._redis_streams: RedisStreams = engine.redis_streams
        #: The queues whose consumers here are behind (:mod:`.queue_credit`):
        #: empty nearly always, so a SEND's test is a dict's truth.
        self._credit: QueueCredit = engine.credit
        self._behind = engine.credit.behind
        #: Each queue's stream name and limit, by destination: made once (the
        #: name's hash computed once), as its name was added to the cluster's
        #: set; forgotten when the policies (and so the limits) change.
        self._streams: dict[str, tuple[str, SharedLimit | None]] = {}
        engine.policies.watch(self._streams.clear)
        self._batch_head = batch_head(self._node)

    def check_connected(self) -> None:
        """
        :raises RedisUnreachable: once Redis has been away longer than the hold;
            within it, messages are queued in the writer (publishers are paused).
        :raises RedisFull: while Redis refuses writes as full (:meth:`.Writer.full`).
        """
        writer = self._engine.writer
        if not writer.connected and self._outage.expired:
            raise RedisUnreachable("broker unavailable", unreachable_text(self._outage.lasted()))
        if writer.full_until and writer.full():
            raise RedisFull("broker full", FULL_TEXT)

    def publish_topic(self, message: Message) -> None:
        """
        Fan a topic message out here, publish it to the other nodes, and add it to
        the streams of the durable subscriptions it matches (a persistent one is
        there already).
        """
        writer = self._engine.writer
        if not writer.connected:
            self.check_connected()
        self._fanout.publish(message)
        if not (message.expires and message.expires <= self._clock.seconds()):
            writer.publish(self._names.topic(message.destination), encode_message(message))
            # The registry of durable subscriptions is most often empty: no look-up then.
            if not message.persistent and self._durables.queues:
                durables = self._durables.streams(message.destination)
                if durables:
                    # Stream entries keep the JSON form, which every version reads.
                    payload = encode(self._node, message)
                    for durable in durables:
                        writer.command("XADD", durable.stream, "*", "m", payload)

    def publish_queue(self, message: Message) -> Deferred[None] | None:
        """
        Add a message to its queue's stream (a persistent one is there already).

        :returns: ``None``; or, when a policy's ``reject-publish`` limits the
            queue, a Deferred that fails with ``LimitExceeded`` if it is full
            (:mod:`.shared_limits`).
        """
        writer = self._engine.writer
        if not writer.connected or writer.full_until:
            self.check_connected()
        self._traffic.published(message)
        if self._behind:
            self._credit.sent(message.destination)
        if not message.persistent:
            destination = message.destination
            known = self._streams.get(destination)
            if known is None:
                known = self._stream(destination)
            stream, limit = known
            if message.priority != DEFAULT_PRIORITY:
                stream = self._lanes.stream(writer, destination, stream, message.priority)
            if message.group is not None:
                self._lanes.grouped(writer, destination)
            if limit is not None:
                limit.stamp(message, self._clock.seconds())
                return limit.add(
                    self._engine, message, stream, encode_entry(self._node, message), waited=False
                )
            payload = encode_entry(self._node, message)
            writer.command("XADD", stream, "*", "m", payload)
        return None

    def appends_once(self, message: Message) -> tuple[list[str], str, bytes, bytes] | None:
        """
        What publishing ``message`` writes to Redis, for a script that does it
        together with the check of its duplicate-detection id (:mod:`.duplicates`).

        :returns: the streams to add its entry to, the channel to publish it
            on (``""`` for a queue message) and what to publish, and the entry;
            ``None`` for a queue whose policy limits it (a script of its own
            adds it): then it is routed as any SEND once its id is found new.
        :raises RedisUnreachable: as :meth:`check_connected`.
        """
        self.check_connected()
        writer = self._engine.writer
        destination = message.destination
        if destination.startswith(QUEUE_PREFIX):
            if self._limits.of(destination) is not None:
                return None
            if destination not in self._named:
                self._queue_names.met(destination)
            if message.group is not None:
                self._lanes.grouped(writer, destination)
            stream = self._lanes.stream(
                writer, destination, self._names.queue(destination), message.priority
            )
            return [stream], "", b"", encode_entry(self._node, message)
        streams = [durable.stream for durable in self._durables.streams(destination)]
        entry = encode_entry(self._node, message) if streams else b""
        return streams, self._names.topic(destination), self._batch_of(message), entry

    def published_once(self, message: Message) -> None:
        """
        ``message``'s id was new and the script added and published it: count
        it as :meth:`publish_queue` does, or fan it out here (the other nodes
        have it from the channel).
        """
        if message.destination.startswith(QUEUE_PREFIX):
            self._traffic.published(message)
            if self._behind:
                self._credit.sent(message.destination)
        else:
            self._fanout.publish(message)

    def _batch_of(self, message: Message) -> bytes:
        """:returns: a topic batch of ``message`` alone, as the writer would publish it."""
        return pack(self._batch_head, message.destination, [encode_message(message)])

    def _stream(self, destination: str) -> tuple[str, SharedLimit | None]:
        """
        :returns: the stream and the limit of a queue this node has not sent
            to lately, its name added to the cluster's set the first time.
        """
        if destination not in self._named:
            self._queue_names.met(destination)
        streams = self._streams
        if len(streams) >= MAX_STREAMS:
            streams.clear()
        known = streams[destination] = (
            self._names.queue(destination),
            self._limits.of(destination),
        )
        return known

    def publish_reply(self, message: Message) -> None:
        """Put a reply on its temporary queue, here or on the node that owns it."""
        if message.destination in self._queues:
            self._table.publish_reply(message)
            return
        owner = _reply_queue_node(message.destination)
        if owner is None or owner == self._node:
            self._table.publish_reply(message)
            return
        self.check_connected()
        self._traffic.published(message)
        self._engine.writer.command(
            "PUBLISH", self._names.inbox(owner), encode(self._node, message)
        )

    def keep(self, message: Message) -> Deferred[None] | None:
        """
        Add a persistent message to its queue's stream, or to the streams of the
        durable subscriptions its topic matches, before it is acknowledged.

        :returns: a Deferred that fires once Redis has it (and, with
            ``--engine-wait-replicas``, its replicas; see docs/cluster.md for
            what ``appendfsync`` then promises), or fails with
            :class:`~stompbroker.broker.engine.redis.outage.RedisUnreachable`;
            ``None`` for a topic message no durable subscription takes.
        """
        writer = self._engine.writer
        destination = message.destination
        if destination.startswith(QUEUE_PREFIX):
            if destination not in self._named:
                self._queue_names.met(destination)
            if message.group is not None:
                self._lanes.grouped(writer, destination)
            streams = [
                self._lanes.stream(
                    writer, destination, self._names.queue(destination), message.priority
                )
            ]
        else:
            streams = [durable.stream for durable in self._durables.streams(destination)]
            if not streams:
                return None
        self.check_connected()
        limit = self._limits.of(destination) if destination.startswith(QUEUE_PREFIX) else None
        if limit is not None:
            limit.stamp(message, self._clock.seconds())
        if message.expires and message.expires <= self._clock.seconds():
            return None
        payload = encode_entry(self._node, message)
        for stream in streams[:-1]:
            writer.command("XADD", stream, "*", "m", payload)
        if limit is not None:
            return limit.add(self._engine, message, streams[-1], payload, waited=True)
        # One pipeline at a time, in order: the last reply means Redis has them all.
        stored: Deferred[Any] = writer.command_waited(
            "XADD", streams[-1], "*", "m", payload, replicated=True
        )
        return stored.addCallback(_nothing)

    def publish_stream(self, message: Message) -> Deferred[None]:
        """
        Append a message to its stream in Redis; this node's readers, as every
        node's, get it from the stream's channel.

        :returns: a Deferred that fires once Redis has it.
        """
        if not self._engine.writer.connected:
            self.check_connected()
        self._traffic.published(message)
        return self._redis_streams.append(message)


def _reply_queue_node(destination: str) -> str | None:
    """:returns: the node token in a ``/reply-queue/tmp-NODE-N`` name, or ``None``."""
    name = destination[len(REPLY_QUEUE_PREFIX) :]
    parts = name.split("-")
    if len(parts) == 3 and parts[0] == "tmp":
        return parts[1]
    return None
