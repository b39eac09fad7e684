"""
Tests for :mod:`stompbroker.broker.queueing.consumer_choice`: consumer priorities, exclusive and
single-active consumers, as ActiveMQ's (``activemq.priority``, ``activemq.exclusive``)
and RabbitMQ's (``x-priority``, ``x-single-active-consumer``) STOMP clients ask for them.
"""

from __future__ import annotations

import pytest

from stompbroker.broker.queueing.consumer_choice import (
    ConsumerChoice,
    ConsumerOptions,
    parse_consumer_options,
)
from stompbroker.protocol.errors import MalformedFrame


def picks(choice: ConsumerChoice[str], count: int, full: frozenset[str] = frozenset()) -> str:
    """The next ``count`` picks, as one string of one-letter consumer names ('-' for none)."""
    return "".join(choice.next(lambda c: c not in full) or "-" for _ in range(count))


def choice_of(*consumers: tuple[str, ConsumerOptions], single_active: bool = False):
    """A ConsumerChoice with the given consumers added in order."""
    choice: ConsumerChoice[str] = ConsumerChoice(single_active=single_active)
    for name, options in consumers:
        choice.add(name, options)
    return choice


PLAIN = ConsumerOptions()
EXCLUSIVE = ConsumerOptions(exclusive=True)


def priority(value: int, exclusive: bool = False) -> ConsumerOptions:
    """Options with a priority."""
    return ConsumerOptions(priority=value, exclusive=exclusive)


@pytest.mark.parametrize(
    "headers, options",
    [
        ({}, ConsumerOptions()),
        ({"activemq.priority": "5"}, ConsumerOptions(priority=5)),
        ({"x-priority": "-3"}, ConsumerOptions(priority=-3)),
        ({"x-priority": "7", "activemq.priority": "7"}, ConsumerOptions(priority=7)),
        ({"activemq.exclusive": "true"}, ConsumerOptions(exclusive=True)),
        ({"activemq.exclusive": "FALSE"}, ConsumerOptions()),
        ({"x-single-active-consumer": "true"}, ConsumerOptions(single_active=True)),
        ({"x-single-active-consumer": "false"}, ConsumerOptions(single_active=False)),
        ({"x-priority": str(2**31 - 1)}, ConsumerOptions(priority=2**31 - 1)),
        ({"x-priority": str(-(2**31))}, ConsumerOptions(priority=-(2**31))),
    ],
)
def test_parse_consumer_options(headers: dict[str, str], options: ConsumerOptions) -> None:
    """SUBSCRIBE headers of ActiveMQ and RabbitMQ become one ConsumerOptions record."""
    assert parse_consumer_options(headers) == options


@pytest.mark.parametrize(
    "headers, message",
    [
        ({"activemq.priority": "high"}, "invalid activemq.priority header"),
        ({"x-priority": "1.5"}, "invalid x-priority header"),
        ({"x-priority": ""}, "invalid x-priority header"),
        ({"x-priority": "-"}, "invalid x-priority header"),
        ({"x-priority": str(2**31)}, "invalid x-priority header"),
        ({"activemq.exclusive": "yes"}, "invalid activemq.exclusive header"),
        ({"x-single-active-consumer": "1"}, "invalid x-single-active-consumer header"),
        ({"activemq.priority": "1", "x-priority": "2"}, "conflicting consumer priorities"),
    ],
)
def test_bad_consumer_options_are_malformed_frames(headers: dict[str, str], message: str) -> None:
    """A bad value is an ERROR naming the header, not a silent default."""
    with pytest.raises(MalformedFrame) as caught:
        parse_consumer_options(headers)
    assert caught.value.message == message


def test_round_robin_among_equals() -> None:
    """Consumers of one priority take turns, skipping those without room."""
    choice = choice_of(("a", PLAIN), ("b", PLAIN), ("c", PLAIN))
    assert choice.is_plain
    assert picks(choice, 6) == "abcabc"
    assert picks(choice, 4, full=frozenset("b")) == "acac"
    assert picks(choice, 2, full=frozenset("abc")) == "--"


