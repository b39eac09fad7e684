"""
The names of the per-destination traffic counters.

The broker counts under these names (:class:`stompbroker.broker.flow.traffic.DestinationTraffic`
has one attribute each) and the statistics export writes a field of each name
(:class:`stompbroker.stats.schema.DestinationRecord`), so they are defined here,
below both.  This module imports nothing: ``sparkjobs/`` loads it, through the
export schema, on a Spark driver that has no Twisted.
"""

from __future__ import annotations

#: The flow counters, in the export record's field order: counts that only grow
#: in the broker, and deltas that add up over intervals in the export.
FLOW_COUNTERS: tuple[str, ...] = (
    "messages_in",
    "messages_delivered",
    "messages_acked",
    "messages_nacked",
    "messages_redelivered",
    "messages_expired",
    "messages_dead_lettered",
    "messages_dropped",
    "bytes_in",
    "bytes_out",
    "messages_duplicate",
)
