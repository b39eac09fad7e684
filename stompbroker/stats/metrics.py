"""
The stats model in Prometheus's terms, for ``/metrics``.

:class:`StatsCollector` is a custom ``prometheus_client`` collector: nothing is
counted twice, the collector reads the model at scrape time
(:meth:`~stompbroker.stats.model.StatsModel.snapshot`), so a scrape costs one pass
over the destinations and the hot path pays nothing for Prometheus.

Metric families (``destination`` label on the per-destination ones; with virtual
hosts also ``vhost``, and ``destination`` is the name its clients know):

- counters ``stompbroker_destination_<counter>_total``, one per flow counter
  of the export schema (``messages_in``, ``messages_delivered``, ... ``bytes_out``);
- gauges ``stompbroker_destination_depth``, ``..._in_flight``,
  ``..._consumers``, and ``..._producers`` (distinct publishing connections
  over the latest live interval), and ``..._subscribers`` (the occupancy:
  subscriptions by the destination their SUBSCRIBE named, on every node, for
  destinations with any);
- for each stream whose range is known (kept here, or in the redis server),
  gauges of its retained range: ``stompbroker_stream_retained_messages``,
  ``stompbroker_stream_retained_bytes``, ``stompbroker_stream_first_offset`` and
  ``stompbroker_stream_last_offset`` (absent while it keeps nothing); its appends
  and reads are the ``messages_in`` and ``messages_delivered`` counters above;
- ``stompbroker_connections`` (gauge, by ``transport``),
  ``stompbroker_connections_opened_total``, ``stompbroker_connections_closed_total``,
  ``stompbroker_uptime_seconds``, ``stompbroker_resident_memory_bytes``,
  ``stompbroker_messages_per_second`` (over the latest live interval),
  ``stompbroker_slow_consumer_drops_total``, ``stompbroker_slow_consumer_disconnects_total``;
- with resumable sessions (docs/resume.md): ``stompbroker_resumable_sessions``
  and ``stompbroker_resume_buffer_bytes`` (gauges, by ``state``: ``connected``
  or ``detached``), ``stompbroker_resumes_total``,
  ``stompbroker_resumes_refused_total``, ``stompbroker_resumes_with_gap_total``,
  ``stompbroker_resumable_sessions_expired_total``,
  ``stompbroker_resumable_sessions_ended_total`` and
  ``stompbroker_resume_buffer_shed_frames_total``;
- with the redis engine (docs/cluster.md): ``stompbroker_topic_gaps_total``,
  ``stompbroker_topic_gap_subscriptions_total`` and
  ``stompbroker_topic_unreadable_batches_total``;
- per node (label ``node``): ``stompbroker_node_connections``,
  ``stompbroker_node_messages_in_total``, ``stompbroker_node_messages_delivered_total``,
  ``stompbroker_node_resident_memory_bytes`` and ``stompbroker_node_foreign_acks_total``;
- the memory watermark (``--memory-high``, docs/monitoring.md): gauges
  ``stompbroker_memory_alarm`` (1 while publishers are paused for memory),
  ``stompbroker_memory_in_use_bytes`` (the latest sample),
  ``stompbroker_memory_high_watermark_bytes``, ``stompbroker_memory_low_watermark_bytes``
  and ``stompbroker_publishers_paused``;
- the disk alarm (``--disk-free-limit``), while it runs: ``stompbroker_disk_alarm``
  (1 while persistent publishers are held), ``stompbroker_disk_free_bytes``,
  ``stompbroker_disk_free_limit_bytes`` and ``stompbroker_disk_held_publishers``;
- given the broker's :class:`~stompbroker.stats.setup.RunningSetup`:
  ``stompbroker_listener_info`` (one per listener, labels ``kind``, ``endpoint``
  and ``url``) and ``stompbroker_configuration_info`` (one label per setting);
- the standard ``process_*`` and ``python_info`` families.

:func:`metrics_registry` gives a registry of its own per broker, never
``prometheus_client``'s global one, so that two brokers in one process (or two
tests) do not share metrics.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import attrs
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector, CollectorRegistry

from stompbroker.broker.flow.rate_gates import RateFigures
from stompbroker.broker.routing.virtual_hosts import split_name
from stompbroker.stats.cluster_sums import nodes_document
from stompbroker.stats.resumable import ResumeFigures, resume_figures
from stompbroker.stats.sampling_services import LiveStats
from stompbroker.stats.schema import FLOW_COUNTERS, DestinationRecord
from stompbroker.stats.setup import RunningSetup

PREFIX = "stompbroker"
#: Each flow counter's help text: the export schema's definition, capitalized.
_HELP = {
    field.name: field.metadata["doc"][:1].upper() + field.metadata["doc"][1:]
    for field in attrs.fields(DestinationRecord)
}


class StatsCollector(Collector):
    """
    Reads the stats model at scrape time.

    :param live: the :class:`~stompbroker.stats.sampling_services.LiveStats` service, whose
        model is read and whose latest interval gives rates and producers.
    :param setup: the listeners and settings in force; ``None`` leaves their families out.
    """

    def __init__(self, live: LiveStats, setup: RunningSetup | None = None) -> None:
        self._live = live
        self._setup = setup

    def collect(self) -> Iterator[Metric]:
        """:returns: every metric family, read now."""
        model = self._live.model
        snapshot = model.snapshot()
        destinations = snapshot.destinations
        # With virtual hosts, a ``vhost`` label beside the client's name.
        hosted = model.broker.has_virtual_hosts()
        labels = ["vhost", "destination"] if hosted else ["destination"]
        label = _host_labels if hosted else _plain_labels
        for index, name in enumerate(FLOW_COUNTERS):
            counter = CounterMetricFamily(
                f"{PREFIX}_destination_{name}", _HELP[name], labels=labels
            )
            for destination, state in destinations.items():
                counter.add_metric(label(destination), state.totals[index])
            yield counter
        gauges = {
            "depth": GaugeMetricFamily(
                f"{PREFIX}_destination_depth", "Messages waiting to be delivered", labels=labels
            ),
            "in_flight": GaugeMetricFamily(
                f"{PREFIX}_destination_in_flight",
                "Messages delivered and not yet acknowledged",
                labels=labels,
            ),
            "consumers": GaugeMetricFamily(
                f"{PREFIX}_destination_consumers",
                "Subscriptions consuming from the destination",
                labels=labels,
            ),
        }
        for destination, state in destinations.items():
            values = label(destination)
            gauges["depth"].add_metric(values, state.depth)
            gauges["in_flight"].add_metric(values, state.in_flight)
            gauges["consumers"].add_metric(values, state.consumers)
        yield from gauges.values()
        yield from _stream_metrics(destinations, labels, label)
        latest = self._live.latest
        producers = GaugeMetricFamily(
            f"{PREFIX}_destination_producers",
            "Distinct connections that published to the destination over the latest live interval",
            labels=labels,
        )
        if latest is not None:
            for record in latest.destinations:
                producers.add_metric(label(record.destination), record.producers)
        yield producers
        subscribers = GaugeMetricFamily(
            f"{PREFIX}_destination_subscribers",
            "Subscriptions to the destination as their SUBSCRIBE named it, on every node"
            " (presence; only destinations with subscribers)",
            labels=["destination"],
        )
        for destination, count in sorted(model.broker.presence.occupancy().items()):
            subscribers.add_metric([destination], count)
        yield subscribers
        yield from self._broker_metrics(snapshot, latest)

    def _broker_metrics(self, snapshot: Any, latest: Any) -> Iterator[Metric]:
        by_transport = Counter(stats.transport for stats in self._live.model.connections())
        connections = GaugeMetricFamily(
            f"{PREFIX}_connections", "Client connections open", labels=["transport"]
        )
        for transport in ("tcp", "tls", "ws", "wss"):
            connections.add_metric([transport], by_transport.get(transport, 0))
        yield connections
        yield CounterMetricFamily(
            f"{PREFIX}_connections_opened",
            "Connections accepted since the broker started",
            value=snapshot.connections_opened,
        )
        yield CounterMetricFamily(
            f"{PREFIX}_connections_closed",
            "Connections closed since the broker started",
            value=snapshot.connections_closed,
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_uptime_seconds", "Seconds since the broker started", value=snapshot.uptime_s
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_resident_memory_bytes",
            "Resident set size of the broker process",
            value=snapshot.rss_bytes,
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_messages_per_second",
            "Messages published per second over the latest live interval",
            value=latest.broker.messages_per_second if latest is not None else 0.0,
        )
        yield from _node_metrics(snapshot)
        counters = self._live.model.broker.counters
        yield CounterMetricFamily(
            f"{PREFIX}_slow_consumer_drops",
            "Topic messages slow subscribers never got (drop-oldest, or dropped with a disconnect)",
            value=counters.dropped,
        )
        yield CounterMetricFamily(
            f"{PREFIX}_slow_consumer_disconnects",
            "Subscribers disconnected for being too slow",
            value=counters.slow_disconnects,
        )
        figures = resume_figures(self._live.model.broker)
        if figures is not None:
            yield from _resume_metrics(figures)
        gaps = self._live.model.topic_gaps()
        if gaps is not None:
            yield CounterMetricFamily(
                f"{PREFIX}_topic_gaps",
                "Times this node's link to other nodes' topic messages came back after a gap",
                value=gaps.gaps,
            )
            yield CounterMetricFamily(
                f"{PREFIX}_topic_gap_subscriptions",
                "Topic subscriptions told cluster-gap:true on their next message",
                value=gaps.subscriptions_told,
            )
            yield CounterMetricFamily(
                f"{PREFIX}_topic_unreadable_batches",
                "Batches of other nodes' topic messages this node could not read (another version)",
                value=gaps.unreadable_batches,
            )
        authorization = self._live.model.authorization
        if authorization:
            yield from _authorization_metrics(authorization)
        rates = self._live.model.broker.rates.figures()
        if rates is not None:
            yield from _rate_limit_metrics(rates)
        yield from _memory_metrics(self._live.model.broker.memory_alarm())
        yield from _disk_metrics(self._live.model.broker.disk_alarm())
        if self._setup is not None:
            yield from _setup_metrics(self._setup)


def _memory_metrics(alarm: Any) -> Iterator[Metric]:
    """The memory watermark: whether its alarm is on, and what it compares."""
    for name, text, value in (
        (
            "memory_alarm",
            "1 while memory in use is over --memory-high and publishers are paused after each SEND",
            int(alarm.alarm),
        ),
        ("memory_in_use_bytes", "Memory in use at the watermark's latest sample", alarm.in_use),
        ("memory_high_watermark_bytes", "--memory-high: publishers pause above it", alarm.high),
        ("memory_low_watermark_bytes", "--memory-low: publishers read again below", alarm.low),
        (
            "publishers_paused",
            "Connections not read from now, for memory or for a slow subscriber (block policy)",
            alarm.paused_publishers,
        ),
    ):
        yield GaugeMetricFamily(f"{PREFIX}_{name}", text, value=value)


def _disk_metrics(alarm: Any) -> Iterator[Metric]:
    """The disk alarm, when it runs: whether it is on, and what it compares."""
    if not alarm.enabled:
        return
    for name, text, value in (
        (
            "disk_alarm",
            "1 while the store's disk has less room than --disk-free-limit and"
            " persistent publishers are held",
            int(alarm.alarm),
        ),
        (
            "disk_free_bytes",
            "Room left for the message store (free disk plus free database pages)",
            alarm.free,
        ),
        ("disk_free_limit_bytes", "--disk-free-limit, in bytes", alarm.limit),
        (
            "disk_held_publishers",
            "Connections held now because the disk alarm is on",
            alarm.held_publishers,
        ),
    ):
        yield GaugeMetricFamily(f"{PREFIX}_{name}", text, value=value)


def _setup_metrics(setup: RunningSetup) -> Iterator[Metric]:
    """The listeners and the settings in force, as Prometheus info metrics."""
    listeners = InfoMetricFamily(
        f"{PREFIX}_listener", "A port the broker listens on", labels=["kind", "endpoint", "url"]
    )
    for entry in setup.listeners:
        listeners.add_metric([entry.kind, entry.endpoint, entry.url or ""], {})
    yield listeners
    yield InfoMetricFamily(
        f"{PREFIX}_configuration",
        "The settings in force, one label per option",
        value={name.replace("-", "_"): value for name, value in setup.settings},
    )


def _stream_metrics(
    destinations: Any, labels: list[str], label: Callable[[str], list[str]]
) -> Iterator[Metric]:
    """The retained range of each stream this process keeps, labelled as the destinations are."""
    families = {
        "messages": GaugeMetricFamily(
            f"{PREFIX}_stream_retained_messages", "Entries the stream keeps", labels=labels
        ),
        "bytes": GaugeMetricFamily(
            f"{PREFIX}_stream_retained_bytes",
            "Bytes of the entries the stream keeps, headers and bodies",
            labels=labels,
        ),
        "first_offset": GaugeMetricFamily(
            f"{PREFIX}_stream_first_offset", "Offset of the oldest entry kept", labels=labels
        ),
        "last_offset": GaugeMetricFamily(
            f"{PREFIX}_stream_last_offset", "Offset of the newest entry kept", labels=labels
        ),
    }
    for destination, state in destinations.items():
        kept = state.stream
        if kept is None:
            continue
        values = label(destination)
        families["messages"].add_metric(values, kept.messages)
        families["bytes"].add_metric(values, kept.bytes)
        if kept.last_offset is not None:
            families["first_offset"].add_metric(values, kept.first_offset)
            families["last_offset"].add_metric(values, kept.last_offset)
    yield from families.values()


def _plain_labels(destination: str) -> list[str]:
    """:returns: the ``destination`` label of a broker without virtual hosts."""
    return [destination]


def _host_labels(destination: str) -> list[str]:
    """:returns: the ``vhost`` and ``destination`` labels: the host and its client's name."""
    return list(split_name(destination))