def test_higher_priority_with_room_first() -> None:
    """Lower priorities get messages only while every higher consumer is full."""
    choice = choice_of(
        ("l", priority(1)), ("h", priority(9)), ("i", priority(9)), ("m", priority(5))
    )
    assert not choice.is_plain
    assert picks(choice, 4) == "hihi"
    assert picks(choice, 2, full=frozenset("hi")) == "mm"
    assert picks(choice, 2, full=frozenset("him")) == "ll"
    assert picks(choice, 3, full=frozenset("h")) == "iii"


def test_removal_keeps_the_turn() -> None:
    """A consumer that leaves does not make the next one lose or repeat its turn."""
    choice = choice_of(("a", PLAIN), ("b", PLAIN), ("c", PLAIN))
    assert picks(choice, 2) == "ab"
    choice.remove("a")
    assert picks(choice, 3) == "cbc"
    choice.remove("c")
    choice.remove("c")  # a no-op
    assert picks(choice, 2) == "bb"
    choice.remove("b")
    assert len(choice) == 0 and picks(choice, 1) == "-"


def test_a_priority_class_that_empties_goes() -> None:
    """When the last consumer of a priority leaves, lower priorities are served again."""
    choice = choice_of(("h", priority(3)), ("l", priority(0)))
    assert picks(choice, 2) == "hh"
    choice.remove("h")
    assert picks(choice, 2) == "ll"
    assert choice.is_plain


def test_exclusive_consumer_gets_everything_until_it_leaves() -> None:
    """activemq.exclusive: the first exclusive consumer alone is served; the next takes over."""
    choice = choice_of(("a", PLAIN), ("x", EXCLUSIVE), ("y", EXCLUSIVE))
    assert choice.is_exclusive and choice.active == "x"
    assert picks(choice, 3) == "xxx"
    assert picks(choice, 2, full=frozenset("x")) == "--"  # its messages wait for it
    choice.remove("x")
    assert choice.active == "y"
    assert picks(choice, 2) == "yy"
    choice.remove("y")
    assert not choice.is_exclusive and choice.active is None
    assert picks(choice, 2) == "aa"


def test_exclusive_prefers_the_highest_priority_and_is_sticky_among_equals() -> None:
    """A newcomer of strictly higher priority takes over; one of equal priority waits."""
    choice = choice_of(("x", priority(1, True)))
    choice.add("y", priority(1, True))
    assert choice.active == "x"
    choice.add("z", priority(5, True))
    assert choice.active == "z"
    choice.add("p", priority(9))  # not exclusive: never active
    assert choice.active == "z"
    choice.remove("z")
    assert choice.active == "x"


def test_election_after_the_active_leaves_picks_highest_then_earliest() -> None:
    """The successor is the highest-priority candidate, the earliest among equals."""
    choice = choice_of(
        ("a", priority(9, True)),
        ("b", priority(1, True)),
        ("c", priority(5, True)),
        ("d", priority(5, True)),
    )
    assert choice.active == "a"
    choice.remove("a")
    assert choice.active == "c"


def test_single_active_consumer_queue() -> None:
    """x-single-active-consumer: every consumer is a candidate; the first is active."""
    choice = choice_of(("a", PLAIN), ("b", PLAIN), single_active=True)
    assert choice.is_exclusive and not choice.is_plain
    assert picks(choice, 3) == "aaa"
    choice.remove("a")
    assert picks(choice, 2) == "bb"
    choice.add("c", priority(2))
    assert choice.active == "c"


def test_adding_twice_is_an_error() -> None:
    """A consumer is served once; adding it again is a programming error."""
    choice = choice_of(("a", PLAIN))
    with pytest.raises(ValueError):
        choice.add("a", PLAIN)
    assert "a" in choice and "b" not in choice


def test_a_declaration_made_elsewhere_elects_afresh() -> None:
    """declare (a cluster's shared declaration): on, the earliest is active; off, round-robin."""
    choice = choice_of(("a", PLAIN), ("b", PLAIN), ("c", PLAIN))
    assert picks(choice, 3) == "abc"
    choice.declare(True)
    assert choice.active == "a" and picks(choice, 2) == "aa"
    choice.declare(True)
    assert choice.active == "a"
    choice.declare(False)
    assert choice.active is None and not choice.is_exclusive
    assert len(set(picks(choice, 3))) == 3
