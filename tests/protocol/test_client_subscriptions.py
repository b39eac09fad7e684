"""
The client's subscriptions (stompbroker.protocol.subscriptions): what SUBSCRIBE
and UNSUBSCRIBE hand the broker and how they name subscriptions, the MESSAGE
frames each kind of subscription writes, the SUBSCRIBE headers other brokers'
clients rely on (windows, redelivery limits, durable names), and how ACK and
NACK find what they settle; against the recording fake broker.
"""

from __future__ import annotations

from typing import Any

import pytest
from attrs import evolve
from hypothesis import given
from hypothesis import strategies as st
from twisted.internet.defer import succeed
from zope.interface.verify import verifyObject

from stompbroker.interfaces import ISubscriber
from stompbroker.protocol.encoder import encode
from stompbroker.protocol.frames import Frame
from stompbroker.protocol.message import Message
from stompbroker.protocol.session import SessionConfig
from stompbroker.protocol.subscribers import SessionSubscription, TrackedSubscription
from tests.support.session import (
    RecordingAccess,
    RecordingBroker,
    connected,
    error_of,
    frame,
    make_session,
    subscribe,
)


def queue_message(message_id: str = "m-1", redeliveries: int = 0) -> Message:
    return Message("/queue/q", message_id, (("x", "y"),), b"body", redeliveries=redeliveries)


# -- SUBSCRIBE and UNSUBSCRIBE ---------------------------------------------------------


def test_subscribe_hands_broker_a_subscriber() -> None:
    """SUBSCRIBE gives the broker an ISubscriber with id, destination and ack mode."""
    session, transport, _, broker = connected()
    session.receive_data(
        frame("SUBSCRIBE", ("id", "7"), ("destination", "/topic/x.*"), ("receipt", "r"))
    )
    [subscriber] = broker.subscribers
    verifyObject(ISubscriber, subscriber)
    assert (subscriber.subscription_id, subscriber.destination, subscriber.ack_mode) == (
        "7",
        "/topic/x.*",
        "auto",
    )
    assert subscriber.connection is session
    assert transport.frames() == [Frame("RECEIPT", (("receipt-id", "r"),))]


def test_duplicate_subscription_id_is_an_error() -> None:
    """Two subscriptions with one id on one connection are an error."""
    session, transport, _, _ = connected()
    session.receive_data(frame("SUBSCRIBE", ("id", "1"), ("destination", "/topic/a")))
    session.receive_data(frame("SUBSCRIBE", ("id", "1"), ("destination", "/topic/b")))
    assert error_of(transport).get("message") == "duplicate subscription"


def test_unsubscribe_by_id_stops_delivery() -> None:
    """STOMP 1.2, "UNSUBSCRIBE": the id names the subscription to end."""
    session, transport, _, broker = connected()
    session.receive_data(frame("SUBSCRIBE", ("id", "1"), ("destination", "/topic/a")))
    session.receive_data(frame("UNSUBSCRIBE", ("id", "1"), ("receipt", "u")))
    session.receive_data(frame("SEND", ("destination", "/topic/a")))
    assert transport.frames() == [Frame("RECEIPT", (("receipt-id", "u"),))]
    assert broker.subscribers == []


def test_unsubscribe_unknown_id_is_an_error() -> None:
    """UNSUBSCRIBE of an id the connection does not have is an error."""
    session, transport, _, _ = connected()
    session.receive_data(frame("UNSUBSCRIBE", ("id", "nope")))
    assert error_of(transport).get("message") == "unknown subscription"


def test_stomp_1_0_subscription_without_id_uses_destination() -> None:
    """
    STOMP 1.0: id is optional; its MESSAGE frames carry no subscription header (issue 14, as
    ActiveMQ's: 1.0 clients match them by destination), and UNSUBSCRIBE by destination works.
    """
    session, transport, _, broker = connected(version="1.0")
    session.receive_data(frame("SUBSCRIBE", ("destination", "/topic/a"), version="1.0"))
    session.receive_data(frame("SEND", ("destination", "/topic/a"), body=b"hi", version="1.0"))
    [message] = transport.frames("1.0")
    assert message.get("subscription") is None
    assert (message.get("destination"), message.body) == ("/topic/a", b"hi")
    session.receive_data(frame("UNSUBSCRIBE", ("destination", "/topic/a"), version="1.0"))
    assert broker.subscribers == []
    assert not transport.closed