def _node_metrics(snapshot: Any) -> Iterator[Metric]:
    """
    Each node's own figures, labelled by node (one node for an engine of one
    process); the other metrics are the whole cluster's.
    """
    families: dict[str, GaugeMetricFamily | CounterMetricFamily] = {
        "connections": GaugeMetricFamily(
            f"{PREFIX}_node_connections", "Client connections open on the node", labels=["node"]
        ),
        "messages_in": CounterMetricFamily(
            f"{PREFIX}_node_messages_in",
            "Messages sent to the node by its clients",
            labels=["node"],
        ),
        "messages_delivered": CounterMetricFamily(
            f"{PREFIX}_node_messages_delivered",
            "Messages the node delivered to its clients",
            labels=["node"],
        ),
        "rss_bytes": GaugeMetricFamily(
            f"{PREFIX}_node_resident_memory_bytes",
            "Resident set size of the node's process",
            labels=["node"],
        ),
        "foreign_acks": CounterMetricFamily(
            f"{PREFIX}_node_foreign_acks",
            "Acknowledgements the node dropped: another node had taken over their messages"
            " while the node's liveness had lapsed, and redelivers them (redis engine)",
            labels=["node"],
        ),
    }
    for entry in nodes_document(snapshot.nodes):
        for name, family in families.items():
            family.add_metric([entry["node"]], entry[name])
    yield from families.values()


