"""
Reading streams over STOMP: where a stream starts and ends, offset ranges, rows.

A range is read with one SUBSCRIBE at ``x-stream-offset:offset=START``: the
broker replays from there, in offset order, and the reader stops at the
range's last offset, or at the first message past it (offsets need not be
dense: the redis engine's are not).  The end is always an offset the stream
had reached when the range was planned (its newest message plus one, or
less), so a range ends without waiting on the live tail, and reading it again
gives the same messages, as long as retention has not dropped them.

The newest (or oldest) offset is learnt the same way: a SUBSCRIBE at ``last``
(or ``first``) with a window of one, whose single MESSAGE carries the offset.
A stream that holds nothing sends nothing, so an answer that does not come
within ``probeTimeout`` means an empty stream.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from pyspark.sql.datasource import InputPartition
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from sparkjobs.datasource.client import (
    ClientPool,
    ConnectSettings,
    StompBrokerError,
    StompClient,
)
from sparkjobs.datasource.listing import readable_streams
from sparkjobs.datasource.options import ReadOptions
from sparkjobs.datasource.positions import End, Start

OFFSET_HEADER = "x-stream-offset"
TIMESTAMP_HEADER = "x-stream-timestamp"
#: Headers of one delivery, not of the message: left out of the ``headers`` column
#: so that reading a range twice gives equal rows.
DELIVERY_HEADERS = frozenset({"subscription", "ack"})
_SPARK_TYPES: dict[str, DataType] = {
    "string": StringType(),
    "int": IntegerType(),
    "bigint": LongType(),
    "double": DoubleType(),
    "boolean": BooleanType(),
    "timestamp": TimestampType(),
}
_probe_ids = itertools.count(1)
log = logging.getLogger("sparkjobs.datasource")


class StreamReadError(Exception):
    """A range could not be read to its end (the broker went quiet, or dropped it)."""


class NothingToRead(StreamReadError):
    """A batch read names a stream that shows no message: empty, or misspelled."""


class DataLost(StreamReadError):
    """Offsets a read needed were removed by the stream's retention before it read them."""


def check_retention(
    client: StompClient, destination: str, start: int, timeout: float, fail: bool
) -> None:
    """
    Compare where a read starts with the oldest offset the stream still keeps.

    Called on the driver when a batch or micro-batch is planned, only for a
    stream known to hold messages, so the probe answers at once.

    :raises DataLost: when ``start`` lies before the oldest kept offset and ``fail``;
        otherwise that is logged and the read goes on from the oldest kept.
    """
    oldest = probe(client, destination, "first", timeout)
    if oldest is None or oldest <= start:
        return
    said = (
        f"{destination}: offsets {start} to {oldest - 1} were removed by the stream's"
        f" retention before they were read (the oldest kept is {oldest})"
    )
    if fail:
        raise DataLost(f"{said}; set option failOnDataLoss to false to read on from {oldest}")
    log.warning("%s; reading on from there (failOnDataLoss is false)", said)


class OffsetRange(InputPartition):
    """
    One partition: the messages of ``destination`` at offsets ``start`` <= offset < ``stop``.
    """

    def __init__(self, destination: str, start: int, stop: int) -> None:
        super().__init__((destination, start, stop))
        self.destination = destination
        self.start = start
        self.stop = stop


def schema(header_columns: tuple[tuple[str, str], ...] = ()) -> StructType:
    """:returns: the rows' schema: the fixed columns, then one per header column."""
    fields = [
        StructField("offset", LongType(), False),
        StructField("timestamp", TimestampType(), True),
        StructField("destination", StringType(), False),
        StructField("headers", MapType(StringType(), StringType(), False), False),
        StructField("body", BinaryType(), False),
    ]
    fields += [StructField(name, _SPARK_TYPES[kind], True) for name, kind in header_columns]
    return StructType(fields)


def probe(client: StompClient, destination: str, start: str, timeout: float) -> int | None:
    """
    :param start: an ``x-stream-offset`` value.
    :returns: the offset of the message the broker would deliver first from
        ``start``, or ``None`` when none arrives within ``timeout`` seconds.
    """
    subscription = f"probe-{next(_probe_ids)}"
    client.send(
        "SUBSCRIBE",
        [
            ("destination", destination),
            ("id", subscription),
            ("ack", "client-individual"),
            ("prefetch-count", "1"),
            (OFFSET_HEADER, start),
        ],
    )
    try:
        while True:
            frame = client.receive(timeout)
            if frame is None:
                return None
            if frame.command == "MESSAGE" and frame.headers.get("subscription") == subscription:
                return int(frame.headers[OFFSET_HEADER])
    finally:
        client.send("UNSUBSCRIBE", [("id", subscription)])


