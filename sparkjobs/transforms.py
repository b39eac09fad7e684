"""
The jobs' logic, as pure functions from DataFrame to DataFrame.

Nothing here reads or writes files, so each function is tested on a few rows
made in the test, and the batch report and the streaming job share the same
definitions: :func:`destination_per_minute` and :func:`broker_per_minute` are
valid on streaming DataFrames too (the caller adds the watermark), the others
are batch-only (percentiles, rankings).

Counter semantics come from :mod:`stompbroker.stats.schema`: flow counters are
deltas over ``interval_s`` and are summed; gauges are sampled at ``ts`` and
are summarized by peak, mean or percentile.  Rates divide by the seconds the
records actually cover (the sum of their ``interval_s``), not by a nominal
window length, so a broker that started mid-minute is not under-reported.
"""

from __future__ import annotations

from functools import reduce

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from sparkjobs.stats_io import CORRUPT_COLUMN, SOURCE_COLUMN
from stompbroker.stats.schema import (
    FLOW_COUNTERS,
    SCHEMA_VERSION,
    added_columns,
    column_types,
    columns_by_kind,
)

PROBLEM_COLUMN = "problem"

MALFORMED = "malformed"
UNSUPPORTED_VERSION = "unsupported schema_version"
UNKNOWN_KIND = "unknown kind"
MISSING_FIELD = "missing field"


def _any_null(columns: tuple[str, ...]) -> Column:
    return reduce(lambda either, name: either | F.col(name).isNull(), columns, F.lit(False))


def with_problem(stats: DataFrame) -> DataFrame:
    """
    Say what is wrong with each record, if anything.

    :param stats: rows as :func:`sparkjobs.stats_io.read_stats` gives them.
    :returns: the rows with a :data:`PROBLEM_COLUMN`: null for a good record,
        else :data:`MALFORMED` (not JSON, cut short, a value of the wrong
        type or a malformed ``ts``), :data:`UNSUPPORTED_VERSION`,
        :data:`UNKNOWN_KIND` or :data:`MISSING_FIELD`.
    """
    required = columns_by_kind()
    kind = F.col("kind")
    lacks_field = reduce(
        lambda either, name: either | ((kind == name) & _any_null(required[name])),
        required,
        F.lit(False),
    )
    version = F.col("schema_version")
    problem = (
        F.when(F.col(CORRUPT_COLUMN).isNotNull(), F.lit(MALFORMED))
        .when(version.isNull() | (version != SCHEMA_VERSION), F.lit(UNSUPPORTED_VERSION))
        .when(kind.isNull() | ~kind.isin(*required), F.lit(UNKNOWN_KIND))
        .when(lacks_field, F.lit(MISSING_FIELD))
    )
    return stats.withColumn(PROBLEM_COLUMN, problem)


def good_records(stats: DataFrame) -> DataFrame:
    """:returns: the records of :func:`with_problem` that have none, in the schema's columns."""
    return stats.where(F.col(PROBLEM_COLUMN).isNull()).select(*column_types())


def bad_records(stats: DataFrame) -> DataFrame:
    """
    :param stats: the output of :func:`with_problem`.
    :returns: one row per bad record: ``problem``, ``source_file`` and
        ``line`` (the raw text when it did not parse, else the parsed fields as JSON).
    """
    parsed = F.to_json(F.struct(*column_types()))
    return stats.where(F.col(PROBLEM_COLUMN).isNotNull()).select(
        PROBLEM_COLUMN,
        SOURCE_COLUMN,
        F.coalesce(F.col(CORRUPT_COLUMN), parsed).alias("line"),
    )


def bad_record_counts(bad: DataFrame) -> DataFrame:
    """:returns: ``problem``, ``records``: how many bad records of each kind, most first."""
    return (
        bad.groupBy(PROBLEM_COLUMN)
        .agg(F.count(F.lit(1)).alias("records"))
        .orderBy(F.desc("records"), PROBLEM_COLUMN)
    )


def of_kind(good: DataFrame, kind: str) -> DataFrame:
    """
    :returns: the good records of one ``kind`` with the columns that kind
        carries, those added within the schema's version 0 where a record (an
        older broker's) lacks them.
    """
    added = [F.coalesce(F.col(name), F.lit(0)).alias(name) for name in added_columns()[kind]]
    return good.where(F.col("kind") == kind).select(*columns_by_kind()[kind], *added)


def _per_second(count: str, seconds: str = "seconds") -> Column:
    return F.try_divide(F.col(count), F.col(seconds))


def _lag_seconds(depth: str, acked: str, seconds: str = "seconds") -> Column:
    """Time to drain ``depth`` at the acknowledgement rate; null when nothing was acknowledged."""
    return F.try_divide(F.col(depth), _per_second(acked, seconds))


