"""
The client's subscriptions part (stompbroker.protocol.subscriptions.Subscriptions)
built alone on a recording broker, the broker's view of a connection and a real
output part over a recording transport, without a session or a stand-in for one:
what SUBSCRIBE makes, the limit, UNSUBSCRIBE, ack ids, and giving every
subscription back.
"""

from __future__ import annotations

from typing import Any

import pytest
from attrs import define
from twisted.internet.task import Clock

from stompbroker.protocol.config import SessionConfig
from stompbroker.protocol.errors import DuplicateSubscription, LimitExceeded, UnknownAck
from stompbroker.protocol.frames import Frame
from stompbroker.protocol.slow_consumer import SlowConsumer
from stompbroker.protocol.subscribers import SessionSubscription, TrackedSubscription
from stompbroker.protocol.subscriptions import Subscriptions
from tests.support.broker import FakeConnection
from tests.support.parts import Failures, reading
from tests.support.session import FakeTransport, RecordingBroker


@define
class Who:
    """Who the client is, as its login part says (``Identified``)."""

    identity: Any = None


class Made:
    """A :class:`Subscriptions` and what it was given, each real or recording."""

    def __init__(self, config: SessionConfig | None = None) -> None:
        config = config or SessionConfig()
        failures = Failures()
        self.transport = FakeTransport()
        self.broker = RecordingBroker()
        self.connection = FakeConnection("s1")
        self.output = SlowConsumer(
            self.connection,
            self.connection.subscribers,
            self.connection.describe,
            self.broker,
            self.transport,
            Clock(),
            config,
            failures.life,
            reading()[0],
            failures,
        )
        self.subscriptions = Subscriptions(self.connection, self.broker, self.output, Who(), config)
        self.subscriptions.negotiated("1.2", None)


def made(config: SessionConfig | None = None) -> tuple[Subscriptions, Made, RecordingBroker]:
    parts = Made(config)
    return parts.subscriptions, parts, parts.broker


def subscribe(subscription_id: str, destination: str, *headers: tuple[str, str]) -> Frame:
    return Frame("SUBSCRIBE", (("id", subscription_id), ("destination", destination), *headers))


def test_a_subscribe_makes_the_class_its_destination_and_ack_mode_need() -> None:
    subscriptions, _, broker = made()
    topic = subscriptions.new(subscribe("a", "/topic/t"))
    queue = subscriptions.new(subscribe("b", "/queue/q"))
    acked = subscriptions.new(subscribe("c", "/topic/t", ("ack", "client")))
    assert type(topic) is SessionSubscription
    assert type(queue) is TrackedSubscription
    assert type(acked) is TrackedSubscription
    assert broker.named("subscribe") == []
    subscriptions.add(topic)
    assert broker.named("subscribe") == [topic]
    assert subscriptions.values() == (topic,)
    with pytest.raises(DuplicateSubscription):
        subscriptions.new(subscribe("a", "/topic/u"))


def test_a_resumable_sessions_topic_messages_go_to_its_recent_writer() -> None:
    subscriptions, parts, _ = made()
    kept: list[bytes] = []
    subscriptions.keep_recent(kept.append)
    topic = subscriptions.new(subscribe("a", "/topic/t"))
    subscriptions.add(topic)
    topic._write(b"MESSAGE")
    assert kept == [b"MESSAGE"]
    assert parts.transport.take() == b""


def test_the_limit_refuses_one_more() -> None:
    subscriptions, _, _ = made(SessionConfig(max_subscriptions=1))
    subscriptions.add(subscriptions.new(subscribe("a", "/topic/t")))
    with pytest.raises(LimitExceeded):
        subscriptions.add(subscriptions.new(subscribe("b", "/topic/t")))


def test_ack_ids_name_the_subscription_by_number() -> None:
    subscriptions, _, _ = made()
    queue = subscriptions.new(subscribe("q", "/queue/q"))
    subscriptions.add(queue)
    assert subscriptions.by_ack_id(f"{queue.number}.m-7") == (queue, "m-7")
    assert subscriptions.by_ack_id("m-7") == (None, "m-7")
    ack = Frame("ACK", (("id", f"{queue.number}.m-7"), ("receipt", "r"), ("transaction", "t")))
    assert subscriptions.ack_names(ack) == (queue, "m-7", "t", "r")
    with pytest.raises(UnknownAck):
        subscriptions.by_ack_id("99.m-7")


def test_unsubscribe_forgets_the_ack_ids_too() -> None:
    subscriptions, _, broker = made()
    queue = subscriptions.new(subscribe("q", "/queue/q"))
    subscriptions.add(queue)
    subscriptions.unsubscribe(Frame("UNSUBSCRIBE", (("id", "q"),)))
    assert broker.named("unsubscribe") == [queue]
    with pytest.raises(UnknownAck):
        subscriptions.by_ack_id(f"{queue.number}.m")


def test_replies_to_a_temporary_queue_get_one_subscription() -> None:
    subscriptions, _, broker = made()
    subscriptions.subscribe_to_replies("/temp-queue/r")
    subscriptions.subscribe_to_replies("/temp-queue/r")
    (made_for_replies,) = broker.named("subscribe")
    assert made_for_replies.subscription_id == "/temp-queue/r"


def test_take_all_hands_them_over_and_drop_all_gives_them_back() -> None:
    subscriptions, _, broker = made()
    first = subscriptions.new(subscribe("a", "/topic/t"))
    second = subscriptions.new(subscribe("b", "/queue/q"))
    subscriptions.add(first)
    subscriptions.add(second)
    assert subscriptions.take_all() == [first, second]
    assert len(subscriptions) == 0
    assert broker.named("unsubscribe") == []
    subscriptions.add(subscriptions.new(subscribe("c", "/topic/t")))
    subscriptions.drop_all()
    assert len(broker.named("unsubscribe")) == 1
    assert len(subscriptions) == 0
