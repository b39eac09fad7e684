"""
Tests for :mod:`stompbroker.broker.groups`: message groups (``JMSXGroupID``,
``JMSXGroupSeq``, ``JMSXGroupFirstForConsumer``) as ActiveMQ and Artemis define them.
"""

from __future__ import annotations

from itertools import cycle

import pytest

from stompbroker.broker.groups import (
    FIRST_FOR_CONSUMER_HEADER,
    WAIT,
    GroupAssignments,
    first_for_consumer,
    parse_group,
    stored_group,
)
from stompbroker.protocol.errors import MalformedFrame
from stompbroker.protocol.message import Message


class Room:
    """Which consumers have room; the test flips it."""

    def __init__(self, full: str = "") -> None:
        self.full = set(full)

    def __call__(self, consumer: str) -> bool:
        return consumer not in self.full


def chooser(consumers: str, room: Room):
    """A round-robin ``choose`` over one-letter consumers, skipping full ones."""
    turn = cycle(consumers)

    def choose() -> str | None:
        for _ in consumers:
            consumer = next(turn)
            if room(consumer):
                return consumer
        return None

    return choose


@pytest.mark.parametrize(
    "headers, parsed",
    [
        ({}, (None, False)),
        ({"JMSXGroupSeq": "-1"}, (None, False)),
        ({"JMSXGroupID": "g"}, ("g", False)),
        ({"JMSXGroupID": "g", "JMSXGroupSeq": "3"}, ("g", False)),
        ({"JMSXGroupID": "g", "JMSXGroupSeq": "-1"}, ("g", True)),
        ({"JMSXGroupID": "g", "JMSXGroupSeq": "0"}, ("g", False)),
    ],
)
def test_parse_group(headers: dict[str, str], parsed: tuple[str | None, bool]) -> None:
    """JMSXGroupID names the group; JMSXGroupSeq -1 closes it; without a group, no group."""
    assert parse_group(headers) == parsed


@pytest.mark.parametrize(
    "headers, message",
    [
        ({"JMSXGroupID": ""}, "empty JMSXGroupID header"),
        ({"JMSXGroupID": "g", "JMSXGroupSeq": "one"}, "invalid JMSXGroupSeq header"),
        ({"JMSXGroupID": "g", "JMSXGroupSeq": "1.0"}, "invalid JMSXGroupSeq header"),
        ({"JMSXGroupID": "g", "JMSXGroupSeq": "-"}, "invalid JMSXGroupSeq header"),
    ],
)
def test_bad_group_headers_are_malformed(headers: dict[str, str], message: str) -> None:
    """An empty group or a non-integer sequence is an ERROR, not a silent ungrouped message."""
    with pytest.raises(MalformedFrame) as caught:
        parse_group(headers)
    assert caught.value.message == message


def test_a_group_sticks_to_its_first_consumer() -> None:
    """All messages of a group go to the consumer its first message went to; groups spread."""
    room = Room()
    choose = chooser("ab", room)
    groups: GroupAssignments[str] = GroupAssignments()
    routed = [groups.route(g, room, choose) for g in "xyxyxx"]
    assert routed == [
        ("a", True),
        ("b", True),
        ("a", False),
        ("b", False),
        ("a", False),
        ("a", False),
    ]
    assert groups.owner("x") == "a" and groups.owner("y") == "b"
    assert groups.groups_of("a") == {"x"} and len(groups) == 2


def test_a_full_owner_makes_its_group_wait_and_other_groups_pass() -> None:
    """A full owner's messages wait; another group's messages still go to another consumer."""
    room = Room()
    choose = chooser("ab", room)
    groups: GroupAssignments[str] = GroupAssignments()
    assert groups.route("x", room, choose) == ("a", True)
    room.full = {"a"}
    assert groups.route("x", room, choose) is WAIT
    assert groups.route("y", room, choose) == ("b", True)
    room.full = set()
    assert groups.route("x", room, choose) == ("a", False)


