"""
How selector values read and combine: header text as numbers and booleans, Java's
integer division, the comparison and arithmetic operators, and the JMS header names.

STOMP headers are text; JMS properties are typed.  These functions are where text
becomes a number or a boolean for a comparison, and where it fails to (``None``,
which the compiler turns into SQL's unknown).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from typing import Any

__all__ = [
    "ARITHMETIC",
    "COMPARISONS",
    "JMS_HEADERS",
    "REFLECTED",
    "to_boolean",
    "to_number",
]

#: JMS header names -> (STOMP header, value when the header is absent).
JMS_HEADERS: dict[str, tuple[str, str | None]] = {
    "JMSMessageID": ("message-id", None),
    "JMSCorrelationID": ("correlation-id", None),
    "JMSType": ("type", None),
    "JMSPriority": ("priority", "4"),
    "JMSTimestamp": ("timestamp", None),
    "JMSExpiration": ("expires", "0"),
    "JMSDestination": ("destination", None),
    "JMSReplyTo": ("reply-to", None),
    "JMSRedelivered": ("redelivered", "false"),
}

_INTEGER = re.compile(r"[+-]?\d+", re.ASCII)
_DECIMAL = re.compile(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?", re.ASCII)


def to_number(text: str) -> int | float | None:
    """:returns: a header's text as a number, or ``None`` if it does not read as one."""
    if text.isdigit() and text.isascii():
        return int(text)
    if _INTEGER.fullmatch(text):
        return int(text)
    if _DECIMAL.fullmatch(text):
        return float(text)
    return None


def to_boolean(text: str) -> bool | None:
    """:returns: ``true``/``false`` (any case) as a boolean, else ``None``."""
    lowered = text.lower()
    if lowered == "true":
        return True
    if lowered == "false":
        return False
    return None


def _divide(left: int | float, right: int | float) -> int | float | None:
    """Divide as Java does (integers truncate toward zero); by zero is unknown."""
    if right == 0:
        return None
    if isinstance(left, int) and isinstance(right, int):
        quotient = abs(left) // abs(right)
        return quotient if (left >= 0) == (right > 0) else -quotient
    return left / right


COMPARISONS: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "<>": operator.ne,
    "<": operator.lt,
    ">": operator.gt,
    "<=": operator.le,
    ">=": operator.ge,
}
#: ``constant OP x`` is ``x REFLECTED[OP] constant``.
REFLECTED = {"=": "=", "<>": "<>", "<": ">", ">": "<", "<=": ">=", ">=": "<="}
ARITHMETIC: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": _divide,
}
