"""
A node's lapse of liveness (stompbroker.broker.engine.redis.lapse): when it sees,
on a ``task.Clock``, that its key may have expired, and how a queue's state is
sorted by what its pending lists still hold.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from twisted.internet.task import Clock

from stompbroker.broker.engine.redis.lapse import (
    Aside,
    LapseWatch,
    claimed_entries,
    sort_after_lapse,
)
from stompbroker.broker.engine.redis.liveness import Liveness
from stompbroker.broker.queueing.delivery import DeliveryCounters
from stompbroker.protocol.message import Message

STREAM = "sb:{q:/queue/a}"
LANE = "sb:{q:/queue/a}:lane:7"


def watch(timeout: float = 2.0) -> tuple[Clock, LapseWatch]:
    clock = Clock()
    clock.advance(100.0)
    return clock, LapseWatch(clock, timeout)


def test_before_any_confirmed_beat_the_node_counts_as_lapsed() -> None:
    _, lapse = watch()
    assert lapse.lapsed()


def test_beats_confirmed_every_third_of_the_timeout_never_lapse() -> None:
    clock, lapse = watch(2.0)
    for _ in range(30):
        sent = lapse.sending()
        clock.advance(0.05)  # the reply's round trip
        lapse.confirmed(sent)
        assert not lapse.lapsed()
        clock.advance(2.0 / 3 - 0.05)
        assert not lapse.lapsed()


def test_a_stop_longer_than_the_timeout_since_the_last_confirmed_beat_is_a_lapse() -> None:
    clock, lapse = watch(2.0)
    lapse.confirmed(lapse.sending())
    clock.advance(1.999)
    assert not lapse.lapsed()
    clock.advance(0.001)
    assert lapse.lapsed()


def test_the_key_lives_from_the_sending_of_a_beat_not_from_its_reply() -> None:
    """A late reply (Redis slow, the node stopped) extends nothing past send + timeout."""
    clock, lapse = watch(2.0)
    sent = lapse.sending()
    clock.advance(1.5)
    lapse.confirmed(sent)
    clock.advance(0.5)
    assert lapse.lapsed()


def test_a_beat_sent_but_never_confirmed_does_not_keep_the_node_live() -> None:
    """Redis away: beats queue in the writer, unanswered; the watch lapses after the timeout."""
    clock, lapse = watch(2.0)
    lapse.confirmed(lapse.sending())
    for _ in range(4):
        clock.advance(2.0 / 3)
        lapse.sending()
    assert lapse.lapsed()


def test_an_older_confirmation_after_a_newer_one_changes_nothing() -> None:
    clock, lapse = watch(2.0)
    first = lapse.sending()
    clock.advance(1.0)
    second = lapse.sending()
    lapse.confirmed(second)
    lapse.confirmed(first)
    assert lapse.safe_until == second + 2.0


def test_a_key_found_gone_is_a_lapse_whatever_the_clock_says() -> None:
    clock, lapse = watch(2.0)
    lapse.confirmed(lapse.sending())
    clock.advance(0.1)
    lapse.gone()
    assert lapse.lapsed()
    lapse.confirmed(lapse.sending())
    assert not lapse.lapsed()


@pytest.mark.parametrize("timeout", [0.0, -1.0])
def test_a_timeout_that_is_not_positive_is_refused(timeout: float) -> None:
    with pytest.raises(ValueError, match="positive"):
        LapseWatch(Clock(), timeout)


def message(number: int) -> Message:
    return Message("/queue/a", f"m-{number}", (), b"x")


def test_sorting_keeps_what_the_pending_lists_hold_and_forgets_what_another_node_took() -> None:
    entries = {
        "m-1": b"1-0",  # read ahead, still this node's
        "m-2": b"2-0",  # read ahead, claimed by another node
        "m-3": (LANE, b"3-0"),  # delivered, still this node's
        "m-4": b"4-0",  # delivered, claimed by another node
    }
    owned = {(STREAM, b"1-0"), (LANE, b"3-0"), (STREAM, b"5-0")}
    aside = Aside([message(1), message(2)], [b"5-0", b"6-0", (LANE, b"7-0")])
    result = sort_after_lapse(owned, STREAM, entries, aside)
    assert [m.message_id for m in result.kept] == ["m-1"]
    assert result.dropped == 1
    assert result.forget == ["m-2", "m-4"]
    # Acknowledged meanwhile: only this node's own entries are ended.
    assert result.to_end == [b"5-0"]


def test_sorting_with_nothing_taken_keeps_everything_in_order() -> None:
    entries = {f"m-{n}": f"{n}-0".encode() for n in range(1, 4)}
    owned = {(STREAM, f"{n}-0".encode()) for n in range(1, 4)}
    aside = Aside([message(1), message(2), message(3)])
    result = sort_after_lapse(owned, STREAM, entries, aside)
    assert [m.message_id for m in result.kept] == ["m-1", "m-2", "m-3"]
    assert result.dropped == 0 and result.forget == [] and result.to_end == []


def test_claimed_entries_reads_the_scripts_reply_as_redis_py_reads_xclaim() -> None:
    reply = [[b"1-0", [b"m", b"payload", b"r", b"2"]], [b"2-0", None], None]
    assert claimed_entries(reply) == [(b"1-0", {b"m": b"payload", b"r": b"2"}), (b"2-0", None)]
    assert claimed_entries([]) == []


def test_dropped_acknowledgements_count_in_the_nodes_delivery_counters() -> None:
    """What Liveness.foreign_settled counts is what /stats and /metrics show per node."""
    counters = DeliveryCounters()
    engine = SimpleNamespace(clock=Clock(), node_timeout=2.0, counters=counters)
    liveness = Liveness(engine)
    liveness.foreign_settled(2, "/queue/a")
    liveness.foreign_settled(1, "/queue/b")
    assert counters.foreign_acks == 3
