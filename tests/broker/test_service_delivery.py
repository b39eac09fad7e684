"""
Tests of the Broker's delivery rules through its IBroker API, with recording
subscribers and fake connections: queues, acknowledgements, dead letters,
transactions, expiry, temporary queues and durable subscriptions.
"""

from __future__ import annotations

import pytest

from stompbroker.broker.queueing.delivery import DeliveryPolicy
from stompbroker.broker.routing.router import MAX_CHECKED_DESTINATIONS
from stompbroker.protocol.errors import (
    DuplicateSubscription,
    DuplicateTransaction,
    InvalidDestination,
    MalformedFrame,
    UnknownAck,
    UnknownSubscription,
    UnknownTransaction,
)
from tests.support.broker import EPOCH, World

# -- queues -------------------------------------------------------------------------


def test_queue_is_created_on_first_send_and_keeps_messages() -> None:
    """SEND to /queue/NAME creates the queue, and its messages wait for a subscriber."""
    world = World()
    world.send("/queue/jobs", b"1", b"2")
    inbox = world.subscribe("/queue/jobs")
    assert inbox.bodies() == [b"1", b"2"]
    assert inbox.received[0].destination == "/queue/jobs"


def test_competing_consumers_share_a_queue() -> None:
    """Each message of a queue goes to exactly one of its subscribers, round-robin."""
    world = World()
    inboxes = [world.subscribe(subscription_id=str(n), on=f"c{n}") for n in range(3)]
    world.send("/queue/q", *(str(n).encode() for n in range(9)))
    received = [body for inbox in inboxes for body in inbox.bodies()]
    assert sorted(received) == sorted(str(n).encode() for n in range(9))
    assert [len(inbox.received) for inbox in inboxes] == [3, 3, 3]


def test_subscription_window_defaults_to_policy_and_follows_prefetch() -> None:
    """
    A client-ack subscription holds at most its prefetch, or the broker's --prefetch when it
    sets none.
    """
    world = World(DeliveryPolicy(prefetch=3))
    default = world.subscribe("/queue/a")
    small = world.subscribe("/queue/b", prefetch=1)
    world.send("/queue/a", *[b"x"] * 5)
    world.send("/queue/b", *[b"x"] * 5)
    assert (len(default.received), len(small.received)) == (3, 1)
    world.ack(small)
    assert len(small.received) == 2


def test_a_wildcard_queue_subscription_takes_from_each_matching_queue() -> None:
    """
    ActiveMQ's wildcard consumer: /queue/jobs.* takes from every matching queue, and a
    MESSAGE names the queue it was sent to; a SEND to a pattern stays an error.
    """
    world = World()
    world.send("/queue/jobs.a", b"1")
    inbox = world.subscribe("/queue/jobs.*")
    world.send("/queue/jobs.b", b"2")
    world.send("/queue/other", b"3")
    assert inbox.bodies() == [b"1", b"2"]
    assert [message.destination for message in inbox.received] == ["/queue/jobs.a", "/queue/jobs.b"]
    with pytest.raises(InvalidDestination):
        world.send("/queue/jobs.*", b"4")


@pytest.mark.parametrize("destination", ["/exchange/x", "/nowhere"])
def test_unknown_destination_kinds_are_errors(destination: str) -> None:
    """
    Destinations other than /topic/, /queue/ and /temp-queue/ are refused, on SEND and
    SUBSCRIBE.
    """
    world = World()
    with pytest.raises(InvalidDestination):
        world.send(destination, b"x")
    with pytest.raises(InvalidDestination):
        world.subscribe(destination)


def test_checked_destinations_are_remembered_within_a_bound() -> None:
    """Each SEND destination is validated once, and the memory of checked ones stays bounded."""
    world = World()
    for n in range(MAX_CHECKED_DESTINATIONS + 10):
        world.send(f"/topic/t{n}", b"x")
    assert 0 < world.broker.router.checked_destinations() <= MAX_CHECKED_DESTINATIONS
    with pytest.raises(InvalidDestination):
        world.send("/topic/a.*", b"x")
    with pytest.raises(InvalidDestination):
        world.send("/topic/a.*", b"x")