def tail(client: StompClient, destination: str, timeout: float) -> int | None:
    """:returns: the newest message's offset plus one, ``None`` for an empty stream."""
    last = probe(client, destination, "last", timeout)
    return None if last is None else last + 1


def resolve_start(
    client: StompClient, destination: str, start: Start, timeout: float
) -> int | None:
    """:returns: the first offset to read from ``start``; ``None`` if the stream has none."""
    if start.kind == "offset":
        return int(start.value)
    if start.kind == "next":
        return tail(client, destination, timeout) or 0
    return probe(client, destination, start.header(), timeout)


def resolve_end(
    client: StompClient, destination: str, end: End, newest: int, timeout: float
) -> int:
    """
    :param newest: the stream's newest offset plus one.
    :returns: the offset a batch read stops before: ``newest`` at the latest.
    """
    if end.kind == "offset":
        return min(newest, int(end.value))
    if end.kind == "timestamp":
        found = probe(client, destination, f"timestamp={end.value}", timeout)
        return newest if found is None else min(newest, found)
    return newest


def limited_end(
    client: StompClient, destination: str, start: int, stop: int, count: int, timeout: float
) -> int:
    """
    :returns: where a micro-batch of at most ``count`` messages from ``start``
        ends: ``stop`` when ``[start, stop)`` cannot hold more, else just past
        the ``count``-th message at or after ``start``.

    Offsets are distinct integers, so ``[first, first + count)`` holds at most
    ``count`` messages: two probes find it, and with dense offsets (the local
    engine) it holds exactly ``count``.  Where that range has a gap (the redis
    engine's offsets count milliseconds) the ``count`` messages are read on
    the driver, as the one way to learn where the ``count``-th is.
    """
    if stop - start <= count:
        return stop
    first = probe(client, destination, f"offset={start}", timeout)
    if first is None or first + count >= stop:
        return stop
    last = first + count - 1
    if probe(client, destination, f"offset={last}", timeout) == last:
        return last + 1
    return _walk(client, destination, first, stop, count, timeout)[1]


def count_messages(
    client: StompClient, destination: str, start: int, stop: int, count: int, timeout: float
) -> int:
    """
    :returns: how many messages ``[start, stop)`` holds, counting no further than ``count``.

    As :func:`limited_end`: two probes where the offsets are dense, else the
    messages are read on the driver, ``count`` of them at most.
    """
    if stop <= start:
        return 0
    first = probe(client, destination, f"offset={start}", timeout)
    if first is None or first >= stop:
        return 0
    span = min(count, stop - first)
    last = first + span - 1
    if probe(client, destination, f"offset={last}", timeout) == last:
        return span
    return _walk(client, destination, first, stop, count, timeout)[0]


def _walk(
    client: StompClient, destination: str, first: int, stop: int, count: int, timeout: float
) -> tuple[int, int]:
    """:returns: how many messages from ``first`` were read before ``stop`` or the
    ``count``-th, and the offset just past the last of them (``stop`` if none came)."""
    subscription = f"count-{next(_probe_ids)}"
    client.send(
        "SUBSCRIBE",
        [
            ("destination", destination),
            ("id", subscription),
            ("ack", "auto"),
            ("prefetch-count", str(min(count, 1000))),
            (OFFSET_HEADER, f"offset={first}"),
        ],
    )
    seen = 0
    try:
        while True:
            frame = client.receive(timeout)
            if frame is None:
                return seen, stop
            if frame.command != "MESSAGE" or frame.headers.get("subscription") != subscription:
                continue
            offset = int(frame.headers[OFFSET_HEADER])
            if offset >= stop:
                return seen, stop
            seen += 1
            if offset == stop - 1 or seen == count:
                return seen, offset + 1
    finally:
        client.send("UNSUBSCRIBE", [("id", subscription)])


