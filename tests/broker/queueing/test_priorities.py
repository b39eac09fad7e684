"""
Tests for :mod:`stompbroker.broker.queueing.priorities`: ten FIFO levels, highest first.

JMS 1.1 section 3.4.10 ("JMSPriority") gives the range 0 to 9 and 4 as the default.
"""

from __future__ import annotations

from collections import deque
from operator import itemgetter

import pytest
from attrs import frozen
from hypothesis import given
from hypothesis import strategies as st

from stompbroker.broker.queueing.priorities import (
    DEFAULT_PRIORITY,
    PendingMessages,
    parse_priority,
)
from stompbroker.protocol.errors import MalformedFrame


@frozen
class Item:
    """A stand-in for a message: a name, a priority and an expiry."""

    name: str
    priority: int = DEFAULT_PRIORITY
    expires: float = 0.0


def names(pending: PendingMessages[Item]) -> list[str]:
    """The names of what waits, in delivery order."""
    return [item.name for item in pending]


def drain(pending: PendingMessages[Item]) -> list[str]:
    """Pop everything, returning the names in the order popped."""
    popped = []
    while pending:
        popped.append(pending.popleft().name)
    return popped


@pytest.mark.parametrize(
    "value, priority",
    [(None, 4), ("0", 0), ("4", 4), ("9", 9), ("10", 9), ("255", 9), ("007", 7)],
)
def test_parse_priority(value: str | None, priority: int) -> None:
    """A missing priority is JMS's default 4; above 9 counts as 9, as RabbitMQ caps it."""
    assert parse_priority(value) == priority


@pytest.mark.parametrize("value", ["", "-1", "high", "4.5", " 4", "+4", "٣"])
def test_parse_priority_refuses_non_integers(value: str) -> None:
    """Anything but a non-negative decimal integer is a malformed SEND."""
    with pytest.raises(MalformedFrame) as caught:
        parse_priority(value)
    assert caught.value.message == "invalid priority header"


@pytest.mark.parametrize(
    "appended, delivered",
    [
        ([("a", 4), ("b", 4), ("c", 4)], "abc"),
        ([("a", 1), ("b", 9), ("c", 5)], "bca"),
        ([("a", 4), ("b", 7), ("c", 4), ("d", 7), ("e", 0)], "bdace"),
        ([("a", 0), ("b", 0)], "ab"),
        ([("a", 9), ("b", 0), ("c", 9)], "acb"),
    ],
)
def test_higher_priority_first_fifo_within(appended: list, delivered: str) -> None:
    """Higher priorities are delivered first; one priority keeps the order of arrival."""
    pending = PendingMessages(items=[Item(name, priority) for name, priority in appended])
    assert names(pending) == list(delivered)
    assert len(pending) == len(appended)
    assert pending.peek().name == delivered[0]
    assert drain(pending) == list(delivered)
    assert not pending
    assert len(pending) == 0


def test_requeued_messages_go_to_the_head_of_their_level_in_delivery_order() -> None:
    """extendleft(reversed(...)) returns messages ahead of their peers, as the queue requeues."""
    pending = PendingMessages(items=[Item("c", 4), Item("z", 1)])
    pending.extendleft(reversed([Item("a", 4), Item("b", 4), Item("y", 1)]))
    assert names(pending) == ["a", "b", "c", "y", "z"]
    pending.appendleft(Item("top", 9))
    assert pending.popleft().name == "top"


def test_a_lower_level_waits_for_the_higher_one_to_empty() -> None:
    """A high-priority message that arrives late overtakes the low-priority backlog."""
    pending = PendingMessages(items=[Item("low1", 1), Item("low2", 1)])
    assert pending.popleft().name == "low1"
    pending.append(Item("high", 8))
    assert drain(pending) == ["high", "low2"]


def test_empty_container_refuses_to_pop_and_peek() -> None:
    """popleft and peek on an empty container raise IndexError, as a deque's popleft does."""
    pending: PendingMessages[Item] = PendingMessages()
    with pytest.raises(IndexError):
        pending.popleft()
    with pytest.raises(IndexError):
        pending.peek()


