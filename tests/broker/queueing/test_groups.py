"""
Tests for :mod:`stompbroker.broker.queueing.groups`: message groups (``JMSXGroupID``,
``JMSXGroupSeq``, ``JMSXGroupFirstForConsumer``) as ActiveMQ and Artemis define them.
"""

from __future__ import annotations

from collections import deque

import pytest

from stompbroker.broker.queueing.groups import (
    FIRST_FOR_CONSUMER_HEADER,
    GroupAssignments,
    GroupedPending,
    first_for_consumer,
    parse_group,
    stored_group,
)
from stompbroker.protocol.errors import MalformedFrame
from stompbroker.protocol.message import Message


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


def test_assign_forget_and_release_track_owners() -> None:
    """A group has one owner until forgotten; a consumer that leaves gives up all of its groups."""
    groups: GroupAssignments[str] = GroupAssignments()
    groups.assign("x", "a")
    groups.assign("y", "b")
    groups.assign("z", "a")
    assert groups.owner("x") == "a" and groups.groups_of("a") == {"x", "z"} and len(groups) == 3
    groups.forget("x")
    groups.forget("x")
    assert groups.owner("x") is None and groups.groups_of("a") == {"z"}
    assert groups.release("a") == {"z"} and groups.release("a") == frozenset()
    assert groups.owner("z") is None and groups.owner("y") == "b"


def grouped_message(group: str, body: str, priority: int = 4) -> Message:
    """A message of ``group`` whose id is its body."""
    return Message(
        "/queue/q", body, (("JMSXGroupID", group),), body.encode(), priority=priority, group=group
    )


def test_grouped_pending_counts_and_iterates_its_lines() -> None:
    """Held messages count in the length, come first in iteration, and are cleared with the rest."""
    pending: GroupedPending[str] = GroupedPending(deque())
    pending.append(grouped_message("y", "y1"))
    pending.hold("x", "a", grouped_message("x", "x1"))
    pending.hold("x", "a", grouped_message("x", "x2"))
    assert len(pending) == 3 and pending.held == 2 and pending
    assert [m.body for m in pending] == [b"x1", b"x2", b"y1"]
    pending.clear()
    assert len(pending) == 0 and not pending and pending.owners() == []


def test_grouped_pending_lines_take_turns_and_returning_messages_go_first() -> None:
    """An owner's lines take turns; a message coming back goes to the head of its group's line."""
    pending: GroupedPending[str] = GroupedPending(deque())
    for body in ("x1", "x2"):
        pending.hold("x", "a", grouped_message("x", body))
    pending.hold("y", "a", grouped_message("y", "y1"))
    assert pending.next_of("a")[0] == "x"
    assert pending.take("x").body == b"x1"
    assert pending.next_of("a")[0] == "y"
    pending.extendleft(reversed([grouped_message("x", "x0"), grouped_message("z", "z0")]))
    assert [m.body for m in pending.main] == [b"z0"]
    assert pending.take("y").body == b"y1"
    assert [pending.take("x").body for _ in range(2)] == [b"x0", b"x2"]
    assert pending.next_of("a") is None and pending.owners() == []


def test_grouped_pending_release_puts_a_line_back_at_the_head() -> None:
    """When a group moves, its line goes back ahead of the queue's other messages, in order."""
    pending: GroupedPending[str] = GroupedPending(deque())
    pending.append(grouped_message("y", "y1"))
    pending.hold("x", "a", grouped_message("x", "x1"))
    pending.hold("x", "a", grouped_message("x", "x2"))
    pending.release("x")
    pending.release("x")
    assert [m.body for m in pending.main] == [b"x1", b"x2", b"y1"] and pending.held == 0


def test_grouped_pending_switches_to_priorities() -> None:
    """The first message of another priority makes the order ten levels, as in a plain queue."""
    pending: GroupedPending[str] = GroupedPending(deque())
    pending.append(grouped_message("x", "low", priority=1))
    pending.append(grouped_message("x", "high", priority=9))
    assert [m.body for m in pending.main] == [b"high", b"low"]


def test_stored_group_reads_the_first_of_repeated_headers() -> None:
    """A message rebuilt from the store gets its group back, first header winning."""
    headers = (("JMSXGroupID", "g"), ("JMSXGroupSeq", "-1"), ("JMSXGroupID", "h"))
    assert stored_group(headers) == ("g", True)
    assert stored_group((("other", "x"),)) == (None, False)


def test_first_for_consumer_marks_a_copy() -> None:
    """The first message of a group for a consumer carries JMSXGroupFirstForConsumer:true."""
    message = Message("/queue/q", "m-1", (("JMSXGroupID", "g"),), b"body")
    message.wire = {"cached": b"bytes"}
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
