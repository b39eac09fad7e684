"""
Where the jobs meet the outside: the SparkSession, the stats files, the Parquet tables.

Reading follows the contract of :mod:`stompbroker.stats.schema`: an explicit
schema (never inference, which would guess types from whatever the first
files hold), only published files (:data:`~stompbroker.stats.schema.FILE_GLOB`;
in-progress files are hidden anyway), and ``PERMISSIVE`` mode, which turns a
truncated line or a value of the wrong type into a row whose
:data:`CORRUPT_COLUMN` holds the raw text instead of failing the job.
"""

from __future__ import annotations

import argparse

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from stompbroker.stats.schema import FILE_GLOB, SPARK_TIMESTAMP_FORMAT, spark_schema

CORRUPT_COLUMN = "_corrupt_record"
SOURCE_COLUMN = "source_file"


#: Where ``--broker`` reads the statistics by default (the broker's ``--stats-stream``).
DEFAULT_STATS_STREAM = "/stream/stompbroker.stats"
#: The header of a stats stream message that names the node whose figures it holds.
NODE_HEADER = "x-stats-node"


def job_parser(prog: str, description: str, output_help: str) -> argparse.ArgumentParser:
    """
    :returns: a parser with the options every job takes: where the statistics
        come from (``--input`` or ``--broker``, see :func:`check_source`),
        ``--output``, ``--master``.
    """
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--input", help="the broker's stats directory (--stats-dir)")
    parser.add_argument(
        "--broker",
        help="read the statistics from the broker's --stats-stream instead, at this URL "
        "(stomp://HOST:PORT, stomp+ssl://, ws://HOST:PORT/ws)",
    )
    parser.add_argument(
        "--stats-stream", default=DEFAULT_STATS_STREAM, help="the stream --broker reads"
    )
    parser.add_argument("--login", help="the broker login for --broker")
    parser.add_argument("--passcode", help="its passcode, or a token")
    parser.add_argument("--output", required=True, help=output_help)
    parser.add_argument("--master", help="Spark master URL (default: local[*], or spark-submit's)")
    return parser


def check_source(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Exit with a usage error unless exactly one of ``--input`` and ``--broker`` is given."""
    if (args.input is None) == (args.broker is None):
        parser.error("give one of --input (a stats directory) and --broker (a broker URL)")


def broker_options(args: argparse.Namespace) -> dict[str, str]:
    """:returns: the ``stompbroker`` data source options that read the stats stream."""
    options = {"url": args.broker, "destination": args.stats_stream}
    if args.login is not None:
        options["login"] = args.login
    if args.passcode is not None:
        options["passcode"] = args.passcode
    return options


def build_session(app_name: str, master: str | None = None) -> SparkSession:
    """
    Get the SparkSession a job runs in.

    Without ``master`` the master is whatever launched the job chose:
    ``spark-submit --master``, or ``local[*]`` when run with plain ``python``
    (Spark's own default).  An already active session (a test's, a notebook's)
    is reused as it is.

    :param app_name: the name shown in the Spark UI.
    :param master: a Spark master URL, e.g. ``spark://host:7077`` or ``local[2]``.
    :returns: the session, with its SQL time zone set to UTC like the stats.
    """
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    session = builder.getOrCreate()
    # Minute windows and Parquet timestamps are read back in the session zone.
    session.conf.set("spark.sql.session.timeZone", "UTC")
    return session


def read_schema() -> StructType:
    """:returns: the stats schema plus the corrupt-record column the reader fills."""
    return StructType(spark_schema().fields + [StructField(CORRUPT_COLUMN, StringType(), True)])


def _reader_options() -> dict[str, str]:
    return {
        "mode": "PERMISSIVE",
        "columnNameOfCorruptRecord": CORRUPT_COLUMN,
        "timestampFormat": SPARK_TIMESTAMP_FORMAT,
        "pathGlobFilter": FILE_GLOB,
    }


def read_stats(spark: SparkSession, path: str) -> DataFrame:
    """
    Read every published stats file under ``path`` (batch).

    Spark's JSON reader parses only the columns a query uses, and flags a
    value of the wrong type only in those; cache the result before running
    several queries on it (as :func:`sparkjobs.report.run_report` does) and
    every column is parsed once, so all of them agree on which records are bad.

    :param path: the stats directory.
    :returns: one row per line: the schema's columns, :data:`CORRUPT_COLUMN`
        (the raw line, when it is not a JSON object of the schema's types)
        and :data:`SOURCE_COLUMN` (the name of the file the line came from).
    """
    frame = spark.read.schema(read_schema()).options(**_reader_options()).json(path)
    return frame.withColumn(SOURCE_COLUMN, F.col("_metadata.file_name"))


def read_stats_stream(
    spark: SparkSession, path: str, max_files_per_trigger: int | None = None
) -> DataFrame:
    """
    Follow ``path`` for newly published stats files (Structured Streaming).

    :param path: the stats directory.
    :param max_files_per_trigger: read at most this many new files per micro-batch.
    :returns: a streaming DataFrame with the columns of :func:`read_stats`.
    """
    reader = spark.readStream.schema(read_schema()).options(**_reader_options())
    if max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", str(max_files_per_trigger))
    return reader.json(path).withColumn(SOURCE_COLUMN, F.col("_metadata.file_name"))


def _stats_of_messages(messages: DataFrame) -> DataFrame:
    """
    Parse stats stream messages as :func:`read_stats` parses lines.

    :returns: the columns of :func:`read_stats`, :data:`SOURCE_COLUMN` being
        ``NODE STREAM#OFFSET``, and ``node``, the node whose figures the record holds.
    """
    node = F.col("headers").getItem(NODE_HEADER)
    parsed = messages.select(
        F.from_json(F.col("body").cast("string"), read_schema(), _reader_options()).alias("r"),
        F.concat_ws(" ", node, F.concat_ws("#", "destination", "offset")).alias(SOURCE_COLUMN),
        node.alias("node"),
    )
    return parsed.select("r.*", SOURCE_COLUMN, "node")


def read_stats_from_broker(spark: SparkSession, options: dict[str, str]) -> DataFrame:
    """
    Read every record the stats stream keeps (batch), through the ``stompbroker`` data source.

    :param options: the data source's options (:func:`broker_options`).
    :returns: the columns of :func:`read_stats`, and ``node``.
    """
    from sparkjobs.datasource import register

    register(spark)
    reader = spark.read.format("stompbroker").options(**options)
    return _stats_of_messages(reader.option("startingOffsets", "first").load())


def read_stats_stream_from_broker(spark: SparkSession, options: dict[str, str]) -> DataFrame:
    """
    Follow the stats stream (Structured Streaming), from its first record kept.

    :param options: the data source's options (:func:`broker_options`).
    :returns: a streaming DataFrame with the columns of :func:`read_stats_from_broker`.
    """
    from sparkjobs.datasource import register

    register(spark)
    reader = spark.readStream.format("stompbroker").options(**options)
    return _stats_of_messages(reader.option("startingOffsets", "first").load())


def table_path(output: str, name: str) -> str:
    """
    :param output: a local directory or a URL (``hdfs://``, ``s3a://``), hence no ``Path``.
    :returns: where the table ``name`` of a job writing to ``output`` lives.
    """
    return f"{output.rstrip('/')}/{name}"


def write_table(frame: DataFrame, output: str, name: str) -> str:
    """
    Write one report table as Parquet, replacing an older run's.

    :returns: the table's path.
    """
    path = table_path(output, name)
    frame.write.mode("overwrite").parquet(path)
    return path
