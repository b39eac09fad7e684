"""
The documents the live surfaces show, made from the stats model's snapshots and
intervals (:mod:`stompbroker.stats.model`): ``/stats`` (:func:`stats_document`),
``/topic/stompbroker.stats`` (:func:`live_document`) and ``/queue/monitor``
(:func:`monitor_text`).  docs/monitoring.md defines every figure.
"""

from __future__ import annotations

from typing import Any

import attrs

from stompbroker.broker.routing.destinations import QUEUE_PREFIX, STREAM_PREFIX
from stompbroker.broker.routing.virtual_hosts import (
    DEFAULT_HOST,
    HOST_MARKER,
    shown_key,
    split_name,
)
from stompbroker.stats.cluster_sums import nodes_document
from stompbroker.stats.model import Interval, Snapshot, StatsModel
from stompbroker.stats.resumable import resume_figures
from stompbroker.stats.schema import (
    FLOW_COUNTERS,
    SCHEMA_VERSION,
    DestinationRecord,
    StatsRecord,
    format_timestamp,
    record_to_dict,
    to_timestamp,
)

__all__ = ["disk_document", "live_document", "memory_document", "monitor_text", "stats_document"]

_MESSAGES_IN = FLOW_COUNTERS.index("messages_in")
_MESSAGES_DELIVERED = FLOW_COUNTERS.index("messages_delivered")
#: Keys of an export record that a live document states once, not per record.
_PER_DOCUMENT = ("schema_version", "kind", "ts", "interval_s")


def _rate(count: int, seconds: float) -> float:
    return count / seconds if seconds else 0.0


def stats_document(
    model: StatsModel, latest: Interval | None, server: str = "stompbroker", lists: bool = True
) -> dict[str, Any]:
    """
    The ``/stats`` JSON: counters since the start, gauges now, rates over the
    latest live interval, and every connection.

    :param model: the stats model.
    :param latest: the latest live interval, for rates and producers; ``None``
        before there is one (they are then 0).
    :param server: the server's name and version.
    :param lists: whether to list every destination and connection; without,
        ``object_totals`` counts them (the console's overview, with 10 000 of each).
    :returns: a JSON-ready dict (see docs/monitoring.md).
    """
    snapshot = model.snapshot()
    recent = latest.by_destination() if latest is not None else {}
    seconds = latest.broker.interval_s if latest is not None else 0.0
    destinations = {}
    hosted = model.broker.has_virtual_hosts()
    for name, state in snapshot.destinations.items() if lists else ():
        record = recent.get(name)
        entry: dict[str, Any] = {}
        if hosted:
            entry["vhost"], entry["name"] = split_name(name)
        entry.update(state.counters())
        entry.update(depth=state.depth, in_flight=state.in_flight, consumers=state.consumers)
        entry["producers"] = record.producers if record is not None else 0
        entry["messages_in_per_second"] = (
            _rate(record.messages_in, seconds) if record is not None else 0.0
        )
        entry["messages_delivered_per_second"] = (
            _rate(record.messages_delivered, seconds) if record is not None else 0.0
        )
        if name.startswith(STREAM_PREFIX) or state.stream is not None:
            entry["stream"] = state.stream.to_dict() if state.stream is not None else None
        destinations[shown_key(name)] = entry
    counters = model.broker.counters
    figures = resume_figures(model.broker)
    gaps = model.topic_gaps()
    rates = model.broker.rates.figures()
    document = {
        "schema_version": SCHEMA_VERSION,
        "ts": format_timestamp(to_timestamp(snapshot.seconds)),
        "server": server,
        "node": snapshot.nodes[0].node if snapshot.nodes else None,
        "broker": {
            "uptime_s": snapshot.uptime_s,
            "connections": snapshot.connections,
            "connections_opened": snapshot.connections_opened,
            "connections_closed": snapshot.connections_closed,
            "rss_bytes": snapshot.rss_bytes,
            "messages_in": snapshot.total("messages_in"),
            "messages_delivered": snapshot.total("messages_delivered"),
            "messages_per_second": latest.broker.messages_per_second if latest else 0.0,
            "deliveries_per_second": _rate(
                sum(record.messages_delivered for record in recent.values()), seconds
            ),
            "interval_s": seconds,
            "slow_consumer_drops": counters.dropped,
            "slow_consumer_disconnects": counters.slow_disconnects,
        },
        "resumable_sessions": figures.to_dict() if figures is not None else None,
        "topic_gaps": attrs.asdict(gaps) if gaps is not None else None,
        "memory": memory_document(model.broker.memory_alarm()),
        "disk": disk_document(model.broker.disk_alarm()),
        "http_auth": [figures.to_dict() for figures in model.authorization] or None,
        "rate_limits": rates.to_dict() if rates is not None else None,
        "nodes": nodes_document(snapshot.nodes),
    }
    if not lists:
        document["object_totals"] = {
            "connections": snapshot.connections,
            "destinations": len(snapshot.destinations),
        }
        return document
    document["destinations"] = destinations
    document["occupancy"] = model.broker.presence.occupancy()
    document["connections"] = [connection.to_dict() for connection in model.connections()]
    return document