def test_clear_empties_every_level() -> None:
    """clear drops the items of all levels."""
    pending = PendingMessages(items=[Item("a", 1), Item("b", 9)])
    pending.clear()
    assert not pending and list(pending) == [] and len(pending) == 0
    pending.append(Item("c", 3))
    assert drain(pending) == ["c"]


def test_priority_of_is_pluggable() -> None:
    """Any function gives the priority: the container holds whatever the queue holds."""
    pending = PendingMessages(priority_of=len, items=["aa", "a", "aaa"])
    assert list(pending) == ["aaa", "aa", "a"]
    with pytest.raises(IndexError):
        pending.append("x" * 10)


def test_remove_if_keeps_the_others_in_order() -> None:
    """remove_if returns what it took in delivery order and leaves the rest in place."""
    items = [
        Item(name, priority) for name, priority in zip("abcdef", [4, 9, 4, 9, 1, 4], strict=True)
    ]
    pending = PendingMessages(items=items)
    taken = pending.remove_if(lambda item: item.name in "bcf")
    assert [item.name for item in taken] == ["b", "c", "f"]
    assert names(pending) == ["d", "a", "e"]
    pending.remove_if(lambda item: item.priority == 9)
    assert names(pending) == ["a", "e"]
    assert pending.peek().name == "a"


def test_remove_expired_reports_the_next_expiry() -> None:
    """The sweep takes expired messages and learns when the next one expires."""
    pending = PendingMessages(
        items=[
            Item("never", 4, 0.0),
            Item("gone", 4, 10.0),
            Item("later", 9, 30.0),
            Item("soon", 1, 20.0),
            Item("now", 1, 15.0),
        ]
    )
    expired, earliest = pending.remove_expired(15.0)
    assert [item.name for item in expired] == ["gone", "now"]
    assert earliest == 20.0
    assert names(pending) == ["later", "never", "soon"]
    assert pending.remove_expired(100.0) == (
        [Item("later", 9, 30.0), Item("soon", 1, 20.0)],
        None,
    )
    assert names(pending) == ["never"]


operations = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(0, 9)),
        st.tuples(st.just("appendleft"), st.integers(0, 9)),
        st.tuples(st.just("popleft"), st.just(0)),
        st.tuples(st.just("remove"), st.integers(0, 9)),
    ),
    max_size=60,
)


@given(operations)
def test_matches_a_sorted_reference(steps: list[tuple[str, int]]) -> None:
    """Any mix of operations leaves the same order as a list sorted by priority then arrival."""
    pending: PendingMessages[tuple[int, int]] = PendingMessages(priority_of=itemgetter(0))
    reference: list[tuple[int, int]] = []  # (priority, sequence); heads get lower sequences
    head, tail = 0, 0
    for operation, priority in steps:
        if operation == "append":
            tail += 1
            entry = (priority, tail)
            pending.append(entry)
            reference.append(entry)
        elif operation == "appendleft":
            head -= 1
            entry = (priority, head)
            pending.appendleft(entry)
            reference.append(entry)
        elif operation == "popleft" and reference:
            reference.sort(key=lambda entry: (-entry[0], entry[1]))
            assert pending.popleft() == reference.pop(0)
        elif operation == "remove":
            pending.remove_if(lambda entry, p=priority: entry[0] == p)
            reference = [entry for entry in reference if entry[0] != priority]
        reference.sort(key=lambda entry: (-entry[0], entry[1]))
        assert list(pending) == reference
        assert len(pending) == len(reference)
        assert bool(pending) == bool(reference)


def test_built_from_a_queues_deque_keeps_its_order() -> None:
    """A queue that swaps its deque for levels on the first non-default priority loses no order."""
    waiting = deque(Item(name) for name in "abc")
    pending = PendingMessages(items=waiting)
    pending.append(Item("urgent", 9))
    pending.append(Item("d"))
    assert drain(pending) == ["urgent", "a", "b", "c", "d"]