@pytest.mark.parametrize("destination", ["/queue/a", "/topic/a"])
def test_stomp_1_0_subscription_with_an_id_names_it(destination: str) -> None:
    """A 1.0 SUBSCRIBE that does give an id gets it back in each MESSAGE's subscription header."""
    session, transport, _, broker = connected(version="1.0")
    session.receive_data(
        frame("SUBSCRIBE", ("destination", destination), ("id", "mine"), version="1.0")
    )
    broker.subscribers[-1].deliver(Message(destination, "m-1", (), b"hi"))
    [message] = transport.frames("1.0")
    assert message.get("subscription") == "mine"


def test_invalid_ack_mode_is_an_error() -> None:
    """SUBSCRIBE with an ack mode STOMP does not define is an error."""
    session, transport, _, _ = connected()
    session.receive_data(frame("SUBSCRIBE", ("id", "1"), ("destination", "/topic/a"), ("ack", "x")))
    assert error_of(transport).get("message") == "invalid ack mode"


def test_stomp_1_0_headers_are_not_escaped() -> None:
    """STOMP 1.0 has no escaping: a backslash in a header passes through as it is."""
    session, transport, _, _ = connected(version="1.0")
    session.receive_data(frame("SUBSCRIBE", ("destination", "/topic/a"), version="1.0"))
    session.receive_data(b"SEND\ndestination:/topic/a\nx-path:C:\\dir\n\nhi\x00")
    [message] = transport.frames("1.0")
    assert message.get("x-path") == "C:\\dir"
    assert b"x-path:C:\\dir\n" in encode(message, "1.0")


def test_message_shared_bytes_are_encoded_once_per_message() -> None:
    """Delivering one message to many subscribers encodes its shared part once."""
    session, transport, _, broker = connected()
    for n in range(3):
        session.receive_data(frame("SUBSCRIBE", ("id", str(n)), ("destination", "/topic/a")))
    session.receive_data(frame("SEND", ("destination", "/topic/a"), body=b"x"))
    [send] = [arg for call, arg in broker.calls if call == "send"]
    assert "1.0" not in send.wire
    assert len({id(tail) for tail in send.wire.values()}) == 1
    assert [f.get("subscription") for f in transport.frames()] == ["0", "1", "2"]


def test_stomp_1_0_subscriber_gets_messages_with_unrepresentable_headers() -> None:
    """
    A header a 1.0 client cannot parse (LF in the value) is left out of its MESSAGE, not fatal.
    """
    broker = RecordingBroker()
    old, old_transport, _, _ = make_session(broker)
    old.receive_data(frame("CONNECT"))
    old.receive_data(frame("SUBSCRIBE", ("destination", "/topic/a"), version="1.0"))
    new, new_transport, _, _ = make_session(broker)
    new.receive_data(frame("CONNECT", ("accept-version", "1.2")))
    new.receive_data(
        frame(
            "SEND",
            ("destination", "/topic/a"),
            ("x-multi", "a\nb"),
            ("x-ok", "fine"),
            body=b"hi",
        )
    )
    [_, message] = old_transport.frames("1.0")
    assert message.get("x-multi") is None
    assert message.get("x-ok") == "fine"
    assert message.body == b"hi"
    assert not old_transport.closed and not new_transport.closed


def test_subscriptions_past_the_limit_are_an_error() -> None:
    """A connection may have max_subscriptions subscriptions; one more is refused, naming it."""
    session, transport, _, broker = connected(config=SessionConfig(max_subscriptions=2))
    for number in range(2):
        subscribe(session, transport, ("id", str(number)), ("destination", "/topic/a"))
    session.receive_data(frame("SUBSCRIBE", ("id", "2"), ("destination", "/topic/a")))
    error = error_of(transport)
    assert error.get("message") == "too many subscriptions"
    assert b"max-subscriptions" in error.body
    assert len(broker.named("subscribe")) == 2


