"""
The streaming job: per-minute aggregates that follow the stats directory.

Usage::

    python -m sparkjobs.live --input STATS_DIR --output OUT_DIR --checkpoint CHECKPOINT_DIR
    python -m sparkjobs.live ... --once        # process what is there now, then stop
    python -m sparkjobs.live --broker stomp://HOST:61613 --output OUT --checkpoint CHECKPOINT

Structured Streaming watches ``STATS_DIR`` for newly published files and keeps
three Parquet tables in ``OUT_DIR``, appending as data arrives:

- ``destination_per_minute`` and ``broker_per_minute``: the same aggregates,
  by the same code, as the batch report's tables of those names.  A minute is
  written once, when the watermark (``--watermark``, default 2 minutes of
  event time, 10 seconds with ``--broker``) has passed its end; records older
  than the watermark by then are dropped by Spark, as late data.
- ``bad_records``: every record that is malformed or invalid, with its file.

Read the tables with Spark (``spark.read.parquet``), which honours the
``_spark_metadata`` log the file sink keeps, so a half-written batch is never
seen.  ``CHECKPOINT_DIR`` holds the progress: restarting with the same
checkpoint resumes where the job stopped, without counting a file twice.

The broker publishes a stats file when its hour is over (see
:mod:`stompbroker.stats.export`), so the tables trail the broker by up to an
hour plus ``--trigger-seconds``.  With ``--broker URL`` instead of ``--input``
the job reads the broker's ``--stats-stream`` through the ``stompbroker`` data
source (:mod:`sparkjobs.datasource`), each record as the broker appends it, so
the tables trail the broker by the watermark and ``--trigger-seconds``, which
default then to 10 seconds and 2 (a minute is written seconds after it ends); no
directory is shared, and with the redis engine one stream holds every node's
records.  ``bad_records`` then names ``NODE STREAM#OFFSET`` instead of a file.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery, StreamingQueryManager

from sparkjobs import transforms
from sparkjobs.stats_io import (
    broker_options,
    build_session,
    check_source,
    job_parser,
    read_stats_stream,
    read_stats_stream_from_broker,
    table_path,
)

DEFAULT_WATERMARK = "2 minutes"
DEFAULT_TRIGGER_SECONDS = 10
#: With ``--broker`` each record arrives as the broker appends it, every
#: ``--stats-interval``: a watermark of that interval lets a minute close a
#: record or two after its end, and a short trigger picks that record up.
BROKER_WATERMARK = "10 seconds"
BROKER_TRIGGER_SECONDS = 2
#: How long a stop waits for the running micro-batch to finish before interrupting it.
STOP_TIMEOUT = 60.0
DEFAULT_STATE_PARTITIONS = 4
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: A streaming query's status while it makes its sources.
INITIALIZING = "Initializing sources"
SOURCE_TIMEOUT = 60.0


def live_tables(stats: DataFrame, watermark: str = DEFAULT_WATERMARK) -> dict[str, DataFrame]:
    """
    The streaming job's outputs, as streaming DataFrames (no I/O).

    :param stats: :func:`sparkjobs.stats_io.read_stats_stream`'s DataFrame.
    :param watermark: how late, in event time, a record may arrive and still count.
    :returns: table name to streaming DataFrame.
    """
    checked = transforms.with_problem(stats)
    good = transforms.good_records(checked)

    def of_kind(kind: str) -> DataFrame:
        return transforms.of_kind(good, kind).withWatermark("ts", watermark)

    return {
        "destination_per_minute": transforms.destination_per_minute(of_kind("destination")),
        "broker_per_minute": transforms.broker_per_minute(of_kind("broker")),
        "bad_records": transforms.bad_records(checked),
    }


def start_queries(
    spark: SparkSession,
    input_path: str | None,
    output_path: str,
    checkpoint_path: str,
    *,
    once: bool = False,
    trigger_seconds: float = DEFAULT_TRIGGER_SECONDS,
    watermark: str = DEFAULT_WATERMARK,
    max_files_per_trigger: int | None = None,
    state_partitions: int = DEFAULT_STATE_PARTITIONS,
    broker: dict[str, str] | None = None,
) -> list[StreamingQuery]:
    """
    Start one streaming query per table of :func:`live_tables`.

    :param once: process the files present now (``availableNow``) and stop,
        instead of polling every ``trigger_seconds``.
    :param state_partitions: partitions of the aggregation state.  Spark's
        default of 200 costs 200 small tasks and state stores per micro-batch,
        minutes per batch on a small machine, for what is a few rows per minute;
        the number is fixed when a checkpoint is created.
    :param broker: follow the broker's stats stream with these data source
        options (:func:`~sparkjobs.stats_io.broker_options`) instead of ``input_path``.
    :returns: the running queries, named after their tables.
    """
    if broker is not None:
        # A Python data source registered in one session is unknown to a new one
        # (and cannot be registered there again): set the query's settings on
        # the caller's session while the queries start (each query keeps a copy),
        # then put them back.
        settings = {
            "spark.sql.shuffle.partitions": str(state_partitions),
            # The records are parsed out of the messages' bodies: the record
            # checks' predicates, pushed down onto the parsed fields' aliases,
            # make constraint propagation grow exponentially with the fields,
            # an OutOfMemoryError when planning each micro-batch.
            "spark.sql.constraintPropagation.enabled": "false",
        }
        with _session_settings(spark, settings):
            return _start(
                live_tables(read_stats_stream_from_broker(spark, broker), watermark),
                output_path,
                checkpoint_path,
                once,
                trigger_seconds,
                one_by_one=True,
            )
    # A session of its own, so the setting does not leak into the caller's.
    spark = spark.newSession()
    spark.conf.set("spark.sql.shuffle.partitions", str(state_partitions))
    stats = read_stats_stream(spark, input_path, max_files_per_trigger)
    return _start(
        live_tables(stats, watermark), output_path, checkpoint_path, once, trigger_seconds
    )


@contextmanager
def _session_settings(spark: SparkSession, settings: dict[str, str]) -> Iterator[None]:
    """Set ``settings`` on ``spark``'s conf within the block, then restore the previous values."""
    previous = {name: spark.conf.get(name, None) for name in settings}
    for name, value in settings.items():
        spark.conf.set(name, value)
    try:
        yield
    finally:
        for name, value in previous.items():
            if value is None:
                spark.conf.unset(name)
            else:
                spark.conf.set(name, value)


