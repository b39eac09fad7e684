"""
The dashboard's charts, drawn with matplotlib as inline SVG.

The ``Agg`` backend needs no display; text is left as text in the SVG
(``svg.fonttype: none``) so the page's font draws it.  Each function takes
plain rows (dicts) already collected from Spark and returns one ``<svg>``
element; a chart with nothing to show says so instead of drawing empty axes.
Lines keep one colour per destination across charts: the destinations'
order, busiest first, picks it.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

MAX_POINTS = 150
BUCKETS = (
    ("1 minute", 60),
    ("5 minutes", 300),
    ("15 minutes", 900),
    ("1 hour", 3600),
    ("2 hours", 7200),
    ("6 hours", 6 * 3600),
    ("1 day", 86400),
)
PALETTE = ("#2563eb", "#f97316", "#16a34a", "#dc2626", "#9333ea", "#0891b2", "#ca8a04")


def chart_bucket(span_seconds: float) -> str:
    """
    :param span_seconds: the time the stats cover.
    :returns: the smallest bucket of :data:`BUCKETS` that keeps a line within
        :data:`MAX_POINTS` points.
    """
    for name, seconds in BUCKETS:
        if span_seconds / seconds <= MAX_POINTS:
            return name
    return BUCKETS[-1][0]


def _svg(figure: Any) -> str:
    import matplotlib.pyplot as plt

    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight")
    plt.close(figure)
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def _figure(height: float = 2.8) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update(
        {
            "svg.fonttype": "none",
            "font.size": 10,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "axes.edgecolor": "#94a3b8",
            "axes.grid": True,
            "grid.color": "#e2e8f0",
            "grid.linewidth": 0.8,
            "xtick.color": "#475569",
            "ytick.color": "#475569",
            "legend.frameon": False,
        }
    )
    figure, axes = plt.subplots(figsize=(6.4, height))
    return figure, axes


def _format_time_axis(axes: Any) -> None:
    import matplotlib.dates as mdates

    locator = mdates.AutoDateLocator(minticks=3, maxticks=8, tz=UTC)
    axes.xaxis.set_major_locator(locator)
    axes.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=UTC))


def _empty_chart(message: str) -> str:
    figure, axes = _figure(1.2)
    axes.axis("off")
    axes.text(0.5, 0.5, message, ha="center", va="center", color="#64748b")
    return _svg(figure)


def destination_chart(
    rows: Iterable[Mapping[str, Any]], destinations: Sequence[str], value: str, ylabel: str
) -> str:
    """
    :param rows: :func:`sparkjobs.transforms.destination_series` rows, in time order.
    :param destinations: the lines to draw, busiest first; each keeps its colour on every chart.
    :param value: the column to plot.
    :returns: an SVG element.
    """
    lines: dict[str, list[tuple[datetime, float]]] = {name: [] for name in destinations}
    for row in rows:
        amount = row[value]
        # A gap, not a zero: a null rate or lag means "undefined" (nothing to divide by).
        point = (row["bucket"], math.nan if amount is None else amount)
        lines[row["destination"]].append(point)
    if not any(lines.values()):
        return _empty_chart("no destination records")
    figure, axes = _figure()
    for index, (name, points) in enumerate(lines.items()):
        if points:
            times, values = zip(*points, strict=True)
            axes.plot(times, values, label=name, color=PALETTE[index % len(PALETTE)], linewidth=1.6)
    axes.set_ylabel(ylabel)
    axes.set_ylim(bottom=0)
    _format_time_axis(axes)
    axes.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    return _svg(figure)


def connections_chart(rows: Sequence[Mapping[str, Any]], bucket: str) -> str:
    """
    :param rows: :func:`sparkjobs.transforms.broker_series` rows.
    :returns: an SVG element: open connections as a line, opened and closed as bars.
    """
    if not rows:
        return _empty_chart("no broker records")
    import matplotlib.dates as mdates

    figure, axes = _figure()
    times = [row["bucket"] for row in rows]
    width = dict(BUCKETS)[bucket] / 86400 * 0.4  # days, as matplotlib dates count
    opened = [row["connections_opened"] or 0 for row in rows]
    closed = [row["connections_closed"] or 0 for row in rows]
    numbers = mdates.date2num(times)
    axes.bar(numbers - width / 2, opened, width, color="#86efac", label=f"opened per {bucket}")
    axes.bar(numbers + width / 2, closed, width, color="#fca5a5", label=f"closed per {bucket}")
    axes.plot(
        times,
        [row["connections_max"] or 0 for row in rows],
        color="#2563eb",
        linewidth=1.6,
        label="open (peak)",
    )
    axes.set_ylabel("connections")
    axes.set_ylim(bottom=0)
    _format_time_axis(axes)
    axes.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    return _svg(figure)


def traffic_chart(top: Sequence[Mapping[str, Any]]) -> str:
    """
    :param top: ``top_destinations`` rows, busiest first.
    :returns: an SVG element: messages in and delivered per destination, as horizontal bars.
    """
    if not top:
        return _empty_chart("no destination records")
    figure, axes = _figure(0.5 + 0.32 * len(top))
    names = [row["destination"] for row in reversed(top)]
    positions = range(len(names))
    received = [row["messages_in"] for row in reversed(top)]
    delivered = [row["messages_delivered"] for row in reversed(top)]
    axes.barh([p + 0.2 for p in positions], received, 0.4, color=PALETTE[0], label="in")
    axes.barh([p - 0.2 for p in positions], delivered, 0.4, color=PALETTE[1], label="delivered")
    axes.set_yticks(list(positions), names)
    axes.grid(axis="y", visible=False)
    axes.set_xlabel("messages")
    axes.legend(loc="lower right", fontsize=8)
    return _svg(figure)
