"""
The broker's statistics: one model that every surface reads.

What is counted, and where: the broker and its queues count per destination as
messages move (:mod:`stompbroker.broker.flow.traffic`), and each session counts its
own frames and bytes (:class:`~stompbroker.protocol.session.StompSession`).
This module counts nothing; :class:`StatsModel` reads those counters, and the
queues and connections themselves, when someone asks:

- :meth:`StatsModel.snapshot` gives a :class:`Snapshot`: every counter since
  the broker started and every gauge (depth, in flight, consumers, connections,
  RSS) at one moment;
- a :class:`Sampler` turns consecutive snapshots into the records of the
  interval between them (:class:`~stompbroker.stats.schema.DestinationRecord`
  and :class:`~stompbroker.stats.schema.BrokerRecord`): flow counters are
  differences, ``interval_s`` is the clock time between the two, gauges are the
  later values, and ``producers`` the connections that sent during it;
- :meth:`StatsModel.connections` describes each client connection.

The surfaces are views of these: :mod:`stompbroker.stats.documents`
(``/stats``, ``/topic/stompbroker.stats``, ``/queue/monitor``),
:mod:`stompbroker.stats.metrics` (``/metrics``), and the JSON Lines export
(:mod:`stompbroker.stats.sampling_services`).  docs/monitoring.md defines every figure.

Streams: a ``/stream/`` destination's ``messages_in`` and ``bytes_in`` are its
appends, its ``messages_delivered`` and ``bytes_out`` what its readers were
handed (the engine and the readers count them, as queues count theirs); its
consumers and in-flight are its readers', and its :class:`StreamRange` the
entries it keeps now, read off its log.  A stream is never forgotten while its
log is there.

Gauges and names: a destination's flow counters are those of the messages sent
to it.  Its depth and in-flight come from the queues of that name; a topic
subscription with client acknowledgements or a durable name has a queue of its
own, whose depth and in-flight count under the subscription's pattern.  A
queue's consumers are the subscriptions taking from it; a topic's, the
subscriptions a message sent to it reaches now (wildcards included), counting
what takes from each subscription's queue.

Forgetting: a destination whose counters have not moved for
:data:`FORGET_AFTER` seconds, which has no queue, and whose latest counts every
sampler has seen, is forgotten, so that short-lived destinations (replies to
temporary queues, say) do not accumulate.  If it comes back its counters start
again from zero, which readers take as a counter reset.
"""

from __future__ import annotations

import os
import resource
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
from attrs import frozen

from stompbroker.broker.engine.node_figures import (
    DestinationFigures,
    NodeFigures,
    StreamRange,
    TopicGaps,
)
from stompbroker.broker.flow.publisher_pauses import resident_bytes
from stompbroker.broker.flow.traffic import DestinationTraffic
from stompbroker.broker.queueing.wildcard import in_flight as held_unacked
from stompbroker.broker.routing.destinations import TOPIC_PREFIX
from stompbroker.broker.routing.syntax import is_wildcard
from stompbroker.interfaces import ConnectionDescription
from stompbroker.stats.cluster_sums import ClusterSums
from stompbroker.stats.schema import (
    FLOW_COUNTERS,
    BrokerRecord,
    DestinationRecord,
    StatsRecord,
    format_timestamp,
    to_timestamp,
)

#: Seconds a destination without queues may stay idle before it is forgotten.
FORGET_AFTER = 600.0

_NO_TRAFFIC = (0,) * len(FLOW_COUNTERS)
_MESSAGES_IN = FLOW_COUNTERS.index("messages_in")

#: The topic the live statistics go to (``LiveStats``): the dashboard's own
#: feed, which is not the traffic it shows, so no statistic counts it.
STATS_TOPIC = "/topic/stompbroker.stats"


def rss_bytes() -> int:
    """
    :returns: the broker process's resident set size now; where ``/proc`` is
        missing (not Linux), the peak, which is all ``getrusage`` knows.
    """
    if os.path.exists("/proc/self/statm"):
        return resident_bytes()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


@frozen
class DestinationState:
    """
    One destination at one moment.

    :ivar totals: its flow counters since the broker started (or since it was
        last forgotten), in the order of :data:`~stompbroker.stats.schema.FLOW_COUNTERS`.
    :ivar depth: messages waiting to be delivered.
    :ivar in_flight: messages delivered and not yet acknowledged.
    :ivar consumers: subscriptions consuming (see the module notes).
    :ivar stream: for a stream kept in this process, what it keeps; else ``None``.
    """

    totals: tuple[int, ...] = _NO_TRAFFIC
    depth: int = 0
    in_flight: int = 0
    consumers: int = 0
    stream: StreamRange | None = None

    def counters(self) -> dict[str, int]:
        """:returns: the flow counters by name."""
        return dict(zip(FLOW_COUNTERS, self.totals, strict=True))