def _start(
    tables: dict[str, DataFrame],
    output_path: str,
    checkpoint_path: str,
    once: bool,
    trigger_seconds: float,
    *,
    one_by_one: bool = False,
) -> list[StreamingQuery]:
    """
    :param one_by_one: start a query once the previous one has its source.
        A Python data source's stream reader is a Python process of its own,
        which must start and call back within Spark's fixed ten seconds:
        three started at once on a busy machine can miss that.
    """
    queries: list[StreamingQuery] = []
    for name, frame in tables.items():
        writer = (
            frame.writeStream.queryName(name)
            .format("parquet")
            .outputMode("append")
            .option("path", table_path(output_path, name))
            .option("checkpointLocation", table_path(checkpoint_path, name))
        )
        if once:
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=f"{trigger_seconds} seconds")
        if one_by_one and queries:
            _wait_for_sources(queries[-1])
        queries.append(writer.start())
    return queries


def _wait_for_sources(query: StreamingQuery, timeout: float = SOURCE_TIMEOUT) -> None:
    """Wait until ``query`` has initialized its sources, has ended, or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while query.isActive and query.status["message"] == INITIALIZING:
        if time.monotonic() > deadline:
            return
        time.sleep(0.1)


def wait_until_stopped(streams: StreamingQueryManager, poll_seconds: int = 1) -> None:
    """
    Block until a query ends or the process gets SIGINT or SIGTERM.

    A signal only sets a flag, and the wait polls it between short waits on
    the JVM: an exception raised inside a Py4J call (what PySpark's own
    SIGINT handler does) breaks the gateway, and the queries could then not
    be stopped cleanly.  The previous handlers are restored on return.

    :param streams: ``spark.streams``.
    :raises pyspark.errors.StreamingQueryException: when a query failed.
    """
    stop = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {number: signal.signal(number, request_stop) for number in STOP_SIGNALS}
    try:
        while not stop.is_set():
            if streams.awaitAnyTermination(poll_seconds):
                return
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def stop_between_batches(
    query: StreamingQuery, timeout: float = STOP_TIMEOUT, poll_seconds: float = 0.1
) -> None:
    """
    Stop ``query`` once its running micro-batch, if any, has committed.

    ``StreamingQuery.stop`` interrupts a running batch: its job is aborted and
    Spark logs the abort with a stack, for what is an ordinary stop.  Waiting
    for the trigger to end first stops the query while it only waits for its
    next trigger; a batch still running after ``timeout`` seconds is interrupted.
    """
    deadline = time.monotonic() + timeout
    while query.isActive and query.status["isTriggerActive"] and time.monotonic() < deadline:
        time.sleep(poll_seconds)
    query.stop()


def parse_args(argv: list[str]) -> argparse.Namespace:
    """:returns: the parsed command line; exits with status 2 on a usage error."""
    parser = job_parser(
        "python -m sparkjobs.live",
        "Maintain per-minute stats aggregates from a stompbroker --stats-dir.",
        "where the Parquet tables grow",
    )
    parser.add_argument("--checkpoint", required=True, help="the streaming checkpoint directory")
    parser.add_argument(
        "--once", action="store_true", help="process the files present now, then stop"
    )
    parser.add_argument(
        "--trigger-seconds",
        type=float,
        help=f"how often to look for new records (default {DEFAULT_TRIGGER_SECONDS},"
        f" with --broker {BROKER_TRIGGER_SECONDS})",
    )
    parser.add_argument(
        "--watermark",
        help=f"how late a record may arrive, e.g. '5 minutes' (default {DEFAULT_WATERMARK!r},"
        f" with --broker {BROKER_WATERMARK!r})",
    )
    parser.add_argument(
        "--max-files-per-trigger", type=int, help="read at most this many new files per batch"
    )
    parser.add_argument(
        "--state-partitions",
        type=int,
        default=DEFAULT_STATE_PARTITIONS,
        help="partitions of the aggregation state (fixed once a checkpoint exists)",
    )
    args = parser.parse_args(argv)
    check_source(parser, args)
    if args.trigger_seconds is None:
        args.trigger_seconds = BROKER_TRIGGER_SECONDS if args.broker else DEFAULT_TRIGGER_SECONDS
    if args.watermark is None:
        args.watermark = BROKER_WATERMARK if args.broker else DEFAULT_WATERMARK
    if args.state_partitions < 1:
        parser.error("--state-partitions must be 1 or more")
    if args.trigger_seconds <= 0:
        parser.error("--trigger-seconds must be more than 0")
    return args


def main(argv: list[str] | None = None) -> int:
    """
    Run the streaming job from the command line until SIGINT or SIGTERM (or,
    with ``--once``, until the files present at start are processed).

    A SparkSession that is already active is used and left running; one this
    function creates is stopped at the end.

    :returns: the exit status.
    """
    args = parse_args(sys.argv[1:] if argv is None else argv)
    owns_session = SparkSession.getActiveSession() is None
    spark = build_session("stompbroker-live", args.master)
    queries: list[StreamingQuery] = []
    try:
        queries = start_queries(
            spark,
            args.input,
            args.output,
            args.checkpoint,
            once=args.once,
            trigger_seconds=args.trigger_seconds,
            watermark=args.watermark,
            max_files_per_trigger=args.max_files_per_trigger,
            state_partitions=args.state_partitions,
            broker=broker_options(args) if args.broker else None,
        )
        if args.once:
            for query in queries:
                query.awaitTermination()
        else:
            wait_until_stopped(spark.streams)
    finally:
        for query in queries:
            stop_between_batches(query)
        if owns_session:
            spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
