"""
The batch report: what the broker did over the stats it exported.

Usage::

    python -m sparkjobs.report --input STATS_DIR --output REPORT_DIR [--master URL] [--top N]
    python -m sparkjobs.report --broker stomp://HOST:61613 --output REPORT_DIR   # the stats stream
    spark-submit --master URL sparkjobs/report.py --input ... --output ...

Reads every published file of a ``--stats-dir`` (see
:mod:`stompbroker.stats.export`), and writes into ``REPORT_DIR`` one Parquet
table per question (``destination_per_minute``, ``broker_per_minute``,
``destination_summary``, ``top_destinations``, ``bad_records``, ``summary``;
docs/monitoring.md lists their columns) and ``dashboard.html``, a
self-contained page with charts.  Bad records are counted, kept in
``bad_records`` and left out of every figure; they never fail the job.

Without ``--master`` it runs where it is launched: ``local[*]`` under plain
``python``, the cluster ``spark-submit`` was given otherwise.

Run with plain ``python``, it starts Spark with errors-only logging
(``quiet-log4j2.properties``) and no progress bars, so that what it prints is
what it read and where the dashboard is; ``PYSPARK_SUBMIT_ARGS``, when set,
is left as it is (and ``spark-submit``'s logging is its own).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import MutableMapping
from pathlib import Path

from attrs import frozen
from pyspark.sql import DataFrame, Row, SparkSession

from sparkjobs import transforms
from sparkjobs.dashboard import write_dashboard
from sparkjobs.stats_io import (
    broker_options,
    build_session,
    check_source,
    job_parser,
    read_stats,
    read_stats_from_broker,
    write_table,
)

DEFAULT_TOP = 10
#: The log4j 2 configuration of a local session the report starts itself.
QUIET_LOGGING = Path(__file__).with_name("quiet-log4j2.properties")


@frozen
class ReportTables:
    """The report's DataFrames, each written as the Parquet table of its name."""

    summary: DataFrame
    destination_per_minute: DataFrame
    broker_per_minute: DataFrame
    destination_summary: DataFrame
    top_destinations: DataFrame
    bad_records: DataFrame

    def named(self) -> dict[str, DataFrame]:
        """:returns: table name to DataFrame, in writing order."""
        return {
            "summary": self.summary,
            "destination_per_minute": self.destination_per_minute,
            "broker_per_minute": self.broker_per_minute,
            "destination_summary": self.destination_summary,
            "top_destinations": self.top_destinations,
            "bad_records": self.bad_records,
        }


def build_report(stats: DataFrame, top: int = DEFAULT_TOP) -> ReportTables:
    """
    Transform the raw stats into the report's tables (no I/O).

    :param stats: rows as :func:`sparkjobs.stats_io.read_stats` gives them.
    :param top: how many destinations ``top_destinations`` keeps.
    """
    checked = transforms.with_problem(stats)
    good = transforms.good_records(checked)
    destinations = transforms.of_kind(good, "destination")
    summary_by_destination = transforms.destination_summary(destinations)
    return ReportTables(
        summary=transforms.report_summary(checked),
        destination_per_minute=transforms.destination_per_minute(destinations),
        broker_per_minute=transforms.broker_per_minute(transforms.of_kind(good, "broker")),
        destination_summary=summary_by_destination,
        top_destinations=transforms.top_destinations(summary_by_destination, top),
        bad_records=transforms.bad_records(checked),
    )


@frozen
class ReportResult:
    """What a run of the report tells its caller, beyond the files it wrote."""

    summary: Row
    bad_record_counts: list[Row]


