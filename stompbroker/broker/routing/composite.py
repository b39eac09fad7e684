"""
Composite destinations: one SEND to several destinations, ``destination:/queue/a,/topic/b``.

ActiveMQ and Apollo read a comma in a SEND's destination as a list: the message
goes to each destination, as if sent to each alone.  Here:

- each part is a destination a SEND may name (a topic, a queue, a temporary or
  reply queue), with no wildcard; spaces around a part are ignored;
- an empty part (``/queue/a,,/queue/b``, a leading or trailing comma) is an error,
  not skipped: it is a typing mistake that would lose a destination;
- a part named twice is sent to once (in any spelling of a topic, since
  ``/topic/a.b`` and ``/topic/a/b`` are one topic; queue names are exact);
- at most ``max_parts`` parts.

So a comma cannot be part of a destination's name: a SEND to ``/queue/a,b`` is
refused (``b`` is not a destination), where before this feature it named a
queue called ``a,b``.  SUBSCRIBE does not read commas (ActiveMQ's composite
consumers are not supported).

How it plugs in
---------------
The router checks a SEND's destination with :func:`split_destination` once (and
caches the result per destination string, as it caches a destination's kind
now; :func:`~stompbroker.broker.routing.destinations.validate_send_destination` is that
check for one destination).  For more than one part it routes one copy of the
message per part, with that part as its ``destination`` (the MESSAGE a consumer
gets names the destination it came through), the same ``message-id``, and a
wire cache of its own; the SEND's RECEIPT follows when all of them are
accepted.  The write right is checked for every part.  A persistent message is
filed once under all its queues' keys, as topic fan-out is now.
"""

from __future__ import annotations

from stompbroker.broker.routing.destinations import Kind, validate_send_destination
from stompbroker.broker.routing.topic_tree import SubscriptionTree
from stompbroker.protocol.errors import InvalidDestination, LimitExceeded

__all__ = ["DEFAULT_MAX_PARTS", "SEPARATOR", "split_destination"]

#: Separates the parts of a composite destination.
SEPARATOR = ","
#: Default bound on the parts of one composite destination.
DEFAULT_MAX_PARTS = 64


def split_destination(
    destination: str, *, max_parts: int = DEFAULT_MAX_PARTS
) -> tuple[tuple[str, Kind], ...]:
    """
    Check a SEND's destination and split it into the destinations it names.

    :param destination: the SEND's ``destination`` header.
    :param max_parts: most parts accepted.
    :returns: ``(destination, kind)`` for each distinct part, in the order given;
        one pair for a destination without a comma.
    :raises InvalidDestination: for an empty part, or a part that is not a
        destination a SEND may name (the message says which part and why).
    :raises LimitExceeded: for more than ``max_parts`` parts.
    """
    if SEPARATOR not in destination:
        return ((destination, validate_send_destination(destination)),)
    parts = [part.strip(" \t") for part in destination.split(SEPARATOR)]
    if len(parts) > max_parts:
        raise LimitExceeded(
            "too many destinations in a composite destination",
            f"A composite destination may name at most {max_parts} destinations;"
            f" this one names {len(parts)}.",
        )
    checked: list[tuple[str, Kind]] = []
    queues: set[str] = set()
    topics: SubscriptionTree[str] = SubscriptionTree(max_cache_size=0)
    for position, part in enumerate(parts, start=1):
        kind = _check_part(destination, position, part)
        if kind is Kind.TOPIC:
            if topics.match(part):
                continue
            topics.add(part, part)
        elif part in queues:
            continue
        else:
            queues.add(part)
        checked.append((part, kind))
    return tuple(checked)


def _check_part(destination: str, position: int, part: str) -> Kind:
    """
    :returns: the kind of one part of a composite destination.
    :raises InvalidDestination: naming the part's position and what is wrong with it.
    """
    if not part:
        raise InvalidDestination(
            f"empty part {position} in composite destination",
            f"The destination {destination!r} lists destinations separated by commas;"
            f" part {position} is empty (a doubled, leading or trailing comma).",
        )
    try:
        return validate_send_destination(part)
    except InvalidDestination as error:
        raise InvalidDestination(
            f"part {position} of composite destination: {error.message}",
            f"The destination {destination!r} lists destinations separated by commas;"
            f" part {position}, {part!r}, is not one a SEND may name: {error.detail}",
        ) from None
