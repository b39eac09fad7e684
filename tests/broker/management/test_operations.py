"""
The operator's operations (:mod:`stompbroker.broker.management.operations`) on a broker with
a ``task.Clock``, fake connections and both message stores: what each one
changes, what it answers, and that a refused one changes nothing.
"""

from __future__ import annotations

import pytest
from twisted.internet.task import Clock

from stompbroker.broker.management.operations import (
    InUse,
    InvalidRequest,
    Management,
    UnknownConnection,
    UnknownDestination,
)
from stompbroker.broker.management.queue_operations import MAX_COUNT, MAX_MOVE
from stompbroker.broker.service import Broker
from stompbroker.broker.store.journal import durable_key
from stompbroker.protocol.errors import ClosedByOperator
from tests.support.broker import FakeConnection, Inbox, World
from tests.support.persistence import PERSISTENT, Setup, send


def waiting(broker: Broker, destination: str) -> list[bytes]:
    """:returns: the bodies waiting in a queue."""
    return [message.body for message in broker.engine.queues[destination].pending]


def test_connections_are_listed_described_and_closed_with_an_operator_error(
    setup: Setup,
) -> None:
    """A connection shows its subscriptions and in flight; a close sends ClosedByOperator."""
    broker = setup.broker()
    management = Management(broker)
    inbox = setup.subscribe(broker, "/queue/jobs", prefetch=5)
    inbox.connection.subscriptions = {inbox.subscription_id: inbox}
    send(broker, "/queue/jobs", b"a", b"b")
    [info] = management.connections()
    assert info.id == "c1" and info.transport == "tcp"
    [subscription] = info.subscriptions
    assert (subscription.destination, subscription.ack, subscription.in_flight) == (
        "/queue/jobs",
        "client-individual",
        2,
    )
    assert management.connection("c1") == info
    management.close_connection("c1", "maintenance")
    [error] = inbox.connection.failed
    assert isinstance(error, ClosedByOperator)
    assert error.message == "closed by an operator" and "maintenance" in error.detail


def test_closing_an_unknown_connection_is_refused_and_closes_nothing() -> None:
    """An id no open connection has raises UnknownConnection; the others are untouched."""
    broker = Broker(Clock())
    connection = FakeConnection("c1")
    broker.open_connection(connection)
    with pytest.raises(UnknownConnection):
        Management(broker).close_connection("nobody")
    assert connection.failed == []


def test_destinations_list_queues_durables_and_topics_with_their_gauges(
    setup: Setup,
) -> None:
    """Each kind of destination is listed with its depth, in flight and consumers."""
    broker = setup.broker()
    management = Management(broker)
    setup.subscribe(broker, "/queue/busy", prefetch=1)
    send(broker, "/queue/busy", b"1", b"2", b"3")
    send(broker, "/queue/idle", b"x")
    setup.subscribe(broker, "/topic/news.*", ack_mode="auto")
    broker.send("/topic/news.eu", (), b"hello")
    broker.engine.durable_queue(("app", "audit"), "/topic/news.#")
    rows = {row.destination: row for row in management.destinations()}
    assert (rows["/queue/busy"].depth, rows["/queue/busy"].in_flight) == (2, 1)
    assert (rows["/queue/idle"].depth, rows["/queue/idle"].consumers) == (1, 0)
    assert rows["/topic/news.eu"].kind == "topic"
    assert rows["/topic/news.eu"].consumers == 1
    durable = rows[durable_key(("app", "audit"))]
    assert (durable.kind, durable.pattern) == ("durable", "/topic/news.#")
    detail = management.destination("/queue/busy")
    [consumer] = detail.subscribers
    assert (consumer.connection, consumer.in_flight, consumer.window) == ("c1", 1, 1)


def test_browse_leaves_messages_and_purge_removes_them_from_memory_and_store(
    setup: Setup,
) -> None:
    """Browsing peeks at the head; a purge empties the queue and the store's key."""
    broker = setup.broker()
    management = Management(broker)
    send(broker, "/queue/q", b"a", b"b", b"c")
    setup.settle()
    assert [message.body for message in management.queues.browse("/queue/q", 2).messages] == [
        b"a",
        b"b",
    ]
    assert waiting(broker, "/queue/q") == [b"a", b"b", b"c"]
    assert management.queues.purge("/queue/q").count == 3
    setup.settle()
    assert waiting(broker, "/queue/q") == []
    assert setup.stored_ids().get("/queue/q", []) == []
    assert broker.counters.discarded == 3


