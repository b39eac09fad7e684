"""
The ``stompbroker`` data source's figures: rows/s read into Spark from a stream
(batch, 1 and 4 partitions), rows/s written from Spark to a queue, the
latency from a SEND to its row in a streaming query with a 1 s trigger, and
with ``--live-minutes N`` the lag of ``sparkjobs.live --broker``: how long
after a minute ends its row is in ``destination_per_minute``.

Usage::

    python -m benchmarks.spark_source --count 1000000
    python -m benchmarks.spark_source --count 0 --live-minutes 4

Starts its own brokers (``--data-dir none``) and a ``local[4]`` SparkSession.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.launcher import BrokerProcess

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def fill(address: tuple[str, int], destination: str, count: int) -> None:
    """Append ``count`` 100-byte messages, a receipt every 1000."""
    import socket

    body = b"x" * 100
    with socket.create_connection(address) as sock:
        sock.sendall(b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00")
        sock.recv(4096)
        frame = f"SEND\ndestination:{destination}\ncontent-length:100\n\n".encode() + body + b"\x00"
        for start in range(0, count, 1000):
            batch = frame * (min(1000, count - start) - 1)
            receipt = f"SEND\ndestination:{destination}\nreceipt:r{start}\ncontent-length:100\n\n"
            sock.sendall(batch + receipt.encode() + body + b"\x00")
            seen = b""
            while f"receipt-id:r{start}".encode() not in seen:
                seen += sock.recv(65536)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.spark_source")
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--write-count", type=int, default=100_000)
    parser.add_argument("--latency-samples", type=int, default=20)
    parser.add_argument("--live-minutes", type=float, default=0)
    parser.add_argument("--stats-interval", type=float, default=10)
    args = parser.parse_args(argv)

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from sparkjobs.datasource import register

    spark = (
        SparkSession.builder.master("local[4]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    workdir = Path(tempfile.mkdtemp(prefix="spark-source-"))
    if args.live_minutes:
        lags = measure_live_lag(spark, workdir, args.live_minutes, args.stats_interval)
        print(
            f"live job, --stats-interval {args.stats_interval:g}: a minute's row written"
            f" {statistics.median(lags):.1f} s after the minute ends (median),"
            f" {max(lags):.1f} s at most, over {len(lags)} minutes"
        )
    if not args.count:
        spark.stop()
        return 0
    with BrokerProcess(
        workdir / "broker", "--data-dir", "none", "--stream-max-bytes", "2G", http=None
    ) as broker:
        url = f"stomp://127.0.0.1:{broker.port}"
        began = time.perf_counter()
        fill(broker.address, "/stream/bench", args.count)
        print(f"filled {args.count} messages in {time.perf_counter() - began:.1f} s")
        # Spark starts its Python workers on the first read: not part of the figures.
        spark.read.format("stompbroker").option("url", url).option(
            "destination", "/stream/bench"
        ).option("endingOffsets", "1000").load().count()
        for partitions in (1, 4):
            frame = (
                spark.read.format("stompbroker")
                .option("url", url)
                .option("destination", "/stream/bench")
                .option("partitionsPerStream", str(partitions))
                .load()
            )
            began = time.perf_counter()
            rows = frame.agg(F.count("*"), F.sum(F.length("body"))).first()
            seconds = time.perf_counter() - began
            print(
                f"read, {partitions} partition(s): {rows[0]} rows in {seconds:.1f} s, "
                f"{rows[0] / seconds:,.0f} rows/s"
            )
        frame = spark.range(args.write_count).selectExpr("repeat('x', 100) AS body").repartition(4)
        began = time.perf_counter()
        (
            frame.write.format("stompbroker")
            .option("url", url)
            .option("destination", "/queue/bench")
            .mode("append")
            .save()
        )
        seconds = time.perf_counter() - began
        print(
            f"write, 4 partitions: {args.write_count} rows in {seconds:.1f} s, "
            f"{args.write_count / seconds:,.0f} rows/s"
        )
        latencies = measure_latency(spark, url, broker.address, args.latency_samples, workdir)
        print(
            f"SEND to streaming row, 1 s trigger: median {statistics.median(latencies):.2f} s, "
            f"max {max(latencies):.2f} s over {len(latencies)}"
        )
    spark.stop()
    return 0


def measure_live_lag(
    spark: SparkSession, workdir: Path, minutes: float, interval: float
) -> list[float]:
    """
    Run the live job's queries on a broker's ``--stats-stream`` with their
    ``--broker`` defaults, and note when each minute first appears in the
    ``destination_per_minute`` table's files.

    :returns: per minute, the seconds from its end to its row's file.
    """
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    from sparkjobs import live

    stream = "/stream/stompbroker.stats"
    first_seen: dict[float, float] = {}
    with BrokerProcess(
        workdir / "stats-broker",
        "--data-dir",
        "none",
        "--stats-stream",
        stream,
        "--stats-interval",
        str(interval),
        http=None,
    ) as broker:
        queries = live.start_queries(
            spark,
            None,
            str(workdir / "live"),
            str(workdir / "live-checkpoint"),
            trigger_seconds=live.BROKER_TRIGGER_SECONDS,
            watermark=live.BROKER_WATERMARK,
            state_partitions=1,
            broker={"url": f"stomp://127.0.0.1:{broker.port}", "destination": stream},
        )
        table = workdir / "live" / "destination_per_minute"
        read: set[Path] = set()
        deadline = time.monotonic() + minutes * 60
        try:
            while time.monotonic() < deadline:
                for part in sorted(table.glob("*.parquet")) if table.exists() else ():
                    if part in read:
                        continue
                    now = time.time()
                    try:
                        written = pq.read_table(part, columns=["minute"]).column(0).to_pylist()
                    except (OSError, ValueError):
                        continue  # still being written
                    read.add(part)
                    for minute in written:
                        first_seen.setdefault(minute.timestamp(), now)
                time.sleep(0.5)
        finally:
            for query in queries:
                live.stop_between_batches(query)
    return [seen - (minute + 60) for minute, seen in sorted(first_seen.items())]


def measure_latency(
    spark: SparkSession, url: str, address: tuple[str, int], samples: int, workdir: Path
) -> list[float]:
    """SEND one message stamped with its send time; the sink notes when its row arrives."""
    import socket

    from pyspark.sql import functions as F

    seen: list[float] = []

    def note(batch: DataFrame, batch_id: int) -> None:
        now = time.time()
        for row in batch.select(F.col("body").cast("string").alias("sent")).collect():
            seen.append(now - float(row.sent))

    query = (
        spark.readStream.format("stompbroker")
        .option("url", url)
        .option("destination", "/stream/latency")
        .option("startingOffsets", "last")
        .load()
        .writeStream.foreachBatch(note)
        .trigger(processingTime="1 second")
        .option("checkpointLocation", str(workdir / "latency-checkpoint"))
        .start()
    )
    with socket.create_connection(address) as sock:
        sock.sendall(b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00")
        sock.recv(4096)
        sock.sendall(f"SEND\ndestination:/stream/latency\n\n{time.time()}\x00".encode())
        deadline = time.monotonic() + 120
        while not seen and time.monotonic() < deadline:
            time.sleep(0.2)  # the query is started and has delivered its first row
        seen.clear()
        for _ in range(samples):
            sock.sendall(f"SEND\ndestination:/stream/latency\n\n{time.time()}\x00".encode())
            time.sleep(1.3)
        time.sleep(3)
    query.stop()
    return seen


if __name__ == "__main__":
    sys.exit(main())