def destination_per_minute(destinations: DataFrame) -> DataFrame:
    """
    Per destination and minute: throughput, depth and consumer lag.

    Works on a streaming DataFrame that has a watermark on ``ts``.

    :param destinations: destination records (:func:`of_kind`).
    :returns: ``minute`` (window start), ``destination``, ``seconds`` covered,
        the sum of each flow counter, ``messages_in_per_second``,
        ``messages_delivered_per_second``, ``depth_max``, ``depth_avg``,
        ``in_flight_max``, ``consumers_max``, ``producers_max`` and
        ``lag_seconds`` (mean depth over the acknowledgement rate).
    """
    aggregated = destinations.groupBy(F.window("ts", "1 minute"), "destination").agg(
        F.sum("interval_s").alias("seconds"),
        *[F.sum(name).alias(name) for name in FLOW_COUNTERS],
        F.max("depth").alias("depth_max"),
        F.avg("depth").alias("depth_avg"),
        F.max("in_flight").alias("in_flight_max"),
        F.max("consumers").alias("consumers_max"),
        F.max("producers").alias("producers_max"),
    )
    return aggregated.select(
        F.col("window.start").alias("minute"),
        "destination",
        "seconds",
        *FLOW_COUNTERS,
        _per_second("messages_in").alias("messages_in_per_second"),
        _per_second("messages_delivered").alias("messages_delivered_per_second"),
        "depth_max",
        "depth_avg",
        "in_flight_max",
        "consumers_max",
        "producers_max",
        _lag_seconds("depth_avg", "messages_acked").alias("lag_seconds"),
    )


def broker_per_minute(brokers: DataFrame) -> DataFrame:
    """
    Per minute: connections and their churn, memory, message rate.

    Works on a streaming DataFrame that has a watermark on ``ts``.

    :param brokers: broker records (:func:`of_kind`).
    :returns: ``minute``, ``seconds``, ``connections_max``,
        ``connections_opened``, ``connections_closed``, ``churn`` (opened plus
        closed), ``rss_bytes_max``, ``messages_per_second_avg``, ``uptime_s_max``.
    """
    aggregated = brokers.groupBy(F.window("ts", "1 minute")).agg(
        F.sum("interval_s").alias("seconds"),
        F.max("connections").alias("connections_max"),
        F.sum("connections_opened").alias("connections_opened"),
        F.sum("connections_closed").alias("connections_closed"),
        F.max("rss_bytes").alias("rss_bytes_max"),
        F.avg("messages_per_second").alias("messages_per_second_avg"),
        F.max("uptime_s").alias("uptime_s_max"),
    )
    return aggregated.select(
        F.col("window.start").alias("minute"),
        "seconds",
        "connections_max",
        "connections_opened",
        "connections_closed",
        (F.col("connections_opened") + F.col("connections_closed")).alias("churn"),
        "rss_bytes_max",
        "messages_per_second_avg",
        "uptime_s_max",
    )


def destination_summary(destinations: DataFrame) -> DataFrame:
    """
    One row per destination over the whole input.

    :param destinations: destination records (:func:`of_kind`).
    :returns: ``destination``, ``first_ts``, ``last_ts``, ``seconds``, the sum
        of each flow counter, ``traffic`` (messages in plus delivered),
        ``depth_peak``, ``depth_p95``, ``depth_avg``, ``in_flight_peak``,
        ``consumers_peak``, ``producers_peak``, ``redelivery_ratio``
        (redelivered over delivered), ``dead_letter_ratio`` (dead-lettered over
        messages in), ``lag_seconds``, and for a stream what it kept at
        ``last_ts`` (``retained_messages``, ``retained_bytes``; 0 for other
        destinations); a ratio is null when its divisor is 0.
    """
    aggregated = destinations.groupBy("destination").agg(
        F.min("ts").alias("first_ts"),
        F.max("ts").alias("last_ts"),
        F.sum("interval_s").alias("seconds"),
        *[F.sum(name).alias(name) for name in FLOW_COUNTERS],
        F.max("depth").alias("depth_peak"),
        F.percentile(F.col("depth").cast("double"), F.lit(0.95)).alias("depth_p95"),
        F.avg("depth").alias("depth_avg"),
        F.max("in_flight").alias("in_flight_peak"),
        F.max("consumers").alias("consumers_peak"),
        F.max("producers").alias("producers_peak"),
        F.max_by("retained_messages", "ts").alias("retained_messages"),
        F.max_by("retained_bytes", "ts").alias("retained_bytes"),
    )
    return aggregated.select(
        "destination",
        "first_ts",
        "last_ts",
        "seconds",
        *FLOW_COUNTERS,
        (F.col("messages_in") + F.col("messages_delivered")).alias("traffic"),
        "depth_peak",
        "depth_p95",
        "depth_avg",
        "in_flight_peak",
        "consumers_peak",
        "producers_peak",
        F.try_divide(F.col("messages_redelivered"), F.col("messages_delivered")).alias(
            "redelivery_ratio"
        ),
        F.try_divide(F.col("messages_dead_lettered"), F.col("messages_in")).alias(
            "dead_letter_ratio"
        ),
        _lag_seconds("depth_avg", "messages_acked").alias("lag_seconds"),
        "retained_messages",
        "retained_bytes",
    )


