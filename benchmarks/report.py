"""
What the suite prints: a table of every run, a table of ratios when comparing, and JSON lines;
and what a micro-benchmark prints (:func:`print_results`).

The JSON lines carry every figure; the tables carry the headline figure of
each scenario (see :data:`benchmarks.cases.HEADLINE`), whether nothing was
lost or duplicated, and the CPU used by the generator, the broker and the
whole machine, in percent of one core.  The machine is shared, so a high
machine figure next to a low generator-plus-broker figure means someone else
was busy during the run.
"""

from __future__ import annotations

import json
import re
import statistics
from typing import Any, TextIO

from benchmarks.cases import HEADLINE


def json_line(result: dict[str, Any]) -> str:
    """:returns: the result as one line of JSON."""
    return json.dumps(result, sort_keys=False, default=str)


def headline(result: dict[str, Any]) -> tuple[str, float | None]:
    """:returns: the name and value of the figure the result's scenario is judged by."""
    name, _ = HEADLINE[result["scenario"]][0]
    return name, result.get(name)


def _cell(value: Any, decimals: int = 3) -> str:
    """Format a figure: counts with separators, rates whole, small ones with ``decimals``."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{decimals}f}" if abs(value) < 100 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _status(result: dict[str, Any]) -> str:
    if result.get("ok"):
        return "ok"
    if result.get("skipped"):
        return f"skipped: {result['skipped']}"
    return f"FAILED: {result.get('error') or result.get('drain') or 'lost or duplicated'}"


def print_table(results: list[dict[str, Any]], out: TextIO) -> None:
    """Print one row per run."""
    header = (
        "case",
        "target",
        "figure",
        "value",
        "lost",
        "dup",
        "gen cpu%",
        "broker cpu%",
        "machine cpu%",
        "",
    )
    rows = [header]
    for result in results:
        name, value = headline(result)
        if result["scenario"] == "idle" and result.get("rss_per_conn_kb") is not None:
            name = f"held ({result['rss_per_conn_kb']} kB each)"
        rows.append(
            (
                result["case"],
                result["target"],
                name,
                _cell(value),
                _cell(result.get("lost")),
                _cell(result.get("duplicated")),
                _cell(result.get("gen_cpu_pct"), 1),
                _cell(result.get("broker_cpu_pct"), 1),
                _cell(result.get("machine_cpu_pct"), 1),
                _status(result),
            )
        )
    _print_rows(rows, out)


def print_ratios(results: list[dict[str, Any]], ours: str, other: str, out: TextIO) -> None:
    """
    Print, per case and figure, the median of each broker's ok runs and their ratio.

    :param ours: the name of the broker the ratio is of.
    :param other: the name of the broker it is compared with.
    """
    rows = [("case", "figure", ours, other, f"{ours} / {other}")]
    cases = list(dict.fromkeys(result["case"] for result in results))
    for case in cases:
        of_case = [result for result in results if result["case"] == case]
        for name, more_is_better in HEADLINE[of_case[0]["scenario"]]:
            medians = []
            for target in (ours, other):
                values = [
                    result[name]
                    for result in of_case
                    if result["target"] == target
                    and result.get("ok")
                    and result.get(name) is not None
                ]
                medians.append(statistics.median(values) if values else None)
            ratio = None
            # A broker that gave memory back during a run can show a negative
            # growth; a ratio with it would mean nothing.
            if medians[0] is not None and medians[1] is not None and min(medians) > 0:
                ratio = round(medians[0] / medians[1], 2)
            label = name if more_is_better else f"{name} (lower is better)"
            rows.append((case, label, _cell(medians[0]), _cell(medians[1]), _cell(ratio, 2)))
    _print_rows(rows, out)


def _print_rows(rows: list[tuple[str, ...]], out: TextIO) -> None:
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    for row in rows:
        cells = []
        for column, cell in enumerate(row):
            text = (
                cell.rjust(widths[column])
                if column and cell[:1].isdigit()
                else cell.ljust(widths[column])
            )
            cells.append(text)
        print("  ".join(cells).rstrip(), file=out)


def print_results(results: list[dict[str, Any]], columns: tuple[tuple[str, str, str], ...]) -> None:
    """
    Print a micro-benchmark's results on stdout as a table, then each as a JSON line.

    :param columns: ``(title, key, format spec)`` for each column of the table,
        such as ``("walk µs", "walk_us", ">10.3f")``; the title takes the spec's
        alignment and width.
    """
    print("".join(f"{title:{_width(spec)}}" for title, _, spec in columns))
    for result in results:
        print("".join(f"{result[key]:{spec}}" for _, key, spec in columns))
    for result in results:
        print(json.dumps(result))


def _width(spec: str) -> str:
    """:returns: the alignment and width of a format spec (``">10"`` of ``">10.3f"``)."""
    found = re.match(r"[<>^]?\d*", spec)
    return found.group() if found else ""
