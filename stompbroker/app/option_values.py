"""
The parsers of option values: what each ``twistd stompbroker`` option's text
becomes (a positive count, seconds, a size in bytes, the heart-beat pair).

They live apart from :class:`stompbroker.app.options.Options`, whose table of
options is long enough on its own: each is a plain function of the option's
text, and needs no ``Options`` to test.  The small ones raise ``ValueError``, which
twistd's ``usage`` turns into a usage error naming the option; :func:`parse_size`
and :func:`parse_heartbeat` raise :class:`~twisted.python.usage.UsageError` themselves.
"""

from __future__ import annotations

from twisted.python import usage

from stompbroker.broker.flow.throttle import physical_memory

__all__ = [
    "non_negative",
    "non_negative_seconds",
    "parse_heartbeat",
    "parse_size",
    "positive",
    "positive_seconds",
    "stream_destination",
    "redelivery_limit",
]

_SIZE_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(f"must be a positive integer, got {text!r}")
    return value


def non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(f"must be 0 or more, got {text!r}")
    return value


def redelivery_limit(text: str) -> int:
    value = int(text)
    if value < -1:
        raise ValueError(f"must be 0 or more, or -1 for no limit, got {text!r}")
    return value


def positive_seconds(text: str) -> float:
    value = float(text)
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
    value = float(text)
    if not 0 <= value < float("inf"):
        raise ValueError(f"must be 0 or more seconds, got {text!r}")
    return value


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
