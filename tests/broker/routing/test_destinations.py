"""Tests of destination kinds, queue name validation and dead-letter queue names."""

from __future__ import annotations

import pytest

from stompbroker.broker.routing.destinations import (
    Kind,
    dead_letter_destination,
    is_dead_letter_queue,
    kind_of,
    name_of,
    validate_queue,
    validate_send_destination,
)
from stompbroker.protocol.errors import InvalidDestination


@pytest.mark.parametrize(
    "destination, kind",
    [
        ("/topic/a.b", Kind.TOPIC),
        ("/queue/jobs", Kind.QUEUE),
        ("/temp-queue/replies", Kind.TEMP_QUEUE),
        ("/reply-queue/tmp-1", Kind.REPLY_QUEUE),
    ],
)
def test_kind_is_told_by_prefix(destination: str, kind: Kind) -> None:
    """Each served prefix names its kind of destination, which a SEND's check returns too."""
    assert kind_of(destination) is kind
    assert validate_send_destination(destination) is kind


@pytest.mark.parametrize("destination", ["/exchange/x", "queue/a", "/queues/a", "", "/amq/queue/a"])
def test_unknown_prefix_is_an_error(destination: str) -> None:
    """A destination of a kind the broker does not serve is refused, as RabbitMQ does."""
    with pytest.raises(InvalidDestination) as caught:
        kind_of(destination)
    assert caught.value.message == "unknown destination"


@pytest.mark.parametrize(
    "destination, message",
    [
        ("/queue/a.*", "wildcard in queue destination"),
        ("/queue/a/#", "wildcard in queue destination"),
        ("/queue/", "empty queue name"),
        ("/temp-queue/", "empty queue name"),
        ("/queue/a//b", "empty segment in destination '/queue/a//b'"),
        ("/queue/a*", "partial wildcard 'a*' in destination"),
    ],
)
def test_invalid_queue_destinations(destination: str, message: str) -> None:
    """Queue destinations have a name and no wildcards: a consumer takes from one queue."""
    with pytest.raises(InvalidDestination) as caught:
        validate_queue(destination)
    assert caught.value.message == message


def test_queue_names_are_kept_as_written() -> None:
    """A queue's name is what follows its prefix, dots and slashes included."""
    validate_queue("/queue/orders.eu/high")
    assert name_of("/queue/orders.eu/high") == "orders.eu/high"


@pytest.mark.parametrize(
    "origin, prefix, expected",
    [
        ("/queue/orders", "DLQ.", "/queue/DLQ.orders"),
        ("/topic/prices.eur", "DLQ.", "/queue/DLQ.prices.eur"),
        ("/queue/orders", "dead-", "/queue/dead-orders"),
    ],
)
def test_dead_letter_destination(origin: str, prefix: str, expected: str) -> None:
    """Dead letters of NAME go to /queue/ + prefix + NAME, for queues and topics alike."""
    assert dead_letter_destination(origin, prefix) == expected
    assert is_dead_letter_queue(expected, prefix)
    assert not is_dead_letter_queue(origin, prefix)


@pytest.mark.parametrize("destination", ["/topic/a.*", "/topic/#", "/queue/a/>", "/queue/", "/x/a"])
def test_validate_send_destination_refuses_wildcards_and_unknown_kinds(destination: str) -> None:
    """A SEND names one place: wildcards, empty queue names and unknown kinds are refused."""
    with pytest.raises(InvalidDestination):
        validate_send_destination(destination)
