"""
The broker with a message store: what it writes for persistent messages, and
what it rebuilds from the store when it starts again.

Every test runs against :class:`MemoryStore` and against :class:`SQLiteStore`
with a synchronous writer on a ``task.Clock`` (its writes are committed when the
clock's turn ends: ``clock.advance(0)``), so no test needs a thread or a socket.
A "restart" drops the broker without stopping it and starts a new one on the
same store (for SQLite, on a store reopened from the same directory).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock

from stompbroker.broker.queueing.backoff import Backoff
from stompbroker.broker.queueing.delivery import DeliveryPolicy
from stompbroker.broker.service import Broker
from stompbroker.broker.store.base import StoreDamaged, StoreLocked
from stompbroker.broker.store.journal import (
    DURABLE_KEY_PREFIX,
    Journal,
    MessageNotStored,
    durable_key,
    parse_durable_key,
)
from stompbroker.protocol.message import Message
from tests.support.broker import FakeConnection, Inbox
from tests.support.persistence import PERSISTENT, Setup, send
from tests.support.store import FILLING, damage_pages, result_of, sqlite_store


def ack(broker: Broker, inbox: Inbox, index: int) -> Any:
    message = inbox.received[index]
    return broker.ack(inbox.connection, message.message_id, subscriber=inbox)


# -- keys ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "durable", [("", "prices"), ("client-1", "a/b"), ('q"uote', "name with \\ and ,")]
)
def test_durable_keys_round_trip_and_never_look_like_queues(durable: tuple[str, str]) -> None:
    """
    A durable subscription's store key gives back its (client-id, name) and is no /queue/ name.
    """
    key = durable_key(durable)
    assert key.startswith(DURABLE_KEY_PREFIX) and not key.startswith("/queue/")
    assert parse_durable_key(key) == durable


@pytest.mark.parametrize("key", ["/queue/orders", "durable:", "durable:[1, 2]", 'durable:["a"]'])
def test_keys_the_broker_did_not_make_are_not_durable_keys(key: str) -> None:
    """parse_durable_key refuses queue names and malformed durable keys."""
    assert parse_durable_key(key) is None


# -- what a SEND writes ------------------------------------------------------------------


def test_persistent_send_to_a_queue_is_stored_and_waits_for_the_store(setup: Setup) -> None:
    """
    A persistent:true SEND is filed under its queue; send() returns what the RECEIPT waits for.
    """
    broker = setup.broker()
    [waiting] = send(broker, "/queue/orders", b"1")
    assert isinstance(waiting, Deferred)
    setup.settle()
    assert result_of(waiting) is None
    assert list(setup.stored_ids()) == ["/queue/orders"]
    assert len(broker.engine.queues["/queue/orders"].pending) == 1


@pytest.mark.parametrize(
    "destination, headers",
    [
        ("/queue/orders", ()),
        ("/queue/orders", (("persistent", "false"),)),
        ("/topic/prices", PERSISTENT),
    ],
)
def test_sends_that_nothing_stores_return_none(
    setup: Setup, destination: str, headers: Any
) -> None:
    """
    A non-persistent SEND, or a persistent one to a topic without durable subscribers, writes
    nothing.
    """
    broker = setup.broker()
    assert send(broker, destination, b"1", headers=headers) == [None]
    assert setup.stored_ids() == {}


def test_temporary_and_reply_queues_are_not_persisted(setup: Setup) -> None:
    """Temporary queues end with their connection, so their messages are never stored."""
    broker = setup.broker()
    requester = setup.subscribe(broker, "/temp-queue/replies", ack_mode="auto")
    worker = setup.subscribe(broker, "/queue/rpc", ack_mode="auto")
    broker.send(
        "/queue/rpc",
        (("reply-to", "/temp-queue/replies"),),
        b"ask",
        connection=requester.connection,
    )
    reply_to = dict(worker.received[0].headers)["reply-to"]
    assert broker.send(reply_to, PERSISTENT, b"answer") is None
    assert broker.send("/temp-queue/own", PERSISTENT, b"x", connection=requester.connection) is None
    assert requester.bodies() == [b"answer"]
    assert setup.stored_ids() == {}


def test_persistent_queues_makes_every_queue_send_persistent(setup: Setup) -> None:
    """With persistent_queues, queue SENDs are stored whatever their header; topic SENDs are not."""
    broker = setup.broker(persistent_queues=True)
    setup.subscribe(broker, "/topic/t", ack_mode="client", durable=("c", "d"))
    send(broker, "/queue/a", b"1", headers=())
    send(broker, "/queue/a", b"2", headers=(("persistent", "false"),))
    send(broker, "/topic/t", b"3", headers=())
    assert [len(ids) for ids in setup.stored_ids().values()] == [2, 0]


def test_persistent_topic_message_is_stored_for_each_matching_durable_subscription(
    setup: Setup,
) -> None:
    """
    A persistent topic message is filed once per durable subscription it reaches, not for others.
    """
    broker = setup.broker()
    setup.subscribe(broker, "/topic/prices.*", ack_mode="client", durable=("c", "all"))
    setup.subscribe(broker, "/topic/prices.eur", ack_mode="client", durable=("c", "eur"))
    setup.subscribe(broker, "/topic/prices.usd", ack_mode="client", durable=("c", "usd"))
    setup.subscribe(broker, "/topic/prices.eur", ack_mode="client")
    [waiting] = send(broker, "/topic/prices.eur", b"1")
    setup.settle()
    assert result_of(waiting) is None
    ids = setup.stored_ids()
    assert {key: len(found) for key, found in ids.items()} == {
        durable_key(("c", "all")): 1,
        durable_key(("c", "eur")): 1,
        durable_key(("c", "usd")): 0,
    }


def test_transaction_stores_its_messages_at_commit(setup: Setup) -> None:
    """STOMP 1.2, "BEGIN": a persistent SEND in a transaction is stored when COMMIT performs it."""
    broker = setup.broker()
    connection = FakeConnection("tx")
    broker.open_connection(connection)
    broker.begin(connection, "t1")
    held = broker.send("/queue/q", PERSISTENT, b"1", connection=connection, transaction="t1")
    assert held is None
    assert setup.stored_ids() == {}
    waiting = broker.commit(connection, "t1")
    assert isinstance(waiting, Deferred)
    setup.settle()
    assert result_of(waiting) is None
    assert len(setup.stored_ids()["/queue/q"]) == 1


def test_a_send_the_store_refuses_fails_with_message_not_stored(setup: Setup) -> None:
    """
    When the store cannot take a message, the Deferred fails with an error fit for an ERROR frame.
    """
    broker = setup.broker()
    setup.settle()
    result_of(setup.store.close())
    [waiting] = send(broker, "/queue/q", b"1")
    setup.settle()
    with pytest.raises(MessageNotStored) as caught:
        result_of(waiting)
    assert caught.value.message == "message not stored"


# -- what happens to a stored message ------------------------------------------------------


def test_a_stored_message_is_written_to_its_consumer_once_its_delivery_is_recorded(
    setup: Setup,
) -> None:
    """
    The delivery mark of a message already written is durable before the client
    sees it, so a crash redelivers it marked.
    """
    broker = setup.broker()
    send(broker, "/queue/q", b"1", b"2")
    setup.settle()
    inbox = setup.subscribe(broker)
    if setup.kind == "sqlite":
        assert inbox.received == []
    setup.settle()
    assert inbox.bodies() == [b"1", b"2"]
    state = setup.stored()
    assert [(m.delivered, m.redeliveries) for m in state.queues["/queue/q"]] == [(True, 1)] * 2


def test_a_message_delivered_before_it_is_written_is_written_marked(setup: Setup) -> None:
    """
    A message that a consumer takes before its add is written goes out at once:
    the add writes it marked, so the message and its mark are durable together
    (and a crash brings it back marked), or neither is (and it never comes back).
    """
    broker = setup.broker()
    inbox = setup.subscribe(broker)
    send(broker, "/queue/q", b"1", b"2")
    assert inbox.bodies() == [b"1", b"2"]
    setup.settle()
    state = setup.stored()
    assert [(m.delivered, m.redeliveries) for m in state.queues["/queue/q"]] == [(True, 1)] * 2


def test_messages_keep_queue_order_when_only_some_are_persistent(setup: Setup) -> None:
    """A non-persistent message does not overtake a persistent one waiting for its delivery mark."""
    broker = setup.broker()
    inbox = setup.subscribe(broker)
    send(broker, "/queue/q", b"1")
    send(broker, "/queue/q", b"2", headers=())
    send(broker, "/queue/q", b"3")
    setup.settle()
    assert inbox.bodies() == [b"1", b"2", b"3"]


def test_ack_removes_and_waits_for_the_removal(setup: Setup) -> None:
    """An ACK removes the message from the store; ack() returns what the ACK's RECEIPT waits for."""
    broker = setup.broker()
    inbox = setup.subscribe(broker)
    send(broker, "/queue/q", b"1", b"2")
    setup.settle()
    waiting = ack(broker, inbox, 0)
    assert isinstance(waiting, Deferred)
    setup.settle()
    assert result_of(waiting) is None
    assert setup.stored_ids() == {"/queue/q": [inbox.received[1].message_id]}