def test_idle_queue_is_forgotten_when_its_last_consumer_leaves() -> None:
    """A queue left empty and unconsumed is dropped (it is created again on first use)."""
    world = World()
    inbox = world.subscribe("/queue/tmp-work")
    world.broker.unsubscribe(inbox)
    assert "/queue/tmp-work" not in world.broker.engine.queues
    busy = world.subscribe("/queue/busy")
    world.send("/queue/busy", b"1", b"2")
    world.broker.unsubscribe(busy)
    assert world.queue_bodies("/queue/busy") == [b"1", b"2"]


# -- acknowledgements ------------------------------------------------------------------


def test_ack_frees_the_window_and_is_counted() -> None:
    """An ACK settles a held message: it is not redelivered, and the next one comes."""
    world = World()
    inbox = world.subscribe(prefetch=1)
    world.send("/queue/q", b"1", b"2")
    world.ack(inbox)
    assert inbox.bodies() == [b"1", b"2"]
    assert world.broker.counters.acknowledged == 1


def test_ack_of_unknown_message_is_an_error() -> None:
    """STOMP 1.2, "ACK": an ACK for a message not awaiting acknowledgement is an ERROR."""
    world = World()
    inbox = world.subscribe()
    with pytest.raises(UnknownAck):
        world.broker.ack(inbox.connection, "no-such-id", subscriber=inbox)
    world.send("/queue/q", b"1")
    world.ack(inbox)
    with pytest.raises(UnknownAck):
        world.ack(inbox)


def test_auto_subscription_has_nothing_to_acknowledge() -> None:
    """
    Messages delivered to an auto-ack subscription are settled already; acking one is an error.
    """
    world = World()
    inbox = world.subscribe(ack_mode="auto")
    world.send("/queue/q", b"1")
    with pytest.raises(UnknownAck):
        world.ack(inbox)


def test_ack_without_subscription_looks_through_the_connection() -> None:
    """STOMP 1.0 names only the message-id: the connection's subscription that holds it is found."""
    world = World()
    world.subscribe("/queue/a", subscription_id="a")
    inbox_b = world.subscribe("/queue/b", subscription_id="b")
    world.send("/queue/b", b"1")
    world.broker.ack(world.connection(), inbox_b.received[0].message_id)
    assert world.broker.counters.acknowledged == 1


def test_a_connection_cannot_ack_another_connections_message() -> None:
    """An ACK names a message delivered to the acknowledging connection, or it is an error."""
    world = World()
    inbox = world.subscribe(on="owner")
    world.send("/queue/q", b"1")
    with pytest.raises(UnknownAck):
        world.broker.ack(world.connection("thief"), inbox.received[0].message_id)


def test_nack_redelivers_with_count() -> None:
    """
    A NACKed message waits out its back-off aside (the next message goes meanwhile),
    then returns to the head of its queue, marked as redelivered.
    """
    world = World()
    inbox = world.subscribe(prefetch=1)
    world.send("/queue/q", b"1", b"2", b"3")
    world.nack(inbox)
    assert [(m.body, m.redeliveries) for m in inbox.received] == [(b"1", 0), (b"2", 0)]
    world.clock.advance(1)  # the broker's redelivery back-off
    world.ack(inbox)
    world.ack(inbox)
    assert [(m.body, m.redeliveries) for m in inbox.received[2:]] == [(b"1", 1), (b"3", 0)]


def test_unsubscribe_returns_held_messages_to_others() -> None:
    """UNSUBSCRIBE (and a lost connection) hands unacknowledged messages to the other consumers."""
    world = World()
    leaving = world.subscribe(subscription_id="leaving", on="c1")
    world.send("/queue/q", b"1", b"2")
    staying = world.subscribe(subscription_id="staying", on="c2")
    world.broker.unsubscribe(leaving)
    assert [(m.body, m.redeliveries) for m in staying.received] == [(b"1", 1), (b"2", 1)]


def test_close_connection_releases_its_consumers() -> None:
    """A connection that ends without UNSUBSCRIBE still returns what it held."""
    world = World()
    gone = world.subscribe(on="gone")
    world.send("/queue/q", b"1")
    world.broker.close_connection(gone.connection)
    other = world.subscribe(on="other")
    assert [(m.body, m.redeliveries) for m in other.received] == [(b"1", 1)]


# -- dead letters ----------------------------------------------------------------------


