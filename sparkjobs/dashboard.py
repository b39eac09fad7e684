"""
The report's HTML dashboard: one self-contained file a person can open anywhere.

The charts (:mod:`sparkjobs.charts`) are inline SVG and the CSS is inline; the
page has no scripts and loads nothing, so it can be mailed or archived as it is.

Only small, already aggregated data reaches the driver: the summary row, the
top destinations, and time series of the :data:`CHART_DESTINATIONS` busiest
destinations, coarsened (:func:`sparkjobs.charts.chart_bucket`) so that a
chart has at most about 150 points per line, whatever span the stats cover.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from attrs import frozen
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sparkjobs import transforms
from sparkjobs.charts import (
    chart_bucket,
    connections_chart,
    destination_chart,
    traffic_chart,
)

if TYPE_CHECKING:
    from sparkjobs.report import ReportTables

CHART_DESTINATIONS = 6


@frozen
class DashboardData:
    """Everything the page shows, collected from Spark into plain Python values."""

    summary: Mapping[str, Any]
    top_destinations: Sequence[Mapping[str, Any]]
    charted: Sequence[str]
    destination_series: Sequence[Mapping[str, Any]]
    broker_series: Sequence[Mapping[str, Any]]
    bad_record_counts: Sequence[Mapping[str, Any]]
    bucket: str
    generated: datetime


def _epoch(frame: DataFrame, *columns: str) -> DataFrame:
    """Timestamps as epoch seconds: collect() would turn them into naive local times."""
    return frame.select(
        *[
            (F.unix_micros(name) / 1e6).alias(name) if name in columns else F.col(name)
            for name in frame.columns
        ]
    )


def _rows(frame: DataFrame, *time_columns: str) -> list[dict[str, Any]]:
    rows = _epoch(frame, *time_columns).collect()
    return [
        {
            name: (
                datetime.fromtimestamp(value, UTC)
                if name in time_columns and value is not None
                else value
            )
            for name, value in row.asDict().items()
        }
        for row in rows
    ]


def collect_dashboard_data(tables: ReportTables, generated: datetime) -> DashboardData:
    """
    Bring the dashboard's data to the driver.

    :param tables: the report's tables.
    :param generated: when the report ran, shown on the page.
    """
    (summary,) = _rows(tables.summary, "first_ts", "last_ts")
    top = _rows(tables.top_destinations)
    span = 0.0
    if summary["first_ts"] is not None:
        span = (summary["last_ts"] - summary["first_ts"]).total_seconds()
    bucket = chart_bucket(span)
    charted = [row["destination"] for row in top[:CHART_DESTINATIONS]]
    destination_series = transforms.destination_series(
        tables.destination_per_minute, charted, bucket
    ).orderBy("bucket", "destination")
    broker_series = transforms.broker_series(tables.broker_per_minute, bucket).orderBy("bucket")
    return DashboardData(
        summary=summary,
        top_destinations=top,
        charted=charted,
        destination_series=_rows(destination_series, "bucket"),
        broker_series=_rows(broker_series, "bucket"),
        bad_record_counts=_rows(transforms.bad_record_counts(tables.bad_records)),
        bucket=bucket,
        generated=generated,
    )


def write_dashboard(tables: ReportTables, path: str) -> None:
    """
    Collect the data, render the page, write it to the local file ``path``.

    :raises OSError: when the file cannot be written.
    """
    data = collect_dashboard_data(tables, datetime.now(UTC))
    with open(path, "w", encoding="utf-8") as page:
        page.write(render_dashboard(data))


def _number(value: Any, digits: int = 0) -> str:
    if value is None:
        return "—"
    return f"{value:,.{digits}f}"


def _bytes(value: Any) -> str:
    if value is None:
        return "—"
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    amount, index = float(value), 0
    while amount >= 1024 and index < len(units) - 1:
        amount, index = amount / 1024, index + 1
    return f"{amount:,.0f} B" if index == 0 else f"{amount:,.1f} {units[index]}"


def _percent(value: Any) -> str:
    return "—" if value is None else f"{value * 100:.1f} %"


def _seconds(value: Any) -> str:
    return "—" if value is None else f"{value:,.1f} s"


def _time(value: datetime | None) -> str:
    return "—" if value is None else value.strftime("%Y-%m-%d %H:%M UTC")


def _tile(label: str, value: str, note: str = "") -> str:
    note_html = f'<div class="note">{html.escape(note)}</div>' if note else ""
    return (
        f'<div class="tile"><div class="label">{html.escape(label)}</div>'
        f'<div class="value">{html.escape(value)}</div>{note_html}</div>'
    )


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], numeric_from: int = 1) -> str:
    def cells(tag: str, values: Sequence[str]) -> str:
        return "".join(
            f'<{tag} class="{"num" if index >= numeric_from else ""}">{html.escape(value)}</{tag}>'
            for index, value in enumerate(values)
        )

    body = "".join(f"<tr>{cells('td', row)}</tr>" for row in rows)
    return f"<table><thead><tr>{cells('th', headers)}</tr></thead><tbody>{body}</tbody></table>"


def _card(title: str, content: str, wide: bool = False) -> str:
    classes = "card wide" if wide else "card"
    return f'<section class="{classes}"><h2>{html.escape(title)}</h2>{content}</section>'


STYLE = """
body { margin: 0; background: #f1f5f9; color: #0f172a;
       font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
header { background: #0f172a; color: #f8fafc; padding: 20px 32px; }
header h1 { margin: 0; font-size: 22px; font-weight: 600; }
header p { margin: 4px 0 0; color: #cbd5e1; }
main { padding: 24px 32px; max-width: 1280px; margin: auto; }
.tiles { display: grid; grid-template-columns: repeat(auto-fit, minmax(150px, 1fr)); gap: 12px; }
.tile { background: #fff; border-radius: 8px; padding: 12px 16px; box-shadow: 0 1px 2px #0f172a14; }
.tile .label { color: #64748b; font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
.tile .value { font-size: 22px; font-weight: 600; margin-top: 2px; }
.tile .note { color: #64748b; font-size: 12px; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(520px, 1fr));
        gap: 16px; margin-top: 16px; }
.card { background: #fff; border-radius: 8px; padding: 16px 20px; box-shadow: 0 1px 2px #0f172a14; }
.card.wide { grid-column: 1 / -1; }
.card h2 { margin: 0 0 8px; font-size: 15px; font-weight: 600; }
svg { width: 100%; height: auto; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th { text-align: left; color: #475569; font-weight: 600; border-bottom: 2px solid #e2e8f0;
     padding: 6px 8px; }
td { border-bottom: 1px solid #f1f5f9; padding: 6px 8px; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.warning { background: #fef3c7; border-left: 4px solid #f59e0b; padding: 10px 16px;
           border-radius: 6px; margin-top: 16px; }
.ok { color: #15803d; }
footer { color: #64748b; font-size: 12px; padding: 0 32px 24px; text-align: center; }
"""


def render_dashboard(data: DashboardData) -> str:
    """
    :returns: the dashboard page as one HTML document with inline CSS and SVG.
    """
    summary = data.summary
    bad = summary["bad_records"]
    tiles = "".join(
        [
            _tile("records", _number(summary["records"]), f"{_number(bad)} bad"),
            _tile("destinations", _number(summary["destinations"])),
            _tile("messages in", _number(summary["messages_in"])),
            _tile("messages delivered", _number(summary["messages_delivered"])),
            _tile("bytes in", _bytes(summary["bytes_in"])),
            _tile("bytes out", _bytes(summary["bytes_out"])),
            _tile(
                "connections opened",
                _number(summary["connections_opened"]),
                f"{_number(summary['connections_closed'])} closed",
            ),
        ]
    )
    if bad:
        problems = ", ".join(
            f"{_number(row['records'])} {row['problem']}" for row in data.bad_record_counts
        )
        quality = (
            f'<div class="warning"><strong>{_number(bad)} bad records</strong> were left out '
            f"of every figure ({html.escape(problems)}); the <code>bad_records</code> table "
            "holds each one with its file.</div>"
        )
    else:
        quality = ""
    per = f"per {data.bucket}" if data.bucket != "1 minute" else "per minute"
    charts = "".join(
        [
            _card(
                f"Messages in per second ({per}, busiest destinations)",
                destination_chart(
                    data.destination_series, data.charted, "messages_in_per_second", "msg/s"
                ),
            ),
            _card(
                f"Messages delivered per second ({per})",
                destination_chart(
                    data.destination_series, data.charted, "messages_delivered_per_second", "msg/s"
                ),
            ),
            _card(
                f"Peak depth ({per})",
                destination_chart(
                    data.destination_series, data.charted, "depth_max", "messages waiting"
                ),
            ),
            _card(
                f"Connections and churn ({per})",
                connections_chart(data.broker_series, data.bucket),
            ),
            _card(
                f"Consumer lag: mean depth over acknowledgement rate ({per})",
                destination_chart(data.destination_series, data.charted, "lag_seconds", "seconds"),
            ),
            _card("Top destinations by traffic", traffic_chart(data.top_destinations)),
            _card(
                "Top destinations",
                _table(
                    [
                        "#",
                        "destination",
                        "in",
                        "delivered",
                        "peak depth",
                        "p95 depth",
                        "lag",
                        "redelivered",
                        "dead-lettered",
                    ],
                    (
                        [
                            str(row["rank"]),
                            row["destination"],
                            _number(row["messages_in"]),
                            _number(row["messages_delivered"]),
                            _number(row["depth_peak"]),
                            _number(row["depth_p95"]),
                            _seconds(row["lag_seconds"]),
                            _percent(row["redelivery_ratio"]),
                            _percent(row["dead_letter_ratio"]),
                        ]
                        for row in data.top_destinations
                    ),
                    numeric_from=2,
                ),
                wide=True,
            ),
        ]
    )
    period = f"{_time(summary['first_ts'])} – {_time(summary['last_ts'])}"
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>stompbroker report · {html.escape(period)}</title>
<style>{STYLE}</style>
</head>
<body>
<header>
<h1>stompbroker traffic report</h1>
<p>{html.escape(period)}</p>
</header>
<main>
<div class="tiles">{tiles}</div>
{quality}
<div class="grid">{charts}</div>
</main>
<footer>Generated {html.escape(_time(data.generated))} by sparkjobs.report from the broker's
JSON Lines export. Tables: summary, destination_per_minute, broker_per_minute,
destination_summary, top_destinations, bad_records (Parquet, in the report's output
directory).</footer>
</body>
</html>
"""
