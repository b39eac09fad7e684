"""
The last hour of the broker's figures, kept by the broker itself: message
rates, connections and memory, one point per live interval
(``--monitor-interval``, 5 seconds by default, so 720 points), in a ring buffer
that forgets the oldest point as each new one comes.

The console draws its charts from it (``GET /api/history``), so they show the
hour before the page was opened rather than starting empty on every load, as
RabbitMQ's management UI does from the samples its nodes keep.  Sans-I/O:
:class:`~stompbroker.stats.sampling_services.LiveStats` feeds it each interval.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

from attrs import asdict, frozen

from stompbroker.stats.model import Interval

__all__ = ["HISTORY_SPAN_S", "History", "HistoryPoint"]

#: How far back the history goes, in seconds.
HISTORY_SPAN_S = 3600.0


@frozen
class HistoryPoint:
    """
    The broker over one live interval.

    :ivar ts: the interval's end, epoch seconds.
    :ivar messages_in_per_second: messages published per second over the interval.
    :ivar messages_delivered_per_second: messages delivered to consumers per second.
    :ivar connections: client connections open at its end.
    :ivar rss_bytes: the process's resident memory at its end.
    """

    ts: float
    messages_in_per_second: float
    messages_delivered_per_second: float
    connections: int
    rss_bytes: int

    @classmethod
    def of(cls, interval: Interval) -> HistoryPoint:
        """:returns: the point of a live interval."""
        broker = interval.broker
        seconds = broker.interval_s or 1.0
        delivered = sum(record.messages_delivered for record in interval.destinations)
        return cls(
            ts=interval.end.seconds,
            messages_in_per_second=broker.messages_per_second,
            messages_delivered_per_second=delivered / seconds,
            connections=broker.connections,
            rss_bytes=broker.rss_bytes,
        )


class History:
    """
    The ring buffer of :class:`HistoryPoint`.

    :param interval: seconds between points, the live interval's.
    :param span: seconds of history kept.
    """

    def __init__(self, interval: float, span: float = HISTORY_SPAN_S) -> None:
        self.interval = interval
        self.span = span
        self._points: deque[HistoryPoint] = deque(maxlen=max(1, math.ceil(span / interval)))

    def record(self, interval: Interval) -> None:
        """Keep the point of ``interval``, forgetting the oldest when the hour is full."""
        self._points.append(HistoryPoint.of(interval))

    def points(self, since: float | None = None) -> list[HistoryPoint]:
        """:returns: the points kept, oldest first; only those after ``since`` when given."""
        if since is None:
            return list(self._points)
        return [point for point in self._points if point.ts > since]

    def to_dict(self, since: float | None = None) -> dict[str, Any]:
        """
        :returns: the JSON of ``GET /api/history``: ``interval_s``, ``span_s`` and
            ``points``, each an object of :class:`HistoryPoint`'s fields.
        """
        return {
            "interval_s": self.interval,
            "span_s": self.span,
            "points": [asdict(point) for point in self.points(since)],
        }
