"""
Tests of :class:`BackPressure` on its own: the Pressure value that routing leaves, how
it pauses a sender, the memory marks on a ``task.Clock``, and slow subscribers' drops.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.task import Clock

from stompbroker.broker.flow.backpressure import (
    MEMORY_PRESSURE,
    BackPressure,
    MemoryAlarm,
    Pressure,
)
from stompbroker.broker.flow.broker_limits import Limits
from stompbroker.broker.queueing.delivery import DeliveryCounters


class Reader:
    """A connection that records whether it is read from."""

    def __init__(self, peer: str = "127.0.0.1:1") -> None:
        self.peer = peer
        self.paused = 0

    def pause_reading(self) -> None:
        self.paused += 1

    def resume_reading(self) -> None:
        self.paused -= 1


class Harness:
    """A BackPressure over a set of open connections, with a gauge the test sets."""

    def __init__(self, memory_high: int = 0, memory_low: int = 0) -> None:
        self.clock = Clock()
        self.counters = DeliveryCounters()
        self.connections: set[Any] = set()
        self.used = 0
        self.pressure = BackPressure(
            self.clock,
            Limits(memory_high=memory_high, memory_low=memory_low),
            self.counters,
            self.connections,
        )
        self.pressure.memory_gauge = lambda: self.used

    def reader(self, peer: str = "127.0.0.1:1") -> Reader:
        connection = Reader(peer)
        self.connections.add(connection)
        return connection


def test_nothing_pending_while_nothing_is_wrong() -> None:
    """With memory low and nobody blocking, routing leaves no pressure and pausing does nothing."""
    harness = Harness()
    sender = harness.reader()
    assert harness.pressure.pending is None
    harness.pressure.pause_sender(sender)
    assert sender.paused == 0


def test_a_blocking_subscriber_leaves_a_pressure_that_pauses_the_sender_once() -> None:
    """
    block_sender during fan-out leaves a Pressure naming the slow subscribers; pause_sender
    holds the sender for each and clears it.
    """
    harness = Harness()
    sender, slow, slower = harness.reader(), harness.reader(), harness.reader()
    harness.pressure.block_sender(slow)
    harness.pressure.block_sender(slower)
    assert harness.pressure.pending == Pressure(False, (slow, slower))
    harness.pressure.pause_sender(sender)
    assert (sender.paused, harness.pressure.pending) == (1, None)
    harness.pressure.resume(slow)
    assert sender.paused == 1
    harness.pressure.resume(slower)
    assert sender.paused == 0


def test_a_sender_or_subscriber_that_is_closing_holds_nobody() -> None:
    """A sender not among the open connections is not paused; nor waits for a closed subscriber."""
    harness = Harness()
    sender, gone = harness.reader(), Reader()
    harness.pressure.block_sender(gone)
    harness.pressure.pause_sender(sender)
    assert sender.paused == 0
    harness.pressure.block_sender(harness.reader())
    harness.pressure.pause_sender(Reader())
    assert harness.pressure.pending is None


def test_memory_over_the_high_mark_pauses_every_sender_until_under_the_low_mark() -> None:
    """While memory is high the pressure stays after each SEND; under the low mark all resume."""
    harness = Harness(memory_high=100, memory_low=50)
    harness.pressure.start()
    first, second = harness.reader(), harness.reader()
    harness.used = 200
    harness.clock.advance(1)
    assert harness.pressure.pending is MEMORY_PRESSURE
    harness.pressure.pause_sender(first)
    assert harness.pressure.pending is MEMORY_PRESSURE
    harness.pressure.pause_sender(second)
    assert (first.paused, second.paused) == (1, 1)
    harness.used = 70
    harness.clock.advance(1)
    assert first.paused == 1
    harness.used = 10
    harness.clock.advance(1)
    assert (first.paused, second.paused, harness.pressure.pending) == (0, 0, None)
    harness.pressure.stop()
    assert not harness.clock.getDelayedCalls()


def test_memory_low_keeps_what_a_blocking_subscriber_caused() -> None:
    """Memory falling under the low mark mid-routing keeps the block, and drops the memory part."""
    harness = Harness(memory_high=100, memory_low=50)
    harness.pressure.start()
    sender, slow = harness.reader(), harness.reader()
    harness.used = 200
    harness.clock.advance(1)
    harness.pressure.block_sender(slow)
    assert harness.pressure.pending == Pressure(True, (slow,))
    harness.used = 10
    harness.clock.advance(1)
    assert harness.pressure.pending == Pressure(False, (slow,))
    harness.pressure.pause_sender(sender)
    assert sender.paused == 1
    harness.pressure.forget(slow)
    assert sender.paused == 0


def test_the_watermark_is_off_without_a_high_mark_or_a_gauge() -> None:
    """memory_high 0 turns the watermark off; so does a system where memory cannot be measured."""
    harness = Harness(memory_high=0)
    harness.pressure.start()
    assert not harness.clock.getDelayedCalls()
    harness = Harness(memory_high=100)
    harness.pressure.memory_gauge = None
    harness.pressure.start()
    assert not harness.clock.getDelayedCalls()


def test_drops_are_counted_and_logged_once_per_episode(log_events: list[dict[str, Any]]) -> None:
    """
    count_dropped counts every drop and disconnect, and warns once per episode; an episode
    ends when the subscriber catches up.
    """
    harness = Harness()
    slow = harness.reader()
    harness.pressure.count_dropped(slow, 3)
    harness.pressure.count_dropped(slow, 2)
    assert harness.counters.dropped == 5
    harness.pressure.resume(slow)
    harness.pressure.count_dropped(slow, 1)
    harness.pressure.count_dropped(slow, 1, disconnected=True)
    assert (harness.counters.dropped, harness.counters.slow_disconnects) == (7, 1)
    warnings = [event["log_format"] for event in log_events if event["log_level"].name == "warn"]
    assert [text.split(":")[0] for text in warnings] == [
        "slow consumer {peer}",
        "slow consumer {peer}",
        "disconnecting slow consumer {peer}",
    ]


def test_the_memory_alarm_tells_operators_when_it_went_off_and_who_is_paused() -> None:
    """
    memory_alarm() is off before a start, then says the latest sample, the alarm and its
    time, and the paused publishers, until memory falls under the low mark.
    """
    harness = Harness(memory_high=100, memory_low=50)
    assert harness.pressure.memory_alarm() == MemoryAlarm(False, False, 0, 100, 50, None, 0)
    harness.pressure.start()
    harness.used = 60
    harness.clock.advance(1)
    assert harness.pressure.memory_alarm() == MemoryAlarm(True, False, 60, 100, 50, None, 0)
    harness.used = 200
    harness.clock.advance(1)
    harness.pressure.pause_sender(harness.reader())
    went_off = harness.clock.seconds()
    assert harness.pressure.memory_alarm() == MemoryAlarm(True, True, 200, 100, 50, went_off, 1)
    harness.used = 10
    harness.clock.advance(1)
    assert harness.pressure.memory_alarm() == MemoryAlarm(True, False, 10, 100, 50, None, 0)
    harness.pressure.stop()


def test_an_alarm_pauses_every_sender_until_it_is_off() -> None:
    """An engine's alarm (Redis away) pauses each sender after its SEND, and all go on when off."""
    harness = Harness()
    first, second = harness.reader(), harness.reader()
    harness.pressure.alarm_on("redis unreachable")
    harness.pressure.pause_sender(first)
    assert harness.pressure.pending == Pressure(alarms=frozenset({"redis unreachable"}))
    harness.pressure.pause_sender(second)
    assert (first.paused, second.paused) == (1, 1)
    harness.pressure.alarm_off("redis unreachable")
    assert (first.paused, second.paused) == (0, 0)
    assert harness.pressure.pending is None


