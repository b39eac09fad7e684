"""
Known traffic, as the stats records a broker would export for it.

The sparkjobs tests need input whose totals they know.  :func:`make_traffic`
builds, interval by interval, the records of a few destinations and the
broker with counts that follow simple formulas, and :func:`export` writes
them through the real :class:`~stompbroker.stats.export.StatsExporter`, its
clock stepped to each interval's end, so the files are exactly what the
broker's export would leave.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from attrs import define, frozen

from stompbroker.stats.export import StatsExporter
from stompbroker.stats.schema import BrokerRecord, DestinationRecord, StatsRecord

START = datetime(2024, 5, 1, 11, 58, tzinfo=UTC).timestamp()
"""Two minutes before an hour boundary, so the default traffic spans two files."""

DESTINATIONS = ("/queue/orders", "/topic/prices", "/queue/audit")


@define
class ManualClock:
    """A clock for :class:`StatsExporter` that moves only when the test says."""

    now: float

    def __call__(self) -> float:
        return self.now


@frozen
class Interval:
    """The records of one export interval, and when they were written."""

    end: float
    records: tuple[StatsRecord, ...]


def destination_record(ts: float, index: int, step: int, interval_s: float) -> DestinationRecord:
    """The record of destination ``DESTINATIONS[index]`` for interval ``step``."""
    messages_in = (index + 1) * (step % 5 + 1)
    nacked = 1 if step % 3 == 0 else 0
    delivered = messages_in + nacked
    return DestinationRecord(
        ts=ts,
        destination=DESTINATIONS[index],
        interval_s=interval_s,
        messages_in=messages_in,
        messages_delivered=delivered,
        messages_acked=delivered - nacked,
        messages_nacked=nacked,
        messages_redelivered=nacked,
        messages_expired=1 if step % 4 == 0 else 0,
        messages_dead_lettered=1 if step % 7 == 0 else 0,
        messages_dropped=0,
        bytes_in=100 * messages_in,
        bytes_out=100 * delivered,
        depth=(step * (index + 2)) % 11,
        in_flight=index,
        consumers=index + 1,
        producers=1,
    )


def make_traffic(
    intervals: int = 30, interval_s: float = 10.0, start: float = START
) -> list[Interval]:
    """
    :returns: ``intervals`` consecutive intervals from ``start``, each with one
        record per destination of :data:`DESTINATIONS` and one broker record.
    """
    result = []
    for step in range(intervals):
        end = start + (step + 1) * interval_s
        destinations = [
            destination_record(end, index, step, interval_s) for index in range(len(DESTINATIONS))
        ]
        broker = BrokerRecord(
            ts=end,
            interval_s=interval_s,
            uptime_s=(step + 1) * interval_s,
            connections=5 + step % 3,
            connections_opened=step % 4,
            connections_closed=step % 3,
            rss_bytes=50_000_000 + step,
            messages_per_second=sum(r.messages_in for r in destinations) / interval_s,
        )
        result.append(Interval(end, (*destinations, broker)))
    return result


def export(directory: Path, intervals: Sequence[Interval]) -> list[Path]:
    """
    Write the intervals through the real exporter, then close it.

    :returns: the published files, in order.
    """
    clock = ManualClock(intervals[0].end if intervals else START)
    exporter = StatsExporter(directory, clock)
    published = []
    for interval in intervals:
        clock.now = interval.end
        if (path := exporter.roll()) is not None:
            published.append(path)
        exporter.write(interval.records)
    if (path := exporter.close()) is not None:
        published.append(path)
    return published


def records(intervals: Sequence[Interval]) -> list[StatsRecord]:
    """:returns: every record of the intervals, in order."""
    return [record for interval in intervals for record in interval.records]
