"""
Tests for :mod:`stompbroker.broker.groups`: message groups (``JMSXGroupID``,
``JMSXGroupSeq``, ``JMSXGroupFirstForConsumer``) as ActiveMQ and Artemis define them.
"""

from __future__ import annotations

from itertools import cycle

import pytest

from stompbroker.broker.groups import (
    FIRST_FOR_CONSUMER_HEADER,
    HELD,
    GroupAssignments,
    first_for_consumer,
    parse_group,
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
    groups: GroupAssignments[str, str] = GroupAssignments()
    routed = [groups.route(g, f"{g}{n}", room, choose) for n, g in enumerate("xyxyxx")]
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


def test_a_full_owner_holds_its_group_back_and_other_groups_pass() -> None:
    """A full owner's messages wait in the group's line; another group's messages still go."""
    room = Room()
    choose = chooser("ab", room)
    groups: GroupAssignments[str, str] = GroupAssignments()
    assert groups.route("x", "x1", room, choose) == ("a", True)
    room.full = {"a"}
    assert groups.route("x", "x2", room, choose) is HELD
    assert groups.route("y", "y1", room, choose) == ("b", True)
    assert groups.route("x", "x3", room, choose) is HELD
    assert groups.held_count == 2 and list(groups.held_messages()) == ["x2", "x3"]
    assert groups.pop_held(room) is None
    room.full = set()
    # Older messages of the group wait in line: a new one joins the line, never overtakes.
    assert groups.route("x", "x4", room, choose) is HELD
    assert [groups.pop_held(room) for _ in range(4)] == [
        ("x2", "a"),
        ("x3", "a"),
        ("x4", "a"),
        None,
    ]
    assert groups.route("x", "x5", room, choose) == ("a", False)


def test_no_room_anywhere_leaves_the_message_in_the_queue() -> None:
    """A new group with no consumer with room gets no owner; the message stays queued."""
    room = Room("ab")
    groups: GroupAssignments[str, str] = GroupAssignments()
    assert groups.route("x", "x1", room, chooser("ab", room)) is None
    assert groups.owner("x") is None and groups.held_count == 0


def test_sequence_minus_one_closes_the_group() -> None:
    """The closing message goes to the owner; the next message picks an owner afresh."""
    room = Room()
    choose = chooser("ab", room)
    groups: GroupAssignments[str, str] = GroupAssignments()
    assert groups.route("x", "x1", room, choose) == ("a", True)
    assert groups.route("x", "x2", room, choose, closes=True) == ("a", False)
    assert groups.owner("x") is None and groups.groups_of("a") == frozenset()
    assert groups.route("x", "x3", room, choose) == ("b", True)


def test_a_held_closing_message_closes_the_group_once_delivered() -> None:
    """A closing message that had to wait closes its group when it finally goes out."""
    room = Room()
    choose = chooser("ab", room)
    groups: GroupAssignments[str, str] = GroupAssignments()
    groups.route("x", "x1", room, choose)
    room.full = {"a"}
    assert groups.route("x", "x2", room, choose, closes=True) is HELD
    room.full = set()
    assert groups.pop_held(room) == ("x2", "a")
    assert groups.owner("x") is None


def test_a_group_closed_by_its_first_message_gets_no_owner() -> None:
    """A one-message group (first message already -1) is delivered and leaves nothing behind."""
    room = Room()
    groups: GroupAssignments[str, str] = GroupAssignments()
    assert groups.route("x", "x1", room, chooser("a", room), closes=True) == ("a", True)
    assert len(groups) == 0


def test_release_moves_groups_and_returns_held_messages() -> None:
    """When the owner leaves, its groups pick new owners, first-for-consumer again."""
    room = Room()
    choose = chooser("ab", room)
    groups: GroupAssignments[str, str] = GroupAssignments()
    groups.route("x", "x1", room, choose)  # a
    groups.route("y", "y1", room, choose)  # b
    groups.route("z", "z1", room, choose)  # a
    room.full = {"a"}
    groups.route("x", "x2", room, choose)
    groups.route("z", "z2", room, choose)
    returned = groups.release("a")
    assert returned == ["x2", "z2"]
    assert groups.owner("x") is None and groups.owner("y") == "b"
    assert groups.held_count == 0 and groups.release("a") == []
    assert groups.route("x", "x2", room, chooser("b", room)) == ("b", True)


def test_first_for_consumer_marks_a_copy() -> None:
    """The first message of a group for a consumer carries JMSXGroupFirstForConsumer:true."""
    message = Message("/queue/q", "m-1", (("JMSXGroupID", "g"),), b"body")
    message.wire["cached"] = b"bytes"
    marked = first_for_consumer(message)
    assert marked.headers == (("JMSXGroupID", "g"), (FIRST_FOR_CONSUMER_HEADER, "true"))
    assert marked.wire == {} and message.wire == {"cached": b"bytes"}
    assert (marked.message_id, marked.body) == ("m-1", b"body")
    assert message.headers == (("JMSXGroupID", "g"),)