def test_an_ack_of_only_non_persistent_messages_waits_for_nothing(setup: Setup) -> None:
    """Acknowledging what the store never held costs no write."""
    broker = setup.broker()
    inbox = setup.subscribe(broker)
    send(broker, "/queue/q", b"1", headers=())
    assert ack(broker, inbox, 0) is None


def test_auto_ack_delivery_removes_the_message(setup: Setup) -> None:
    """
    STOMP 1.2, "SUBSCRIBE ack Header": an auto-ack delivery is an acknowledgement, so it removes.
    """
    broker = setup.broker()
    inbox = setup.subscribe(broker, ack_mode="auto")
    send(broker, "/queue/q", b"1")
    setup.settle()
    assert inbox.bodies() == [b"1"]
    assert setup.stored_ids() == {}


def test_requeue_writes_its_due_time_and_redelivery_is_marked_again(setup: Setup) -> None:
    """
    A NACKed message waits in memory with its due time stored (its RECEIPT waits for
    nothing); its next delivery adds to its stored redelivery count and clears the due time.
    """
    broker = setup.broker()
    inbox = setup.subscribe(broker)
    send(broker, "/queue/q", b"1")
    setup.settle()
    message_id = inbox.received[0].message_id
    assert broker.nack(inbox.connection, message_id, subscriber=inbox) is None
    setup.settle()
    [record] = setup.stored().queues["/queue/q"]
    assert record.due == setup.clock.seconds() + 1
    setup.clock.advance(1)
    setup.settle()
    assert [m.redeliveries for m in inbox.received] == [0, 1]
    [record] = setup.stored().queues["/queue/q"]
    assert (record.delivered, record.redelivery_count, record.due) == (True, 1, 0.0)