def test_subscribe_needs_the_read_right() -> None:
    """
    With access rules, SUBSCRIBE asks for the read right on its pattern, as the client logged
    in.
    """
    access = RecordingAccess(refused="/topic/secret")
    config = SessionConfig(authenticator=lambda *_: succeed("who"), access=access)
    session, transport, _, broker = connected(config=config)
    subscribe(session, transport, ("id", "1"), ("destination", "/topic/a.*"))
    session.receive_data(frame("SUBSCRIBE", ("id", "2"), ("destination", "/topic/secret")))
    assert access.checks == [("who", "read", "/topic/a.*"), ("who", "read", "/topic/secret")]
    assert error_of(transport).get("message") == "access denied: no read right on '/topic/secret'"
    assert len(broker.named("subscribe")) == 1


def test_deliveries_counted_in_batches_add_up_to_what_was_written() -> None:
    """
    count_deliveries adds, per batch the broker reports, the frames and bytes an auto-ack
    topic subscription wrote (see broker.traffic): the prefix per message, the tails by style.
    """
    session, transport, _, _ = connected(version="1.1")
    subscription = subscribe(session, transport, ("id", "s"), ("destination", "/topic/a"))
    before = (session.output.frames_sent, session.output.bytes_sent)
    messages = [Message("/topic/a", f"m-{n}", (), b"x" * n) for n in range(3)]
    tails: dict[str, int] = {}
    for message in messages:
        subscription.deliver(message)
        message.add_tail_sizes(tails)
    written = transport.take()
    subscription.count_deliveries(len(messages), tails)
    assert session.output.frames_sent - before[0] == 3
    assert session.output.bytes_sent - before[1] == len(written)


# -- the MESSAGE frames of a queue subscription --------------------------------------


def test_client_ack_message_carries_ack_id_naming_subscription_and_message() -> None:
    """
    STOMP 1.2, "MESSAGE": with client acks the frame has an ack header, which ACK's id repeats.
    """
    session, transport, _, broker = connected()
    subscription = subscribe(
        session, transport, ("id", "s"), ("destination", "/queue/q"), ("ack", "client")
    )
    subscription.deliver(queue_message())
    [message] = transport.frames()
    assert message.headers[:2] == (("subscription", "s"), ("ack", f"{subscription.number}.m-1"))
    session.receive_data(frame("ACK", ("id", message.get("ack"))))
    assert broker.named("ack") == [("m-1", subscription, None)]


@pytest.mark.parametrize("version", ["1.0", "1.1"])
def test_older_versions_get_no_ack_header(version: str) -> None:
    """STOMP 1.0 and 1.1 acknowledge by message-id, so their MESSAGE frames carry no ack header."""
    session, transport, _, _ = connected(version=version)
    subscription = subscribe(
        session,
        transport,
        ("id", "s"),
        ("destination", "/queue/q"),
        ("ack", "client"),
        version=version,
    )
    subscription.deliver(queue_message())
    [message] = transport.frames(version)
    assert message.get("ack") is None
    assert message.get("message-id") == "m-1"


def test_redelivered_message_says_so_with_count() -> None:
    """A message that came back to its queue arrives with redelivered:true and redelivery-count."""
    session, transport, _, _ = connected()
    subscription = subscribe(session, transport, ("id", "s"), ("destination", "/queue/q"))
    subscription.deliver(queue_message(redeliveries=2))
    [message] = transport.frames()
    assert message.get("redelivered") == "true"
    assert message.get("redelivery-count") == "2"
    assert message.get("ack") is None, "auto subscriptions are not asked to acknowledge"


def test_redelivered_acknowledged_message_headers_in_order() -> None:
    """
    A redelivered MESSAGE to a client-individual subscription carries subscription, ack, then
    the redelivery headers, then the message's own; the shared tail cached on the message stays
    without them, so that another subscription's delivery does not inherit them.
    """
    session, transport, _, _ = connected()
    subscription = subscribe(
        session, transport, ("id", "s"), ("destination", "/queue/q"), ("ack", "client-individual")
    )
    message = queue_message(redeliveries=3)
    subscription.deliver(message)
    [delivered] = transport.frames()
    assert [name for name, _ in delivered.headers][:6] == [
        "subscription",
        "ack",
        "redelivered",
        "redelivery-count",
        "message-id",
        "destination",
    ]
    assert delivered.get("ack") == f"{subscription.number}.m-1"
    assert delivered.get("redelivery-count") == "3"
    assert all(b"redelivered" not in tail for tail in message.wire.values())


