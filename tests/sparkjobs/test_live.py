"""
The streaming job, run bounded (``--once``) over files the real exporter wrote.

It must produce what the batch transforms produce for every minute its
watermark has closed, report bad records, and resume from its checkpoint
without counting a file twice.
"""

from __future__ import annotations

import signal
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from sparkjobs import live, transforms
from sparkjobs.stats_io import read_stats
from stompbroker.stats.schema import record_to_json_line
from tests.sparkjobs.traffic import START, export, make_traffic


def run_once(base: Path) -> int:
    return live.main(
        [
            "--input",
            str(base / "stats"),
            "--output",
            str(base / "live"),
            "--checkpoint",
            str(base / "checkpoint"),
            "--once",
            "--watermark",
            "1 minute",
            "--state-partitions",
            "1",
        ]
    )


def batch_per_minute(spark: SparkSession, stats: Path, *, before: datetime) -> DataFrame:
    """What the batch transforms say for the minutes that end by ``before``."""
    good = transforms.good_records(transforms.with_problem(read_stats(spark, str(stats))))
    per_minute = transforms.destination_per_minute(transforms.of_kind(good, "destination"))
    return per_minute.where(F.col("minute") <= F.lit(before) - F.expr("INTERVAL 1 MINUTE"))


def minutes(frame: DataFrame) -> list[str]:
    return [
        row.minute
        for row in frame.select(F.date_format("minute", "HH:mm").alias("minute"))
        .distinct()
        .orderBy("minute")
        .collect()
    ]


def test_streaming_job_matches_the_batch_aggregates_and_resumes(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A bounded run writes the watermark-closed minutes the batch job computes, then resumes."""
    stats = tmp_path / "stats"
    export(stats, make_traffic(intervals=30))  # 11:58:10 .. 12:03:00
    cut = record_to_json_line(make_traffic(intervals=1)[0].records[0])[:40]
    (stats / "stats-2024050110.jsonl").write_text(cut + "\n")

    assert run_once(tmp_path) == 0
    streamed = spark.read.parquet(str(tmp_path / "live" / "destination_per_minute"))
    # The watermark stands at 12:02:00 (latest ts less one minute): minutes up to 12:01 are closed.
    assert minutes(streamed) == ["11:58", "11:59", "12:00", "12:01"]
    watermark = datetime(2024, 5, 1, 12, 2, tzinfo=UTC)
    assertDataFrameEqual(streamed, batch_per_minute(spark, stats, before=watermark))
    bad = spark.read.parquet(str(tmp_path / "live" / "bad_records")).collect()
    assert [(row.problem, row.line) for row in bad] == [("malformed", cut)]
    churn = spark.read.parquet(str(tmp_path / "live" / "broker_per_minute"))
    assert minutes(churn) == ["11:58", "11:59", "12:00", "12:01"]

    # The broker goes on (a restart in the same hour, so a new part file) and the job resumes.
    export(stats, make_traffic(intervals=12, start=START + 300))  # 12:03:10 .. 12:05:00
    assert run_once(tmp_path) == 0
    streamed = spark.read.parquet(str(tmp_path / "live" / "destination_per_minute"))
    assert minutes(streamed) == ["11:58", "11:59", "12:00", "12:01", "12:02", "12:03"]
    watermark = datetime(2024, 5, 1, 12, 4, tzinfo=UTC)
    assertDataFrameEqual(streamed, batch_per_minute(spark, stats, before=watermark))
    assert spark.read.parquet(str(tmp_path / "live" / "bad_records")).count() == 1


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--trigger-seconds", "0"], "--trigger-seconds must be more than 0"),
        (["--state-partitions", "0"], "--state-partitions must be 1 or more"),
    ],
)
def test_usage_errors_exit_with_status_2(
    arguments: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Impossible settings are refused before any Spark work starts."""
    required = ["--input", "in", "--output", "out", "--checkpoint", "checkpoint"]
    with pytest.raises(SystemExit) as exit_info:
        live.parse_args(required + arguments)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


class SignallingStreams:
    """A stand-in for ``spark.streams`` whose waits see a signal arrive, or a query end."""

    def __init__(self, signal_number: int | None, ends_after: int = 1000) -> None:
        self.signal_number = signal_number
        self.ends_after = ends_after
        self.waits: list[int] = []

    def awaitAnyTermination(self, timeout: int) -> bool:  # noqa: N802 (PySpark's name)
        self.waits.append(timeout)
        if self.signal_number is not None and len(self.waits) == 2:
            signal.raise_signal(self.signal_number)
        return len(self.waits) >= self.ends_after


@pytest.mark.parametrize("signal_number", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_signal_ends_the_wait_between_polls(signal_number: int) -> None:
    """SIGINT or SIGTERM stops the continuous job after the current poll, then handlers revert."""
    before = signal.getsignal(signal_number)
    streams = SignallingStreams(signal_number)
    live.wait_until_stopped(streams)  # type: ignore[arg-type]
    assert streams.waits == [1, 1]
    assert signal.getsignal(signal_number) is before


def test_the_wait_ends_when_a_query_ends() -> None:
    """With no signal, the wait lasts until Spark reports a query terminated."""
    streams = SignallingStreams(None, ends_after=3)
    live.wait_until_stopped(streams, poll_seconds=5)  # type: ignore[arg-type]
    assert streams.waits == [5, 5, 5]
