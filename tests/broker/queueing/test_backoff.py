"""
Tests of :mod:`stompbroker.broker.queueing.backoff` (the delay of each redelivery,
and a SUBSCRIBE's headers) and :mod:`stompbroker.broker.queueing.delayed` (the
messages of a queue that wait aside for it), and of the queue that holds them.
"""

from __future__ import annotations

import pytest
from attrs import evolve
from twisted.internet.task import Clock

from stompbroker.broker.queueing.backoff import Backoff, parse_backoff
from stompbroker.broker.queueing.dead_letters import DELIVERY_LIMIT
from stompbroker.broker.queueing.delayed import DelayedMessages
from stompbroker.broker.queueing.delivery import DeliveryCounters, DeliveryPolicy
from stompbroker.broker.queueing.queues import WorkerQueue
from stompbroker.protocol.errors import MalformedFrame
from stompbroker.protocol.message import Message
from tests.support.broker import Inbox, message


def test_each_redelivery_waits_longer_up_to_the_maximum() -> None:
    """ActiveMQ's exponential back-off: initial, times the multiplier each time, capped."""
    backoff = Backoff(1000, 2.0, 10_000)
    assert [backoff.delay(n) for n in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert backoff.delay(10_000) == 10.0


def test_the_defaults_keep_a_nack_loop_from_dead_lettering_within_a_minute() -> None:
    """With --max-redeliveries 6, the broker's defaults spread a NACK loop over a minute."""
    backoff = Backoff()
    assert backoff.delay(1) == 1.0
    assert sum(backoff.delay(n) for n in range(1, 7)) == 63.0


def test_no_initial_delay_means_no_wait() -> None:
    """A delay of 0 redelivers at once, whatever the multiplier."""
    assert Backoff(0, 5.0).delay(3) == 0.0 and not Backoff(0).active


@pytest.mark.parametrize(
    "fields", [{"delay_ms": -1}, {"multiplier": 0.5}, {"max_delay_ms": 86_400_001}]
)
def test_a_backoff_out_of_range_is_refused(fields: dict[str, float]) -> None:
    """The value itself refuses what no option or header may give."""
    with pytest.raises(ValueError):
        Backoff(**fields)  # type: ignore[arg-type]


def test_headers_override_the_default_one_by_one() -> None:
    """A SUBSCRIBE's headers replace what they name; no header gives the default itself."""
    default = Backoff(500, 3.0, 20_000)
    assert parse_backoff({}, default) is default
    assert parse_backoff({"redelivery-delay": "0"}, default) == Backoff(0, 3.0, 20_000)
    assert parse_backoff(
        {"redelivery-multiplier": "1.5", "redelivery-max-delay": "900"}, default
    ) == Backoff(500, 1.5, 900)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("redelivery-delay", "1.5"),
        ("redelivery-delay", ""),
        ("redelivery-max-delay", "-5"),
        ("redelivery-multiplier", "nan"),
        ("redelivery-multiplier", "101"),
    ],
)
def test_a_bad_header_is_malformed_and_named(name: str, value: str) -> None:
    """A header that is not a number in range is a MalformedFrame naming it."""
    with pytest.raises(MalformedFrame, match=name):
        parse_backoff({name: value}, Backoff())


def test_delayed_messages_come_back_in_due_order_on_one_timer() -> None:
    """The holder gives back what is due, in due order (ties in order held), on its clock."""
    clock = Clock()
    released: list[list[bytes]] = []
    delayed = DelayedMessages(clock, lambda due: released.append([m.body for m in due]))
    delayed.hold(message(b"late"), 3.0)
    delayed.hold(message(b"a"), 1.0)
    delayed.hold(message(b"b"), 1.0)
    assert len(clock.getDelayedCalls()) == 1 and len(delayed) == 3
    clock.advance(0.5)
    assert released == []
    clock.advance(0.5)
    assert released == [[b"a", b"b"]]
    clock.advance(2)
    assert released == [[b"a", b"b"], [b"late"]] and not delayed
    assert clock.getDelayedCalls() == []


def test_a_holder_emptied_stops_its_timer() -> None:
    """take_all hands over every message held and cancels the timer."""
    clock = Clock()
    delayed = DelayedMessages(clock, lambda due: pytest.fail("released"))
    delayed.hold(message(b"1"), 5.0)
    assert [m.body for m in delayed.take_all()] == [b"1"]
    assert clock.getDelayedCalls() == [] and not delayed
    clock.advance(10)


class Harness:
    """A queue on a ``task.Clock`` whose consumer has a back-off of 1 s, doubling."""

    def __init__(self) -> None:
        self.clock = Clock()
        self.dead: list[tuple[Message, str]] = []
        self.counters = DeliveryCounters()
        self.queue = WorkerQueue(
            "/queue/q",
            self.clock,
            DeliveryPolicy(),
            self.counters,
            lambda dead, reason, key: self.dead.append((dead, reason)),
        )
        self.inbox = Inbox()
        self.consumer = self.queue.add_consumer(self.inbox, 10, 2)
        self.consumer.backoff = Backoff(1000, 2.0, 60_000)

    def nack(self, body: bytes) -> None:
        self.queue.requeue(self.consumer, self.consumer.settle(body.decode()))


def test_a_nacked_message_waits_aside_then_goes_to_the_head() -> None:
    """The queue keeps delivering behind a waiting message; it then goes first."""
    harness = Harness()
    harness.consumer.window = 1
    for body in (b"1", b"2", b"3"):
        harness.queue.enqueue(message(body))
    harness.nack(b"1")
    assert harness.inbox.bodies() == [b"1", b"2"]
    assert not harness.queue.is_idle() and len(harness.queue.delayed or ()) == 1
    harness.clock.advance(1)
    assert [m.body for m in harness.queue.pending] == [b"1", b"3"]
    assert harness.counters.redelivered == 1


def test_the_limit_still_dead_letters_after_the_waits() -> None:
    """After max-redeliveries waits, the next NACK dead-letters the message at once."""
    harness = Harness()
    harness.queue.enqueue(message(b"1"))
    for wait in (1, 2):
        harness.nack(b"1")
        harness.clock.advance(wait)
    harness.nack(b"1")
    assert [(m.body, reason) for m, reason in harness.dead] == [(b"1", DELIVERY_LIMIT)]
    assert [m.redeliveries for m in harness.inbox.received] == [0, 1, 2]


def test_a_grouped_message_is_redelivered_at_once() -> None:
    """A message of a group skips the back-off: its group's later messages must not overtake it."""
    harness = Harness()
    grouped = evolve(message(b"1"), group="g")
    harness.queue.enqueue(grouped)
    harness.nack(b"1")
    assert [(m.body, m.redeliveries) for m in harness.inbox.received] == [(b"1", 0), (b"1", 1)]
    assert harness.queue.delayed is None


def test_purge_and_close_take_the_waiting_messages_too() -> None:
    """Purging counts the waiting messages among those discarded; closing drops them."""
    harness = Harness()
    harness.queue.enqueue(message(b"1"))
    harness.nack(b"1")
    harness.queue.remove_consumer(harness.consumer)
    assert harness.queue.purge() == 1 and harness.queue.is_idle()
    harness.queue.add_consumer(harness.inbox, 10, 2).backoff = Backoff()
    harness.queue.enqueue(message(b"2"))
    harness.queue.requeue(harness.queue.consumers[0], harness.queue.consumers[0].take_all())
    harness.queue.close()
    assert harness.counters.discarded == 2 and harness.clock.getDelayedCalls() == []