def test_no_room_anywhere_leaves_the_message_in_the_queue() -> None:
    """A new group with no consumer with room gets no owner; the message stays queued."""
    room = Room("ab")
    groups: GroupAssignments[str] = GroupAssignments()
    assert groups.route("x", room, chooser("ab", room)) is None
    assert groups.owner("x") is None and len(groups) == 0


def test_sequence_minus_one_closes_the_group() -> None:
    """The closing message goes to the owner; the next message picks an owner afresh."""
    room = Room()
    choose = chooser("ab", room)
    groups: GroupAssignments[str] = GroupAssignments()
    assert groups.route("x", room, choose) == ("a", True)
    assert groups.route("x", room, choose, closes=True) == ("a", False)
    assert groups.owner("x") is None and groups.groups_of("a") == frozenset()
    assert groups.route("x", room, choose) == ("b", True)


def test_a_closing_message_that_waits_keeps_the_group() -> None:
    """A closing message whose owner is full waits, and the group keeps its owner until it goes."""
    room = Room()
    choose = chooser("ab", room)
    groups: GroupAssignments[str] = GroupAssignments()
    groups.route("x", room, choose)
    room.full = {"a"}
    assert groups.route("x", room, choose, closes=True) is WAIT
    assert groups.owner("x") == "a"
    room.full = set()
    assert groups.route("x", room, choose, closes=True) == ("a", False)
    assert groups.owner("x") is None


def test_a_group_closed_by_its_first_message_gets_no_owner() -> None:
    """A one-message group (first message already -1) is delivered and leaves nothing behind."""
    room = Room()
    groups: GroupAssignments[str] = GroupAssignments()
    assert groups.route("x", room, chooser("a", room), closes=True) == ("a", True)
    assert len(groups) == 0


def test_release_moves_the_groups_of_a_consumer_that_left() -> None:
    """When the owner leaves, its groups pick new owners, first-for-consumer again."""
    room = Room()
    choose = chooser("ab", room)
    groups: GroupAssignments[str] = GroupAssignments()
    groups.route("x", room, choose)  # a
    groups.route("y", room, choose)  # b
    groups.route("z", room, choose)  # a
    assert groups.release("a") == {"x", "z"}
    assert groups.owner("x") is None and groups.owner("y") == "b"
    assert groups.release("a") == frozenset()
    assert groups.route("x", room, chooser("b", room)) == ("b", True)


def test_stored_group_reads_the_first_of_repeated_headers() -> None:
    """A message rebuilt from the store gets its group back, first header winning."""
    headers = (("JMSXGroupID", "g"), ("JMSXGroupSeq", "-1"), ("JMSXGroupID", "h"))
    assert stored_group(headers) == ("g", True)
    assert stored_group((("other", "x"),)) == (None, False)


def test_first_for_consumer_marks_a_copy() -> None:
    """The first message of a group for a consumer carries JMSXGroupFirstForConsumer:true."""
    message = Message("/queue/q", "m-1", (("JMSXGroupID", "g"),), b"body")
    message.wire["cached"] = b"bytes"
    marked = first_for_consumer(message)
    assert marked.headers == (("JMSXGroupID", "g"), (FIRST_FOR_CONSUMER_HEADER, "true"))
    assert marked.wire == {} and message.wire == {"cached": b"bytes"}
    assert (marked.message_id, marked.body) == ("m-1", b"body")
    assert message.headers == (("JMSXGroupID", "g"),)


def test_first_for_consumer_marks_once() -> None:
    """A message marked before (a redelivery to a new owner) carries the header once."""
    message = Message("/queue/q", "m-1", (("JMSXGroupID", "g"),), b"body")
    twice = first_for_consumer(first_for_consumer(message))
    assert twice.headers == (("JMSXGroupID", "g"), (FIRST_FOR_CONSUMER_HEADER, "true"))
