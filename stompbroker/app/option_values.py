"""
The parsers of option values: what each ``twistd stompbroker`` option's text
becomes (a positive count, seconds, a size in bytes, the heart-beat pair).

They live apart from :class:`stompbroker.app.options.Options`, whose table of
options is long enough on its own: each is a plain function of the option's
text, and needs no ``Options`` to test.  The small ones raise ``ValueError`` saying
what the value should be; :func:`named` wraps them so that the usage error names the
option (twistd's ``usage`` alone says "Parameter type enforcement failed: invalid
literal for int()").  :func:`parse_size` and :func:`parse_heartbeat` raise
:class:`~twisted.python.usage.UsageError` themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.python import usage

from stompbroker.broker.flow.disk_alarm import DiskFreeLimit
from stompbroker.broker.flow.publisher_pauses import physical_memory

__all__ = [
    "named",
    "non_negative",
    "non_negative_seconds",
    "parse_disk_free_limit",
    "parse_heartbeat",
    "parse_size",
    "positive",
    "positive_seconds",
    "stream_destination",
    "redelivery_limit",
]

_SIZE_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def whole_number(text: str) -> int:
    """:raises ValueError: saying that ``text`` is not a whole number."""
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"takes a whole number, got {text!r}") from None


def number(text: str) -> float:
    """:raises ValueError: saying that ``text`` is not a number."""
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"takes a number, got {text!r}") from None


def positive(text: str) -> int:
    value = whole_number(text)
    if value < 1:
        raise ValueError(f"must be a positive integer, got {text!r}")
    return value


def non_negative(text: str) -> int:
    value = whole_number(text)
    if value < 0:
        raise ValueError(f"must be 0 or more, got {text!r}")
    return value


def redelivery_limit(text: str) -> int:
    value = whole_number(text)
    if value < -1:
        raise ValueError(f"must be 0 or more, or -1 for no limit, got {text!r}")
    return value


def positive_seconds(text: str) -> float:
    value = number(text)
    if not 0 < value < float("inf"):
        raise ValueError(f"must be more than 0 seconds, got {text!r}")
    return value


def stream_destination(text: str) -> str | None:
    """:returns: a ``/stream/NAME`` destination, or ``None`` for ``none``."""
    if text == "none":
        return None
    if not text.startswith("/stream/") or len(text) == len("/stream/"):
        raise ValueError(f"must be a /stream/NAME destination or none, got {text!r}")
    return text


def non_negative_seconds(text: str) -> float:
    value = number(text)
    if not 0 <= value < float("inf"):
        raise ValueError(f"must be 0 or more seconds, got {text!r}")
    return value


class _NamedCoercer:
    """A parser of one option's value whose errors name the option."""

    def __init__(self, option: str, coerce: Callable[[str], Any]) -> None:
        self.option = option
        self.coerce = coerce
        # twistd's --help shows it beside the option.
        self.coerceDoc = getattr(coerce, "coerceDoc", "")

    def __call__(self, text: str) -> Any:
        try:
            return self.coerce(text)
        except ValueError as error:
            raise usage.UsageError(f"--{self.option} {error}") from None


def named(parameters: list[Any]) -> list[Any]:
    """
    :param parameters: an ``optParameters`` table (name, short, default, help[, coerce]).
    :returns: the same table, each parser wrapped so that a bad value is a usage
        error that names its option (``--max-connections takes a whole number, got
        'abc'``).
    """
    return [
        [*row[:4], _NamedCoercer(row[0], row[4])] if len(row) > 4 and row[4] else row
        for row in parameters
    ]


def parse_size(text: str, option: str) -> int:
    """
    :param text: bytes, with an optional unit ``K``, ``M``, ``G`` or ``T`` (powers
        of 1024), or a percentage of the machine's memory such as ``40%``.
    :param option: the option's name, for the error message.
    :returns: the size in bytes.
    :raises usage.UsageError: for anything else.
    """
    cleaned = text.strip().upper().removesuffix("B").removesuffix("I")
    try:
        if cleaned.endswith("%"):
            share = float(cleaned[:-1]) / 100
            if not 0 <= share <= 1:
                raise ValueError(text)
            return int(physical_memory() * share)
        unit = cleaned[-1:] if cleaned[-1:] in _SIZE_UNITS else ""
        value = float(cleaned[: len(cleaned) - len(unit)])
        if not 0 <= value < float("inf"):
            raise ValueError(text)
        return int(value * _SIZE_UNITS[unit])
    except ValueError:
        raise usage.UsageError(
            f"--{option} takes bytes (with K, M, G or T) or a share of memory such as 40%,"
            f" got {text!r}"
        ) from None


def parse_disk_free_limit(text: str) -> DiskFreeLimit:
    """
    :param text: bytes, with an optional unit ``K``, ``M``, ``G`` or ``T``, or a
        percentage of the data directory's filesystem such as ``5%``; 0 turns the
        disk alarm off.
    :raises usage.UsageError: for anything else.
    """
    refusal = usage.UsageError(
        "--disk-free-limit takes bytes (with K, M, G or T) or a share of the data"
        f" directory's filesystem below 100%, such as 5%, got {text!r}"
    )
    cleaned = text.strip()
    if not cleaned.endswith("%"):
        try:
            return DiskFreeLimit(size=parse_size(cleaned, "disk-free-limit"))
        except usage.UsageError:
            raise refusal from None
    try:
        share = float(cleaned[:-1]) / 100
    except ValueError:
        raise refusal from None
    if not 0 <= share < 1:
        raise refusal
    return DiskFreeLimit(share=share)


def parse_heartbeat(text: str, option: str = "heartbeat") -> tuple[int, int]:
    """
    :param text: ``"SEND,RECV"`` in milliseconds.
    :param option: the option's name, for the error.
    :returns: the pair of integers.
    :raises usage.UsageError: when the text is not two non-negative integers.
    """
    try:
        send, receive = (int(part) for part in text.split(","))
    except ValueError:
        raise usage.UsageError(f"--{option} takes SEND,RECV in ms, got {text!r}") from None
    if send < 0 or receive < 0:
        raise usage.UsageError(f"--{option} values must be 0 or more, got {text!r}")
    return (send, receive)
