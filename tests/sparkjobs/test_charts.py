"""
The dashboard's charts: resolution, and what each chart draws from plain rows.

No Spark here: the charts take rows already collected.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from sparkjobs.charts import chart_bucket, connections_chart, destination_chart, traffic_chart

#: matplotlib's first drawing on a machine runs fc-list to find the fonts: a process.
pytestmark = pytest.mark.integration

NOON = datetime(2024, 5, 1, 12, tzinfo=UTC)


@pytest.mark.parametrize(
    ("span_seconds", "bucket"),
    [
        (0, "1 minute"),
        (150 * 60, "1 minute"),
        (151 * 60, "5 minutes"),
        (24 * 3600, "15 minutes"),
        (6 * 86400, "1 hour"),
        (7 * 86400, "2 hours"),
        (10 * 365 * 86400, "1 day"),
    ],
)
def test_chart_bucket_keeps_lines_short(span_seconds: float, bucket: str) -> None:
    """Charts stay readable: a few hours are drawn by the minute, a week in 2-hour steps."""
    assert chart_bucket(span_seconds) == bucket


def test_destination_chart_draws_one_line_per_destination_and_gaps_for_nulls() -> None:
    """Each destination gets a labelled line; an undefined value (null lag) is a gap, not 0."""
    rows = [
        {"bucket": NOON + timedelta(minutes=m), "destination": name, "lag_seconds": value}
        for m in range(3)
        for name, value in (("/queue/a", 1.0 * m), ("/queue/b", None if m == 1 else 2.0))
    ]
    svg = destination_chart(rows, ["/queue/a", "/queue/b"], "lag_seconds", "seconds")
    assert svg.startswith("<svg")
    assert "/queue/a" in svg and "/queue/b" in svg
    assert "nan" not in svg.lower()


def test_charts_without_rows_say_so() -> None:
    """An empty chart carries a message instead of bare axes."""
    assert "no destination records" in destination_chart([], [], "depth_max", "messages")
    assert "no broker records" in connections_chart([], "1 minute")
    assert "no destination records" in traffic_chart([])


def test_connections_and_traffic_charts_label_their_series() -> None:
    """The churn chart names opened, closed and open; the traffic chart names its destinations."""
    rows = [
        {"bucket": NOON, "connections_max": 5, "connections_opened": 2, "connections_closed": 1},
        {
            "bucket": NOON + timedelta(minutes=5),
            "connections_max": 4,
            "connections_opened": 0,
            "connections_closed": 1,
        },
    ]
    churn = connections_chart(rows, "5 minutes")
    assert "opened per 5 minutes" in churn and "open (peak)" in churn
    top = [{"destination": "/queue/a", "messages_in": 5, "messages_delivered": 4}]
    assert "/queue/a" in traffic_chart(top)
