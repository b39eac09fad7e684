"""
Tests of :class:`WorkerQueue` and :class:`Consumer`: dispatch, windows, settlement,
redelivery, dead letters and expiry, with recording subscribers and ``task.Clock``.
"""

from __future__ import annotations

from typing import Any

import pytest
from twisted.internet.task import Clock

from stompbroker.broker.flow.traffic import Traffic
from stompbroker.broker.queueing.dead_letters import DELIVERY_LIMIT, EXPIRED, REJECTED
from stompbroker.broker.queueing.delivery import Consumer, DeliveryCounters, DeliveryPolicy
from stompbroker.broker.queueing.queues import WorkerQueue
from stompbroker.protocol.message import Message
from tests.support.broker import Inbox, message

DEFAULT_POLICY = DeliveryPolicy()


class Harness:
    """A queue on a ``task.Clock`` whose dead letters are recorded."""

    def __init__(
        self, policy: DeliveryPolicy = DEFAULT_POLICY, sweep_interval: float = 1.0
    ) -> None:
        self.clock = Clock()
        self.counters = DeliveryCounters()
        self.dead: list[tuple[Message, str]] = []
        self.queue = WorkerQueue(
            "/queue/q",
            self.clock,
            policy,
            self.counters,
            lambda dead, reason, store_key: self.dead.append((dead, reason)),
            sweep_interval=sweep_interval,
        )

    def consumer(
        self, window: int = 10, max_redeliveries: int = 6, **kwargs: Any
    ) -> tuple[Consumer, Inbox]:
        inbox = Inbox(**kwargs)
        return self.queue.add_consumer(inbox, window, max_redeliveries), inbox

    def send(self, *bodies: bytes, expires: float = 0.0) -> None:
        for body in bodies:
            self.queue.enqueue(message(body, expires=expires))


def test_messages_wait_for_a_consumer_then_arrive_in_order() -> None:
    """
    A queue keeps messages while nobody consumes, and delivers them in FIFO order to the first
    consumer.
    """
    harness = Harness()
    harness.send(b"1", b"2", b"3")
    assert len(harness.queue.pending) == 3
    _, inbox = harness.consumer()
    assert inbox.bodies() == [b"1", b"2", b"3"]
    assert not harness.queue.pending


def test_each_message_goes_to_one_consumer_round_robin() -> None:
    """Competing consumers take turns, each message going to exactly one of them."""
    harness = Harness()
    inboxes = [harness.consumer(subscription_id=name)[1] for name in "abc"]
    harness.send(*(str(n).encode() for n in range(7)))
    assert [inbox.bodies() for inbox in inboxes] == [
        [b"0", b"3", b"6"],
        [b"1", b"4"],
        [b"2", b"5"],
    ]


def test_full_window_is_skipped_until_it_acknowledges() -> None:
    """A consumer with its window full gets nothing more until an ACK makes room (prefetch)."""
    harness = Harness()
    slow, slow_inbox = harness.consumer(window=1, subscription_id="slow")
    _, fast_inbox = harness.consumer(window=10, subscription_id="fast")
    harness.send(b"1", b"2", b"3", b"4")
    assert slow_inbox.bodies() == [b"1"]
    assert fast_inbox.bodies() == [b"2", b"3", b"4"]
    harness.send(b"5")
    assert fast_inbox.bodies()[-1] == b"5"
    harness.queue.acknowledge(slow, slow.settle("1"))
    harness.send(b"6")
    assert slow_inbox.bodies() == [b"1", b"6"]


def test_messages_wait_when_every_window_is_full() -> None:
    """With every window full, messages stay queued, and each ACK releases the next in order."""
    harness = Harness()
    consumer, inbox = harness.consumer(window=2)
    harness.send(b"1", b"2", b"3", b"4")
    assert inbox.bodies() == [b"1", b"2"]
    harness.queue.acknowledge(consumer, consumer.settle("2"))
    assert inbox.bodies() == [b"1", b"2", b"3"]
    assert [m.body for m in harness.queue.pending] == [b"4"]


