"""
A streaming query of the ``stompbroker`` data source in a process of its own,
so that a test can kill it (SIGKILL, its JVM with it) as a crash would, and
start it again from the same checkpoint.

Usage: ``python -m tests.sparkjobs.query_child URL DESTINATION OUTPUT CHECKPOINT``.
It writes each micro-batch's ``offset`` and ``body`` to Parquet files under
OUTPUT (Spark's file sink: exactly once with a checkpoint), prints ``started``
once the query runs and, when a line comes on its standard input, reads all the
stream holds, stops the query and exits.
"""

from __future__ import annotations

import sys

from sparkjobs.datasource import register
from tests.support.spark import local_session


def main(url: str, destination: str, output: str, checkpoint: str) -> None:
    spark = local_session("stompbroker-query-child")
    register(spark)
    frame = (
        spark.readStream.format("stompbroker")
        .option("url", url)
        .option("destination", destination)
        .option("maxMessagesPerTrigger", "200")
        .option("timeout", "20")
        .load()
        .select("offset", "body")
    )
    query = (
        frame.writeStream.format("parquet")
        .option("path", output)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="0.2 seconds")
        .start()
    )
    print("started", flush=True)
    sys.stdin.readline()
    query.processAllAvailable()
    query.stop()
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:])