@frozen
class Snapshot:
    """
    The whole broker at one moment: counters since it started, and gauges.

    :ivar seconds: when, on the broker's clock (epoch seconds on a reactor).
    :ivar uptime_s: seconds since the model was made, with the broker.
    :ivar destinations: destination -> its :class:`DestinationState`.
    :ivar connections: client connections open.
    :ivar connections_opened: connections admitted since the broker started.
    :ivar connections_closed: admitted connections closed since.
    :ivar rss_bytes: the process's resident set size.
    :ivar nodes: every node's own figures, this one's first (one, for an
        engine of one process); the other fields are the whole cluster's
        (:mod:`stompbroker.stats.cluster_sums`).
    """

    seconds: float
    uptime_s: float
    destinations: Mapping[str, DestinationState]
    connections: int
    connections_opened: int
    connections_closed: int
    rss_bytes: int
    nodes: tuple[NodeFigures, ...] = ()

    def total(self, counter: str) -> int:
        """:returns: a flow counter summed over every destination."""
        index = FLOW_COUNTERS.index(counter)
        return sum(state.totals[index] for state in self.destinations.values())


@frozen
class Interval:
    """
    What happened between two snapshots, as export records.

    :ivar start: the earlier snapshot.
    :ivar end: the later one; the records' ``ts``.
    :ivar destinations: one record per destination that had traffic, producers
        or a gauge above zero.
    :ivar broker: the broker's record.
    """

    start: Snapshot
    end: Snapshot
    destinations: tuple[DestinationRecord, ...]
    broker: BrokerRecord

    def records(self) -> list[StatsRecord]:
        """:returns: every record of the interval, the broker's last."""
        return [*self.destinations, self.broker]

    def by_destination(self) -> dict[str, DestinationRecord]:
        """:returns: the destination records by destination."""
        return {record.destination: record for record in self.destinations}


@frozen(kw_only=True)
class ConnectionStats(ConnectionDescription):
    """
    One client connection, as ``/stats`` shows it: what the connection says of
    itself (:meth:`~stompbroker.interfaces.IConnection.describe`; the fields are
    :class:`~stompbroker.interfaces.ConnectionDescription`'s), as JSON.
    """

    @classmethod
    def of(cls, connection: Any) -> ConnectionStats:
        """
        :param connection: an :class:`~stompbroker.interfaces.IConnection` of
            the broker: a session, or a connection an embedding made, which
            describes itself by its session id and address (and so shows zeros).
        :returns: its statistics now.
        """
        return cls(**attrs.asdict(connection.describe(), recurse=False))

    def to_dict(self) -> dict[str, Any]:
        """
        :returns: the JSON object, ``connected_since`` as ISO-8601 text; without
            ``info``, the login's presence data, which is the user's, not a figure.
        """
        values = attrs.asdict(self, filter=lambda field, _: field.name != "info")
        values["connected_since"] = format_timestamp(to_timestamp(self.connected_since))
        return values


