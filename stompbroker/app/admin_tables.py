"""
How the ``stompbroker`` management subcommands print the API's answers for a
person: aligned columns under short headers (``in/s``, not
``messages_in_per_second``), rates to one decimal, durations in words
(``1 min 2 s``, not ``62.43774223327637``), sizes in KiB and MiB, times to the
second, and counts that read for one (``moved 1 message``).  ``--json`` prints
the API's own JSON instead, unrounded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TextIO

__all__ = [
    "CONNECTIONS",
    "DESTINATIONS",
    "DETACHED",
    "NODES",
    "OVERVIEW",
    "Column",
    "count_of",
    "print_table",
]

#: One column: the API's field, its header, and how a value is shown.
Column = tuple[str, str, Callable[[Any], str]]


def plain(value: Any) -> str:
    """:returns: the value as it is; ``-`` for none or an empty text."""
    if value is None or value == "":
        return "-"
    return str(value)


def rate(value: Any) -> str:
    """:returns: a rate per second to one decimal (``2.0``)."""
    return f"{float(value):.1f}"


def duration(value: Any) -> str:
    """:returns: seconds in words: ``45 s``, ``1 min 2 s``, ``3 h 4 min``, ``2 d 1 h``."""
    seconds = int(float(value))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes} min"
    if minutes:
        return f"{minutes} min {seconds} s"
    return f"{seconds} s"


def size(value: Any) -> str:
    """:returns: bytes as ``512 B``, ``1.5 KiB``, ``3.2 MiB``, ``1.1 GiB``."""
    amount = float(value)
    for unit in ("B", "KiB", "MiB"):
        if amount < 1024:
            return f"{int(amount)} B" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    return f"{amount:.1f} GiB"


def moment(value: Any) -> str:
    """:returns: an API time (``2024-05-01T12:00:10.123Z``) to the second (``...:10Z``)."""
    if not value:
        return "-"
    text = str(value)
    return f"{text.partition('.')[0]}Z" if "." in text else text


def yes_no(value: Any) -> str:
    """:returns: ``yes`` or ``no``."""
    return "yes" if value else "no"


OVERVIEW: list[Column] = [
    ("connections", "connections", plain),
    ("messages_in", "messages in", plain),
    ("uptime_s", "uptime", duration),
]
NODES: list[Column] = [
    ("name", "node", plain),
    ("engine", "engine", plain),
    ("here", "here", yes_no),
]
CONNECTIONS: list[Column] = [
    ("id", "id", plain),
    ("peer", "peer", plain),
    ("login", "login", plain),
    ("transport", "transport", plain),
    ("version", "version", plain),
    ("subscriptions", "subs", plain),
    ("messages_in", "msgs in", plain),
    ("messages_out", "msgs out", plain),
    ("bytes_in", "in", size),
    ("bytes_out", "out", size),
    ("connected_since", "connected since", moment),
]
DESTINATIONS: list[Column] = [
    ("destination", "destination", plain),
    ("kind", "kind", plain),
    ("depth", "depth", plain),
    ("in_flight", "in flight", plain),
    ("consumers", "consumers", plain),
    ("producers", "producers", plain),
    ("messages_in_per_second", "in/s", rate),
    ("messages_delivered_per_second", "delivered/s", rate),
    ("policy", "policy", plain),
]
POLICIES: list[Column] = [
    ("name", "name", plain),
    ("pattern", "pattern", plain),
    ("apply-to", "apply to", plain),
    ("priority", "priority", plain),
    ("definition", "definition", plain),
]
DETACHED: list[Column] = [
    ("id", "id", plain),
    ("login", "login", plain),
    ("version", "version", plain),
    ("subscriptions", "subs", plain),
    ("buffered_frames", "buffered", plain),
    ("buffered_bytes", "buffered size", size),
    ("missed", "missed", plain),
    ("gap", "gap", yes_no),
    ("detached_since", "detached since", moment),
    ("expires_at", "expires", moment),
]


def print_table(rows: Sequence[dict[str, Any]], columns: Sequence[Column], out: TextIO) -> None:
    """Print ``rows`` as aligned columns under their headers; numbers align right."""
    cells = [[show(row[key]) if key in row else "-" for key, _, show in columns] for row in rows]
    headers = [header for _, header, _ in columns]
    widths = [
        max([len(header)] + [len(cell[i]) for cell in cells]) for i, header in enumerate(headers)
    ]
    numeric = [
        bool(cells) and all(cell[i][:1].isdigit() or cell[i] == "-" for cell in cells)
        for i in range(len(columns))
    ]
    for line in [headers, *cells]:
        print(
            "  ".join(
                cell.rjust(width) if right else cell.ljust(width)
                for cell, width, right in zip(line, widths, numeric, strict=True)
            ).rstrip(),
            file=out,
        )


def count_of(count: int, noun: str) -> str:
    """:returns: ``1 message``, ``40 messages``: a count with its noun."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