def test_message_past_redelivery_limit_goes_to_dead_letter_queue_with_headers() -> None:
    """
    After --max-redeliveries a message moves to /queue/DLQ.NAME, with headers saying whence and
    why.
    """
    world = World(DeliveryPolicy(max_redeliveries=1))
    inbox = world.subscribe("/queue/orders")
    world.send("/queue/orders", b"poison", headers=[("x-k", "v")])
    sent = inbox.received[0]
    world.nack(inbox)
    world.clock.advance(1)  # the broker's redelivery back-off
    world.nack(inbox)
    assert len(inbox.received) == 2
    dead = world.subscribe("/queue/DLQ.orders", subscription_id="dlq", on="ops")
    [letter] = dead.received
    assert letter.body == b"poison"
    assert letter.destination == "/queue/DLQ.orders"
    assert dict(letter.headers) == {
        "x-k": "v",
        "original-destination": "/queue/orders",
        "original-message-id": sent.message_id,
        "dead-letter-reason": "delivery-limit",
    }
    assert letter.message_id != sent.message_id
    assert world.broker.counters.dead_lettered == 1


def test_subscription_can_set_its_own_redelivery_limit() -> None:
    """A max-redeliveries header on SUBSCRIBE overrides the broker's limit for what it returns."""
    world = World(DeliveryPolicy(max_redeliveries=10))
    inbox = world.subscribe("/queue/orders", max_redeliveries=0)
    world.send("/queue/orders", b"poison")
    world.nack(inbox)
    assert world.queue_bodies("/queue/DLQ.orders") == [b"poison"]


def test_nack_without_requeue_dead_letters_at_once() -> None:
    """
    NACK with requeue:false sends the message straight to the dead-letter queue, reason
    rejected.
    """
    world = World()
    inbox = world.subscribe("/queue/orders")
    world.send("/queue/orders", b"bad")
    world.nack(inbox, requeue=False)
    [letter] = world.broker.engine.queues["/queue/DLQ.orders"].pending
    assert dict(letter.headers)["dead-letter-reason"] == "rejected"
    assert len(inbox.received) == 1


def test_dead_letter_prefix_is_configurable() -> None:
    """--dead-letter-prefix names the dead-letter queues."""
    world = World(DeliveryPolicy(dead_letter_prefix="failed."))
    inbox = world.subscribe("/queue/orders")
    world.send("/queue/orders", b"bad")
    world.nack(inbox, requeue=False)
    assert world.queue_bodies("/queue/failed.orders") == [b"bad"]


def test_failures_in_a_dead_letter_queue_are_discarded() -> None:
    """
    A message rejected from a dead-letter queue is discarded and counted, not dead-lettered
    again.
    """
    world = World()
    inbox = world.subscribe("/queue/DLQ.orders")
    world.send("/queue/DLQ.orders", b"bad")
    world.nack(inbox, requeue=False)
    assert "/queue/DLQ.DLQ.orders" not in world.broker.engine.queues
    assert world.broker.counters.discarded == 1


def test_dead_letter_headers_replace_earlier_ones() -> None:
    """A message dead-lettered twice says where it failed last, not where it failed first."""
    world = World()
    inbox = world.subscribe("/queue/retry")
    world.send(
        "/queue/retry",
        b"x",
        headers=[("original-destination", "/queue/first"), ("dead-letter-reason", "expired")],
    )
    world.nack(inbox, requeue=False)
    [letter] = world.broker.engine.queues["/queue/DLQ.retry"].pending
    assert [value for name, value in letter.headers if name == "original-destination"] == [
        "/queue/retry"
    ]


# -- topics --------------------------------------------------------------------------


def test_auto_topic_subscription_is_delivered_directly() -> None:
    """An auto-ack topic subscription sits in the tree itself: no queue, no bookkeeping."""
    world = World()
    inbox = world.subscribe("/topic/news", "auto")
    world.send("/topic/news", b"1")
    assert inbox.bodies() == [b"1"]
    assert world.broker.engine.topics.match("/topic/news") == (inbox,)
    assert world.broker.counters.enqueued == 0


def test_client_ack_topic_subscription_redelivers_to_itself() -> None:
    """
    A topic subscription with client acks gets its own queue: a NACKed message comes back to it.
    """
    world = World()
    first = world.subscribe("/topic/news", "client", subscription_id="a")
    second = world.subscribe("/topic/news", "client", subscription_id="b", on="c2")
    world.send("/topic/news", b"1")
    world.nack(first)
    world.clock.advance(1)  # the broker's redelivery back-off
    assert [(m.body, m.redeliveries) for m in first.received] == [(b"1", 0), (b"1", 1)]
    assert second.bodies() == [b"1"]