def test_a_waiting_redelivery_waits_out_its_time_after_a_restart(setup: Setup) -> None:
    """
    A persistent NACKed message's back-off survives a restart: it is held aside until
    its stored due time, while the messages behind it are delivered.
    """
    broker = setup.broker(policy=DeliveryPolicy(backoff=Backoff(10_000)))
    inbox = setup.subscribe(broker)
    send(broker, "/queue/q", b"1")
    setup.settle()
    broker.nack(inbox.connection, inbox.received[0].message_id, subscriber=inbox)
    setup.settle()
    restarted = setup.restart(down=4)
    send(restarted, "/queue/q", b"2")
    setup.settle()
    again = setup.subscribe(restarted)
    setup.settle()
    assert again.bodies() == [b"2"]
    setup.clock.advance(5.9)
    setup.settle()
    assert again.bodies() == [b"2"]
    setup.clock.advance(0.1)
    setup.settle()
    assert [(m.body, m.redeliveries) for m in again.received] == [(b"2", 0), (b"1", 1)]


def test_rejected_message_moves_to_its_dead_letter_queue_in_the_store(setup: Setup) -> None:
    """NACK requeue:false moves the stored message to the DLQ in one step, and waits for it."""
    broker = setup.broker()
    inbox = setup.subscribe(broker, "/queue/orders")
    send(broker, "/queue/orders", b"poison")
    setup.settle()
    waiting = broker.nack(
        inbox.connection, inbox.received[0].message_id, subscriber=inbox, requeue=False
    )
    setup.settle()
    assert result_of(waiting) is None
    state = setup.stored()
    [letter] = state.queues["/queue/DLQ.orders"]
    assert "/queue/orders" not in state.queues
    assert dict(letter.headers)["original-message-id"] == inbox.received[0].message_id
    assert broker.engine.queues["/queue/DLQ.orders"].pending[0].persistent