class StatsModel:
    """
    Reads the broker's statistics: snapshots, per-interval records, connections.

    :param broker: the :class:`~stompbroker.broker.service.Broker`.
    :param clock: ``seconds()`` for timestamps and intervals; the broker's clock
        by default.
    :param rss: returns the process's resident set size in bytes.
    :param forget_after: see :data:`FORGET_AFTER`.
    :param authorization: the figures of each of the application's authorization
        endpoints (one per ``--auth http:URL``, each an
        :class:`~stompbroker.security.http_endpoint.EndpointFigures`), in
        ``--auth``'s order; empty without one.
    :ivar started: when the model was made, in clock seconds: the start of ``uptime_s``.
    """

    def __init__(
        self,
        broker: Any,
        clock: Any = None,
        rss: Callable[[], int] = rss_bytes,
        forget_after: float = FORGET_AFTER,
        authorization: Sequence[Any] = (),
    ) -> None:
        self.broker = broker
        self.authorization = tuple(authorization)
        self.clock = clock if clock is not None else broker.clock
        self.started: float = self.clock.seconds()
        self._rss = rss
        self._forget_after = forget_after
        self._samplers: list[Sampler] = []
        #: destination -> (its totals when last seen to change, when that was).
        self._changed: dict[str, tuple[tuple[int, ...], float]] = {}
        self._engine = broker.engine
        self._sums = ClusterSums()
        self._engine.share(self._shared)

    def topic_gaps(self) -> TopicGaps | None:
        """:returns: this node's gaps in other nodes' topic messages; ``None`` on one process."""
        gaps: TopicGaps | None = self._engine.topic_gaps()
        return gaps

    def sampler(self, own: bool = False) -> Sampler:
        """
        :param own: sample this process's figures (:meth:`own_snapshot`) rather
            than the cluster's (:meth:`snapshot`).
        :returns: a new :class:`Sampler`, whose intervals start at its first sample.
        """
        sampler = Sampler(self, own)
        self._samplers.append(sampler)
        self.broker.traffic.sampling = True
        return sampler

    def snapshot(self) -> Snapshot:
        """
        :returns: the :class:`Snapshot` of the whole broker: this process's
            own, or the cluster's if the engine is shared with other nodes.
        """
        own = self.own_snapshot()
        here = self._figures(own)
        view = self._engine.cluster()
        if view is None:
            return attrs.evolve(own, nodes=(here,))
        cluster, nodes = self._sums.merge(here, view)
        return attrs.evolve(
            own,
            destinations={
                name: DestinationState(
                    f.totals, f.depth, f.in_flight, f.consumers, view.streams.get(name)
                )
                for name, f in cluster.destinations.items()
            },
            connections=cluster.connections,
            connections_opened=cluster.connections_opened,
            connections_closed=cluster.connections_closed,
            rss_bytes=cluster.rss_bytes,
            nodes=nodes,
        )

    @property
    def node(self) -> str:
        """:returns: this node's id (the engine's)."""
        return str(self._engine.ids.node)

    def _figures(self, own: Snapshot) -> NodeFigures:
        books = self._engine.bookkeeping()
        return NodeFigures(
            books.ids.node,
            own.seconds,
            own.uptime_s,
            own.connections,
            own.connections_opened,
            own.connections_closed,
            own.rss_bytes,
            {
                name: DestinationFigures(
                    state.totals, state.depth, state.in_flight, state.consumers
                )
                for name, state in own.destinations.items()
            },
            books.counters.foreign_acks,
        )

    def _shared(self) -> bytes:
        """:returns: this process's figures, for the other nodes of a cluster."""
        return self._figures(self.own_snapshot()).encode()

    def own_snapshot(self) -> Snapshot:
        """
        Read every counter and gauge of this process now, and forget
        destinations long idle.

        :returns: the :class:`Snapshot`.
        """
        now = self.clock.seconds()
        traffic = self.broker.traffic
        self._engine.report_deliveries()
        gauges: dict[str, list[int]] = {}
        for queue in traffic.queues:
            name = queue.destination
            gauge = gauges.get(name)
            if gauge is None:
                gauge = gauges[name] = [0, 0, 0]
            gauge[0] += queue.depth()
            gauge[1] += sum(held_unacked(consumer) for consumer in queue.consumers)
            if not name.startswith(TOPIC_PREFIX) or is_wildcard(name):
                gauge[2] += len(queue.consumers)
        streams = self._engine.stream_logs()
        for name, log in streams.items():
            readers = [reader.consumer for reader in log.attached if reader.consumer is not None]
            gauges[name] = [
                0,
                sum(held_unacked(consumer) for consumer in readers),
                len(readers),
            ]
        self._forget_idle(now, gauges)
        view = self._engine.cluster()
        # A stream kept in a server has its range there, the same from every node.
        kept_elsewhere = view.streams if view is not None else {}
        destinations: dict[str, DestinationState] = {}
        for name in sorted(set(traffic.destinations) | set(gauges)):
            if name == STATS_TOPIC:
                continue
            counted = traffic.destinations.get(name)
            depth, in_flight, consumers = gauges.get(name, (0, 0, 0))
            if name.startswith(TOPIC_PREFIX) and not is_wildcard(name):
                consumers = self._topic_consumers(name)
            log = streams.get(name)
            destinations[name] = DestinationState(
                counted.totals() if counted is not None else _NO_TRAFFIC,
                depth,
                in_flight,
                consumers,
                (StreamRange.of(log) if log is not None else None) or kept_elsewhere.get(name),
            )
        return Snapshot(
            seconds=now,
            uptime_s=max(now - self.started, 0.0),
            destinations=destinations,
            connections=len(self.broker.connections),
            connections_opened=traffic.connections_opened,
            connections_closed=traffic.connections_closed,
            rss_bytes=self._rss(),
        )

    def connections(self) -> list[ConnectionStats]:
        """:returns: every client connection's statistics, oldest first."""
        self._engine.report_deliveries()
        described = [ConnectionStats.of(connection) for connection in self.broker.connections]
        described.sort(key=lambda stats: (stats.connected_since, stats.address))
        return described

    def _topic_consumers(self, destination: str) -> int:
        found = self._engine.topic_subscriptions(destination)
        return len(found.direct) + sum(len(queue.consumers) for queue in found.queues)

    def _forget_idle(self, now: float, gauges: Mapping[str, Any]) -> None:
        """Forget destinations idle for ``forget_after``, without queues, fully sampled."""
        traffic = self.broker.traffic
        changed = self._changed
        for name, counted in list(traffic.destinations.items()):
            totals = counted.totals()
            seen = changed.get(name)
            if seen is None or seen[0] != totals:
                changed[name] = (totals, now)
                continue
            if now - seen[1] < self._forget_after or name in gauges:
                continue
            if any(sampler.seen(name) not in (None, totals) for sampler in self._samplers):
                continue
            if any(sampler.counts_producers_of(counted) for sampler in self._samplers):
                continue
            del traffic.destinations[name]
            del changed[name]
            self._sums.forgotten(name, totals)
            for sampler in self._samplers:
                sampler.forget(name)

    def prune_producers(self) -> None:
        """Drop producer stamps older than every sampler's current interval."""
        oldest = min(sampler.since for sampler in self._samplers)
        for counted in self.broker.traffic.destinations.values():
            producers = counted.producers
            if producers:
                stale = [connection for connection, stamp in producers.items() if stamp < oldest]
                for connection in stale:
                    del producers[connection]