def test_client_ack_topic_subscription_window_holds_back_messages() -> None:
    """A topic subscriber past its window gets nothing more until it acknowledges."""
    world = World()
    inbox = world.subscribe("/topic/news.#", "client", prefetch=2)
    world.send("/topic/news.a", b"1", b"2", b"3")
    assert inbox.bodies() == [b"1", b"2"]
    world.ack(inbox)
    assert inbox.bodies() == [b"1", b"2", b"3"]


def test_unsubscribing_a_topic_subscription_discards_its_queue() -> None:
    """A non-durable topic subscription's messages end with it."""
    world = World()
    inbox = world.subscribe("/topic/news", "client", prefetch=1)
    world.send("/topic/news", b"1", b"2")
    world.broker.unsubscribe(inbox)
    assert world.broker.engine.topics.match("/topic/news") == ()
    assert world.broker.counters.discarded == 2


# -- transactions ------------------------------------------------------------------------


def test_transactional_sends_are_published_at_commit_in_order() -> None:
    """STOMP 1.2, "BEGIN": SENDs in a transaction reach nobody until COMMIT, then all in order."""
    world = World()
    inbox = world.subscribe("/queue/q", "auto")
    publisher = world.connection("pub")
    world.broker.begin(publisher, "tx")
    world.send("/queue/q", b"1", connection=publisher, transaction="tx")
    world.send("/topic/t", b"2", connection=publisher, transaction="tx")
    world.send("/queue/q", b"3", connection=publisher, transaction="tx")
    assert inbox.received == []
    world.broker.commit(publisher, "tx")
    assert inbox.bodies() == [b"1", b"3"]


def test_aborted_sends_are_never_published() -> None:
    """STOMP 1.2, "ABORT": SENDs of an aborted transaction are discarded."""
    world = World()
    inbox = world.subscribe("/queue/q", "auto")
    publisher = world.connection("pub")
    world.broker.begin(publisher, "tx")
    world.send("/queue/q", b"1", connection=publisher, transaction="tx")
    world.broker.abort(publisher, "tx")
    assert inbox.received == []
    queues = world.broker.engine.queues
    assert "/queue/q" in queues and not queues["/queue/q"].pending


def test_ack_in_transaction_takes_effect_at_commit() -> None:
    """An ACK inside a transaction keeps the window full until COMMIT."""
    world = World()
    inbox = world.subscribe(prefetch=1)
    world.send("/queue/q", b"1", b"2")
    world.broker.begin(inbox.connection, "tx")
    world.ack(inbox, transaction="tx")
    assert inbox.bodies() == [b"1"]
    world.broker.commit(inbox.connection, "tx")
    assert inbox.bodies() == [b"1", b"2"]


def test_ack_undone_by_abort_leaves_message_unacknowledged() -> None:
    """After ABORT the transaction's ACKs never happened: the message can be acknowledged again."""
    world = World()
    inbox = world.subscribe(prefetch=1)
    world.send("/queue/q", b"1")
    world.broker.begin(inbox.connection, "tx")
    world.ack(inbox, transaction="tx")
    world.broker.abort(inbox.connection, "tx")
    world.ack(inbox)
    assert world.broker.counters.acknowledged == 1


def test_nack_in_transaction_takes_effect_at_commit() -> None:
    """A NACK inside a transaction redelivers only once the transaction commits."""
    world = World()
    inbox = world.subscribe()
    world.send("/queue/q", b"1")
    world.broker.begin(inbox.connection, "tx")
    world.nack(inbox, transaction="tx")
    assert len(inbox.received) == 1
    world.broker.commit(inbox.connection, "tx")
    world.clock.advance(1)  # the broker's redelivery back-off
    assert [m.redeliveries for m in inbox.received] == [0, 1]


def test_commit_skips_acks_settled_meanwhile() -> None:
    """
    A transactional ACK of a message acknowledged outside the transaction is a no-op at COMMIT.
    """
    world = World()
    inbox = world.subscribe()
    world.send("/queue/q", b"1")
    world.broker.begin(inbox.connection, "tx")
    world.ack(inbox, transaction="tx")
    world.ack(inbox)
    world.broker.commit(inbox.connection, "tx")
    assert world.broker.counters.acknowledged == 1


