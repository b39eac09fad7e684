"""
Wildcard consumers on queues (:mod:`stompbroker.broker.queueing.wildcard`): one
subscription on every ``/queue/`` its pattern matches, with one window.
"""

from __future__ import annotations

import pytest

from stompbroker.broker.engine.capabilities import REDIS
from stompbroker.broker.queueing.delivery import DeliveryPolicy
from stompbroker.broker.queueing.wildcard import WildcardConsumer, in_flight
from stompbroker.broker.routing.syntax import matches
from stompbroker.protocol.errors import InvalidDestination, NotSupported
from tests.support.consumers import World


@pytest.mark.parametrize(
    ("pattern", "destination", "expected"),
    [
        ("/queue/orders.>", "/queue/orders.eu", True),
        ("/queue/orders.>", "/queue/orders.eu.paris", True),
        ("/queue/orders.>", "/queue/orders", True),
        ("/queue/orders.#", "/queue/orders/eu", True),
        ("/queue/orders.*", "/queue/orders.eu", True),
        ("/queue/orders.*", "/queue/orders.eu.paris", False),
        ("/queue/orders.*", "/queue/orders", False),
        ("/queue/*.eu", "/queue/orders.eu", True),
        ("/queue/*.eu", "/queue/orders.us", False),
        ("/queue/orders.>", "/queue/ordersx.eu", False),
        ("/queue/orders.>", "/topic/orders.eu", False),
    ],
)
def test_matches_segment_by_segment(pattern: str, destination: str, expected: bool) -> None:
    """`*` is one segment, `#`/`>` any trailing ones; `/` and `.` both separate."""
    assert matches(pattern, destination) is expected


def test_it_takes_from_existing_and_later_queues_with_their_destination() -> None:
    """Queues that exist and queues made later; each MESSAGE names its own queue."""
    world = World()
    world.send("/queue/orders.eu", b"1")
    world.send("/queue/other", b"x")
    inbox = world.subscribe("/queue/orders.>")
    world.send("/queue/orders.us", b"2")
    world.send("/queue/orders.eu.paris", b"3")
    assert [(m.destination, m.body) for m in inbox.received] == [
        ("/queue/orders.eu", b"1"),
        ("/queue/orders.us", b"2"),
        ("/queue/orders.eu.paris", b"3"),
    ]
    assert [m.body for m in world.engine.queues["/queue/other"].pending] == [b"x"]


def test_each_message_goes_to_one_consumer() -> None:
    """A wildcard consumer and a plain one on the same queue share its messages."""
    world = World()
    wild = world.subscribe("/queue/jobs.*", "auto", subscription_id="w")
    plain = world.subscribe("/queue/jobs.a", "auto", subscription_id="p")
    world.send("/queue/jobs.a", *[b"%d" % n for n in range(10)])
    assert sorted(wild.bodies() + plain.bodies()) == sorted(b"%d" % n for n in range(10))
    assert wild.bodies() and plain.bodies()


def test_one_window_over_every_queue_and_room_goes_round() -> None:
    """prefetch 2 over three busy queues: 2 held in all, and each ACK's room goes round."""
    world = World()
    for name in ("a", "b", "c"):
        world.send(f"/queue/w.{name}", *[f"{name}{n}".encode() for n in range(5)])
    inbox = world.subscribe("/queue/w.*", prefetch=2)
    assert len(inbox.received) == 2
    for _ in range(6):
        message = inbox.received[-2]
        world.consumers.ack(world.connection, message.message_id, subscriber=inbox)
        state = world.registry.states[world.connection]
        assert len(state.consumers[inbox].unacked) == 2
    queues = {m.destination for m in inbox.received}
    assert queues == {"/queue/w.a", "/queue/w.b", "/queue/w.c"}
    consumer = world.registry.states[world.connection].consumers[inbox]
    assert isinstance(consumer, WildcardConsumer)
    held = [in_flight(member) for member in consumer.members.values()]
    assert sum(held) == 2


def test_nack_returns_a_message_to_its_own_queue() -> None:
    """A NACK's message goes back to the head of the queue it came from."""
    world = World(DeliveryPolicy(max_redeliveries=-1))
    world.send("/queue/n.a", b"a")
    world.send("/queue/n.b", b"b")
    inbox = world.subscribe("/queue/n.*", prefetch=1)
    [first] = inbox.take()
    world.consumers.nack(world.connection, first.message_id, subscriber=inbox)
    [again] = inbox.take()
    assert again.redeliveries in (0, 1)
    assert again.destination in ("/queue/n.a", "/queue/n.b")
    world.consumers.ack(world.connection, again.message_id, subscriber=inbox)
    [last] = inbox.take()
    assert {first.destination, again.destination, last.destination} == {
        "/queue/n.a",
        "/queue/n.b",
    }
    redelivered = [m for m in (again, last) if m.destination == first.destination]
    assert redelivered[0].redeliveries == 1


