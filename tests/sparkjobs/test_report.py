"""
The batch report, run once through its command line on files the real exporter wrote.

The traffic is known (:mod:`tests.sparkjobs.traffic`), so every total in the
written tables is checked against the sums of the records that went in, and a
file of damaged lines checks that bad records are counted, kept and left out.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest
from attrs import frozen
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.testing import assertDataFrameEqual

from sparkjobs import report, transforms
from sparkjobs.dashboard import DashboardData, render_dashboard
from stompbroker.stats.schema import BrokerRecord, DestinationRecord, record_to_dict
from tests.sparkjobs.traffic import DESTINATIONS, Interval, export, make_traffic, records

DAMAGED_FILE = "stats-2024050112-1.jsonl"


@frozen
class ReportRun:
    """One run of the report: its input, its output and what it printed."""

    intervals: list[Interval]
    bad_lines: list[str]
    output: Path
    exit_status: int
    printed: str

    def table(self, spark: SparkSession, name: str) -> DataFrame:
        return spark.read.parquet(str(self.output / name))


def damaged_lines(intervals: list[Interval]) -> list[str]:
    """Lines as a broken writer or a crash would leave them: one of each problem."""
    sample = record_to_dict(intervals[0].records[0])
    return [
        json.dumps(sample)[:60],
        json.dumps({**sample, "messages_in": "many"}),
        json.dumps({**sample, "schema_version": 99}),
        json.dumps({**sample, "kind": "connection"}),
    ]


@pytest.fixture(scope="module")
def run(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> ReportRun:
    base = tmp_path_factory.mktemp("report")
    intervals = make_traffic()
    export(base / "stats", intervals)
    bad_lines = damaged_lines(intervals)
    (base / "stats" / DAMAGED_FILE).write_text("\n".join(bad_lines) + "\n")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        status = report.main(["--input", str(base / "stats"), "--output", str(base / "report")])
    return ReportRun(intervals, bad_lines, base / "report", status, printed.getvalue())


def flow_totals(intervals: list[Interval]) -> dict[str, dict[str, int]]:
    """The input's sum of each flow counter, per destination."""
    totals: dict[str, Counter[str]] = {}
    for record in records(intervals):
        if isinstance(record, DestinationRecord):
            counter = totals.setdefault(record.destination, Counter())
            for name in transforms.FLOW_COUNTERS:
                counter[name] += getattr(record, name)
    return {name: dict(counter) for name, counter in totals.items()}


def test_the_report_succeeds_and_says_what_it_read(run: ReportRun) -> None:
    """The command exits 0 despite bad records, prints the counts of good and bad, and the page."""
    good = len(records(run.intervals))
    assert run.exit_status == 0
    assert f"{good + 4} records, 4 bad, 3 destinations" in run.printed
    assert "bad records: 2 malformed" in run.printed
    assert f"dashboard: {run.output / 'dashboard.html'}" in run.printed.splitlines()


def test_destination_totals_equal_the_traffic_that_went_in(
    spark: SparkSession, run: ReportRun
) -> None:
    """Each destination's summed counters equal the sums of the exported records."""
    expected = flow_totals(run.intervals)
    summary = run.table(spark, "destination_summary")
    assert {
        row.destination: {n: row[n] for n in transforms.FLOW_COUNTERS} for row in summary.collect()
    } == expected


def test_per_minute_throughput_adds_up_to_the_same_totals(
    spark: SparkSession, run: ReportRun
) -> None:
    """Summing destination_per_minute over its minutes gives back each destination's totals."""
    per_minute = run.table(spark, "destination_per_minute")
    sums = per_minute.groupBy("destination").sum("messages_in", "bytes_out").collect()
    expected = flow_totals(run.intervals)
    assert {row.destination: (row["sum(messages_in)"], row["sum(bytes_out)"]) for row in sums} == {
        name: (totals["messages_in"], totals["bytes_out"]) for name, totals in expected.items()
    }
    # 11:58:10 to 12:03:00 touches six minutes.
    assert per_minute.select("minute").distinct().count() == 6