def test_refused_calls_change_nothing(setup: Setup) -> None:  # noqa: F811
    """Bad names, counts, targets and deletes of consumed queues raise, and the queue stays."""
    broker = setup.broker()
    management = Management(broker)
    setup.subscribe(broker, "/queue/q", prefetch=1)
    send(broker, "/queue/q", b"a", b"b")
    setup.settle()
    stored = setup.stored_ids()
    refusals = [
        (UnknownDestination, lambda: management.queues.purge("/queue/none")),
        (InvalidRequest, lambda: management.queues.purge("/topic/t")),
        (InvalidRequest, lambda: management.queues.browse("/queue/q", 0)),
        (InvalidRequest, lambda: management.queues.browse("/queue/q", MAX_COUNT + 1)),
        (InvalidRequest, lambda: management.queues.move("/queue/q", "/queue/r", 0)),
        (InvalidRequest, lambda: management.queues.move("/queue/q", "/queue/r", MAX_MOVE + 1)),
        (InvalidRequest, lambda: management.queues.move("/queue/q", "/queue/q", 5)),
        (InvalidRequest, lambda: management.queues.move("/queue/q", "/queue/*", 5)),
        (InvalidRequest, lambda: management.queues.move("/queue/q", "/temp-queue/x", 5)),
        (InvalidRequest, lambda: management.queues.retry("/queue/q", 5)),
        (InvalidRequest, lambda: management.publish("/topic/a.*", b"x")),
        (InUse, lambda: management.queues.delete("/queue/q")),
    ]
    for kind, call in refusals:
        with pytest.raises(kind):
            call()
    assert waiting(broker, "/queue/q") == [b"b"]
    setup.settle()
    assert setup.stored_ids() == stored


def test_delete_removes_an_idle_queue_and_its_stored_messages(setup: Setup) -> None:  # noqa: F811
    """A deleted queue is gone from the broker and from the store."""
    broker = setup.broker()
    management = Management(broker)
    send(broker, "/queue/old", b"a", b"b")
    assert management.queues.delete("/queue/old") == 2
    setup.settle()
    assert "/queue/old" not in broker.engine.queues
    assert setup.stored_ids().get("/queue/old", []) == []
    with pytest.raises(UnknownDestination):
        management.destination("/queue/old")


def test_delete_removes_a_durable_subscription(setup: Setup) -> None:  # noqa: F811
    """A durable subscription is deleted by its durable: name, with its backlog."""
    broker = setup.broker()
    broker.engine.durable_queue(("app", "audit"), "/topic/t")
    send(broker, "/topic/t", b"kept")
    name = durable_key(("app", "audit"))
    assert Management(broker).queues.delete(name) == 1
    setup.settle()
    assert broker.engine.durable == {}
    assert setup.stored().subscriptions == ()


def test_move_takes_messages_to_another_queue_in_memory_and_in_the_store(
    setup: Setup,
) -> None:
    """Moved messages leave their queue for the other's tail, and their store key with them."""
    broker = setup.broker()
    management = Management(broker)
    send(broker, "/queue/a", b"1", b"2", b"3")
    send(broker, "/queue/b", b"0")
    assert management.queues.move("/queue/a", "/queue/b", 2).count == 2
    setup.settle()
    assert waiting(broker, "/queue/a") == [b"3"]
    # A move is not bounded by what a browse may list.
    assert management.queues.move("/queue/a", "/queue/c", MAX_COUNT + 1).count == 1
    assert management.queues.move("/queue/c", "/queue/a", MAX_COUNT + 1).count == 1
    setup.settle()
    assert waiting(broker, "/queue/b") == [b"0", b"1", b"2"]
    stored = setup.stored_ids()
    assert len(stored["/queue/a"]) == 1 and len(stored["/queue/b"]) == 3


def test_copy_leaves_the_originals(setup: Setup) -> None:  # noqa: F811
    """Copied messages are added to the target (and the store) and stay in the source."""
    broker = setup.broker()
    send(broker, "/queue/a", b"1", b"2")
    assert Management(broker).queues.move("/queue/a", "/queue/b", 10, copy=True).count == 2
    setup.settle()
    assert waiting(broker, "/queue/a") == [b"1", b"2"]
    assert waiting(broker, "/queue/b") == [b"1", b"2"]
    assert len(setup.stored_ids()["/queue/b"]) == 2


def test_retry_sends_dead_letters_back_without_their_dead_letter_headers(
    setup: Setup,
) -> None:
    """A dead letter goes back to its original-destination, in memory and in the store."""
    broker = setup.broker()
    management = Management(broker)
    inbox = setup.subscribe(broker, "/queue/orders")
    send(broker, "/queue/orders", b"bad", headers=(*PERSISTENT, ("kind", "x")))
    setup.settle()
    [message] = inbox.take()
    broker.nack(inbox.connection, message.message_id, subscriber=inbox, requeue=False)
    broker.unsubscribe(inbox)
    setup.settle()
    assert waiting(broker, "/queue/DLQ.orders") == [b"bad"]
    assert management.queues.retry_targets("/queue/DLQ.orders", 10) == {"/queue/orders"}
    retried = management.queues.retry("/queue/DLQ.orders", 10)
    assert (retried.count, retried.left) == (1, 0)
    setup.settle()
    [back] = broker.engine.queues["/queue/orders"].pending
    assert back.headers == (*PERSISTENT, ("kind", "x"))
    assert waiting(broker, "/queue/DLQ.orders") == []
    stored = setup.stored_ids()
    assert stored["/queue/orders"] == [back.message_id]
    assert stored.get("/queue/DLQ.orders", []) == []


