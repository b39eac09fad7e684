"""
Tests for :mod:`stompbroker.broker.routing.composite`: ``destination:/queue/a,/topic/b`` sends to
both,
as ActiveMQ's and Apollo's composite destinations do.
"""

from __future__ import annotations

import pytest

from stompbroker.broker.routing.composite import split_destination
from stompbroker.broker.routing.destinations import Kind
from stompbroker.protocol.errors import InvalidDestination, LimitExceeded

Q, T, TQ, RQ = Kind.QUEUE, Kind.TOPIC, Kind.TEMP_QUEUE, Kind.REPLY_QUEUE


@pytest.mark.parametrize(
    "destination, parts",
    [
        ("/queue/a", (("/queue/a", Q),)),
        ("/topic/a.b", (("/topic/a.b", T),)),
        ("/queue/a,/topic/b", (("/queue/a", Q), ("/topic/b", T))),
        ("/topic/b,/queue/a", (("/topic/b", T), ("/queue/a", Q))),
        ("/queue/a, /queue/b ,\t/queue/c", (("/queue/a", Q), ("/queue/b", Q), ("/queue/c", Q))),
        ("/temp-queue/r,/reply-queue/x-1", (("/temp-queue/r", TQ), ("/reply-queue/x-1", RQ))),
        # duplicates are sent to once: queues by exact name, topics in any spelling
        ("/queue/a,/queue/a", (("/queue/a", Q),)),
        ("/queue/a,/queue/A", (("/queue/a", Q), ("/queue/A", Q))),
        ("/topic/a.b,/topic/a/b,/topic/a.b", (("/topic/a.b", T),)),
        ("/queue/a.b,/queue/a/b", (("/queue/a.b", Q), ("/queue/a/b", Q))),
    ],
)
def test_split_destination(destination: str, parts: tuple) -> None:
    """A composite destination names each distinct destination once, in the order given."""
    assert split_destination(destination) == parts


@pytest.mark.parametrize(
    "destination, message",
    [
        ("/queue/a,,/queue/b", "empty part 2 in composite destination"),
        (",/queue/a", "empty part 1 in composite destination"),
        ("/queue/a,", "empty part 2 in composite destination"),
        ("/queue/a, ,/queue/b", "empty part 2 in composite destination"),
        ("/queue/a,b", "part 2 of composite destination: unknown destination"),
        ("/queue/a,/topic/x.*", "part 2 of composite destination: wildcard in SEND destination"),
        ("/topic/#,/queue/a", "part 1 of composite destination: wildcard in SEND destination"),
        ("/queue/a,/queue/", "part 2 of composite destination: empty queue name"),
        ("/queue/a,/queue/b//c", "part 2 of composite destination: empty segment in destination"),
    ],
)
def test_invalid_composite_destinations(destination: str, message: str) -> None:
    """Each part must be a destination a SEND may name; the error says which part and why."""
    with pytest.raises(InvalidDestination) as caught:
        split_destination(destination)
    assert caught.value.message.startswith(message)
    assert repr(destination) in caught.value.detail


def test_a_destination_without_a_comma_is_checked_alone() -> None:
    """Without a comma the destination is checked as any SEND destination is."""
    with pytest.raises(InvalidDestination) as caught:
        split_destination("/queue/a.*")
    assert caught.value.message == "wildcard in queue destination"


def test_the_number_of_parts_is_bounded() -> None:
    """More than max_parts parts is refused before any part is checked."""
    destination = ",".join(f"/queue/q{n}" for n in range(5))
    assert len(split_destination(destination, max_parts=5)) == 5
    with pytest.raises(LimitExceeded):
        split_destination(destination, max_parts=4)
