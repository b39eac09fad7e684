"""
The JSON Lines exporter: hourly files, hidden while written, published by an atomic rename.

No reactor and no Spark: the exporter's clock is a :class:`ManualClock`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from stompbroker.stats.export import StatsExporter, final_name, hour_stamp, in_progress_name
from stompbroker.stats.schema import (
    FILE_GLOB,
    DestinationRecord,
    record_from_json_line,
    record_to_json_line,
)
from tests.sparkjobs.traffic import ManualClock

NOON = datetime(2024, 5, 1, 12, tzinfo=UTC).timestamp()


def record(seconds: float, messages_in: int = 1) -> DestinationRecord:
    return DestinationRecord(
        ts=seconds, destination="/queue/a", interval_s=10, messages_in=messages_in
    )


def published(directory: Path) -> list[str]:
    """The names a Spark reader of the directory would pick up."""
    return sorted(path.name for path in directory.glob(FILE_GLOB))


def read_back(path: Path) -> list[DestinationRecord]:
    return [record_from_json_line(line) for line in path.read_text().splitlines()]


def test_file_names_are_utc_hours() -> None:
    """Files are named by UTC hour, as the documented layout says."""
    assert hour_stamp(NOON + 3599) == "2024050112"
    assert final_name("2024050112") == "stats-2024050112.jsonl"
    assert final_name("2024050112", 2) == "stats-2024050112-2.jsonl"
    assert in_progress_name("2024050112") == ".stats-2024050112.jsonl.inprogress"


def test_records_go_to_a_hidden_file_until_close(tmp_path: Path) -> None:
    """While an hour is being written nothing matches the readers' glob; close publishes it all."""
    exporter = StatsExporter(tmp_path / "stats", ManualClock(NOON + 5))
    written = [record(NOON + 5), record(NOON + 15, 2)]
    assert exporter.write(written[:1]) == 1
    assert exporter.write(written[1:]) == 1
    assert published(tmp_path / "stats") == []
    assert exporter.in_progress_path == tmp_path / "stats" / ".stats-2024050112.jsonl.inprogress"
    assert exporter.close() == tmp_path / "stats" / "stats-2024050112.jsonl"
    assert published(tmp_path / "stats") == ["stats-2024050112.jsonl"]
    assert read_back(tmp_path / "stats" / "stats-2024050112.jsonl") == written
    assert not exporter.in_progress_path


def test_a_write_in_a_new_hour_publishes_the_previous_one(tmp_path: Path) -> None:
    """The hour rolls on the first write after it ends."""
    clock = ManualClock(NOON + 3590)
    exporter = StatsExporter(tmp_path, clock)
    exporter.write([record(NOON + 3590)])
    clock.now = NOON + 3600
    exporter.write([record(NOON + 3600)])
    assert published(tmp_path) == ["stats-2024050112.jsonl"]
    exporter.close()
    assert published(tmp_path) == ["stats-2024050112.jsonl", "stats-2024050113.jsonl"]
    assert read_back(tmp_path / "stats-2024050113.jsonl") == [record(NOON + 3600)]


def test_roll_publishes_only_when_the_hour_is_over(tmp_path: Path) -> None:
    """roll() lets a timer publish an hour even when no write follows it."""
    clock = ManualClock(NOON + 10)
    exporter = StatsExporter(tmp_path, clock)
    assert exporter.roll() is None
    exporter.write([record(NOON + 10)])
    clock.now = NOON + 3599
    assert exporter.roll() is None
    clock.now = NOON + 3600
    assert exporter.roll() == tmp_path / "stats-2024050112.jsonl"
    assert exporter.roll() is None


def test_writing_no_records_creates_no_file(tmp_path: Path) -> None:
    """An empty interval leaves the directory alone, and close has nothing to publish."""
    exporter = StatsExporter(tmp_path / "stats", ManualClock(NOON))
    assert exporter.write([]) == 0
    assert exporter.close() is None
    assert not (tmp_path / "stats").exists()


def test_a_restart_within_the_hour_never_reuses_a_final_name(tmp_path: Path) -> None:
    """Spark's streaming source skips a name it has seen, so each part of an hour gets its own."""
    for part in range(3):
        exporter = StatsExporter(tmp_path, ManualClock(NOON + part))
        exporter.write([record(NOON + part, part + 1)])
        exporter.close()
    assert published(tmp_path) == [
        "stats-2024050112-1.jsonl",
        "stats-2024050112-2.jsonl",
        "stats-2024050112.jsonl",
    ]
    assert read_back(tmp_path / "stats-2024050112-2.jsonl") == [record(NOON + 2, 3)]


def test_a_dead_exporters_past_hour_is_published_by_the_next(tmp_path: Path) -> None:
    """An in-progress file a crashed broker left for an hour that is over gets published."""
    (tmp_path / in_progress_name("2024050111")).write_text(
        record_to_json_line(record(NOON - 10)) + "\n"
    )
    exporter = StatsExporter(tmp_path, ManualClock(NOON + 10))
    exporter.write([record(NOON + 10)])
    assert published(tmp_path) == ["stats-2024050111.jsonl"]
    assert read_back(tmp_path / "stats-2024050111.jsonl") == [record(NOON - 10)]


def test_a_dead_exporters_current_hour_is_continued_after_its_cut_line(tmp_path: Path) -> None:
    """Appending resumes on a new line, so a line cut by a crash spoils only itself."""
    cut = record_to_json_line(record(NOON + 5))[:30]
    whole = record_to_json_line(record(NOON + 1))
    (tmp_path / in_progress_name("2024050112")).write_text(f"{whole}\n{cut}")
    exporter = StatsExporter(tmp_path, ManualClock(NOON + 10))
    exporter.write([record(NOON + 10)])
    path = exporter.close()
    assert path is not None
    assert path.read_text().splitlines() == [whole, cut, record_to_json_line(record(NOON + 10))]


def test_an_empty_leftover_is_removed_rather_than_published(tmp_path: Path) -> None:
    """A crash before the first write leaves an empty file, which is not worth publishing."""
    (tmp_path / in_progress_name("2024050111")).touch()
    exporter = StatsExporter(tmp_path, ManualClock(NOON))
    exporter.write([record(NOON)])
    exporter.close()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["stats-2024050112.jsonl"]