def test_transaction_errors() -> None:
    """Unknown transactions, and BEGIN of an open one, are errors; ids are per connection."""
    world = World()
    first, second = world.connection("a"), world.connection("b")
    world.broker.begin(first, "tx")
    world.broker.begin(second, "tx")
    with pytest.raises(DuplicateTransaction):
        world.broker.begin(first, "tx")
    for call in (world.broker.commit, world.broker.abort):
        with pytest.raises(UnknownTransaction):
            call(first, "other")
    with pytest.raises(UnknownTransaction):
        world.send("/queue/q", b"1", connection=first, transaction="other")
    with pytest.raises(UnknownTransaction):
        world.send("/queue/q", b"1", transaction="tx")


def test_closing_a_connection_aborts_its_transactions() -> None:
    """
    A connection that closes with open transactions aborts them: held SENDs are never published.
    """
    world = World()
    inbox = world.subscribe("/queue/q", "auto", on="consumer")
    publisher = world.connection("pub")
    world.broker.begin(publisher, "tx")
    world.send("/queue/q", b"1", connection=publisher, transaction="tx")
    world.broker.close_connection(publisher)
    assert inbox.received == []


def test_invalid_send_in_transaction_fails_at_once() -> None:
    """A SEND in a transaction is checked when it arrives, not at COMMIT."""
    world = World()
    publisher = world.connection("pub")
    world.broker.begin(publisher, "tx")
    with pytest.raises(InvalidDestination):
        world.send("/nowhere", b"1", connection=publisher, transaction="tx")


# -- expiry ------------------------------------------------------------------------------


def test_expired_queue_message_is_never_delivered() -> None:
    """A message whose expires time has passed is not delivered to a later subscriber."""
    world = World()
    world.send("/queue/q", b"soon", headers=[("expires", str(int((EPOCH + 1) * 1000)))])
    world.send("/queue/q", b"later", headers=[("expiration", "5000")])
    world.clock.advance(2)
    inbox = world.subscribe()
    assert inbox.bodies() == [b"later"]
    assert world.broker.counters.expired == 1


def test_broker_ttl_applies_to_messages_without_expiry() -> None:
    """--ttl expires messages that set no expiry of their own."""
    world = World(DeliveryPolicy(ttl=1000))
    world.send("/queue/q", b"1")
    world.send("/queue/q", b"2", headers=[("expiration", "10000")])
    world.clock.advance(1.5)
    assert world.queue_bodies("/queue/q") == [b"2"]


def test_expired_topic_message_reaches_nobody() -> None:
    """A topic message already expired when sent is not delivered, and is counted."""
    world = World()
    inbox = world.subscribe("/topic/t", "auto")
    world.send("/topic/t", b"old", headers=[("expires", str(int((EPOCH - 1) * 1000)))])
    assert inbox.received == []
    assert world.broker.counters.expired == 1


def test_expired_messages_can_be_dead_lettered() -> None:
    """
    With --expired dead-letter, expired messages move to the dead-letter queue, reason expired.
    """
    world = World(DeliveryPolicy(expired="dead-letter"))
    world.send("/queue/q", b"1", headers=[("expiration", "100")])
    world.send("/topic/t", b"2", headers=[("expires", "1")])
    world.clock.advance(1)
    assert world.queue_bodies("/queue/DLQ.q") == [b"1"]
    assert world.queue_bodies("/queue/DLQ.t") == [b"2"]
    [letter] = world.broker.engine.queues["/queue/DLQ.q"].pending
    assert dict(letter.headers)["dead-letter-reason"] == "expired"
    assert letter.expires == 0.0, "a dead letter does not expire again"


def test_invalid_expiry_header_is_an_error() -> None:
    """An expires header that is not a number of ms is refused."""
    world = World()
    with pytest.raises(MalformedFrame):
        world.send("/queue/q", b"1", headers=[("expires", "tomorrow")])


def test_expiry_headers_are_delivered_unchanged() -> None:
    """Consumers see the expiry headers the sender set."""
    world = World()
    inbox = world.subscribe("/queue/q", "auto")
    world.send("/queue/q", b"1", headers=[("expiration", "60000")])
    assert dict(inbox.received[0].headers) == {"expiration": "60000"}


# -- temporary queues -------------------------------------------------------------------


def test_reply_to_temp_queue_is_rewritten_and_replies_reach_the_requester() -> None:
    """
    reply-to:/temp-queue/NAME becomes a unique /reply-queue/ name; SENDs to it reach the
    requester.
    """
    world = World()
    requester = world.connection("requester")
    replies = world.subscribe("/temp-queue/r", "auto", on="requester")
    worker = world.subscribe("/queue/rpc", "auto", on="worker")
    world.send("/queue/rpc", b"ask", headers=[("reply-to", "/temp-queue/r")], connection=requester)
    reply_to = dict(worker.received[0].headers)["reply-to"]
    assert reply_to.startswith("/reply-queue/")
    world.send(reply_to, b"answer", connection=world.connection("worker"))
    assert replies.bodies() == [b"answer"]