def test_an_alarm_and_the_memory_mark_each_hold_a_sender() -> None:
    """A sender paused for memory and for an alarm reads again only once both are over."""
    harness = Harness(memory_high=100, memory_low=50)
    harness.pressure.start()
    sender = harness.reader()
    harness.used = 200
    harness.clock.advance(1)
    harness.pressure.alarm_on("redis unreachable")
    harness.pressure.pause_sender(sender)
    assert sender.paused == 1
    harness.pressure.alarm_off("redis unreachable")
    assert sender.paused == 1
    assert harness.pressure.pending is not None and harness.pressure.pending.memory
    harness.used = 10
    harness.clock.advance(1)
    assert sender.paused == 0
    assert harness.pressure.pending is None


def test_a_held_sender_alone_is_paused_until_its_reason_is_released() -> None:
    """
    hold_sender pauses the sender of the message being routed, not the next
    sender (a queue behind holds its own publishers only), until release_held.
    """
    harness = Harness()
    held, other = harness.reader(), harness.reader()
    harness.pressure.hold_sender("consumers behind on /queue/a")
    harness.pressure.hold_sender("consumers behind on /queue/a")
    assert harness.pressure.pending == Pressure(held_for=("consumers behind on /queue/a",))
    harness.pressure.pause_sender(held)
    assert harness.pressure.pending is None
    harness.pressure.pause_sender(other)
    assert (held.paused, other.paused) == (1, 0)
    harness.pressure.release_held("consumers behind on /queue/b")
    assert held.paused == 1
    harness.pressure.release_held("consumers behind on /queue/a")
    assert held.paused == 0


def test_an_alarm_raised_while_a_message_is_routed_keeps_its_hold() -> None:
    """An alarm that goes on and off in the middle of routing does not drop the sender's hold."""
    harness = Harness()
    sender = harness.reader()
    harness.pressure.hold_sender("consumers behind on /queue/a")
    harness.pressure.alarm_on("redis busy", loud=False)
    harness.pressure.alarm_off("redis busy")
    harness.pressure.pause_sender(sender)
    assert sender.paused == 1
    harness.pressure.release_held("consumers behind on /queue/a")
    assert sender.paused == 0