def test_auto_consumers_hold_nothing_and_have_no_window() -> None:
    """An auto-ack consumer is never full and keeps no unacknowledged messages (at-most-once)."""
    harness = Harness()
    consumer, inbox = harness.consumer(window=1, ack_mode="auto")
    harness.send(b"1", b"2", b"3")
    assert inbox.bodies() == [b"1", b"2", b"3"]
    assert not consumer.unacked
    assert not consumer.holds("1")


def test_client_mode_settles_cumulatively() -> None:
    """
    STOMP 1.2, "SUBSCRIBE ack Header": in client mode an ACK covers that message and every
    earlier one.
    """
    harness = Harness()
    consumer, _ = harness.consumer(ack_mode="client")
    harness.send(b"1", b"2", b"3")
    assert [m.body for m in consumer.settle("2")] == [b"1", b"2"]
    assert list(consumer.unacked) == ["3"]
    assert consumer.settle("2") == []


def test_client_individual_mode_settles_one_message() -> None:
    """
    STOMP 1.2, "SUBSCRIBE ack Header": in client-individual mode an ACK covers only that
    message.
    """
    harness = Harness()
    consumer, _ = harness.consumer(ack_mode="client-individual")
    harness.send(b"1", b"2", b"3")
    assert [m.body for m in consumer.settle("2")] == [b"2"]
    assert list(consumer.unacked) == ["1", "3"]
    assert consumer.settle("2") == [], "a message settled already settles nothing"
    assert [m.body for m in consumer.take_all()] == [b"1", b"3"], "the rest, in delivery order"


def test_requeued_messages_return_to_the_head_in_order_marked_redelivered() -> None:
    """
    NACKed messages go back to the head of the queue in delivery order, with redeliveries
    counted.
    """
    harness = Harness()
    consumer, inbox = harness.consumer(window=2)
    harness.send(b"1", b"2", b"3")
    original = inbox.take()
    harness.queue.requeue(consumer, consumer.settle("1") + consumer.settle("2"))
    redelivered = inbox.take()
    assert [m.body for m in redelivered] == [b"1", b"2"]
    assert [m.redeliveries for m in redelivered] == [1, 1]
    assert [m.redeliveries for m in original] == [0, 0], "the published message is not changed"
    assert redelivered[0].wire is original[0].wire, "the encoded tail is shared"
    assert [m.body for m in harness.queue.pending] == [b"3"]
    assert harness.counters.redelivered == 2


def test_removed_consumers_messages_go_to_the_others() -> None:
    """A consumer that goes away returns what it held, and the remaining consumers get it first."""
    harness = Harness()
    leaving, leaving_inbox = harness.consumer(window=2, subscription_id="leaving")
    _, staying_inbox = harness.consumer(window=10, subscription_id="staying")
    harness.send(b"1", b"2", b"3", b"4")
    assert leaving_inbox.bodies() == [b"1", b"3"]
    staying_inbox.take()
    harness.queue.remove_consumer(leaving)
    assert [(m.body, m.redeliveries) for m in staying_inbox.received] == [(b"1", 1), (b"3", 1)]
    harness.queue.remove_consumer(leaving)  # a second removal is harmless


def test_round_robin_continues_after_a_consumer_leaves() -> None:
    """Removing a consumer keeps the turn order of the others intact."""
    harness = Harness()
    consumers = [harness.consumer(ack_mode="auto", subscription_id=name) for name in "abc"]
    harness.send(b"1", b"2")
    harness.queue.remove_consumer(consumers[0][0])
    harness.send(b"3", b"4")
    assert consumers[1][1].bodies() == [b"2", b"4"]
    assert consumers[2][1].bodies() == [b"3"]


