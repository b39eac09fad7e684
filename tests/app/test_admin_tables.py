"""
Tests of how the management subcommands print for a person
(:mod:`stompbroker.app.admin_tables`): short headers, rounded numbers, words.
"""

from __future__ import annotations

import io

import pytest

from stompbroker.app.admin_tables import (
    DESTINATIONS,
    DETACHED,
    OVERVIEW,
    count_of,
    duration,
    moment,
    print_table,
    size,
)


def table(rows: list[dict[str, object]], columns: list) -> list[str]:
    """:returns: the printed lines of a table."""
    out = io.StringIO()
    print_table(rows, columns, out)
    return out.getvalue().splitlines()


def test_destinations_have_short_headers_and_rates_to_one_decimal() -> None:
    """``messages_delivered_per_second`` 1.9997818231195785 shows as ``delivered/s`` 2.0."""
    row = {
        "destination": "/queue/orders",
        "kind": "queue",
        "depth": 5667,
        "in_flight": 0,
        "consumers": 1,
        "producers": 2,
        "messages_in_per_second": 12.345678,
        "messages_delivered_per_second": 1.9997818231195785,
        "policy": "orders",
    }
    header, line = table([row], DESTINATIONS)
    assert header.split("  ")[0] == "destination"
    assert "delivered/s" in header and "per_second" not in header
    assert line.split() == [
        *("/queue/orders", "queue", "5667", "0", "1", "2", "12.3", "2.0", "orders")
    ]


def test_the_overview_shows_uptime_in_words() -> None:
    """``uptime_s`` 62.43774223327637 shows as ``uptime`` 1 min 2 s."""
    overview = {"connections": 3, "messages_in": 10, "uptime_s": 62.43774223327637}
    header, line = table([overview], OVERVIEW)
    assert header.split() == ["connections", "messages", "in", "uptime"]
    assert line.split() == ["3", "10", "1", "min", "2", "s"]


@pytest.mark.parametrize(
    "seconds, words",
    [
        (0.4, "0 s"),
        (59.9, "59 s"),
        (62.4, "1 min 2 s"),
        (3 * 3600 + 240, "3 h 4 min"),
        (180000, "2 d 2 h"),
    ],
)
def test_durations_read_as_words(seconds: float, words: str) -> None:
    """Seconds become the two largest units, to the second."""
    assert duration(seconds) == words


def test_sizes_times_and_counts() -> None:
    """Bytes in KiB/MiB, times to the second, and a count of one in the singular."""
    assert [size(512), size(1536), size(3 * 1024**2), size(5 * 1024**3)] == [
        "512 B",
        "1.5 KiB",
        "3.0 MiB",
        "5.0 GiB",
    ]
    assert moment("2024-05-01T12:00:10.123Z") == "2024-05-01T12:00:10Z"
    assert moment(None) == "-"
    assert (count_of(1, "message"), count_of(0, "message"), count_of(40, "message")) == (
        "1 message",
        "0 messages",
        "40 messages",
    )


def test_a_missing_value_is_a_dash() -> None:
    """A login of None (an anonymous client) shows as ``-``, keeping the columns in place."""
    _, line = table([{"id": "s1", "login": None, "version": "1.2", "subscriptions": 1}], DETACHED)
    assert line.split()[:4] == ["s1", "-", "1.2", "1"]