def test_a_message_failing_in_a_dead_letter_queue_is_removed(setup: Setup) -> None:
    """A dead letter that fails again is discarded, and so leaves the store."""
    broker = setup.broker()
    inbox = setup.subscribe(broker, "/queue/DLQ.orders")
    send(broker, "/queue/DLQ.orders", b"poison")
    setup.settle()
    broker.nack(inbox.connection, inbox.received[0].message_id, subscriber=inbox, requeue=False)
    setup.settle()
    assert setup.stored_ids() == {}
    assert broker.counters.discarded == 1


@pytest.mark.parametrize("expired", ["drop", "dead-letter"])
def test_expired_messages_leave_the_store(setup: Setup, expired: str) -> None:
    """An expired message is removed, or moved to its dead-letter queue, in the store too."""
    broker = setup.broker(policy=DeliveryPolicy(expired=expired))
    send(broker, "/queue/q", b"1", headers=PERSISTENT + (("expiration", "1000"),))
    setup.settle()
    setup.clock.advance(2)
    ids = setup.stored_ids()
    if expired == "drop":
        assert ids == {}
    else:
        assert list(ids) == ["/queue/DLQ.q"]


def test_durable_subscriptions_are_recorded_moved_and_removed(setup: Setup) -> None:
    """
    Creating a durable subscription records it; moving it to another topic starts it afresh;
    removing drops it.
    """
    broker = setup.broker()
    inbox = setup.subscribe(broker, "/topic/a", ack_mode="client", durable=("c", "d"))
    send(broker, "/topic/a", b"1")
    setup.settle()
    key = durable_key(("c", "d"))
    assert [(s.name, s.destination) for s in setup.stored().subscriptions] == [(key, "/topic/a")]
    broker.unsubscribe(inbox)
    setup.subscribe(broker, "/topic/b", ack_mode="client", durable=("c", "d"))
    setup.settle()
    state = setup.stored()
    assert [(s.name, s.destination) for s in state.subscriptions] == [(key, "/topic/b")]
    assert state.backlogs[key] == ()
    broker.remove_durable(("c", "d"))
    setup.settle()
    assert setup.stored().subscriptions == ()


# -- recovery -----------------------------------------------------------------------------


def test_recovery_refills_queues_in_order_without_writing_them_again(setup: Setup) -> None:
    """
    After a restart each queue holds its stored messages in their original order, and nothing is
    added twice.
    """
    broker = setup.broker()
    send(broker, "/queue/a", b"a1", b"a2", b"a3")
    send(broker, "/queue/b", b"b1")
    send(broker, "/queue/a", b"a4", headers=())
    before = setup.stored_ids()
    again = setup.restart()
    assert [m.body for m in again.engine.queues["/queue/a"].pending] == [b"a1", b"a2", b"a3"]
    assert [m.body for m in again.engine.queues["/queue/b"].pending] == [b"b1"]
    assert all(m.persistent for m in again.engine.queues["/queue/a"].pending)
    assert setup.stored_ids() == before


def test_delivered_but_unacknowledged_messages_come_back_redelivered(setup: Setup) -> None:
    """
    A message delivered before the crash comes back with its delivery counted; an acknowledged one
    does not come back.
    """
    broker = setup.broker()
    inbox = setup.subscribe(broker, prefetch=2)
    send(broker, "/queue/q", b"1", b"2", b"3", b"4")
    setup.settle()
    ack(broker, inbox, 0)
    setup.settle()
    assert inbox.bodies() == [b"1", b"2", b"3"]
    again = setup.restart()
    consumer = setup.subscribe(again)
    setup.settle()
    assert [(m.body, m.redeliveries) for m in consumer.received] == [
        (b"2", 1),
        (b"3", 1),
        (b"4", 0),
    ]


def test_recovery_rebuilds_durable_subscriptions_and_their_backlogs(setup: Setup) -> None:
    """
    A durable subscription survives a restart with what it had collected, and keeps collecting.
    """
    broker = setup.broker()
    first = setup.subscribe(broker, "/topic/prices.*", ack_mode="client", durable=("c", "p"))
    broker.unsubscribe(first)
    send(broker, "/topic/prices.eur", b"1", b"2")
    send(broker, "/topic/prices.eur", b"lost", headers=())
    again = setup.restart()
    assert again.engine.durable[("c", "p")].destination == "/topic/prices.*"
    send(again, "/topic/prices.usd", b"3")
    back = setup.subscribe(again, "/topic/prices.*", ack_mode="client", durable=("c", "p"))
    setup.settle()
    assert back.bodies() == [b"1", b"2", b"3"]


