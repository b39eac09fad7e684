"""
Duplicate detection shared by every node of a cluster: each destination's
window of duplicate-detection ids (:mod:`stompbroker.broker.features.duplicate_ids`)
is a sorted set in Redis, and a SEND that carries an id is checked, recorded
and published by one script (:data:`DEDUP_CHECK_ADD`, ``lua/dedup_check_add.lua``),
on whichever node it arrives.

So two nodes that race on one id route it once: Redis runs the scripts one
after the other, and the second finds the id.  The script goes (``EVALSHA``;
the whole script again when Redis answers ``NOSCRIPT``) through the
writer like every other write a message causes, so it keeps its place among
the publisher's other SENDs, and the SEND's RECEIPT waits for its reply (with
``--engine-wait-replicas``, for the replicas too when the message is
persistent): a RECEIPT means the id and the message are in Redis together.

The window is the bound on memory: at most ``duplicate-window-ids`` ids, none
older than ``duplicate-window`` (scored by the Redis server's clock, one clock
for every node), and the key expires with the window when no id comes.

A queue message is added to its stream (or lane) by the script, a topic
message published on its channel and added to the durable subscriptions'
streams it matches.  What the script cannot write (a queue whose policy limits
its length or bytes has scripts of its own, a ``/stream/``, a reply queue, a
scheduled message) is routed as any SEND once the script found its id new,
and its id leaves the window again if that routing fails; a node that dies
between the two leaves the id recorded without its message.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from redis.exceptions import NoScriptError
from twisted.internet.defer import Deferred

from stompbroker.broker.engine.duplicate_detection import Route, window_bounds
from stompbroker.broker.engine.redis.keys import Keys
from stompbroker.broker.engine.redis.scripts import load
from stompbroker.broker.features.policies import Policies
from stompbroker.broker.flow.traffic import Traffic
from stompbroker.protocol.message import Message

__all__ = ["DEDUP_CHECK_ADD", "DEDUP_CHECK_ADD_SHA", "ClusterDuplicates"]

#: Checks an id in its destination's window and, if new, records it and adds
#: and publishes the message (``lua/dedup_check_add.lua``, which says how).
DEDUP_CHECK_ADD = load("dedup_check_add")
#: Its SHA-1, for ``EVALSHA``: a SEND sends 40 bytes rather than the script.
DEDUP_CHECK_ADD_SHA = DEDUP_CHECK_ADD.sha


class Appends(Protocol):
    """What the script writes for a message, and what the node does after it
    (:class:`~stompbroker.broker.engine.redis.cluster_publishing.ClusterPublishing`)."""

    def appends_once(self, message: Message) -> tuple[list[str], str, bytes, bytes] | None:
        """:returns: the streams, the channel and its batch, the entry; ``None``: routed apart."""

    def published_once(self, message: Message) -> None:
        """The script added and published ``message``: what this node does then."""


class ClusterDuplicates:
    """
    :param writer: ``writer()`` is the engine's ordered writer (made when it opens).
    :param publishing: what the script writes for a message, and what this
        node does once it is published.
    :param names: the keys' names.
    :param policies: the per-destination policies, for each window's bounds.
    :param traffic: where a repeat counts as ``messages_duplicate``.
    """

    def __init__(
        self,
        writer: Callable[[], Any],
        publishing: Appends,
        names: Keys,
        policies: Policies,
        traffic: Traffic,
    ) -> None:
        self._writer = writer
        self._publishing = publishing
        self._names = names
        self._policies = policies
        self._traffic = traffic

    def route_once(
        self, duplicate_id: str, message: Message, persistent: bool, route: Route, plain: bool
    ) -> Deferred[None] | None:
        """
        :meth:`~stompbroker.broker.engine.duplicate_detection.RoutesOnce.route_once`,
        decided in Redis.

        :returns: a Deferred that fires once Redis has decided (and, if the id
            was new, has the message), or fails with ``RedisUnreachable``.
        """
        destination = message.destination
        count, seconds = window_bounds(self._policies, destination)
        if count <= 0:
            return route(message)
        appends = self._publishing.appends_once(message) if plain else None
        window = self._names.duplicates(destination)
        if appends is None:
            streams: list[str] = []
            channel, batch, entry = "", b"", b""
        else:
            streams, channel, batch, entry = appends
        rest = (
            1 + len(streams),
            window,
            *streams,
            duplicate_id,
            int(seconds * 1000),
            count,
            entry,
            channel,
            batch,
        )
        decided: Deferred[Any] = self._writer().command_waited(
            "EVALSHA", DEDUP_CHECK_ADD, *rest, replicated=persistent
        )
        decided.addErrback(self._unless_unloaded, rest, persistent)
        if appends is None:
            return decided.addCallback(self._route_if_new, message, route, window, duplicate_id)
        return decided.addCallback(self._published_if_new, message)

    def _unless_unloaded(self, failure: Any, rest: tuple[Any, ...], persistent: bool) -> Any:
        """
        Redis did not have the script (it restarted, or a replica took over):
        send it whole, once more (this SEND's place among the publisher's
        writes moves behind those already queued).
        """
        if failure.check(NoScriptError):
            return self._writer().command_waited(
                "EVAL", str(DEDUP_CHECK_ADD), *rest, replicated=persistent
            )
        return failure

    def _published_if_new(self, new: int, message: Message) -> None:
        if new:
            self._publishing.published_once(message)
        else:
            self._traffic.of(message.destination).messages_duplicate += 1

    def _route_if_new(
        self, new: int, message: Message, route: Route, window: str, duplicate_id: str
    ) -> Deferred[None] | None:
        if not new:
            self._traffic.of(message.destination).messages_duplicate += 1
            return None
        try:
            routed = route(message)
        except Exception:
            self._forget(None, window, duplicate_id)
            raise
        if routed is not None:
            routed.addErrback(self._forget, window, duplicate_id)
        return routed

    def _forget(self, failure: Any, window: str, duplicate_id: str) -> Any:
        """The message was not routed after all: take its id out, so that a retry goes through."""
        self._writer().command("ZREM", window, duplicate_id)
        return failure
