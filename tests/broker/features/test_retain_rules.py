"""
Tests for :mod:`stompbroker.broker.features.retain_rules`: a topic's last value (Apollo's
``retain:set``
and ``retain:remove``), matched with the subscription tree's own wildcard rules.
"""

from __future__ import annotations

import pytest

from stompbroker.broker.features.retain_rules import (
    REMOVE,
    SET,
    RetainedMessages,
    as_retained,
    parse_retain,
)
from stompbroker.protocol.errors import (
    InvalidDestination,
    LimitExceeded,
    MalformedFrame,
    NotSupported,
)
from stompbroker.protocol.message import Message


def message(destination: str, body: bytes = b"", expires: float = 0.0) -> Message:
    """A message sent to ``destination``."""
    return Message(destination, f"m-{destination}-{body!r}", (), body, expires=expires)


def bodies(messages: list[Message]) -> list[bytes]:
    """The bodies of ``messages``, in order."""
    return [retained.body for retained in messages]


@pytest.mark.parametrize(
    "value, action",
    [(None, None), ("set", SET), ("true", SET), ("remove", REMOVE)],
)
def test_parse_retain(value: str | None, action: str | None) -> None:
    """retain:set (and Apollo's example spelling retain:true) keeps; retain:remove forgets."""
    assert parse_retain(value, "/topic/a") == action


def test_parse_retain_refuses_unknown_values_and_queues() -> None:
    """An unknown value is malformed; retain on a queue is refused, not ignored."""
    with pytest.raises(MalformedFrame) as caught:
        parse_retain("yes", "/topic/a")
    assert caught.value.message == "invalid retain header"
    with pytest.raises(NotSupported) as refused:
        parse_retain("set", "/queue/a")
    assert refused.value.message == "retain is for topics only"


def test_last_value_replaces_the_one_before() -> None:
    """A topic keeps only its latest retained message."""
    store = RetainedMessages()
    store.set(message("/topic/stock/IBM", b"111"))
    store.set(message("/topic/stock/IBM", b"112"))
    assert len(store) == 1
    assert bodies(store.matching("/topic/stock/IBM")) == [b"112"]


def test_any_spelling_of_a_topic_is_one_topic() -> None:
    """'/' and '.' separate alike, for setting, getting, matching and removing."""
    store = RetainedMessages()
    store.set(message("/topic/stock/IBM", b"1"))
    store.set(message("/topic/stock.IBM", b"2"))
    assert len(store) == 1
    assert store.get("topic/stock/IBM").body == b"2"
    assert bodies(store.matching("/topic/stock.IBM")) == [b"2"]
    assert store.remove("/topic/stock/IBM").body == b"2"
    assert store.get("/topic/stock.IBM") is None


@pytest.mark.parametrize(
    "pattern, expected",
    [
        ("/topic/stock/IBM", [b"ibm"]),
        ("/topic/stock/*", [b"ibm", b"sap"]),
        ("/topic/stock.*", [b"ibm", b"sap"]),
        ("/topic/#", [b"ibm", b"sap", b"eur", b"root"]),
        ("/topic/>", [b"ibm", b"sap", b"eur", b"root"]),
        ("/topic/fx/#", [b"eur"]),
        ("/topic/*/eur/*", []),
        ("/topic/nothing", []),
        ("/topic", [b"root"]),
    ],
)
def test_matching_uses_the_subscription_rules(pattern: str, expected: list[bytes]) -> None:
    """A wildcard subscription gets every matching topic's value, oldest retained first."""
    store = RetainedMessages()
    for destination, body in [
        ("/topic/stock/IBM", b"ibm"),
        ("/topic/stock/SAP", b"sap"),
        ("/topic/fx/eur", b"eur"),
        ("/topic", b"root"),
    ]:
        store.set(message(destination, body))
    assert bodies(store.matching(pattern)) == expected


def test_resetting_a_topic_makes_it_the_newest() -> None:
    """Retention order is the order of the last set: a topic set again moves to the end."""
    store = RetainedMessages()
    store.set(message("/topic/a", b"a1"))
    store.set(message("/topic/b", b"b1"))
    store.set(message("/topic/a", b"a2"))
    assert bodies(store.matching("/topic/*")) == [b"b1", b"a2"]


def test_remove_forgets() -> None:
    """retain:remove clears the value; removing again is a no-op."""
    store = RetainedMessages()
    store.set(message("/topic/a", b"a"))
    assert store.remove("/topic/a").body == b"a"
    assert store.remove("/topic/a") is None
    assert store.matching("/topic/#") == [] and len(store) == 0


def test_expired_retained_messages_are_dropped_when_looked_at() -> None:
    """An expired last value is not handed out, and is forgotten."""
    store = RetainedMessages()
    store.set(message("/topic/a", b"old", expires=10.0))
    store.set(message("/topic/b", b"forever"))
    assert bodies(store.matching("/topic/*", now=5.0)) == [b"old", b"forever"]
    assert bodies(store.matching("/topic/*", now=10.0)) == [b"forever"]
    assert store.get("/topic/a") is None


def test_invalid_destinations_and_patterns_are_refused() -> None:
    """Retaining needs one topic; matching needs a valid pattern."""
    store = RetainedMessages()
    with pytest.raises(InvalidDestination):
        store.set(message("/topic/a/*"))
    with pytest.raises(InvalidDestination):
        store.matching("/topic/#/a")


def test_the_number_of_topics_is_bounded() -> None:
    """Beyond max_topics a new topic is refused; replacing a value still works."""
    store = RetainedMessages(max_topics=2)
    store.set(message("/topic/a"))
    store.set(message("/topic/b"))
    with pytest.raises(LimitExceeded):
        store.set(message("/topic/c"))
    store.set(message("/topic/a", b"again"))
    store.remove("/topic/b")
    store.set(message("/topic/c"))
    assert len(store) == 2


def test_as_retained_marks_a_copy() -> None:
    """The copy a new subscriber gets says retained:true and drops retain."""
    original = Message("/topic/a", "m-1", (("retain", "set"), ("x", "1")), b"v")
    original.wire = {"cached": b"bytes"}
    copy = as_retained(original)
    assert copy.headers == (("x", "1"), ("retained", "true"))
    assert copy.wire == {} and original.wire == {"cached": b"bytes"}
    assert original.headers == (("retain", "set"), ("x", "1"))