def test_first_delivery_has_no_redelivery_headers() -> None:
    """A message delivered for the first time has neither redelivered nor redelivery-count."""
    session, transport, _, _ = connected()
    subscription = subscribe(
        session, transport, ("id", "s"), ("destination", "/queue/q"), ("ack", "client-individual")
    )
    original = queue_message()
    subscription.deliver(original)
    subscription.deliver(evolve(original, redeliveries=1))
    first, second = transport.frames()
    assert first.get("redelivered") is None and first.get("redelivery-count") is None
    assert second.get("redelivered") == "true"
    assert first.body == second.body == b"body"


@pytest.mark.parametrize(
    "headers, tracked",
    [
        ((("destination", "/topic/a"),), False),
        ((("destination", "/topic/a"), ("ack", "client")), True),
        ((("destination", "/topic/a"), ("durable", "true")), True),
        ((("destination", "/queue/a"),), True),
        ((("destination", "/temp-queue/a"),), True),
    ],
    ids=["auto-topic", "client-topic", "durable-topic", "queue", "temp-queue"],
)
def test_only_auto_topic_subscriptions_take_the_fast_path(headers: Any, tracked: bool) -> None:
    """
    Auto-ack topic subscriptions keep the plain delivery path; queue-backed ones add
    ack/redelivery headers.
    """
    session, transport, _, _ = connected()
    subscription = subscribe(session, transport, ("id", "s"), *headers)
    assert type(subscription) is (TrackedSubscription if tracked else SessionSubscription)


# -- SUBSCRIBE headers ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "header, value, prefetch",
    [("prefetch-count", "5", 5), ("activemq.prefetchSize", "7", 7), ("prefetch-count", "0", 0)],
)
def test_prefetch_headers_set_the_window(header: str, value: str, prefetch: int) -> None:
    """
    RabbitMQ's prefetch-count and ActiveMQ's activemq.prefetchSize both set the window; 0 means
    the default.
    """
    session, transport, _, _ = connected()
    subscription = subscribe(
        session,
        transport,
        ("id", "s"),
        ("destination", "/queue/q"),
        ("ack", "client"),
        (header, value),
    )
    assert subscription.prefetch == prefetch


def test_subscription_without_prefetch_uses_the_default() -> None:
    """
    A subscription that asks for no window gets the broker's (prefetch 0), and the default
    redelivery limit.
    """
    session, transport, _, _ = connected()
    subscription = subscribe(session, transport, ("id", "s"), ("destination", "/queue/q"))
    assert (subscription.prefetch, subscription.max_redeliveries, subscription.durable) == (
        0,
        None,
        None,
    )


def test_max_redeliveries_header() -> None:
    """max-redeliveries on SUBSCRIBE sets the subscription's redelivery limit; -1 means none."""
    session, transport, _, _ = connected()
    limited = subscribe(
        session, transport, ("id", "a"), ("destination", "/queue/q"), ("max-redeliveries", "3")
    )
    unlimited = subscribe(
        session, transport, ("id", "b"), ("destination", "/queue/q"), ("max-redeliveries", "-1")
    )
    assert (limited.max_redeliveries, unlimited.max_redeliveries) == (3, -1)


@pytest.mark.parametrize(
    "header, value",
    [
        ("prefetch-count", "many"),
        ("prefetch-count", "-1"),
        ("activemq.prefetchSize", "1.5"),
        ("max-redeliveries", "-2"),
        ("max-redeliveries", "x"),
    ],
)
def test_invalid_delivery_headers_are_errors(header: str, value: str) -> None:
    """
    A window or redelivery limit that is not a suitable integer gets an ERROR naming the header.
    """
    session, transport, _, _ = connected()
    session.receive_data(
        frame("SUBSCRIBE", ("id", "s"), ("destination", "/queue/q"), (header, value))
    )
    assert error_of(transport).get("message") == f"invalid {header} header"


