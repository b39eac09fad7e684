"""
The stats record schema: JSON round trips, validation, and the Spark schema it implies.

These tests need no SparkSession except the contract test at the end, which
reads lines the real exporter wrote through the real Spark reader.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import DoubleType, LongType, StringType, TimestampType
from pyspark.testing import assertDataFrameEqual, assertSchemaEqual

from sparkjobs.stats_io import CORRUPT_COLUMN, SOURCE_COLUMN, read_schema, read_stats
from stompbroker.stats.schema import (
    SCHEMA_VERSION,
    BrokerRecord,
    DestinationRecord,
    StatsRecordError,
    added_columns,
    column_types,
    columns_by_kind,
    record_from_dict,
    record_from_json_line,
    record_to_dict,
    record_to_json_line,
    spark_schema,
)
from tests.sparkjobs.traffic import export, make_traffic, records

ROOT = Path(__file__).resolve().parents[2]
MOMENT = datetime(2024, 5, 1, 12, 0, 10, 123456, tzinfo=UTC)


def destination(**changes: object) -> DestinationRecord:
    values: dict[str, object] = {
        "ts": MOMENT,
        "destination": "/queue/orders",
        "interval_s": 10.0,
        "messages_in": 7,
        "depth": 3,
    }
    values.update(changes)
    return DestinationRecord(**values)  # type: ignore[arg-type]


def test_destination_record_round_trips_through_a_json_line() -> None:
    """A destination record read back from its JSON line equals the record."""
    record = destination(bytes_in=700, consumers=2)
    assert record_from_json_line(record_to_json_line(record)) == record


def test_broker_record_round_trips_through_a_json_line() -> None:
    """A broker record read back from its JSON line equals the record."""
    record = BrokerRecord(
        ts=MOMENT,
        interval_s=10,
        uptime_s=61.5,
        connections=4,
        rss_bytes=1 << 26,
        messages_per_second=12.5,
    )
    assert record_from_json_line(record_to_json_line(record)) == record


def test_json_line_is_one_compact_object_with_version_and_kind_first() -> None:
    """A line is a single JSON object without line breaks, led by schema_version and kind."""
    line = record_to_json_line(destination())
    assert "\n" not in line
    assert list(json.loads(line))[:3] == ["schema_version", "kind", "ts"]
    assert json.loads(line)["schema_version"] == SCHEMA_VERSION


def test_ts_is_iso_8601_utc_with_milliseconds() -> None:
    """ts is written in UTC with millisecond precision and a Z, whatever zone it was given in."""
    paris = MOMENT.astimezone(timezone(timedelta(hours=2)))
    assert (
        json.loads(record_to_json_line(destination(ts=paris)))["ts"] == "2024-05-01T12:00:10.123Z"
    )


def test_ts_accepts_epoch_seconds_as_the_reactor_gives_them() -> None:
    """A float ts is taken as seconds since the epoch, as IReactorTime.seconds() returns."""
    assert destination(ts=MOMENT.timestamp()).ts == MOMENT.replace(microsecond=123000)


def test_naive_ts_is_refused() -> None:
    """A datetime without a zone is ambiguous, so a record refuses it."""
    with pytest.raises(TypeError):
        destination(ts=datetime(2024, 5, 1, 12))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"messages_in": -1}, "messages_in must be 0 or more"),
        ({"messages_in": True}, "messages_in must be an integer"),
        ({"messages_in": 1.5}, "messages_in must be an integer"),
        ({"interval_s": float("nan")}, "interval_s must be a finite number"),
        ({"destination": ""}, "destination must be a non-empty string"),
    ],
)
def test_invalid_values_are_refused_on_construction(changes: dict, message: str) -> None:
    """The broker cannot export a record that the jobs would count as bad."""
    with pytest.raises((TypeError, ValueError), match=message):
        destination(**changes)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"schema_version": 2}, "schema_version must be 1"),
        ({"schema_version": True}, "schema_version must be 1"),
        ({"kind": "queue"}, "kind must be one of"),
        ({"ts": "yesterday"}, "ts must be an ISO-8601 timestamp"),
        ({"ts": "2024-05-01T12:00:00"}, "ts must carry a UTC offset"),
        ({"ts": 1714564800}, "ts must be text"),
        ({"messages_in": "7"}, "messages_in must be an integer"),
        ({"depth": None}, "depth must be an integer"),
    ],
)
def test_from_dict_refuses_what_is_not_a_valid_record(changes: dict, message: str) -> None:
    """from_dict raises StatsRecordError, never another error, for a bad dictionary."""
    data = {**record_to_dict(destination()), **changes}
    with pytest.raises(StatsRecordError, match=message):
        record_from_dict(data)


def test_from_dict_names_missing_fields() -> None:
    """A record without one of its kind's fields is refused, naming the field."""
    data = record_to_dict(destination())
    del data["producers"]
    with pytest.raises(StatsRecordError, match="lacks producers"):
        record_from_dict(data)