class Sampler:
    """
    Turns the model's snapshots into records, one interval at a time.

    Each sampler keeps its own previous snapshot, so the export, the live topic
    and anything else can sample at intervals of their own.  Make one with
    :meth:`StatsModel.sampler`.
    """

    def __init__(self, model: StatsModel, own: bool = False) -> None:
        self._model = model
        self._snapshot = model.own_snapshot if own else model.snapshot
        self._previous: Snapshot | None = None
        #: The first producer generation of the interval now running.
        self.since = model.broker.traffic.generation

    def sample(self) -> Interval | None:
        """
        Take a snapshot, and describe the interval since the previous one.

        :returns: the :class:`Interval`, or ``None`` at the first call, which
            only starts the first interval.
        """
        model = self._model
        snapshot = self._snapshot()
        previous, self._previous = self._previous, snapshot
        interval = None
        if previous is not None:
            interval = self._interval(previous, snapshot)
        self.since = model.broker.traffic.new_generation()
        model.prune_producers()
        return interval

    def seen(self, destination: str) -> tuple[int, ...] | None:
        """:returns: a destination's totals at this sampler's latest snapshot, if it was there."""
        if self._previous is None:
            return None
        state = self._previous.destinations.get(destination)
        return None if state is None else state.totals

    def counts_producers_of(self, counted: DestinationTraffic) -> bool:
        """:returns: whether connections sent to that destination in the interval now running."""
        return counted.producers_since(self.since) > 0

    def forget(self, destination: str) -> None:
        """Forget a destination the model has forgotten, so that it may come back from zero."""
        if self._previous is not None and destination in self._previous.destinations:
            kept = {
                name: state
                for name, state in self._previous.destinations.items()
                if name != destination
            }
            self._previous = attrs.evolve(self._previous, destinations=kept)

    def _interval(self, start: Snapshot, end: Snapshot) -> Interval:
        seconds = max(end.seconds - start.seconds, 0.0)
        traffic = self._model.broker.traffic
        records = []
        messages_in = 0
        for name, state in end.destinations.items():
            before = start.destinations.get(name)
            earlier = before.totals if before is not None else _NO_TRAFFIC
            # A counter below its earlier value was forgotten and started again.
            deltas = tuple(
                now - then if now >= then else now
                for now, then in zip(state.totals, earlier, strict=True)
            )
            counted = traffic.destinations.get(name)
            producers = counted.producers_since(self.since) if counted is not None else 0
            messages_in += deltas[_MESSAGES_IN]
            if not (
                any(deltas)
                or producers
                or state.depth
                or state.in_flight
                or state.consumers
                or (state.stream is not None and state.stream.messages)
            ):
                continue
            kept = state.stream
            records.append(
                DestinationRecord(
                    ts=end.seconds,
                    destination=name,
                    interval_s=seconds,
                    depth=state.depth,
                    in_flight=state.in_flight,
                    consumers=state.consumers,
                    producers=producers,
                    retained_messages=kept.messages if kept is not None else 0,
                    retained_bytes=kept.bytes if kept is not None else 0,
                    **dict(zip(FLOW_COUNTERS, deltas, strict=True)),
                )
            )
        broker = BrokerRecord(
            ts=end.seconds,
            interval_s=seconds,
            uptime_s=end.uptime_s,
            connections=end.connections,
            connections_opened=_delta(end.connections_opened, start.connections_opened),
            connections_closed=_delta(end.connections_closed, start.connections_closed),
            rss_bytes=end.rss_bytes,
            messages_per_second=messages_in / seconds if seconds else 0.0,
        )
        return Interval(start, end, tuple(records), broker)


def _delta(now: int, then: int) -> int:
    return now - then if now >= then else now