def top_destinations(summary: DataFrame, limit: int) -> DataFrame:
    """
    :param summary: the output of :func:`destination_summary`.
    :param limit: how many to keep.
    :returns: the busiest destinations by ``traffic`` (then bytes, then name),
        with a ``rank`` from 1, and their traffic figures.
    """
    busiest = [
        F.desc("traffic"),
        F.desc(F.col("bytes_in") + F.col("bytes_out")),
        F.asc("destination"),
    ]
    # The summary has one row per destination: small enough for one partition.
    ranking = Window.orderBy(*busiest)
    return (
        summary.withColumn("rank", F.row_number().over(ranking))
        .where(F.col("rank") <= limit)
        .select(
            "rank",
            "destination",
            "traffic",
            "messages_in",
            "messages_delivered",
            "bytes_in",
            "bytes_out",
            "depth_peak",
            "depth_p95",
            "lag_seconds",
            "redelivery_ratio",
            "dead_letter_ratio",
        )
        .orderBy("rank")
    )


def report_summary(stats: DataFrame) -> DataFrame:
    """
    The report's headline figures, in one row.

    :param stats: the output of :func:`with_problem`.
    :returns: ``records``, ``bad_records``, ``destination_records``,
        ``broker_records``, ``destinations``, ``first_ts``, ``last_ts`` and
        the totals of ``messages_in``, ``messages_delivered``, ``bytes_in``,
        ``bytes_out``, ``connections_opened``, ``connections_closed`` over
        the good records.
    """
    good = F.col(PROBLEM_COLUMN).isNull()

    def good_sum(name: str) -> Column:
        return F.coalesce(F.sum(F.when(good, F.col(name))), F.lit(0)).alias(name)

    return stats.agg(
        F.count(F.lit(1)).alias("records"),
        F.count(F.when(~good, 1)).alias("bad_records"),
        F.count(F.when(good & (F.col("kind") == "destination"), 1)).alias("destination_records"),
        F.count(F.when(good & (F.col("kind") == "broker"), 1)).alias("broker_records"),
        F.count_distinct(F.when(good, F.col("destination"))).alias("destinations"),
        F.min(F.when(good, F.col("ts"))).alias("first_ts"),
        F.max(F.when(good, F.col("ts"))).alias("last_ts"),
        *[
            good_sum(name)
            for name in (
                "messages_in",
                "messages_delivered",
                "bytes_in",
                "bytes_out",
                "connections_opened",
                "connections_closed",
            )
        ],
    )


def destination_series(per_minute: DataFrame, destinations: list[str], bucket: str) -> DataFrame:
    """
    Chart data: a few destinations' rates and depth in buckets of ``bucket``.

    :param per_minute: the output of :func:`destination_per_minute`.
    :param destinations: the destinations to keep.
    :param bucket: a Spark interval, e.g. ``"1 minute"`` or ``"1 hour"``.
    :returns: ``bucket`` (start), ``destination``, ``messages_in_per_second``,
        ``messages_delivered_per_second``, ``depth_max``, ``lag_seconds``.
    """
    return (
        per_minute.where(F.col("destination").isin(*destinations))
        .groupBy(F.window("minute", bucket), "destination")
        .agg(
            F.sum("seconds").alias("seconds"),
            F.sum("messages_in").alias("messages_in"),
            F.sum("messages_delivered").alias("messages_delivered"),
            F.sum("messages_acked").alias("messages_acked"),
            F.max("depth_max").alias("depth_max"),
            (F.sum(F.col("depth_avg") * F.col("seconds")) / F.sum("seconds")).alias("depth_avg"),
        )
        .select(
            F.col("window.start").alias("bucket"),
            "destination",
            _per_second("messages_in").alias("messages_in_per_second"),
            _per_second("messages_delivered").alias("messages_delivered_per_second"),
            "depth_max",
            _lag_seconds("depth_avg", "messages_acked").alias("lag_seconds"),
        )
    )


def broker_series(per_minute: DataFrame, bucket: str) -> DataFrame:
    """
    Chart data: connections and churn in buckets of ``bucket``.

    :param per_minute: the output of :func:`broker_per_minute`.
    :returns: ``bucket`` (start), ``connections_max``, ``connections_opened``,
        ``connections_closed``, ``messages_per_second_avg``.
    """
    return (
        per_minute.groupBy(F.window("minute", bucket))
        .agg(
            F.max("connections_max").alias("connections_max"),
            F.sum("connections_opened").alias("connections_opened"),
            F.sum("connections_closed").alias("connections_closed"),
            F.avg("messages_per_second_avg").alias("messages_per_second_avg"),
        )
        .select(
            F.col("window.start").alias("bucket"),
            "connections_max",
            "connections_opened",
            "connections_closed",
            "messages_per_second_avg",
        )
    )
