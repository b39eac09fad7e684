"""
The broker's PySpark data source, ``stompbroker``: read ``/stream/`` destinations, write any.

Usage::

    from sparkjobs.datasource import StompbrokerDataSource
    spark.dataSource.register(StompbrokerDataSource)
    df = (spark.read.format("stompbroker")
          .option("url", "stomp://127.0.0.1:61613")
          .option("destination", "/stream/orders")
          .load())

docs/spark.md lists the options, the schema and the guarantees.

Why here, in ``sparkjobs``: it is the Spark side of the broker, like the
stats jobs, and it shares their rule (docs/architecture.md, layer 8): it talks
to the broker only through STOMP and imports nothing of ``stompbroker``, so
Spark executors need this package and ``websocket-client``, never Twisted.
Why STOMP rather than the management API: a SUBSCRIBE with
``x-stream-offset`` is the one public way to read a stream from an exact
offset, it is checked against the ``read`` right like any reader's, it works
on every listener (TCP, TLS, WebSocket) and on any node of a cluster, and the
management API has no stream read and needs the ``admin`` right.

- :mod:`sparkjobs.datasource.client`: a blocking STOMP client.
- :mod:`sparkjobs.datasource.options`: the options, checked.
- :mod:`sparkjobs.datasource.positions`: where reads start and end, in either vocabulary.
- :mod:`sparkjobs.datasource.reading`: offsets, ranges, rows.
- :mod:`sparkjobs.datasource.pacing`: when a micro-batch runs (``minMessagesPerTrigger``).
- :mod:`sparkjobs.datasource.listing`: the streams a login may read, named in errors.
- :mod:`sparkjobs.datasource.writing`: rows to SENDs, receipts, refusals.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark import TaskContext
from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from sparkjobs.datasource.client import StompClient
from sparkjobs.datasource.options import (
    DataSourceOptionError,
    ReadOptions,
    WriteOptions,
    for_batch,
    for_stream,
    read_options,
    write_options,
)
from sparkjobs.datasource.pacing import TriggerPacing
from sparkjobs.datasource.reading import (
    POOL,
    DataLost,
    OffsetRange,
    check_retention,
    count_messages,
    limited_end,
    plan_batch,
    pooled,
    read_range,
    resolve_start,
    schema,
    split,
    tail,
)
from sparkjobs.datasource.writing import RowsRefused, summarize, write_rows

__all__ = ["DataLost", "DataSourceOptionError", "RowsRefused", "StompbrokerDataSource", "register"]

log = logging.getLogger("sparkjobs.datasource")


class StompbrokerDataSource(DataSource):
    """The ``stompbroker`` format: read streams, write to any destination; batch or streaming."""

    @classmethod
    def name(cls) -> str:
        return "stompbroker"

    def schema(self) -> StructType:
        return schema(read_options(self.options).header_columns)

    def reader(self, schema: StructType) -> DataSourceReader:
        return BatchReader(for_batch(read_options(self.options)))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802 (Spark's)
        return StreamReader(for_stream(read_options(self.options)))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return BatchWriter(write_options(self.options))

    def streamWriter(  # noqa: N802 (Spark's name)
        self, schema: StructType, overwrite: bool
    ) -> DataSourceStreamWriter:
        return StreamWriter(write_options(self.options))


def register(spark: SparkSession) -> None:
    """Register the ``stompbroker`` format with ``spark``; a second call changes nothing."""
    try:
        spark.dataSource.register(StompbrokerDataSource)
    except AnalysisException as error:
        if error.getCondition() != "DATA_SOURCE_ALREADY_EXISTS":
            raise


def _read(options: ReadOptions, partition: InputPartition, keep: bool) -> Iterator[tuple[Any, ...]]:
    """:param keep: keep the connection for the next micro-batch (streaming), or close it."""
    # With no range planned Spark still runs one task, with a partition of its own.
    if not isinstance(partition, OffsetRange):
        return iter(())
    return read_range(
        options.connect,
        partition,
        options.prefetch,
        options.header_columns,
        POOL if keep else None,
    )


class BatchReader(DataSourceReader):
    """Reads each stream from ``startingOffsets`` to ``endingOffsets``, as planned on the driver."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        return plan_batch(self.options)

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        return _read(self.options, partition, keep=False)


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """
    Follows the streams: Spark's offset is, per stream, the offset read next.

    Each micro-batch reads, per stream, from its offset to the newest
    message's plus one as the broker showed it when the batch was planned, so
    a batch is a fixed offset range: Spark's checkpoint holds it, and a query
    restarted from the checkpoint reads the same range again and goes on from
    its end, without loss or duplicate.  With ``maxMessagesPerTrigger`` the
    range ends earlier, after that many messages (Kafka's ``maxOffsetsPerTrigger``),
    so that a query starting on a long stream reads it in bounded batches.

    With ``minMessagesPerTrigger`` a trigger that finds fewer new messages in
    all the streams runs no batch, until ``maxTriggerDelay`` has passed since
    the last one (:class:`TriggerPacing`, the Kafka source's rule).

    Under ``Trigger.AvailableNow`` the newest offsets when the query starts are
    its target: batches end there at the latest, each still bounded by
    ``maxMessagesPerTrigger``, and the query ends once it has read up to them
    (``minMessagesPerTrigger`` does not hold it back: it would wait for
    messages the query is not to read).
    """

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self._target: dict[str, int] | None = None
        self._pacing = (
            None
            if options.min_per_trigger is None
            else TriggerPacing(options.min_per_trigger, options.max_trigger_delay)
        )

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802 (Spark's name)
        """Take each stream's newest offset now (plus one) as where the query stops."""
        with pooled(self.options.connect) as client:
            self._target = {
                destination: tail(client, destination, self.options.probe_timeout) or 0
                for destination in self.options.destinations
            }

    def _ends(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        options = self.options
        with pooled(options.connect) as client:
            newest = self._newest(client, start)
            free = self._target is not None or isinstance(limit, ReadAllAvailable)
            pacing = None if free else self._pacing
            if pacing is not None and not pacing.admit(
                lambda: self._count_new(client, start, newest)
            ):
                return {destination: start.get(destination, 0) for destination in newest}
            if not isinstance(limit, ReadMaxRows):
                return newest
            # Shared out evenly: a stream's share is not lent to another.
            budget = max(1, limit.max_rows // len(options.destinations))
            return {
                destination: limited_end(
                    client,
                    destination,
                    start.get(destination, 0),
                    end,
                    budget,
                    options.probe_timeout,
                )
                for destination, end in newest.items()
            }

    def _newest(self, client: StompClient, start: dict[str, int]) -> dict[str, int]:
        """:returns: per stream, its newest offset plus one (or the AvailableNow target),
        after checking that retention kept what the next batch reads."""
        options = self.options
        ends = {}
        for destination in options.destinations:
            begun = start.get(destination, 0)
            if self._target is None:
                newest = tail(client, destination, options.probe_timeout)
            else:
                newest = self._target.get(destination, begun)
            end = begun if newest is None else max(begun, newest)
            if end > begun:
                check_retention(
                    client, destination, begun, options.probe_timeout, options.fail_on_data_loss
                )
            ends[destination] = end
        return ends

    def _count_new(self, client: StompClient, start: dict[str, int], ends: dict[str, int]) -> int:
        """:returns: the streams' new messages, counted up to ``minMessagesPerTrigger``."""
        wanted = self.options.min_per_trigger or 0
        seen = 0
        for destination, end in ends.items():
            if seen >= wanted:
                break
            seen += count_messages(
                client,
                destination,
                start.get(destination, 0),
                end,
                wanted - seen,
                self.options.probe_timeout,
            )
        return seen

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802 (Spark's name)
        """
        ``maxMessagesPerTrigger`` (or else ``minMessagesPerTrigger``) as Spark's read
        limit; Spark may still ask for all, and then neither holds.
        """
        if self.options.max_per_trigger is not None:
            return ReadMaxRows(self.options.max_per_trigger)
        if self.options.min_per_trigger is not None:
            return ReadMinRows(self.options.min_per_trigger)
        return ReadAllAvailable()

    def initialOffset(self) -> dict[str, int]:  # noqa: N802 (Spark's name)
        options = self.options
        with pooled(options.connect) as client:
            offsets = {}
            for destination in options.destinations:
                start = resolve_start(
                    client, destination, options.starting[destination], options.probe_timeout
                )
                if start is None:
                    # Nothing at or after the start yet: begin at the tail.
                    start = tail(client, destination, options.probe_timeout) or 0
                offsets[destination] = start
            return offsets

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:  # noqa: N802
        return self._ends(start, limit)

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        ranges: list[OffsetRange] = []
        for destination, stop in end.items():
            ranges += split(
                destination, start.get(destination, stop), stop, self.options.partitions
            )
        return ranges

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        return _read(self.options, partition, keep=True)

    def stop(self) -> None:
        """The query ends: close the connections its planning kept open."""
        POOL.close()


def _write(options: WriteOptions, iterator: Iterator[Any]) -> WriterCommitMessage:
    context = TaskContext.get()
    return write_rows(options, iterator, context.partitionId() if context else 0)


def _report(options: WriteOptions, messages: list[Any], batch: str) -> None:
    sent, refused, kept = summarize(messages, options.fail_on_refused)
    if refused:
        log.warning(
            "%s: the broker refused %d of %d rows, e.g. %s",
            batch,
            refused,
            sent + refused,
            "; ".join(f"partition {r.partition} row {r.row}: {r.reason}" for r in kept[:3]),
        )


class BatchWriter(DataSourceWriter):
    """``df.write.format("stompbroker")``: one SEND per row."""

    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return _write(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        _report(self.options, messages, "write")


class StreamWriter(DataSourceStreamWriter):
    """``writeStream.format("stompbroker")``: one SEND per row of each micro-batch."""

    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return _write(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        _report(self.options, messages, f"batch {batchId}")