@pytest.mark.parametrize(
    "connect_client_id, headers, durable",
    [
        (None, [("durable", "true")], ("", "sub-1")),
        ("app", [("persistent", "true")], ("app", "sub-1")),
        ("app", [("activemq.subscriptionName", "prices")], ("app", "prices")),
        ("app", [("durable-subscription-name", "prices")], ("app", "prices")),
        (None, [("durable", "false")], None),
    ],
    ids=["rabbitmq-durable", "rabbitmq-persistent", "activemq", "artemis", "not-durable"],
)
def test_durable_subscription_names(connect_client_id: Any, headers: list, durable: Any) -> None:
    """
    RabbitMQ's durable/persistent (named by id), ActiveMQ's and Artemis's name headers (with
    client-id).
    """
    session, transport, _, _ = connected(client_id=connect_client_id)
    subscription = subscribe(
        session, transport, ("id", "sub-1"), ("destination", "/topic/p"), *headers
    )
    assert subscription.durable == durable


def test_named_durable_subscription_needs_client_id() -> None:
    """
    ActiveMQ's activemq.subscriptionName without a client-id on CONNECT is an error, as in
    ActiveMQ.
    """
    session, transport, _, _ = connected()
    session.receive_data(
        frame(
            "SUBSCRIBE",
            ("id", "s"),
            ("destination", "/topic/p"),
            ("activemq.subscriptionName", "n"),
        )
    )
    assert error_of(transport).get("message") == "missing client-id header"


def test_durable_header_on_a_queue_is_ignored() -> None:
    """Queues keep their messages anyway: durable headers on a queue subscription change nothing."""
    session, transport, _, _ = connected()
    subscription = subscribe(
        session, transport, ("id", "s"), ("destination", "/queue/q"), ("durable", "true")
    )
    assert subscription.durable is None


# -- UNSUBSCRIBE of durable subscriptions -----------------------------------------------


def test_unsubscribe_without_durable_header_keeps_the_durable_subscription() -> None:
    """A plain UNSUBSCRIBE detaches from a durable subscription, which keeps collecting."""
    session, transport, _, broker = connected()
    subscription = subscribe(
        session, transport, ("id", "s"), ("destination", "/topic/t"), ("durable", "true")
    )
    session.receive_data(frame("UNSUBSCRIBE", ("id", "s")))
    assert broker.named("unsubscribe") == [subscription]
    assert broker.named("remove_durable") == []


def test_unsubscribe_with_durable_header_removes_it() -> None:
    """UNSUBSCRIBE with durable:true ends the subscription and deletes the durable one."""
    session, transport, _, broker = connected()
    subscribe(session, transport, ("id", "s"), ("destination", "/topic/t"), ("durable", "true"))
    session.receive_data(frame("UNSUBSCRIBE", ("id", "s"), ("durable", "true"), ("receipt", "r")))
    assert broker.named("remove_durable") == [("", "s")]
    assert transport.frames() == [Frame("RECEIPT", (("receipt-id", "r"),))]


def test_inactive_durable_subscription_can_be_removed_by_name() -> None:
    """
    ActiveMQ style: UNSUBSCRIBE naming a durable subscription this connection is not consuming
    removes it.
    """
    session, transport, _, broker = connected(client_id="app")
    session.receive_data(frame("UNSUBSCRIBE", ("id", "x"), ("activemq.subscriptionName", "prices")))
    assert broker.named("remove_durable") == [("app", "prices")]
    assert not transport.closed


# -- ACK and NACK -------------------------------------------------------------------------


def test_ack_1_1_names_message_and_subscription() -> None:
    """STOMP 1.1, "ACK": message-id and subscription name the message."""
    session, transport, _, broker = connected(version="1.1")
    subscription = subscribe(
        session,
        transport,
        ("id", "s"),
        ("destination", "/queue/q"),
        ("ack", "client"),
        version="1.1",
    )
    session.receive_data(frame("ACK", ("subscription", "s"), ("message-id", "m-9"), version="1.1"))
    assert broker.named("ack") == [("m-9", subscription, None)]