def test_connection_churn_adds_up(spark: SparkSession, run: ReportRun) -> None:
    """broker_per_minute's opened and closed connections add up to the broker records'."""
    brokers = [r for r in records(run.intervals) if isinstance(r, BrokerRecord)]
    row = (
        run.table(spark, "broker_per_minute")
        .agg({"connections_opened": "sum", "connections_closed": "sum", "churn": "sum"})
        .first()
    )
    opened = sum(r.connections_opened for r in brokers)
    closed = sum(r.connections_closed for r in brokers)
    assert (row["sum(connections_opened)"], row["sum(connections_closed)"]) == (opened, closed)
    assert row["sum(churn)"] == opened + closed


def test_summary_table_counts_records_and_totals(spark: SparkSession, run: ReportRun) -> None:
    """The summary row counts every line, the bad ones apart, and totals the good ones."""
    good = records(run.intervals)
    expected = flow_totals(run.intervals)
    row = run.table(spark, "summary").first()
    assert row is not None
    assert (row.records, row.bad_records, row.destinations) == (len(good) + 4, 4, 3)
    assert row.destination_records == len(run.intervals) * len(DESTINATIONS)
    assert row.broker_records == len(run.intervals)
    assert row.messages_in == sum(totals["messages_in"] for totals in expected.values())


def test_bad_records_are_kept_with_their_file(spark: SparkSession, run: ReportRun) -> None:
    """Each damaged line is in bad_records with its problem and the file it came from."""
    assertDataFrameEqual(
        run.table(spark, "bad_records"),
        [
            Row(problem="malformed", source_file=DAMAGED_FILE, line=run.bad_lines[0]),
            Row(problem="malformed", source_file=DAMAGED_FILE, line=run.bad_lines[1]),
            Row(
                problem="unsupported schema_version",
                source_file=DAMAGED_FILE,
                line=json.dumps(json.loads(run.bad_lines[2]), separators=(",", ":")),
            ),
            Row(
                problem="unknown kind",
                source_file=DAMAGED_FILE,
                line=json.dumps(json.loads(run.bad_lines[3]), separators=(",", ":")),
            ),
        ],
    )


def test_top_destinations_are_ranked_by_traffic(spark: SparkSession, run: ReportRun) -> None:
    """The destination with the most messages in and out ranks first."""
    expected = flow_totals(run.intervals)
    by_traffic = sorted(
        expected, key=lambda d: -(expected[d]["messages_in"] + expected[d]["messages_delivered"])
    )
    top = run.table(spark, "top_destinations").orderBy("rank").collect()
    assert [row.destination for row in top] == by_traffic
    assert [row.rank for row in top] == [1, 2, 3]


def test_dashboard_is_one_self_contained_page(run: ReportRun) -> None:
    """dashboard.html loads nothing from elsewhere, and shows charts, destinations, bad records."""
    page = (run.output / "dashboard.html").read_text()
    assert page.startswith("<!DOCTYPE html>")
    for outside in ("<script", "<link", 'src="http', "url(http"):
        assert outside not in page
    assert page.count("<svg") == 6
    for name in DESTINATIONS:
        assert name in page
    assert "4 bad records" in page
    assert "2024-05-01 11:58 UTC – 2024-05-01 12:03 UTC" in page


def test_dashboard_renders_without_any_records() -> None:
    """A report over an empty stats directory still gives a page, with empty charts."""
    summary = {
        "records": 0,
        "bad_records": 0,
        "destinations": 0,
        "first_ts": None,
        "last_ts": None,
        "messages_in": 0,
        "messages_delivered": 0,
        "bytes_in": 0,
        "bytes_out": 0,
        "connections_opened": 0,
        "connections_closed": 0,
    }
    page = render_dashboard(
        DashboardData(summary, [], [], [], [], [], "1 minute", datetime(2024, 5, 1, tzinfo=UTC))
    )
    assert "no destination records" in page
    assert "no broker records" in page
    assert "bad records" not in page


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--input", "/nonexistent/stats", "--output", "out"], "is not a directory"),
        (["--input", ".", "--output", "s3a://bucket/report"], "give --dashboard"),
        (["--input", ".", "--output", "out", "--top", "0"], "--top must be 1 or more"),
    ],
)
def test_usage_errors_exit_with_status_2(
    arguments: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Mistakes on the command line are reported before any Spark work starts."""
    with pytest.raises(SystemExit) as exit_info:
        report.parse_args(arguments)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
