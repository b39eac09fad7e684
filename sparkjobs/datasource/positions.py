"""
Where a read starts and ends in each stream, from the options that say so.

Two vocabularies name the same positions: this source's own (``first``,
``last``, an offset ``N``, ``timestamp=SECONDS``) and the Kafka source's, so
that a job moved from Kafka keeps its options: ``earliest`` and ``latest``, a
JSON object per topic and partition (``{"/stream/orders": {"0": 23}}``, ``-2``
for earliest and ``-1`` for latest), and timestamps in milliseconds
(``startingTimestamp``, ``startingOffsetsByTimestamp``, ``endingTimestamp``,
``endingOffsetsByTimestamp``).  A stream is one log, Kafka's topic of one
partition: its partition is ``"0"``, or the offset is given without one
(``{"/stream/orders": 23}``).  As in Kafka, a JSON object names every stream read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from attrs import frozen

_TIMESTAMP = re.compile(r"timestamp=(\d+(?:\.\d*)?)")
#: Kafka's offsets that stand for a position: in JSON, -2 and -1.
EARLIEST, LATEST = -2, -1
KAFKA_NAMES = {EARLIEST: "earliest", LATEST: "latest"}
#: The options that say where a read starts, and where a batch read ends: at most one of each.
STARTING_OPTIONS = ("startingOffsets", "startingTimestamp", "startingOffsetsByTimestamp")
ENDING_OPTIONS = ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp")


_Position = TypeVar("_Position", "Start", "End")


class PositionError(ValueError):
    """An option that places a read names a position the source cannot take."""


@frozen
class Start:
    """
    Where reading starts: ``first``, ``last`` (the newest message), ``next``
    (after the newest: Kafka's ``latest``), ``offset`` (with ``value``) or
    ``timestamp`` (``value`` in POSIX seconds).
    """

    kind: str
    value: float = 0

    def header(self) -> str:
        """:returns: the ``x-stream-offset`` value that asks the broker for this start."""
        if self.kind == "offset":
            return f"offset={int(self.value)}"
        if self.kind == "timestamp":
            return f"timestamp={self.value}"
        return self.kind


@frozen
class End:
    """
    Where a batch read stops: ``latest`` (the newest message when the read is
    planned), before ``offset`` ``value``, or before the first message appended
    at or after ``timestamp`` ``value`` (POSIX seconds).
    """

    kind: str
    value: float = 0


def _parse_own_start(name: str, text: str) -> Start:
    if text in ("first", "last"):
        return Start(text)
    if text == "earliest":
        return Start("first")
    if text == "latest":
        return Start("next")
    if text.isdigit():
        return Start("offset", int(text))
    matched = _TIMESTAMP.fullmatch(text)
    if matched:
        return Start("timestamp", float(matched.group(1)))
    raise PositionError(
        f"option {name} must be first, last, an offset N, timestamp=SECONDS, earliest, latest"
        f" or a JSON object of offsets per stream, got {text!r}"
    )


def _per_stream(name: str, text: str, destinations: tuple[str, ...]) -> dict[str, int]:
    """:returns: the whole number the JSON object ``text`` gives each stream."""
    try:
        given: Any = json.loads(text)
    except ValueError as error:
        raise PositionError(f"option {name} is not valid JSON ({error}): {text!r}") from None
    if not isinstance(given, dict):
        raise PositionError(f"option {name} must be a JSON object of streams, got {text!r}")
    numbers = {}
    for stream, value in given.items():
        if stream not in destinations:
            raise PositionError(
                f"option {name} names {stream}, which is not read"
                f" (option destination: {', '.join(destinations)})"
            )
        if isinstance(value, dict):
            if list(value) != ["0"]:
                raise PositionError(
                    f'option {name}: a stream has one partition, "0"; {stream} is given'
                    f" {', '.join(map(repr, value)) or 'none'}"
                )
            value = value["0"]
        if isinstance(value, bool) or not isinstance(value, int):
            raise PositionError(f"option {name}: {stream} must be a whole number, got {value!r}")
        numbers[stream] = value
    missing = [stream for stream in destinations if stream not in numbers]
    if missing:
        raise PositionError(
            f"option {name} gives nothing for {', '.join(missing)}: name every stream read"
            f" (-2 for earliest, -1 for latest, where any will do)"
        )
    return numbers


def _milliseconds(name: str, value: int | str) -> float:
    """:returns: POSIX seconds of a Kafka timestamp in milliseconds."""
    if isinstance(value, str):
        if not value.strip().isdigit():
            raise PositionError(
                f"option {name} must be milliseconds since the epoch, got {value!r}"
            )
        value = int(value)
    if value < 0:
        raise PositionError(f"option {name}: a timestamp must not be negative, got {value}")
    return value / 1000


def starts(options: Mapping[str, str], destinations: tuple[str, ...]) -> dict[str, Start]:
    """
    :returns: each stream's :class:`Start`, from whichever starting option is given
        (``startingOffsets`` ``first`` when none is).
    :raises PositionError: for two starting options, a bad value, a malformed JSON,
        or a JSON object naming a stream not read or leaving one out.
    """
    name = _only_one(options, STARTING_OPTIONS)
    if name is None:
        return dict.fromkeys(destinations, Start("first"))
    text = options[name]
    timed = _by_time(name, text, destinations, lambda seconds: Start("timestamp", seconds))
    if timed is not None:
        return timed
    if not text.strip().startswith(("{", "[")):
        return dict.fromkeys(destinations, _parse_own_start(name, text.strip()))
    named = {EARLIEST: Start("first"), LATEST: Start("next")}
    return _offsets(name, text, destinations, named, lambda offset: Start("offset", offset))


def ends(options: Mapping[str, str], destinations: tuple[str, ...]) -> dict[str, End]:
    """
    :returns: each stream's :class:`End` (``latest`` when no ending option is given).
    :raises PositionError: as :func:`starts`; -2 (earliest) is no end.
    """
    name = _only_one(options, ENDING_OPTIONS)
    if name is None:
        return dict.fromkeys(destinations, End("latest"))
    text = options[name].strip()
    timed = _by_time(name, text, destinations, lambda seconds: End("timestamp", seconds))
    if timed is not None:
        return timed
    if text == "latest":
        return dict.fromkeys(destinations, End("latest"))
    if text.isdigit():
        return dict.fromkeys(destinations, End("offset", int(text)))
    if not text.startswith(("{", "[")):
        raise PositionError(
            f"option {name} must be latest, an offset N or a JSON object of offsets per stream,"
            f" got {text!r}"
        )
    return _offsets(
        name, text, destinations, {LATEST: End("latest")}, lambda offset: End("offset", offset)
    )


def _by_time(
    name: str, text: str, destinations: tuple[str, ...], at: Callable[[float], _Position]
) -> dict[str, _Position] | None:
    """:returns: per stream, ``at(seconds)`` of a Kafka timestamp option; ``None`` for another."""
    if name.endswith("OffsetsByTimestamp"):
        return {
            stream: at(_milliseconds(f"{name} of {stream}", value))
            for stream, value in _per_stream(name, text, destinations).items()
        }
    if name.endswith("Timestamp"):
        return dict.fromkeys(destinations, at(_milliseconds(name, text)))
    return None


def _offsets(
    name: str,
    text: str,
    destinations: tuple[str, ...],
    named: Mapping[int, _Position],
    at: Callable[[int], _Position],
) -> dict[str, _Position]:
    """:returns: per stream, Kafka's JSON ``text`` as: ``at(offset)``, or ``named``."""
    found = {}
    for stream, offset in _per_stream(name, text, destinations).items():
        if offset in named:
            found[stream] = named[offset]
        elif offset >= 0:
            found[stream] = at(offset)
        else:
            meanings = ", ".join(f"{number} ({KAFKA_NAMES[number]})" for number in named)
            raise PositionError(
                f"option {name}: {stream} must be an offset or {meanings}, got {offset}"
            )
    return found


def check_range(starting: Mapping[str, Start], ending: Mapping[str, End]) -> None:
    """:raises PositionError: for a stream whose start offset lies after its end offset."""
    for stream, start in starting.items():
        end = ending[stream]
        if start.kind == "offset" and end.kind == "offset" and start.value > end.value:
            raise PositionError(
                f"the start of {stream} ({int(start.value)}) is after its end"
                f" ({int(end.value)}): the range would be empty"
            )


def _only_one(options: Mapping[str, str], names: tuple[str, ...]) -> str | None:
    given = [name for name in names if name in options]
    if len(given) > 1:
        raise PositionError(f"give one of options {' and '.join(given)}, not both")
    return given[0] if given else None