def test_ack_1_0_names_only_the_message() -> None:
    """
    STOMP 1.0, "ACK": message-id alone; the broker looks through the connection's subscriptions.
    """
    session, transport, _, broker = connected(version="1.0")
    session.receive_data(frame("ACK", ("message-id", "m-9"), ("receipt", "r"), version="1.0"))
    assert broker.named("ack") == [("m-9", None, None)]
    assert transport.frames("1.0") == [Frame("RECEIPT", (("receipt-id", "r"),))]


def test_ack_1_2_with_a_message_id_for_id_is_looked_up() -> None:
    """A 1.2 ACK whose id is a message-id (as ActiveMQ clients send) is taken for one."""
    session, transport, _, broker = connected()
    session.receive_data(frame("ACK", ("id", "f00d-17")))
    assert broker.named("ack") == [("f00d-17", None, None)]


def test_ack_1_2_reads_the_first_of_repeated_headers() -> None:
    """
    STOMP 1.2, Repeated Header Entries: an ACK's first id, transaction and receipt count, and
    the message-id and subscription it may carry besides (as the Go generator sends) do not.
    """
    session, transport, _, broker = connected()
    subscription = subscribe(
        session, transport, ("id", "s"), ("destination", "/queue/q"), ("ack", "client-individual")
    )
    session.receive_data(frame("BEGIN", ("transaction", "t1")))
    session.receive_data(
        frame(
            "ACK",
            ("id", f"{subscription.number}.m-1"),
            ("message-id", "m-other"),
            ("subscription", "other"),
            ("receipt", "r1"),
            ("transaction", "t1"),
            ("id", "0.m-2"),
            ("receipt", "r2"),
        )
    )
    session.receive_data(frame("ACK", ("id", f"{subscription.number}.m-3"), ("receipt", "r3")))
    assert broker.named("ack") == [("m-1", subscription, "t1"), ("m-3", subscription, None)]
    assert transport.frames() == [
        Frame("RECEIPT", (("receipt-id", "r1"),)),
        Frame("RECEIPT", (("receipt-id", "r3"),)),
    ]


def test_ack_id_of_an_unknown_subscription_is_an_error() -> None:
    """An ack id whose subscription this connection does not have is an ERROR."""
    session, transport, _, _ = connected()
    session.receive_data(frame("ACK", ("id", "99.m-1"), ("receipt", "r")))
    error = error_of(transport)
    assert error.get("message") == "unknown message to acknowledge"
    assert error.get("receipt-id") == "r"


def test_ack_of_an_ended_subscription_is_an_error() -> None:
    """After UNSUBSCRIBE, the subscription's ack ids name nothing."""
    session, transport, _, _ = connected()
    subscription = subscribe(
        session, transport, ("id", "s"), ("destination", "/queue/q"), ("ack", "client")
    )
    session.receive_data(frame("UNSUBSCRIBE", ("id", "s")))
    session.receive_data(frame("ACK", ("id", f"{subscription.number}.m-1")))
    assert error_of(transport).get("message") == "unknown message to acknowledge"


def test_ack_1_1_naming_an_unknown_subscription_is_looked_up_by_message_id() -> None:
    """
    Issue 14: a 1.1 ACK whose subscription header names none of the connection's (clients send
    that) is looked for by its message-id through all of them, as ActiveMQ and RabbitMQ do.
    """
    session, transport, _, broker = connected(version="1.1")
    session.receive_data(frame("ACK", ("subscription", "nope"), ("message-id", "m"), version="1.1"))
    session.receive_data(
        frame("NACK", ("subscription", "/queue/q"), ("message-id", "n"), version="1.1")
    )
    assert broker.named("ack") == [("m", None, None)]
    assert broker.named("nack") == [("n", None, True, None)]
    assert not transport.closed


@pytest.mark.parametrize(
    "version, missing", [("1.2", "id"), ("1.1", "message-id"), ("1.0", "message-id")]
)
def test_ack_naming_no_message_is_an_error(version: str, missing: str) -> None:
    """An ACK without the header its version names the message by gets an ERROR naming it."""
    session, transport, _, _ = connected(version=version)
    session.receive_data(frame("ACK", version=version))
    assert error_of(transport, version).get("message") == f"missing {missing} header"


