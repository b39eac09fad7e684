"""The record of what a node ended in a queue's stream (stompbroker.broker.engine.redis.settled)."""

from __future__ import annotations

import pytest

from stompbroker.broker.engine.redis.settled import RecentlySettled


def test_an_ended_entry_and_an_acknowledged_message_are_known() -> None:
    """An entry ended here, or any entry of a message acknowledged here, is to be ended again."""
    record = RecentlySettled()
    record.ended(b"1-0")
    record.acknowledged("n-7")
    assert record.knows(b"1-0")
    assert record.knows(b"9-0", "n-7")
    assert not record.knows(b"2-0", "n-8")
    assert not record.knows(b"2-0")


def test_the_oldest_are_forgotten_past_the_limit() -> None:
    """Each record keeps at least its last ``limit`` ids, at most twice as many."""
    record = RecentlySettled(limit=2)
    for number in range(5):
        record.ended(f"{number}-0".encode())
        record.acknowledged(f"n-{number}")
        assert 2 <= len(record) <= 4 or number < 1
    assert len(record) == 3
    assert not record.knows(b"0-0", "n-0") and not record.knows(b"1-0", "n-1")
    for number in (2, 3, 4):
        assert record.knows(f"{number}-0".encode()) and record.knows(b"x", f"n-{number}")


def test_a_limit_under_one_is_refused() -> None:
    """A record that keeps nothing would end nothing: refused with the reason."""
    with pytest.raises(ValueError, match="1 or more"):
        RecentlySettled(limit=0)


def test_an_entry_of_another_stream_is_known_by_its_stream_and_id() -> None:
    """Lanes number their entries alike: an id ended in one lane is not ended in another."""
    record = RecentlySettled()
    record.ended(("q:lane9", b"1-0"))
    assert record.knows(("q:lane9", b"1-0"))
    assert not record.knows(("q:lane8", b"1-0"))
    assert not record.knows(b"1-0")