def test_messages_that_expired_while_the_broker_was_down_are_expired_through_the_store(
    setup: Setup,
) -> None:
    """Recovery drops (or dead-letters) what has expired, after refilling the dead-letter queue."""
    broker = setup.broker(policy=DeliveryPolicy(expired="dead-letter"))
    send(broker, "/queue/DLQ.q", b"old letter")
    send(broker, "/queue/q", b"short", headers=PERSISTENT + (("expiration", "1000"),))
    send(broker, "/queue/q", b"long")
    again = setup.restart(down=2, policy=DeliveryPolicy(expired="dead-letter"))
    assert [m.body for m in again.engine.queues["/queue/q"].pending] == [b"long"]
    letters = again.engine.queues["/queue/DLQ.q"].pending
    assert [m.body for m in letters] == [b"old letter", b"short"]
    setup.settle()
    assert [len(ids) for key, ids in sorted(setup.stored_ids().items())] == [2, 1]
    assert again.counters.expired == 1


def test_stored_messages_under_unknown_keys_are_left_alone(setup: Setup) -> None:
    """
    A key that is neither a queue nor a durable subscription is reported, not turned into a queue.
    """
    setup.broker()
    setup.store.add("elsewhere", Message("/queue/x", "m-1", (), b"x"))
    again = setup.restart()
    assert "elsewhere" not in again.engine.queues
    assert list(setup.stored_ids()) == ["elsewhere"]


def test_when_ready_waits_for_recovery(tmp_path: Path) -> None:
    """Clients must wait: when_ready fires only once the store has been read back."""
    clock = Clock()
    store = sqlite_store(tmp_path, clock)
    broker = Broker(clock, store=store)
    broker.startService()
    ready = broker.when_ready()
    assert not ready.called
    clock.advance(0)
    assert result_of(ready) is None
    assert result_of(broker.when_ready()) is None
    result_of(broker.stopService())


def test_a_store_that_cannot_be_read_fails_when_ready(tmp_path: Path) -> None:
    """
    A damaged page found while recovering fails the start, rather than leaving an empty broker.
    """
    setup = Setup("sqlite", tmp_path)
    count, size = FILLING
    send(setup.broker(), "/queue/q", *[b"x" * size for _ in range(count)])
    setup.settle()
    result_of(setup.store.close())
    damage_pages(tmp_path)
    store = sqlite_store(tmp_path, setup.clock)
    again = Broker(setup.clock, store=store)
    again.startService()
    setup.settle()
    with pytest.raises(StoreDamaged, match="restore it from a backup"):
        result_of(again.when_ready())
    assert again.engine.queues == {}
    result_of(store.close())


def test_a_locked_store_stops_the_start(tmp_path: Path) -> None:
    """A data directory in use by another store makes startService raise, before anything runs."""
    clock = Clock()
    holder = sqlite_store(tmp_path, clock)
    holder.open()
    broker = Broker(clock, store=sqlite_store(tmp_path, clock))
    with pytest.raises(StoreLocked):
        broker.startService()
    assert not broker.running
    result_of(holder.close())


def test_a_broker_without_a_store_is_ready_at_once_and_ignores_persistent() -> None:
    """
    Without a store every message lives in memory, and send() never returns anything to wait for.
    """
    broker = Broker(Clock())
    broker.startService()
    assert result_of(broker.when_ready()) is None
    assert send(broker, "/queue/q", b"1") == [None]
    assert not broker.engine.queues["/queue/q"].pending[0].persistent


def test_a_delivery_mark_joined_to_its_add_gives_the_queue_nothing_to_wait_for(
    tmp_path: Path,
) -> None:
    """
    A message delivered before its add is written needs no wait (its mark rides
    in the insert): the journal says so with ``None``, and the queue writes the
    MESSAGE at once; once the add is written, a mark is an update to wait for.
    """
    clock = Clock()
    store = sqlite_store(tmp_path, clock)
    store.open()
    journal = Journal(store)
    message = Message("/queue/orders", "m-1", (), b"1", persistent=True)
    added = journal.add(["/queue/orders"], message)
    assert journal.delivered("/queue/orders", "m-1") is None
    clock.advance(0)
    assert result_of(added) is None
    again = journal.delivered("/queue/orders", "m-1")
    assert isinstance(again, Deferred) and not again.called
    clock.advance(0)
    assert result_of(again) is True
    result_of(store.close())