def test_redelivery_limit_sends_message_to_dead_letters() -> None:
    """A message redelivered as often as allowed is dead-lettered on its next return."""
    harness = Harness()
    consumer, inbox = harness.consumer(max_redeliveries=2)
    harness.send(b"poison")
    for expected in (1, 2):
        harness.queue.requeue(consumer, consumer.settle("poison"))
        assert inbox.received[-1].redeliveries == expected
    harness.queue.requeue(consumer, consumer.settle("poison"))
    assert len(inbox.received) == 3
    [(dead, reason)] = harness.dead
    assert (dead.body, reason) == (b"poison", DELIVERY_LIMIT)
    assert not harness.queue.pending


def test_zero_redeliveries_dead_letters_on_first_return() -> None:
    """With max-redeliveries 0 a returned message is never redelivered."""
    harness = Harness()
    consumer, _ = harness.consumer(max_redeliveries=0)
    harness.send(b"1")
    harness.queue.requeue(consumer, consumer.settle("1"))
    assert [reason for _, reason in harness.dead] == [DELIVERY_LIMIT]


def test_unlimited_redeliveries() -> None:
    """With max-redeliveries -1 a message is redelivered however often it returns."""
    harness = Harness()
    consumer, inbox = harness.consumer(max_redeliveries=-1)
    harness.send(b"1")
    for _ in range(50):
        harness.queue.requeue(consumer, consumer.settle("1"))
    assert inbox.received[-1].redeliveries == 50
    assert harness.dead == []


def test_reject_dead_letters_at_once_and_makes_room() -> None:
    """NACK with requeue:false dead-letters the message without redelivery, freeing the window."""
    harness = Harness()
    consumer, inbox = harness.consumer(window=1)
    harness.send(b"1", b"2")
    harness.queue.reject(consumer.settle("1"))
    assert [(m.body, reason) for m, reason in harness.dead] == [(b"1", REJECTED)]
    assert inbox.bodies() == [b"1", b"2"]


def test_dead_lettering_at_the_limit_makes_room_for_the_next_message() -> None:
    """A NACK that dead-letters a message at its redelivery limit frees the window at once."""
    harness = Harness()
    consumer, inbox = harness.consumer(window=1, max_redeliveries=0)
    harness.send(b"poison", b"next")
    assert inbox.bodies() == [b"poison"]
    harness.queue.requeue(consumer, consumer.settle("poison"))
    assert [reason for _, reason in harness.dead] == [DELIVERY_LIMIT]
    assert inbox.bodies() == [b"poison", b"next"]


def test_backlog_behind_full_windows_flows_again_when_room_appears() -> None:
    """
    Messages sent while every consumer is full or paused pile up, in order, and
    flow again as soon as an ACK or a resume makes room, from either consumer.
    """
    harness = Harness()
    first, first_inbox = harness.consumer(window=1, subscription_id="first")
    second, second_inbox = harness.consumer(window=1, subscription_id="second")
    harness.send(*(str(n).encode() for n in range(6)))
    assert first_inbox.bodies() == [b"0"] and second_inbox.bodies() == [b"1"]
    second.paused = True
    harness.queue.acknowledge(second, second.settle("1"))
    harness.send(b"6")
    assert second_inbox.bodies() == [b"1"]
    second.paused = False
    harness.queue.dispatch()
    assert second_inbox.bodies() == [b"1", b"2"]
    harness.queue.acknowledge(first, first.settle("0"))
    assert first_inbox.bodies() == [b"0", b"3"]
    harness.queue.acknowledge(second, second.settle("2"))
    harness.queue.acknowledge(first, first.settle("3"))
    assert second_inbox.bodies() == [b"1", b"2", b"4"]
    assert first_inbox.bodies() == [b"0", b"3", b"5"]
    assert [m.body for m in harness.queue.pending] == [b"6"]


def test_expired_message_at_the_head_is_never_delivered() -> None:
    """A message whose expiry has passed is expired when it reaches the head, not delivered."""
    harness = Harness()
    harness.clock.advance(100)
    harness.send(b"old", expires=50.0)
    harness.send(b"fresh", expires=200.0)
    harness.send(b"forever")
    _, inbox = harness.consumer()
    assert inbox.bodies() == [b"fresh", b"forever"]
    assert harness.counters.expired == 1
    assert harness.dead == [], "the default policy drops expired messages"