def test_client_mode_ack_settles_across_queues() -> None:
    """A cumulative ACK settles the earlier messages of every queue, each on its own."""
    world = World()
    world.send("/queue/c.a", b"a1", b"a2")
    world.send("/queue/c.b", b"b1")
    inbox = world.subscribe("/queue/c.*", "client")
    last = inbox.received[-1]
    world.consumers.ack(world.connection, last.message_id, subscriber=inbox)
    assert world.engine.counters.acknowledged == 3
    assert world.registry.states[world.connection].consumers[inbox].unacked == {}


def test_transactions_hold_the_ack_until_commit() -> None:
    """An ACK in a transaction settles at COMMIT, on the message's queue."""
    world = World()
    world.send("/queue/t.a", b"1")
    inbox = world.subscribe("/queue/t.>")
    [message] = inbox.take()
    world.transactions.begin(world.connection, "tx")
    world.consumers.ack(world.connection, message.message_id, subscriber=inbox, transaction="tx")
    assert world.engine.counters.acknowledged == 0
    world.transactions.commit(world.connection, "tx")
    assert world.engine.counters.acknowledged == 1


def test_unsubscribe_returns_what_it_held_to_each_queue_and_stops_watching() -> None:
    """What it held goes back where it came from; later queues are no longer taken from."""
    world = World()
    world.send("/queue/u.a", b"a")
    world.send("/queue/u.b", b"b")
    inbox = world.subscribe("/queue/u.*")
    assert len(inbox.take()) == 2
    world.consumers.unsubscribe(inbox)
    assert [m.body for m in world.engine.queues["/queue/u.a"].pending] == [b"a"]
    assert [m.body for m in world.engine.queues["/queue/u.b"].pending] == [b"b"]
    world.send("/queue/u.c", b"c")
    assert inbox.received == []
    assert world.engine.table.watchers == {}


def test_unsubscribe_forgets_the_queues_it_alone_kept() -> None:
    """Queues that hold nothing and had only it as consumer are released."""
    world = World()
    inbox = world.subscribe("/queue/r.*", "auto")
    world.send("/queue/r.a", b"a")
    assert inbox.bodies() == [b"a"]
    world.consumers.unsubscribe(inbox)
    assert "/queue/r.a" not in world.engine.queues


def test_a_deleted_queue_keeps_the_others_in_flight() -> None:
    """A queue deleted under it drops only that queue's messages from its window."""
    world = World()
    world.send("/queue/d.a", b"a")
    world.send("/queue/d.b", b"b")
    inbox = world.subscribe("/queue/d.*")
    kept = next(m for m in inbox.take() if m.destination == "/queue/d.b")
    world.engine.delete_queue(world.engine.queues["/queue/d.a"])
    consumer = world.registry.states[world.connection].consumers[inbox]
    assert list(consumer.unacked) == [kept.message_id]
    world.consumers.ack(world.connection, kept.message_id, subscriber=inbox)
    assert world.engine.counters.acknowledged == 1


def test_paused_connection_gets_nothing_until_resumed() -> None:
    """A paused connection's wildcard consumer takes nothing; resuming hands out again."""
    world = World()
    inbox = world.subscribe("/queue/p.*", "auto")
    world.send("/queue/p.a", b"0")
    world.registry.pause_consumers(world.connection)
    world.send("/queue/p.a", b"1")
    world.send("/queue/p.b", b"2")
    assert inbox.bodies() == [b"0"]
    world.registry.resume_consumers(world.connection)
    assert sorted(inbox.bodies()) == [b"0", b"1", b"2"]


def test_an_invalid_pattern_is_refused() -> None:
    """A pattern with `>` before the end is an error, as on topics."""
    world = World()
    with pytest.raises(InvalidDestination, match="must be the last segment"):
        world.subscribe("/queue/a.>.b")


def test_an_engine_without_queue_wildcards_refuses_with_the_documented_text() -> None:
    """The redis engine's refusal says why, and that re-subscribing will not help."""
    world = World()
    world.consumers._capabilities = REDIS
    with pytest.raises(NotSupported) as caught:
        world.subscribe("/queue/orders.>")
    assert caught.value.message == (
        "wildcard queue consumers are not supported by the redis engine yet"
    )
    assert "re-subscribe" in caught.value.detail


def test_each_queue_counts_only_its_own_in_flight() -> None:
    """The statistics and the API count a member's own messages, not the whole window's."""
    world = World()
    world.send("/queue/f.a", b"a1", b"a2")
    world.send("/queue/f.b", b"b1")
    world.subscribe("/queue/f.*")
    queues = world.engine.queues
    assert sum(in_flight(c) for c in queues["/queue/f.a"].consumers) == 2
    assert sum(in_flight(c) for c in queues["/queue/f.b"].consumers) == 1
