"""
The pure transforms, each on a few records whose answer is worked out by hand.

Records are written as JSON lines and read with the real reader, so every
test also exercises the schema; the transforms themselves do no I/O.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.testing import assertDataFrameEqual

from sparkjobs import transforms
from sparkjobs.stats_io import read_stats
from stompbroker.stats.schema import (
    BrokerRecord,
    DestinationRecord,
    StatsRecord,
    record_to_dict,
    record_to_json_line,
)

NOON = datetime(2024, 5, 1, 12, tzinfo=UTC)
_directories = itertools.count()


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(NOON.timestamp() + seconds, UTC)


def dest(seconds: float, name: str = "/queue/a", **counters: int) -> DestinationRecord:
    return DestinationRecord(ts=at(seconds), destination=name, interval_s=10, **counters)


def broker(seconds: float, **values: float) -> BrokerRecord:
    return BrokerRecord(ts=at(seconds), interval_s=10, **values)  # type: ignore[arg-type]


def load(spark: SparkSession, tmp_path: Path, lines: Sequence[StatsRecord | str]) -> DataFrame:
    """Write records (or raw lines) as one published file and read it back with the real reader."""
    directory = tmp_path / f"stats{next(_directories)}"
    directory.mkdir()
    text = "".join(
        (line if isinstance(line, str) else record_to_json_line(line)) + "\n" for line in lines
    )
    (directory / "stats-2024050112.jsonl").write_text(text)
    return transforms.with_problem(read_stats(spark, str(directory)))


def good(checked: DataFrame, kind: str) -> DataFrame:
    return transforms.of_kind(transforms.good_records(checked), kind)


def assert_rows(actual: DataFrame, rows: list[Row], **options: bool) -> None:
    """
    Compare with expected rows built as a DataFrame of the same schema, so that
    timestamps go through the same conversion on both sides.
    """
    expected = actual.sparkSession.createDataFrame(rows, actual.schema)
    assertDataFrameEqual(actual, expected, **options)


def with_changes(record: StatsRecord, **changes: object) -> str:
    return json.dumps({**record_to_dict(record), **changes})


def test_each_kind_of_bad_record_is_named(spark: SparkSession, tmp_path: Path) -> None:
    """Cut lines, wrong types, other versions, unknown kinds and missing fields are told apart."""
    sample = dest(10, messages_in=1)
    lines = [
        sample,
        broker(10, connections=1),
        record_to_json_line(sample)[:50],
        "not json at all",
        with_changes(sample, messages_in="seven"),
        with_changes(sample, ts="2024-05-01 12:00:10"),
        with_changes(broker(10), rss_bytes=1.5),
        with_changes(sample, schema_version=2),
        with_changes(sample, kind="queue"),
        json.dumps({k: v for k, v in record_to_dict(sample).items() if k != "kind"}),
        json.dumps({k: v for k, v in record_to_dict(sample).items() if k != "producers"}),
    ]
    checked = load(spark, tmp_path, lines)
    expected = (
        [None, None]
        + [transforms.MALFORMED] * 5
        + [
            transforms.UNSUPPORTED_VERSION,
            transforms.UNKNOWN_KIND,
            transforms.UNKNOWN_KIND,
            transforms.MISSING_FIELD,
        ]
    )
    assert_rows(checked.select(transforms.PROBLEM_COLUMN), [Row(problem=p) for p in expected])


def test_bad_records_keep_the_raw_line_and_its_file(spark: SparkSession, tmp_path: Path) -> None:
    """A bad record is reported with its text, so someone can find and fix the writer."""
    cut = record_to_json_line(dest(10))[:50]
    checked = load(spark, tmp_path, [dest(10), cut])
    assert_rows(
        transforms.bad_records(checked),
        [Row(problem="malformed", source_file="stats-2024050112.jsonl", line=cut)],
    )


def test_a_wrong_type_in_a_column_a_table_ignores_still_excludes_the_record(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Once the input is cached, as the report caches it, every table sees the same bad records."""
    lines = [dest(10, messages_in=1), with_changes(dest(20, messages_in=5), rss_bytes="lots")]
    checked = load(spark, tmp_path, lines).cache()
    per_minute = transforms.destination_per_minute(good(checked, "destination"))
    assert [row.messages_in for row in per_minute.select("messages_in").collect()] == [1]