def test_temp_queue_names_are_private_to_a_connection() -> None:
    """Two connections using the same temp-queue name get different queues."""
    world = World()
    worker = world.subscribe("/queue/rpc", "auto", on="worker")
    for name in ("a", "b"):
        world.send(
            "/queue/rpc",
            name.encode(),
            headers=[("reply-to", "/temp-queue/r")],
            connection=world.connection(name),
        )
    names = {dict(message.headers)["reply-to"] for message in worker.received}
    assert len(names) == 2


def test_temp_queue_is_deleted_when_its_connection_closes() -> None:
    """A temporary queue ends with its connection; later replies to it are discarded and counted."""
    world = World()
    requester = world.connection("requester")
    worker = world.subscribe("/queue/rpc", "auto", on="worker")
    world.send("/queue/rpc", b"ask", headers=[("reply-to", "/temp-queue/r")], connection=requester)
    reply_to = dict(worker.received[0].headers)["reply-to"]
    world.broker.close_connection(requester)
    assert reply_to not in world.broker.engine.queues
    world.send(reply_to, b"late")
    assert world.broker.counters.discarded == 1


def test_reply_queue_cannot_be_subscribed_to() -> None:
    """Only the connection that made a temporary queue receives from it."""
    world = World()
    with pytest.raises(InvalidDestination):
        world.subscribe("/reply-queue/tmp-x-1")


# -- durable subscriptions --------------------------------------------------------------


def test_durable_subscription_collects_while_away_and_delivers_on_return() -> None:
    """A durable topic subscription keeps the topic's messages while its client is away."""
    world = World()
    key = ("client-1", "prices")
    first = world.subscribe("/topic/prices.*", "client", durable=key, on="before")
    world.send("/topic/prices.eur", b"1")
    world.ack(first)
    world.broker.close_connection(first.connection)
    world.send("/topic/prices.eur", b"2")
    world.send("/topic/prices.usd", b"3")
    again = world.subscribe("/topic/prices.*", "client", durable=key, on="after")
    assert again.bodies() == [b"2", b"3"]


def test_durable_subscription_returns_unacknowledged_messages_on_reconnect() -> None:
    """
    Messages a durable subscriber held unacknowledged when it left are redelivered when it
    returns.
    """
    world = World()
    key = ("", "sub-1")
    first = world.subscribe("/topic/t", "client-individual", durable=key, on="before")
    world.send("/topic/t", b"1")
    world.broker.close_connection(first.connection)
    again = world.subscribe("/topic/t", "client-individual", durable=key, on="after")
    assert [(m.body, m.redeliveries) for m in again.received] == [(b"1", 1)]


def test_removing_a_durable_subscription_discards_what_it_collected() -> None:
    """
    UNSUBSCRIBE with the durable header deletes the subscription: nothing is kept for it any
    more.
    """
    world = World()
    key = ("c", "gone")
    inbox = world.subscribe("/topic/t", "auto", durable=key)
    world.broker.unsubscribe(inbox)
    world.send("/topic/t", b"kept")
    world.broker.remove_durable(key)
    world.send("/topic/t", b"not kept")
    again = world.subscribe("/topic/t", "auto", durable=key, on="c2")
    assert again.received == []
    with pytest.raises(UnknownSubscription):
        world.broker.remove_durable(("c", "never"))


def test_durable_subscription_moved_to_another_topic_starts_afresh() -> None:
    """
    Subscribing a durable name to another topic replaces it, as in JMS; not while it is
    consumed.
    """
    world = World()
    key = ("c", "d")
    inbox = world.subscribe("/topic/a", "auto", durable=key)
    with pytest.raises(DuplicateSubscription):
        world.subscribe("/topic/b", "auto", durable=key, on="c2")
    world.broker.unsubscribe(inbox)
    world.send("/topic/a", b"old")
    moved = world.subscribe("/topic/b", "auto", durable=key, on="c3")
    world.send("/topic/b", b"new")
    assert moved.bodies() == [b"new"]
    assert world.broker.engine.topics.match("/topic/a") == ()