#: The counters of resumable sessions: metric name (without ``_total``), figure, help.
_RESUME_COUNTERS = (
    ("resumes", "resumed", "Sessions resumed by their client within --resume-window"),
    (
        "resumes_refused",
        "refused",
        "Resume tokens refused (unknown, expired, another login's or protocol version's)",
    ),
    ("resumes_with_gap", "resumed_with_gap", "Resumes that said resume-gap:true"),
    (
        "resumable_sessions_expired",
        "expired",
        "Detached sessions whose --resume-window closed without their client",
    ),
    ("resumable_sessions_ended", "ended", "Detached sessions an operator ended"),
    (
        "resume_buffer_shed_frames",
        "shed_frames",
        "Frames dropped early from resume buffers because memory was over --memory-high",
    ),
)


def _resume_metrics(figures: ResumeFigures) -> Iterator[Metric]:
    """The resumable sessions of this node (docs/resume.md, "Watching them")."""
    for name, text, connected, detached in (
        (
            "resumable_sessions",
            "Resumable sessions, connected or detached (waiting for their client)",
            figures.connected,
            figures.detached,
        ),
        (
            "resume_buffer_bytes",
            "Bytes held in the resume buffers of resumable sessions",
            figures.connected_bytes,
            figures.detached_bytes,
        ),
    ):
        gauge = GaugeMetricFamily(f"{PREFIX}_{name}", text, labels=["state"])
        gauge.add_metric(["connected"], connected)
        gauge.add_metric(["detached"], detached)
        yield gauge
    values = figures.to_dict()
    for name, figure, text in _RESUME_COUNTERS:
        yield CounterMetricFamily(f"{PREFIX}_{name}", text, value=values[figure])