def test_destination_per_minute_sums_flows_and_summarizes_gauges(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Flow counters add up per minute; depth gives peak and mean; rates use covered seconds."""
    lines = [
        dest(10, messages_in=6, messages_acked=2, depth=4),
        dest(20, messages_in=4, messages_acked=3, depth=8),
        dest(70, messages_in=9, depth=5),
        dest(20, "/queue/b", messages_in=1, messages_delivered=1, messages_acked=1),
    ]
    destinations = good(load(spark, tmp_path, lines), "destination")
    per_minute = transforms.destination_per_minute(destinations)
    assert_rows(
        per_minute.select(
            "minute",
            "destination",
            "seconds",
            "messages_in",
            "messages_acked",
            "depth_max",
            "depth_avg",
            "messages_in_per_second",
            "lag_seconds",
        ),
        [
            Row(
                minute=at(0),
                destination="/queue/a",
                seconds=20.0,
                messages_in=10,
                messages_acked=5,
                depth_max=8,
                depth_avg=6.0,
                messages_in_per_second=0.5,
                lag_seconds=24.0,
            ),
            Row(
                minute=at(60),
                destination="/queue/a",
                seconds=10.0,
                messages_in=9,
                messages_acked=0,
                depth_max=5,
                depth_avg=5.0,
                messages_in_per_second=0.9,
                lag_seconds=None,
            ),
            Row(
                minute=at(0),
                destination="/queue/b",
                seconds=10.0,
                messages_in=1,
                messages_acked=1,
                depth_max=0,
                depth_avg=0.0,
                messages_in_per_second=0.1,
                lag_seconds=0.0,
            ),
        ],
    )


def test_broker_per_minute_counts_churn(spark: SparkSession, tmp_path: Path) -> None:
    """Connections opened plus closed is the minute's churn; open connections take the peak."""
    lines = [
        broker(10, connections=3, connections_opened=3, connections_closed=0, rss_bytes=100),
        broker(20, connections=2, connections_opened=1, connections_closed=2, rss_bytes=300),
        broker(70, connections=2, rss_bytes=200, messages_per_second=4.0),
    ]
    per_minute = transforms.broker_per_minute(good(load(spark, tmp_path, lines), "broker"))
    assert_rows(
        per_minute.select(
            "minute",
            "connections_max",
            "connections_opened",
            "connections_closed",
            "churn",
            "rss_bytes_max",
            "messages_per_second_avg",
        ),
        [
            Row(
                minute=at(0),
                connections_max=3,
                connections_opened=4,
                connections_closed=2,
                churn=6,
                rss_bytes_max=300,
                messages_per_second_avg=0.0,
            ),
            Row(
                minute=at(60),
                connections_max=2,
                connections_opened=0,
                connections_closed=0,
                churn=0,
                rss_bytes_max=200,
                messages_per_second_avg=4.0,
            ),
        ],
    )


def test_destination_summary_gives_peak_and_p95_depth_and_ratios(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Peak and exact 95th percentile of depth, and redelivery and dead-letter ratios."""
    lines = [
        dest(
            10 * i,
            messages_in=10,
            messages_delivered=5,
            messages_redelivered=1,
            messages_dead_lettered=2 if i == 0 else 0,
            messages_acked=5,
            depth=i,
        )
        for i in range(20)
    ]
    lines.append(dest(10, "/topic/quiet", depth=3))
    summary = transforms.destination_summary(good(load(spark, tmp_path, lines), "destination"))
    assert_rows(
        summary.select(
            "destination",
            "messages_in",
            "traffic",
            "depth_peak",
            "depth_p95",
            "redelivery_ratio",
            "dead_letter_ratio",
            "lag_seconds",
        ),
        [
            # p95 of 0..19 interpolates between 18 and 19; lag = mean depth 9.5 / 0.5 acks/s.
            Row(
                destination="/queue/a",
                messages_in=200,
                traffic=300,
                depth_peak=19,
                depth_p95=18.05,
                redelivery_ratio=0.2,
                dead_letter_ratio=0.01,
                lag_seconds=19.0,
            ),
            Row(
                destination="/topic/quiet",
                messages_in=0,
                traffic=0,
                depth_peak=3,
                depth_p95=3.0,
                redelivery_ratio=None,
                dead_letter_ratio=None,
                lag_seconds=None,
            ),
        ],
    )


def test_destination_summary_has_what_a_stream_kept_last_and_older_lines_read_as_0(
    spark: SparkSession, tmp_path: Path
) -> None:
    """
    A stream's summary has its appends and reads, and the range it kept at its last record; a
    line of an older broker, without the streams' gauges, reads with 0 for them.
    """
    older = record_to_dict(dest(10, "/queue/old", messages_in=2))
    del older["retained_messages"], older["retained_bytes"]
    lines = [
        dest(10, "/stream/audit", messages_in=5, messages_delivered=10, retained_messages=5),
        dest(20, "/stream/audit", messages_in=3, retained_messages=6, retained_bytes=480),
        json.dumps(older),
    ]
    summary = transforms.destination_summary(good(load(spark, tmp_path, lines), "destination"))
    assert_rows(
        summary.select(
            "destination",
            "messages_in",
            "messages_delivered",
            "retained_messages",
            "retained_bytes",
        ),
        [
            Row(
                destination="/queue/old",
                messages_in=2,
                messages_delivered=0,
                retained_messages=0,
                retained_bytes=0,
            ),
            Row(
                destination="/stream/audit",
                messages_in=8,
                messages_delivered=10,
                retained_messages=6,
                retained_bytes=480,
            ),
        ],
    )


def test_top_destinations_ranks_by_traffic_then_bytes_then_name(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The busiest come first; ties go to more bytes, then to the name; the limit applies."""
    lines = [
        dest(10, "/queue/small", messages_in=1),
        dest(10, "/queue/big", messages_in=50, messages_delivered=50),
        dest(10, "/queue/tie-heavy", messages_in=10, bytes_in=900),
        dest(10, "/queue/tie-b", messages_in=10, bytes_in=100),
        dest(10, "/queue/tie-a", messages_in=10, bytes_in=100),
    ]
    summary = transforms.destination_summary(good(load(spark, tmp_path, lines), "destination"))
    top = transforms.top_destinations(summary, 4)
    assert_rows(
        top.select("rank", "destination", "traffic"),
        [
            Row(rank=1, destination="/queue/big", traffic=100),
            Row(rank=2, destination="/queue/tie-heavy", traffic=10),
            Row(rank=3, destination="/queue/tie-a", traffic=10),
            Row(rank=4, destination="/queue/tie-b", traffic=10),
        ],
        checkRowOrder=True,
    )


def test_report_summary_totals_only_good_records(spark: SparkSession, tmp_path: Path) -> None:
    """The headline figures count every record but add up only the good ones."""
    lines = [
        dest(10, "/queue/a", messages_in=3, bytes_in=30),
        dest(20, "/queue/b", messages_in=4, bytes_in=40),
        with_changes(dest(30, "/queue/c", messages_in=100), schema_version=9),
        broker(10, connections_opened=2, connections_closed=1),
    ]
    summary = transforms.report_summary(load(spark, tmp_path, lines))
    assert_rows(
        summary.select(
            "records",
            "bad_records",
            "destination_records",
            "broker_records",
            "destinations",
            "first_ts",
            "last_ts",
            "messages_in",
            "bytes_in",
            "connections_opened",
        ),
        [
            Row(
                records=4,
                bad_records=1,
                destination_records=2,
                broker_records=1,
                destinations=2,
                first_ts=at(10),
                last_ts=at(20),
                messages_in=7,
                bytes_in=70,
                connections_opened=2,
            )
        ],
    )


def test_destination_series_coarsens_minutes_into_buckets(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Chart buckets sum the flows and recompute rates over the seconds they cover."""
    lines = [
        dest(60 * minute + 10, messages_in=minute, messages_acked=1, depth=minute)
        for minute in range(10)
    ]
    lines.append(dest(10, "/queue/other", messages_in=99))
    destinations = good(load(spark, tmp_path, lines), "destination")
    per_minute = transforms.destination_per_minute(destinations)
    series = transforms.destination_series(per_minute, ["/queue/a"], "5 minutes")
    assert_rows(
        series,
        [
            Row(
                bucket=at(0),
                destination="/queue/a",
                messages_in_per_second=0.2,
                messages_delivered_per_second=0.0,
                depth_max=4,
                lag_seconds=20.0,
            ),
            Row(
                bucket=at(300),
                destination="/queue/a",
                messages_in_per_second=0.7,
                messages_delivered_per_second=0.0,
                depth_max=9,
                lag_seconds=70.0,
            ),
        ],
    )