def run_report(
    spark: SparkSession,
    input_path: str | None,
    output_path: str,
    *,
    top: int = DEFAULT_TOP,
    dashboard_path: str | None = None,
    broker: dict[str, str] | None = None,
) -> ReportResult:
    """
    Read, transform, write: the whole job, in a session the caller owns.

    The input is cached for the run, since every table reads it, and
    released at the end: a cached read would otherwise answer a later run in
    the same session with the files of this one.

    :param input_path: the stats directory (unused with ``broker``).
    :param output_path: where the Parquet tables go (any path Spark can write).
    :param dashboard_path: a local file for the HTML; ``OUTPUT/dashboard.html`` by default.
    :param broker: read the broker's stats stream with these data source
        options (:func:`~sparkjobs.stats_io.broker_options`) instead of ``input_path``.
    :returns: the headline figures.
    """
    if broker is not None:
        stats = read_stats_from_broker(spark, broker).cache()
    else:
        stats = read_stats(spark, input_path).cache()
    try:
        tables = build_report(stats, top)
        for name, frame in tables.named().items():
            write_table(frame, output_path, name)
        write_dashboard(tables, dashboard_path or str(Path(output_path) / "dashboard.html"))
        (summary,) = tables.summary.collect()  # an aggregate without grouping: one row
        return ReportResult(
            summary=summary,
            bad_record_counts=transforms.bad_record_counts(tables.bad_records).collect(),
        )
    finally:
        stats.unpersist()


def parse_args(argv: list[str]) -> argparse.Namespace:
    """:returns: the parsed command line; exits with status 2 on a usage error."""
    parser = job_parser(
        "python -m sparkjobs.report",
        "Report on the stats a stompbroker exported with --stats-dir.",
        "where to write the tables",
    )
    parser.add_argument(
        "--top", type=int, default=DEFAULT_TOP, help="destinations in top_destinations"
    )
    parser.add_argument(
        "--dashboard", help="local path of the HTML page (default: OUTPUT/dashboard.html)"
    )
    args = parser.parse_args(argv)
    check_source(parser, args)
    if "://" in args.output and not args.dashboard:
        parser.error("--output is not a local directory: give --dashboard a local file path")
    if args.input is not None and "://" not in args.input and not Path(args.input).is_dir():
        parser.error(f"--input {args.input!r} is not a directory")
    if args.top < 1:
        parser.error("--top must be 1 or more")
    return args


def quiet_local_spark(environ: MutableMapping[str, str] = os.environ) -> None:
    """
    Make a Spark that this process has yet to start log errors only, and draw no
    progress bars: the warnings of a local session (the native-hadoop library,
    windows without partitions) are not a report user's to act on.  Done through
    ``PYSPARK_SUBMIT_ARGS``, which PySpark reads when it starts its JVM, and only
    when it is not set already.
    """
    if "PYSPARK_SUBMIT_ARGS" in environ:
        return
    java_options = f"-Dlog4j2.configurationFile={QUIET_LOGGING.absolute()}"
    environ["PYSPARK_SUBMIT_ARGS"] = shlex.join(
        [
            "--driver-java-options",
            java_options,
            "--conf",
            "spark.ui.showConsoleProgress=false",
            "pyspark-shell",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    """
    Run the report from the command line.

    A SparkSession that is already active (a test's, a notebook's) is used and
    left running; one this function creates is stopped at the end.

    :returns: the exit status: 0 when the report was written, bad records or not.
    """
    args = parse_args(sys.argv[1:] if argv is None else argv)
    owns_session = SparkSession.getActiveSession() is None
    if owns_session:
        quiet_local_spark()
    dashboard = args.dashboard or str(Path(args.output) / "dashboard.html")
    spark = build_session("stompbroker-report", args.master)
    try:
        result = run_report(
            spark,
            args.input,
            args.output,
            top=args.top,
            dashboard_path=dashboard,
            broker=broker_options(args) if args.broker else None,
        )
    finally:
        if owns_session:
            spark.stop()
    summary = result.summary
    print(
        f"{summary['records']} records, {summary['bad_records']} bad, "
        f"{summary['destinations']} destinations; tables in {args.output}"
    )
    for row in result.bad_record_counts:
        print(f"  bad records: {row['records']} {row['problem']}")
    print(f"dashboard: {Path(dashboard).absolute()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