def test_retry_leaves_dead_letters_without_an_origin() -> None:
    """A message in a dead-letter queue without original-destination stays there, counted."""
    broker = Broker(Clock())
    broker.send("/queue/DLQ.x", (), b"orphan")
    retried = Management(broker).queues.retry("/queue/DLQ.x", 5)
    assert (retried.count, retried.left) == (0, 1)
    assert waiting(broker, "/queue/DLQ.x") == [b"orphan"]


def test_a_dead_letter_queue_not_made_yet_browses_and_retries_as_empty() -> None:
    """No message was dead-lettered yet: 0 messages, not an unknown destination."""
    management = Management(Broker(Clock()))
    assert management.queues.browse("/queue/DLQ.orders", 10).messages == ()
    assert management.queues.retry_targets("/queue/DLQ.orders", 10) == set()
    retried = management.queues.retry("/queue/DLQ.orders", 10)
    assert (retried.count, retried.left) == (0, 0)
    with pytest.raises(UnknownDestination):
        management.queues.browse("/queue/orders", 10)
    with pytest.raises(UnknownDestination):
        management.queues.purge("/queue/DLQ.orders")


def test_publish_routes_as_a_send_and_nodes_name_this_process() -> None:
    """publish reaches a queue; nodes lists this broker alone, with the local engine."""
    broker = Broker(Clock())
    management = Management(broker)
    message = management.publish("/queue/q", b"hi", (("k", "v"),))
    assert waiting(broker, "/queue/q") == [b"hi"] and message.headers == (("k", "v"),)
    [node] = management.nodes()
    assert (node.name, node.here, node.engine) == (broker.engine.ids.node, True, "local")


def test_publish_takes_user_and_stream_destinations_as_a_send_does() -> None:
    """A SEND may name /user/LOGIN/... and /stream/...: so may a publish; the stream keeps it."""
    broker = Broker(Clock())
    management = Management(broker)
    assert management.publish("/user/alice/queue/notify", b"hi").destination == (
        "/user/alice/queue/notify"
    )
    management.publish("/stream/log", b"entry")
    [stream] = [info for info in management.destinations() if info.destination == "/stream/log"]
    assert stream.depth == 1


@pytest.mark.parametrize(
    ("destination", "named"),
    [
        ("/temp-queue/a", "of one connection"),
        ("/reply-queue/a", "of one connection"),
        ("/queue/a,/topic/b", "each of its parts"),
        ("/topic/a.*", "wildcard"),
        ("/elsewhere/a", "not a destination"),
    ],
)
def test_publish_refuses_what_no_outside_send_can_reach(destination: str, named: str) -> None:
    """A connection's own queues, composites, wildcards and unknown kinds: refused, saying why."""
    management = Management(Broker(Clock()))
    with pytest.raises(InvalidRequest, match=named):
        management.publish(destination, b"x")


def test_topic_detail_lists_direct_subscribers() -> None:
    """A topic's consumers are the subscriptions a message sent to it reaches now."""
    broker = Broker(Clock())
    connection = FakeConnection("c9")
    broker.open_connection(connection)
    broker.subscribe(Inbox("/topic/a.*", "auto", subscription_id="7", connection=connection))
    broker.send("/topic/a.b", (), b"x")
    [consumer] = Management(broker).destination("/topic/a.b").subscribers
    assert (consumer.connection, consumer.subscription, consumer.ack) == ("c9", "7", "auto")


def test_a_connection_counts_the_messages_it_sent_and_was_sent() -> None:
    """messages_in counts a session's SENDs, messages_out its queue and topic MESSAGEs."""
    world = World()
    producer, consumer = world.client(), world.client()
    consumer.send_frame("SUBSCRIBE", id="q", destination="/queue/work", ack="client-individual")
    consumer.send_frame("SUBSCRIBE", id="t", destination="/topic/news")
    for destination in ("/queue/work", "/queue/work", "/topic/news"):
        producer.send_frame("SEND", b"x", destination=destination)
    assert len(consumer.messages()) == 3
    management = Management(world.broker)
    counts = {
        info.id: (info.messages_in, info.messages_out, info.frames_in)
        for info in management.connections()
    }
    assert counts == {
        producer.session.session_id: (3, 0, 4),
        consumer.session.session_id: (0, 3, 3),
    }


def test_streams_are_listed_as_destinations_of_kind_stream() -> None:
    """A stream shows what it keeps, its readers and what they hold; an unknown one is refused."""
    broker = Broker(Clock())
    management = Management(broker)
    for body in (b"a", b"b", b"c"):
        broker.send("/stream/prices", (), body)
    inbox = Inbox(
        "/stream/prices",
        "client-individual",
        prefetch=2,
        headers={"x-stream-offset": "first"},
        connection=FakeConnection("c1"),
    )
    broker.open_connection(inbox.connection)
    broker.subscribe(inbox)
    rows = {row.destination: row for row in management.destinations()}
    row = rows["/stream/prices"]
    assert (row.kind, row.depth, row.consumers, row.in_flight) == ("stream", 3, 1, 2)
    [reader] = management.destination("/stream/prices").subscribers
    assert (reader.connection, reader.in_flight, reader.window) == ("c1", 2, 2)
    with pytest.raises(UnknownDestination):
        management.destination("/stream/none")