def test_nack_requeues_by_default_and_not_with_requeue_false() -> None:
    """NACK redelivers by default; requeue:false (RabbitMQ) asks for dead-lettering at once."""
    session, transport, _, broker = connected()
    subscription = subscribe(
        session, transport, ("id", "s"), ("destination", "/queue/q"), ("ack", "client")
    )
    number = subscription.number
    session.receive_data(frame("NACK", ("id", f"{number}.m-1")))
    session.receive_data(frame("NACK", ("id", f"{number}.m-2"), ("requeue", "false")))
    assert broker.named("nack") == [
        ("m-1", subscription, True, None),
        ("m-2", subscription, False, None),
    ]


def test_invalid_requeue_header_is_an_error() -> None:
    """requeue must be true or false."""
    session, transport, _, _ = connected()
    session.receive_data(frame("NACK", ("id", "1.m"), ("requeue", "maybe")))
    assert error_of(transport).get("message") == "invalid requeue header"


# -- reply-to a temporary queue --------------------------------------------------------


def test_reply_to_temp_queue_subscribes_the_sender_once() -> None:
    """
    SEND with reply-to:/temp-queue/NAME subscribes the sender to it (id = the name), as RabbitMQ
    does.
    """
    session, transport, _, broker = connected()
    for _ in range(2):
        session.receive_data(
            frame("SEND", ("destination", "/queue/rpc"), ("reply-to", "/temp-queue/r"))
        )
    [replies] = broker.subscribers
    assert (replies.subscription_id, replies.destination, replies.ack_mode) == (
        "/temp-queue/r",
        "/temp-queue/r",
        "auto",
    )
    assert [name for name, _ in broker.calls if name in {"subscribe", "send"}] == [
        "subscribe",
        "send",
        "send",
    ]


def test_reply_to_a_temp_queue_already_subscribed_adds_nothing() -> None:
    """A client that subscribed to its temporary queue itself keeps its own subscription."""
    session, transport, _, broker = connected()
    subscribe(
        session, transport, ("id", "mine"), ("destination", "/temp-queue/r"), ("ack", "client")
    )
    session.receive_data(
        frame("SEND", ("destination", "/queue/rpc"), ("reply-to", "/temp-queue/r"))
    )
    assert [s.subscription_id for s in broker.subscribers] == ["mine"]


def test_reply_to_elsewhere_subscribes_nothing() -> None:
    """A reply-to that is not a temporary queue is only passed on."""
    session, transport, _, broker = connected()
    session.receive_data(
        frame("SEND", ("destination", "/queue/rpc"), ("reply-to", "/queue/answers"))
    )
    assert broker.subscribers == []
    [sent] = broker.named("send")
    assert ("reply-to", "/queue/answers") in sent.headers


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["id", "transaction", "receipt", "message-id", "subscription", "x"]),
            st.sampled_from(["a", "b", "m-1"]),
        ),
        max_size=7,
    )
)
def test_ack_1_2_settles_what_reading_its_headers_one_at_a_time_names(
    pairs: list[tuple[str, str]],
) -> None:
    """
    The 1.2 ACK's one-pass reading of its headers agrees with Frame.get, header by header: the
    first id names the message, the first transaction and receipt count (STOMP 1.2, Repeated
    Header Entries); without an id, the general reading takes the message-id (a subscription
    header here names none of the connection's), and without either the frame is refused.
    """
    session, transport, _, broker = connected()
    subscription = subscribe(
        session, transport, ("id", "s"), ("destination", "/queue/q"), ("ack", "client-individual")
    )
    # Ack ids of the subscription itself, so that every id names a message it may hold.
    headers = tuple(
        (name, f"{subscription.number}.{value}" if name == "id" else value) for name, value in pairs
    )
    ack = Frame("ACK", headers)
    session.receive_data(encode(ack, "1.2"))
    ack_id = ack.get("id")
    if ack_id is not None:
        expected = [(ack_id.partition(".")[2], subscription, ack.get("transaction"))]
    elif ack.get("message-id") is not None:
        expected = [(ack.get("message-id"), None, ack.get("transaction"))]
    else:
        assert broker.named("ack") == []
        assert error_of(transport).get("message") == "missing id header"
        return
    assert broker.named("ack") == expected
    receipt = ack.get("receipt")
    assert transport.frames() == ([Frame("RECEIPT", (("receipt-id", receipt),))] if receipt else [])