def memory_document(alarm: Any) -> dict[str, Any]:
    """
    :param alarm: the broker's :class:`~stompbroker.broker.flow.backpressure.MemoryAlarm`.
    :returns: the memory watermark as JSON: ``enabled``, ``alarm``, ``in_use_bytes``,
        ``high_bytes``, ``low_bytes``, ``since`` (ISO-8601, or ``null`` without
        an alarm) and ``paused_publishers``.
    """
    return {
        "enabled": alarm.enabled,
        "alarm": alarm.alarm,
        "in_use_bytes": alarm.in_use,
        "high_bytes": alarm.high,
        "low_bytes": alarm.low,
        "since": None if alarm.since is None else format_timestamp(to_timestamp(alarm.since)),
        "paused_publishers": alarm.paused_publishers,
    }


def disk_document(alarm: Any) -> dict[str, Any]:
    """
    :param alarm: the broker's :class:`~stompbroker.broker.flow.disk_alarm.DiskAlarm`.
    :returns: the disk alarm as JSON: ``enabled``, ``alarm``, ``free_bytes`` (the
        room left for the store), ``total_bytes`` (its filesystem), ``limit_bytes``,
        ``since`` (ISO-8601, or ``null`` without an alarm) and ``held_publishers``.
    """
    return {
        "enabled": alarm.enabled,
        "alarm": alarm.alarm,
        "free_bytes": alarm.free,
        "total_bytes": alarm.total,
        "limit_bytes": alarm.limit,
        "since": None if alarm.since is None else format_timestamp(to_timestamp(alarm.since)),
        "held_publishers": alarm.held_publishers,
    }


def live_document(interval: Interval) -> dict[str, Any]:
    """
    The JSON published on ``/topic/stompbroker.stats``: one interval's export
    records, with what they share stated once.

    :returns: ``schema_version``, ``ts``, ``interval_s``, ``broker`` (the
        broker record's fields) and ``destinations`` (a list of destination
        records' fields), as docs/monitoring.md describes.
    """
    broker = record_to_dict(interval.broker)
    return {
        "schema_version": SCHEMA_VERSION,
        "ts": broker["ts"],
        "interval_s": broker["interval_s"],
        "node": interval.end.nodes[0].node if interval.end.nodes else None,
        "nodes": nodes_document(interval.end.nodes),
        "broker": _fields(broker),
        "destinations": [
            _shown(_fields(record_to_dict(record))) for record in interval.destinations
        ],
    }


def _fields(values: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in values.items() if name not in _PER_DOCUMENT}


def exported_records(interval: Interval) -> list[StatsRecord]:
    """
    :returns: the interval's records as exported: a virtual host's destination
        under ``HOST:NAME``, as ``/stats`` keys it (never the internal name).
    """
    return [
        attrs.evolve(record, destination=shown_key(record.destination))
        if isinstance(record, DestinationRecord) and HOST_MARKER in record.destination
        else record
        for record in interval.records()
    ]


def _shown(fields: dict[str, Any]) -> dict[str, Any]:
    """:returns: a destination record's fields under its client's name, with its virtual host."""
    vhost, fields["destination"] = split_name(fields["destination"])
    if vhost != DEFAULT_HOST:
        fields["vhost"] = vhost
    return fields


def monitor_text(snapshot: Snapshot) -> str:
    """
    The body of a ``/queue/monitor`` message, in stompserver's format: for each
    queue a ``Queue:`` line, then ``size``, ``dequeued`` and ``enqueued`` as
    header lines, and a blank line.

    ``size`` is the depth, ``enqueued`` the messages sent to the queue and
    ``dequeued`` the messages delivered from it (redeliveries included), both
    since the broker started.

    :returns: the text; empty when there are no queues.
    """
    parts = []
    for name, state in snapshot.destinations.items():
        if not name.startswith(QUEUE_PREFIX):
            continue
        parts.append(
            f"Queue: {shown_key(name)}\nsize: {state.depth}\n"
            f"dequeued: {state.totals[_MESSAGES_DELIVERED]}\n"
            f"enqueued: {state.totals[_MESSAGES_IN]}\n\n"
        )
    return "".join(parts)
