"""
What other nodes send, as this node's one pub/sub connection brings it: topic
messages (fanned out to this node's subscribers), stream entries, replies to
this node's temporary queues, notices of durable subscriptions, and resume
requests and replies (:mod:`.resumes`).  One connection, so that each channel's
messages come in the order Redis took them, whatever channel they are on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from stompbroker.broker.engine.redis.codec import decode
from stompbroker.broker.engine.redis.connection import BACKOFF_BASE, BACKOFF_CAP, CONNECTION_ERRORS
from stompbroker.broker.engine.redis.topic_batches import (
    TopicBatch,
    UnreadableBatch,
    batch_head,
    unpack,
)
from stompbroker.logs import logger

log = logger("stompbroker.broker.engine.redis")


def alone(deliver: Callable[[Any], object], payload: Any) -> None:
    """
    The engine's ``deliver_together`` until the transports give theirs: hand
    ``payload`` to ``deliver``, each connection's writes going out as they come.
    """
    deliver(payload)


async def pushed(response: Any) -> Any:
    """
    What the pub/sub connection does with each message Redis pushes (RESP3):
    hand it on.  redis-py's own handler formats every message for a debug log
    line first (``str`` of the whole payload, tens of kilobytes for a batch)
    even when that log is off.
    """
    return response


async def listen(engine: Any, pubsub: Any, unreadable: Unreadable | None = None) -> None:
    """
    Fan out what other nodes publish to this node's subscribers, until cancelled.

    :param engine: the :class:`~stompbroker.broker.engine.redis.engine.RedisEngine`.
    :param pubsub: its subscribed pub/sub connection.
    :param unreadable: what counts the topic batches it cannot read.
    """
    delay = BACKOFF_BASE
    # What this node published itself, fanned out here already.
    node_prefix = batch_head(engine.ids.node)
    streams_pattern = engine.names.streams.encode()
    fan_out = engine.fanout.publish
    # Whether anyone here subscribes to a destination (a cached tree lookup).
    subscribed = engine.fanout.tree.match
    control = engine.names.control.encode()
    resumes = engine.resumes
    resume_channel = b"" if resumes is None else resumes.channel.encode()
    counted = engine.traffic.destinations
    features = engine.channels
    together = engine.deliver_together

    if unreadable is None:
        unreadable = Unreadable()

    def fan_out_batch(batch: TopicBatch) -> None:
        messages = batch.messages
        for message in messages:
            fan_out(message)
        # Counted in where it was sent, so that the nodes' counts add up (a
        # batch's messages have one destination).
        if messages:
            traffic = counted.get(messages[0].destination)
            if traffic is not None:
                traffic.messages_in -= len(messages)
                traffic.bytes_in -= batch.body_bytes

    while True:
        try:
            response = await pubsub.parse_response(block=True)
        except asyncio.CancelledError:
            raise
        except CONNECTION_ERRORS as error:
            log.warn("lost Redis pub/sub: {error}; reconnecting", error=str(error))
            engine.redis_streams.lost()
            await asyncio.sleep(delay)
            delay = min(delay * 2, BACKOFF_CAP)
            continue
        delay = BACKOFF_BASE
        kind = response[0]
        if kind == b"pmessage":
            if response[1] == streams_pattern:
                try:
                    engine.redis_streams.arrived(response[2], response[3])
                except Exception:
                    log.failure("adding a stream entry from Redis failed")
                continue
            payload = response[3]
            if payload.startswith(node_prefix):
                continue
            try:
                batch = unpack(payload, subscribed)
            except UnreadableBatch as error:
                unreadable.met(error)
                continue
            if batch is None:
                # Nobody here subscribes to its destination: not decoded.
                continue
            try:
                together(fan_out_batch, batch)
            except Exception:
                log.failure("fanning out a message from Redis failed")
            # Let the reactor write what the batch gave the subscribers before
            # the next one, which may be read already.
            await asyncio.sleep(0)
        elif kind == b"message" and response[1] == control:
            engine.durables.notice(response[2])
        elif kind == b"message" and resumes is not None and response[1] == resume_channel:
            resumes.received(response[2])
        elif kind == b"message" and response[1] in features:
            try:
                features[response[1]](response[2])
            except Exception:
                log.failure("a notice from Redis failed")
        elif kind == b"message":
            try:
                _, message = decode(response[2])
                engine.table.publish_reply(message)
            except Exception:
                log.failure("delivering a reply from Redis failed")


class Unreadable:
    """
    Counts the topic batches this node cannot read (in the statistics'
    ``topic_gaps``), and logs the first from each node: a cluster of nodes of
    different versions sends one per batch, and the log must say so without
    repeating it thousands of times a second.

    :ivar count: the batches met so far.
    """

    def __init__(self) -> None:
        self.count = 0
        self._told: set[str | None] = set()

    def met(self, error: UnreadableBatch) -> None:
        """Count ``error``'s batch, and log it if its node sent none before."""
        self.count += 1
        if error.origin in self._told:
            return
        self._told.add(error.origin)
        log.error(
            "dropped {reason}, from node {origin}: this node's subscribers miss its"
            " topic messages; run one stompbroker version across the cluster"
            " (further such batches are counted in topic_gaps.unreadable_batches,"
            " not logged)",
            reason=error.reason,
            origin=error.origin or "unknown",
        )