def _authorization_metrics(endpoints: Sequence[Any]) -> Iterator[Metric]:
    """
    The questions to the application's endpoints (each ``--auth http:URL``), by
    endpoint, path and outcome.
    """
    counter = CounterMetricFamily(
        f"{PREFIX}_http_auth_answers",
        "Questions to the application's authorization endpoints, by endpoint (its URL), path"
        " (user, vhost, resource) and outcome (asked, cached, allowed, denied, timeouts, errors)",
        labels=["endpoint", "path", "outcome"],
    )
    for figures in endpoints:
        for path, counts in figures.paths().items():
            for outcome, value in counts.items():
                counter.add_metric([figures.url, path, outcome], value)
    yield counter


def _rate_limit_metrics(figures: RateFigures) -> Iterator[Metric]:
    """What the rate limits did: connections slowed now and in all, closed, refused."""
    yield GaugeMetricFamily(
        f"{PREFIX}_rate_limited_connections",
        "Connections whose reading is paused now for a rate limit",
        value=figures.slowed,
    )
    yield CounterMetricFamily(
        f"{PREFIX}_rate_limit_slowdowns",
        "Times a connection was slowed for a rate limit",
        value=figures.slowed_total,
    )
    yield CounterMetricFamily(
        f"{PREFIX}_rate_limit_disconnects",
        "Connections closed for staying over a rate limit (--rate-limit-over-time)",
        value=figures.disconnected,
    )
    yield CounterMetricFamily(
        f"{PREFIX}_rate_limit_refused_connections",
        "Connections refused for the connection rate of their address (--max-connection-rate)",
        value=figures.refused,
    )


def metrics_registry(live: LiveStats, setup: RunningSetup | None = None) -> CollectorRegistry:
    """
    :param live: the broker's :class:`~stompbroker.stats.sampling_services.LiveStats`.
    :param setup: the listeners and settings in force, if known.
    :returns: a registry of the broker's metrics and the process's.
    """
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StatsCollector(live, setup))
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    return registry