def test_requeued_message_that_expired_is_not_redelivered() -> None:
    """A message that expires while a consumer holds it is not redelivered after a NACK."""
    harness = Harness()
    consumer, inbox = harness.consumer()
    harness.send(b"1", expires=5.0)
    harness.clock.advance(6)
    harness.queue.requeue(consumer, consumer.settle("1"))
    assert inbox.bodies() == [b"1"]
    assert harness.counters.expired == 1


def test_sweep_expires_messages_nobody_consumes() -> None:
    """
    Expired messages leave a queue without consumers when their time comes, keeping the rest in
    order.
    """
    harness = Harness()
    harness.send(b"a", expires=2.0)
    harness.send(b"b")
    harness.send(b"c", expires=5.0)
    harness.clock.advance(2)
    assert [m.body for m in harness.queue.pending] == [b"b", b"c"]
    harness.clock.advance(3)
    assert [m.body for m in harness.queue.pending] == [b"b"]
    assert harness.counters.expired == 2
    assert harness.clock.getDelayedCalls() == []


def test_sweeps_are_at_least_an_interval_apart() -> None:
    """
    A stream of messages expiring at different times costs one sweep per interval, not one per
    message.
    """
    harness = Harness(sweep_interval=1.0)
    for n in range(100):
        harness.send(str(n).encode(), expires=0.01 * (n + 1))
    assert len(harness.clock.getDelayedCalls()) == 1
    harness.clock.advance(0.01)
    assert len(harness.queue.pending) == 99
    harness.clock.advance(0.5)
    assert len(harness.queue.pending) == 99, "the next sweep waits for the interval"
    harness.clock.advance(0.5)
    assert len(harness.queue.pending) == 0
    assert harness.counters.expired == 100


def test_expired_messages_dead_lettered_when_policy_says_so() -> None:
    """
    With expired=dead-letter an expired message goes to the dead-letter callable, reason
    expired.
    """
    harness = Harness(DeliveryPolicy(expired="dead-letter"))
    harness.send(b"1", expires=1.0)
    harness.clock.advance(1)
    assert [(m.body, reason) for m, reason in harness.dead] == [(b"1", EXPIRED)]


def test_close_discards_everything_and_stops_the_sweep() -> None:
    """Closing a queue drops pending and held messages, counts them, and leaves no timer behind."""
    harness = Harness()
    consumer, _ = harness.consumer(window=1)
    harness.send(b"1", b"2", expires=10.0)
    harness.queue.close()
    assert harness.queue.is_idle()
    assert not consumer.unacked
    assert harness.counters.discarded == 2
    assert harness.clock.getDelayedCalls() == []


class AcknowledgingInbox(Inbox):
    """A subscriber that acknowledges each message from inside its delivery."""

    consumer: Consumer

    def deliver(self, delivered: Message) -> None:
        super().deliver(delivered)
        self.consumer.queue.acknowledge(self.consumer, self.consumer.settle(delivered.message_id))


def test_acknowledging_inside_a_delivery_does_not_reenter_dispatch() -> None:
    """A consumer that settles from within deliver() still gets every message once, in order."""
    harness = Harness()
    inbox = AcknowledgingInbox()
    harness.send(b"1", b"2", b"3")
    inbox.consumer = Consumer(inbox, harness.queue, 1, 6)
    harness.queue.consumers.append(inbox.consumer)
    harness.queue.dispatch()
    assert inbox.bodies() == [b"1", b"2", b"3"]
    assert harness.counters.acknowledged == 3


