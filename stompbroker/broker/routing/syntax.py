"""
The syntax of destinations and subscription patterns: their segments, the
wildcards, and the checks of a SUBSCRIBE pattern and of a SEND destination.

Pure code: no Twisted, no I/O.  Apart from the subscription tree
(:mod:`stompbroker.broker.routing.topic_tree`) because much else checks destinations
without matching them (the router, access rights, tokens, retained messages,
the management API); the tree imports these rules from here.

Destination syntax
------------------
- A destination is split into *segments* at ``/`` and at ``.``; the two separators are
  interchangeable, so ``/topic/prices.eur`` and ``/topic/prices/eur`` are one destination.
- One leading separator is optional: ``/topic/a``, ``topic/a`` and ``.topic.a`` are one
  destination.  Any other empty segment (``/topic//a``, ``/topic/a.``) is invalid.
- Wildcards appear in subscription patterns only, and only as a whole segment:
  ``*`` matches exactly one segment; ``#`` and its synonym ``>`` match zero or more
  trailing segments and must be the last segment (``/topic/a.#`` matches ``/topic/a``,
  ``/topic/a.b`` and ``/topic/a.b.c``).
- ``*``, ``#`` and ``>`` are reserved: a segment that contains one of them among other
  characters (``a*``, ``x#y``) is not a literal but an error, in patterns and destinations
  alike, so that no destination can be mistaken for a pattern.
"""

from __future__ import annotations

from stompbroker.protocol.errors import InvalidDestination

__all__ = [
    "ONE_SEGMENT",
    "TRAILING_SEGMENTS",
    "is_wildcard",
    "matches",
    "normalise",
    "validate_destination",
    "validate_pattern",
]

#: The segment that matches exactly one segment.
ONE_SEGMENT = "*"
#: The segments that match zero or more trailing segments; synonyms.
TRAILING_SEGMENTS = frozenset({"#", ">"})
_WILDCARDS = TRAILING_SEGMENTS | {ONE_SEGMENT}
_RESERVED_CHARACTERS = "*#>"


def normalise(destination: str) -> str:
    """
    Spell a destination with ``/`` as its only separator and no leading separator.

    :param destination: a destination or pattern, valid or not.
    :returns: the key under which exact patterns are stored.
    """
    normalised = destination.replace(".", "/")
    if normalised[:1] == "/":
        return normalised[1:]
    return normalised


def _segments(destination: str, what: str) -> list[str]:
    """
    Split a destination or pattern into segments, rejecting empty ones.

    :param destination: the text as the client sent it.
    :param what: ``"destination"`` or ``"pattern"``, for the error message.
    :returns: the segments, at least one.
    :raises InvalidDestination: if the text is empty or has an empty segment.
    """
    segments = normalise(destination).split("/")
    if "" in segments:
        if segments == [""]:
            raise InvalidDestination(f"Empty {what}")
        raise InvalidDestination(
            f"empty segment in {what} {destination!r}",
            f"The {what} {destination!r} has an empty segment: separators ('/' or '.')"
            " must not be doubled or trail, and only one may lead.",
        )
    return segments


def is_wildcard(destination: str) -> bool:
    """
    Tell whether a destination is a wildcard pattern rather than one destination.

    :param destination: any destination text.
    :returns: ``True`` if a whole segment is ``*``, ``#`` or ``>``.
    """
    if not any(character in destination for character in _RESERVED_CHARACTERS):
        return False
    return any(segment in _WILDCARDS for segment in normalise(destination).split("/"))


def matches(pattern: str, destination: str) -> bool:
    """
    Tell whether one destination matches a pattern, segment by segment.

    For the few places that match one name at a time (a wildcard consumer on
    queues meeting a queue); the topic tree matches many patterns at once.

    :param pattern: a valid SUBSCRIBE pattern (see :func:`validate_pattern`).
    :param destination: a destination without wildcards.
    :returns: whether ``destination`` is one of those ``pattern`` names.
    """
    wanted = normalise(pattern).split("/")
    given = normalise(destination).split("/")
    for index, segment in enumerate(wanted):
        if segment in TRAILING_SEGMENTS:
            return True
        if index >= len(given) or (segment != ONE_SEGMENT and segment != given[index]):
            return False
    return len(wanted) == len(given)


def validate_pattern(pattern: str) -> None:
    """
    Check a SUBSCRIBE destination, which may hold wildcards.

    :param pattern: the destination pattern as the client sent it.
    :raises InvalidDestination: if it is empty, has an empty segment, has a partial
        wildcard such as ``a*``, or has ``#``/``>`` anywhere but last.
    """
    segments = _segments(pattern, "pattern")
    last = len(segments) - 1
    for index, segment in enumerate(segments):
        if segment in TRAILING_SEGMENTS:
            if index != last:
                raise InvalidDestination(
                    f"wildcard {segment!r} must be the last segment",
                    f"In {pattern!r}, {segment!r} (zero or more trailing segments)"
                    " is followed by more segments; it may appear only at the end.",
                )
        elif segment != ONE_SEGMENT:
            _reject_reserved(segment, pattern, "pattern")


def validate_destination(destination: str) -> None:
    """
    Check a destination that names one place, as in SEND: no wildcards at all.

    :param destination: the destination as the client sent it.
    :raises InvalidDestination: if it is empty, has an empty segment, or holds any of
        the reserved characters ``*``, ``#``, ``>``.
    """
    for segment in _segments(destination, "destination"):
        if segment in _WILDCARDS:
            raise InvalidDestination(
                "wildcard in SEND destination",
                f"The destination {destination!r} holds the wildcard {segment!r};"
                " wildcards are allowed only in SUBSCRIBE.",
            )
        _reject_reserved(segment, destination, "destination")


def _reject_reserved(segment: str, destination: str, what: str) -> None:
    """
    Refuse a literal segment that contains a wildcard character.

    :raises InvalidDestination: if ``segment`` holds ``*``, ``#`` or ``>``.
    """
    for character in _RESERVED_CHARACTERS:
        if character in segment:
            raise InvalidDestination(
                f"partial wildcard {segment!r} in {what}",
                f"The {what} {destination!r} has the segment {segment!r}; {character!r}"
                " is a wildcard and must be a whole segment.",
            )
