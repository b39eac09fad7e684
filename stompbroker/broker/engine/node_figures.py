"""
What one node tells the others about itself, so that every node can show the
whole cluster: :class:`NodeFigures`, and the :class:`ClusterView` an engine
shared by several nodes gives back.

The statistics (:mod:`stompbroker.stats.model`) make a node's figures from its
own counters and queues, and hand the engine a callable that returns them
encoded (:meth:`~stompbroker.broker.engine.cluster_interface.ISharedEngine.share`); the engine
puts them where the other nodes read them, and reads theirs, with what waits in
the server unread (:meth:`~stompbroker.broker.engine.cluster_interface.ISharedEngine.cluster`).
The statistics and the management API add them up, and both show a stream's
:class:`StreamRange`, the entries it keeps.  An engine of one process
(the local engine) has no view: everything is this process's own.

Pure data and JSON: no Twisted, nothing of an engine's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs
from attrs import frozen

from stompbroker.broker.flow.counter_names import FLOW_COUNTERS

__all__ = ["ClusterView", "DestinationFigures", "NodeFigures", "StreamRange", "TopicGaps"]


@frozen
class StreamRange:
    """
    What a stream keeps now: the range retention has left.

    :ivar first_offset: the offset of the oldest entry kept (the next offset
        when it keeps none).
    :ivar last_offset: the offset of the newest entry, ``None`` when it keeps none.
    :ivar messages: the entries kept.
    :ivar bytes: their bytes, headers and bodies, as retention counts them.
    """

    first_offset: int
    last_offset: int | None
    messages: int
    bytes: int

    @classmethod
    def of(cls, log: Any) -> StreamRange | None:
        """
        :param log: a :class:`~stompbroker.broker.streams.log.StreamLog`.
        :returns: its range, or ``None`` for a log that mirrors a stream kept
            elsewhere (the redis engine's), which knows only what it has seen.
        """
        kept = log.kept
        if kept is None:
            return None
        return cls(log.first_offset, log.last_offset, kept, log.size)

    def to_dict(self) -> dict[str, Any]:
        """:returns: the range as JSON."""
        return attrs.asdict(self)


@frozen
class DestinationFigures:
    """
    One destination on one node.

    :ivar totals: its flow counters on that node, in the order of
        :data:`~stompbroker.stats.schema.FLOW_COUNTERS`.
    :ivar depth: messages the node holds waiting for a consumer (for a queue
        shared through the server: read from it and not yet handed out).
    :ivar in_flight: messages the node delivered and has not had acknowledged.
    :ivar consumers: the node's subscriptions consuming from it.
    """

    totals: tuple[int, ...]
    depth: int = 0
    in_flight: int = 0
    consumers: int = 0


@frozen
class NodeFigures:
    """
    One node's figures at one moment.

    :ivar node: its node token.
    :ivar seconds: when, in epoch seconds.
    :ivar uptime_s: seconds since it started.
    :ivar connections: client connections open on it.
    :ivar connections_opened: connections it admitted since it started.
    :ivar connections_closed: admitted connections closed since.
    :ivar rss_bytes: its resident set size.
    :ivar destinations: destination -> its :class:`DestinationFigures` there.
    :ivar foreign_acks: acknowledgements it dropped because another node had
        taken over their messages while its liveness had lapsed (redis engine:
        :meth:`~stompbroker.broker.engine.redis.liveness.Liveness.foreign_settled`).
    """

    node: str
    seconds: float
    uptime_s: float
    connections: int
    connections_opened: int
    connections_closed: int
    rss_bytes: int
    destinations: Mapping[str, DestinationFigures]
    foreign_acks: int = 0

    def total(self, index: int) -> int:
        """:returns: the flow counter at ``index`` summed over its destinations."""
        return sum(figures.totals[index] for figures in self.destinations.values())

    def encode(self) -> bytes:
        """:returns: the figures as compact JSON."""
        return json.dumps(
            [
                self.node,
                self.seconds,
                self.uptime_s,
                self.connections,
                self.connections_opened,
                self.connections_closed,
                self.rss_bytes,
                {
                    name: [list(f.totals), f.depth, f.in_flight, f.consumers]
                    for name, f in self.destinations.items()
                },
                self.foreign_acks,
            ],
            separators=(",", ":"),
        ).encode()

    @classmethod
    def decode(cls, payload: bytes) -> NodeFigures:
        """
        :returns: the figures :meth:`encode` made (without ``foreign_acks``, or
            with fewer flow counters, as a node of an older version makes them: 0).
        :raises ValueError: for anything else.
        """
        try:
            fields = json.loads(payload)
            if not isinstance(fields, list) or len(fields) not in (8, 9):
                raise ValueError("not a node's figures")
            node, seconds, uptime, connections, opened, closed, rss, destinations = fields[:8]
            foreign_acks = int(fields[8]) if len(fields) == 9 else 0
            return cls(
                str(node),
                float(seconds),
                float(uptime),
                int(connections),
                int(opened),
                int(closed),
                int(rss),
                {
                    str(name): DestinationFigures(
                        _counters(totals), int(depth), int(in_flight), int(consumers)
                    )
                    for name, (totals, depth, in_flight, consumers) in destinations.items()
                },
                foreign_acks,
            )
        except (TypeError, AttributeError) as error:
            raise ValueError(f"not a node's figures: {error}") from None


def _counters(totals: list[Any]) -> tuple[int, ...]:
    """:returns: a node's flow counters, those its version did not count yet as 0."""
    counted = tuple(int(n) for n in totals[: len(FLOW_COUNTERS)])
    return counted + (0,) * (len(FLOW_COUNTERS) - len(counted))


@frozen
class TopicGaps:
    """
    How often this node missed other nodes' topic messages, and whom it told.

    :ivar gaps: times its pub/sub connection to the server came back after
        the server closed it (what other nodes published meanwhile is lost here).
    :ivar subscriptions_told: topic subscriptions on it whose next MESSAGE
        said ``cluster-gap:true``, summed over the gaps.
    :ivar unreadable_batches: batches of other nodes' topic messages this node
        dropped because it cannot read them (a node of another version).
    """

    gaps: int = 0
    subscriptions_told: int = 0
    unreadable_batches: int = 0


@frozen
class ClusterView:
    """
    What an engine shared by several nodes knows of the others, as of its latest
    reading (about once a second).

    :ivar peers: the figures of every other live node.
    :ivar unread: messages in the server that no node has read yet, by the
        ``/queue/`` destination or the durable subscription's key
        (``durable:[...]``); a node's figures count what it has read.
    :ivar patterns: a durable subscription's key -> its topic pattern (the
        statistics count a durable subscription's depth under its pattern).
    :ivar streams: each ``/stream/``'s :class:`StreamRange` as the server keeps
        it: one stream that every node appends to and reads, so it is the
        cluster's once, never a sum over the nodes.
    """

    peers: tuple[NodeFigures, ...] = ()
    unread: Mapping[str, int] = {}
    patterns: Mapping[str, str] = {}
    streams: Mapping[str, StreamRange] = {}

    def depth(self, destination: str) -> int:
        """:returns: what the other nodes have read from ``destination`` and not handed out."""
        return sum(
            figures.depth
            for peer in self.peers
            if (figures := peer.destinations.get(destination)) is not None
        )

    def in_flight(self, destination: str) -> int:
        """:returns: what the other nodes delivered from ``destination``, not yet acknowledged."""
        return sum(
            figures.in_flight
            for peer in self.peers
            if (figures := peer.destinations.get(destination)) is not None
        )

    def consumers(self, destination: str) -> int:
        """:returns: the other nodes' consumers of ``destination``."""
        return sum(
            figures.consumers
            for peer in self.peers
            if (figures := peer.destinations.get(destination)) is not None
        )