def test_counters_follow_each_state_change() -> None:
    """Enqueue, delivery, acknowledgement and redelivery are each counted once."""
    harness = Harness()
    consumer, _ = harness.consumer()
    harness.send(b"1", b"2")
    harness.queue.acknowledge(consumer, consumer.settle("1"))
    harness.queue.requeue(consumer, consumer.settle("2"))
    counters = harness.counters
    assert (counters.enqueued, counters.delivered, counters.acknowledged, counters.redelivered) == (
        2,
        3,
        1,
        1,
    )


@pytest.mark.parametrize(
    "settings",
    [
        {"prefetch": 0},
        {"max_redeliveries": -2},
        {"expired": "keep"},
        {"dead_letter_prefix": ""},
        {"dead_letter_prefix": "a/b"},
        {"ttl": -1},
    ],
)
def test_policy_rejects_invalid_settings(settings: dict[str, Any]) -> None:
    """A DeliveryPolicy refuses settings that cannot work, at construction."""
    with pytest.raises(ValueError):
        DeliveryPolicy(**settings)


def test_deliver_copies_gives_each_consumer_with_room_its_own_copy() -> None:
    """
    deliver_copies hands every consumer with room a copy ahead of what is pending, skipping
    one with a full window, and counts each copy as in and delivered (docs/monitoring.md).
    """
    traffic = Traffic()
    queue = WorkerQueue(
        "/queue/monitor", Clock(), DeliveryPolicy(), DeliveryCounters(), print, traffic=traffic
    )
    watcher = Inbox("/queue/monitor", "auto", subscription_id="w")
    careful = Inbox("/queue/monitor", "client", subscription_id="c")
    full = Inbox("/queue/monitor", "client-individual", subscription_id="f")
    queue.add_consumer(full, 1, 6)
    queue.enqueue(Message("/queue/monitor", "waiting", (), b"sent"))
    queue.add_consumer(watcher, 10, 6)
    holder = queue.add_consumer(careful, 10, 6)
    ids = iter(["s1", "s2", "s3"])
    assert queue.deliver_copies(b"status", (("k", "v"),), ids) == 2
    assert [m.message_id for m in watcher.received + careful.received] == ["s1", "s2"]
    assert careful.received[0].headers == (("k", "v"),) and holder.holds("s2")
    assert full.bodies() == [b"sent"]
    counted = traffic.destinations["/queue/monitor"]
    assert (counted.messages_in, counted.messages_delivered, counted.messages_acked) == (2, 3, 1)


def test_a_published_message_holds_the_queues_own_destination_string() -> None:
    """
    A message sent to the queue waits holding the queue's destination string, one object for
    every message waiting, rather than the copy its SEND was parsed into.
    """
    harness = Harness()
    sent = Message("".join(["/queue/", "q"]), "m-1", (), b"x")
    assert sent.destination is not harness.queue.destination
    harness.queue.publish(sent)
    [waiting] = harness.queue.pending
    assert waiting.destination is harness.queue.destination


def test_a_queue_held_by_another_hands_its_consumers_to_the_owner_and_reports_what_leaves() -> None:
    """
    A queue that is another queue's local state (the redis engine's stream handle) gives its
    consumers the owner to settle with, and tells it of each message that expires or is
    dead-lettered; an acknowledged one it does not.
    """
    owner = object()
    left: list[bytes] = []
    dead: list[str] = []
    clock = Clock()
    queue = WorkerQueue(
        "/queue/q",
        clock,
        DeliveryPolicy(),
        DeliveryCounters(),
        lambda gone, reason, store_key: dead.append(reason),
        owner=owner,
        left=lambda gone: left.append(gone.body),
    )
    consumer = queue.add_consumer(Inbox(), 10, 0)
    assert consumer.queue is owner
    queue.enqueue(message(b"acked"))
    queue.acknowledge(consumer, consumer.settle("acked"))
    queue.enqueue(message(b"refused"))
    queue.reject(consumer.settle("refused"))
    queue.remove_consumer(consumer)
    queue.enqueue(message(b"stale", expires=5.0))
    clock.advance(10)
    assert left == [b"refused", b"stale"]
    assert dead == [REJECTED]