def split(destination: str, start: int, stop: int, parts: int) -> list[OffsetRange]:
    """:returns: ``[start, stop)`` cut into at most ``parts`` ranges of equal width."""
    if stop <= start:
        return []
    width = -(-(stop - start) // parts)
    return [
        OffsetRange(destination, low, min(low + width, stop)) for low in range(start, stop, width)
    ]


def plan_batch(options: ReadOptions) -> list[OffsetRange]:
    """
    :returns: the ranges of a batch read: each stream from its start to its
        end (at most its newest message), split per ``partitionsPerStream``.
    :raises NothingToRead: for a stream that shows no message: a batch read of
        nothing is a misspelt name far more often than a wish for no rows.
    """
    ranges: list[OffsetRange] = []
    client = StompClient.connect(options.connect)
    try:
        for destination in options.destinations:
            try:
                stop = tail(client, destination, options.probe_timeout)
            except StompBrokerError as error:
                # Most often the access rules' answer to a misspelt name.
                listing = readable_streams(options.connect, options.api_url, options.bearer)
                raise StompBrokerError(
                    error.message, error.receipt_id, f"{error.detail}; {listing.describe()}"
                ) from None
            if stop is None:
                raise NothingToRead(
                    f"{destination} showed no message within probeTimeout"
                    f" ({options.probe_timeout:g} s): it is empty, or no stream of that name"
                    " exists (a stream exists once something is sent to it); check the name: "
                    + readable_streams(options.connect, options.api_url, options.bearer).describe()
                )
            stop = resolve_end(
                client, destination, options.ending[destination], stop, options.probe_timeout
            )
            starting = options.starting[destination]
            start = resolve_start(client, destination, starting, options.probe_timeout)
            if start is None:
                continue
            if starting.kind == "offset" and start < stop:
                check_retention(
                    client, destination, start, options.probe_timeout, options.fail_on_data_loss
                )
            ranges += split(destination, start, stop, options.partitions)
    finally:
        client.close()
    return ranges


def _typed(text: str | None, kind: str) -> Any:
    """A header's value as a column of ``kind``; ``None`` when absent or not of that type."""
    if text is None:
        return None
    try:
        if kind == "string":
            return text
        if kind in ("int", "bigint"):
            return int(text)
        if kind == "double":
            return float(text)
        if kind == "boolean":
            return {"true": True, "false": False}.get(text.lower())
        return datetime.fromtimestamp(float(text), UTC)
    except (ValueError, OverflowError, OSError):
        return None


#: The connections of this process (an executor's Python worker, or the driver's
#: stream reader), kept between the micro-batches of a streaming query.
POOL = ClientPool()


@contextmanager
def pooled(settings: ConnectSettings, pool: ClientPool = POOL) -> Iterator[StompClient]:
    """
    A connection from ``pool`` for the block, given back when the block ends
    with no subscription open; closed instead when it raises (or a generator
    using it is closed early), since a subscription may then be left open.
    """
    client = pool.take(settings)
    try:
        yield client
    except BaseException:
        client.close()
        raise
    pool.give(settings, client)


def read_range(
    settings: ConnectSettings,
    part: OffsetRange,
    prefetch: int,
    header_columns: tuple[tuple[str, str], ...],
    pool: ClientPool | None = POOL,
) -> Iterator[tuple[Any, ...]]:
    """
    Yield one row per message of ``part``, in offset order.

    :param pool: where the connection comes from and goes back to once the
        range is read to its end (one left mid-range, by an error or Spark
        stopping early, is closed); ``None``: a connection of its own, closed
        at the end (a batch read, which has no next batch to keep it for).

    :raises StreamReadError: when no message comes for ``settings.timeout`` seconds
        before the range's end.
    :raises StompBrokerError: when the broker refuses the SUBSCRIBE (no ``read`` right, say).
    """
    subscription = f"range-{next(_probe_ids)}"
    keeping = ClientPool() if pool is None else pool
    try:
        with pooled(settings, keeping) as client:
            client.send(
                "SUBSCRIBE",
                [
                    ("destination", part.destination),
                    ("id", subscription),
                    ("ack", "auto"),
                    ("prefetch-count", str(prefetch)),
                    (OFFSET_HEADER, f"offset={part.start}"),
                ],
            )
            yield from _rows(client, settings, part, subscription, header_columns)
            client.send("UNSUBSCRIBE", [("id", subscription)])
    finally:
        if pool is None:
            keeping.close()


def _rows(
    client: StompClient,
    settings: ConnectSettings,
    part: OffsetRange,
    subscription: str,
    header_columns: tuple[tuple[str, str], ...],
) -> Iterator[tuple[Any, ...]]:
    while True:
        frame = client.receive()
        if frame is None:
            raise StreamReadError(
                f"{part.destination}: no message at or after offset {part.start} "
                f"(reading up to {part.stop}) within {settings.timeout} s"
            )
        headers = frame.headers
        if frame.command != "MESSAGE" or headers.get("subscription") != subscription:
            continue
        offset = int(headers[OFFSET_HEADER])
        if offset >= part.stop:
            return
        if offset < part.start:
            continue
        stamp = _typed(headers.get(TIMESTAMP_HEADER), "timestamp")
        kept = {name: value for name, value in headers.items() if name not in DELIVERY_HEADERS}
        yield (
            offset,
            stamp,
            part.destination,
            kept,
            frame.body,
            *(_typed(headers.get(name), kind) for name, kind in header_columns),
        )
        if offset == part.stop - 1:
            return