def test_a_line_without_the_fields_added_within_the_version_reads_them_as_0() -> None:
    """
    An older broker's line lacks the fields added within version 1 (the streams' gauges, the
    count of duplicates): it still reads, with them 0; a kept stream's line carries them.
    """
    data = record_to_dict(destination())
    for name in added_columns()["destination"]:
        del data[name]
    assert added_columns()["destination"] == (
        "messages_duplicate",
        "retained_messages",
        "retained_bytes",
    )
    assert record_from_dict(data) == destination()
    kept = destination(destination="/stream/audit", retained_messages=5, retained_bytes=290)
    assert record_from_json_line(record_to_json_line(kept)) == kept


def test_from_dict_ignores_keys_it_does_not_know() -> None:
    """Extra keys do not make a record invalid."""
    data = {**record_to_dict(destination()), "comment": "added by hand"}
    assert record_from_dict(data) == destination()


def test_a_line_that_is_not_a_json_object_is_refused() -> None:
    """Truncated lines and JSON that is not an object raise StatsRecordError."""
    for line in (record_to_json_line(destination())[:40], "[1, 2]"):
        with pytest.raises(StatsRecordError):
            record_from_json_line(line)


def test_spark_schema_has_one_column_per_field_with_the_matching_type() -> None:
    """The Spark schema is the union of both kinds' fields, typed from the Python fields."""
    expected = {
        "int": LongType(),
        "float": DoubleType(),
        "str": StringType(),
        "datetime": TimestampType(),
    }
    schema = spark_schema()
    assert [f.name for f in schema.fields] == list(column_types())
    assert {f.name: f.dataType for f in schema.fields} == {
        name: expected[kind] for name, kind in column_types().items()
    }
    carried = {
        name
        for by_kind in (columns_by_kind(), added_columns())
        for names in by_kind.values()
        for name in names
    }
    assert carried == set(column_types()) - {"schema_version", "kind"}


@pytest.mark.integration
def test_importing_the_schema_does_not_import_pyspark() -> None:
    """The broker imports the schema module, and must not need PySpark for it."""
    code = (
        "import sys, stompbroker.stats.schema, stompbroker.stats.export; "
        "sys.exit('pyspark' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, timeout=60)
    assert result.returncode == 0


def test_every_column_is_documented() -> None:
    """docs/monitoring.md describes each column of the export schema."""
    text = (ROOT / "docs" / "monitoring.md").read_text()
    missing = [name for name in column_types() if f"`{name}`" not in text]
    assert missing == []


def test_lines_the_exporter_writes_read_through_the_spark_schema(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Contract: every line the broker's exporter writes parses in Spark, value for value."""
    intervals = make_traffic(intervals=3)
    export(tmp_path, intervals)
    frame = read_stats(spark, str(tmp_path)).cache()
    assertSchemaEqual(frame.drop(SOURCE_COLUMN).schema, read_schema())
    expected = spark.createDataFrame(
        [
            {**record_to_dict(record), "ts": record.ts, CORRUPT_COLUMN: None}
            for record in records(intervals)
        ],
        read_schema(),
    )
    assertDataFrameEqual(frame.drop(SOURCE_COLUMN), expected)
    assert frame.where(frame[CORRUPT_COLUMN].isNotNull()).count() == 0
    frame.unpersist()
