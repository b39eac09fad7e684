"""
Tests of the router on its own, against a recording engine: where each kind of
destination goes, what a message is made of, persistence, transactions, and the
back-pressure that routing leaves.
"""

from __future__ import annotations

from typing import Any

import pytest
from attrs import evolve
from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.internet.defer import Deferred, fail
from twisted.internet.task import Clock

from stompbroker.broker.clients.connections import ConnectionRegistry
from stompbroker.broker.clients.transactions import Transactions
from stompbroker.broker.engine.capabilities import Capabilities
from stompbroker.broker.engine.duplicate_detection import DuplicateDetection
from stompbroker.broker.engine.fanout import Bookkeeping
from stompbroker.broker.features.policies import Policies
from stompbroker.broker.flow.backpressure import BackPressure
from stompbroker.broker.flow.broker_limits import Limits
from stompbroker.broker.flow.traffic import Traffic
from stompbroker.broker.queueing.delivery import DeliveryCounters, DeliveryPolicy
from stompbroker.broker.routing.destinations import Kind
from stompbroker.broker.routing.ids import Ids
from stompbroker.broker.routing.router import Router
from stompbroker.protocol.errors import InvalidDestination, NotSupported, UnknownTransaction
from stompbroker.protocol.message import Message
from tests.support.broker import FakeConnection

EPOCH = 1_700_000_000.0


class RecordingQueue:
    """A temporary queue that records what is published to it."""

    def __init__(self, destination: str, calls: list[tuple[str, Any]]) -> None:
        self.destination = destination
        self._calls = calls

    def publish(self, message: Message) -> None:
        self._calls.append(("temp", message))


class RecordingEngine:
    """The engine methods the router calls, recording each call in order."""

    def __init__(self, persistent: bool = False) -> None:
        # Neither schedules nor retains: those are tested in test_timing_routing.py.
        self.stated = Capabilities(persistence=persistent, scheduling=False, retain=False)
        self.traffic = Traffic()
        self.ids = Ids("n0")
        self.calls: list[tuple[str, Any]] = []
        self.kept: Deferred[None] | None = None
        #: Called with each topic message, as a subscriber's delivery would be.
        self.on_topic: Any = None

    def capabilities(self) -> Capabilities:
        return self.stated

    def bookkeeping(self) -> Bookkeeping:
        return Bookkeeping(self.ids, self.traffic, DeliveryCounters())

    def duplicate_detection(self) -> DuplicateDetection:
        return DuplicateDetection(Clock(), Policies())

    def publish_topic(self, message: Message) -> None:
        self.calls.append(("topic", message))
        if self.on_topic is not None:
            self.on_topic(message)

    def publish_queue(self, message: Message) -> None:
        self.calls.append(("queue", message))

    def publish_reply(self, message: Message) -> None:
        self.calls.append(("reply", message))

    def publish_stream(self, message: Message) -> Deferred[None] | None:
        self.calls.append(("stream", message))
        return self.kept

    def keep(self, message: Message) -> Deferred[None] | None:
        self.calls.append(("keep", message))
        return self.kept

    def new_reply_queue(self) -> RecordingQueue:
        return RecordingQueue(self.ids.new_reply_queue(), self.calls)


class World:
    """A router over a recording engine, with the parts it needs, on a ``task.Clock``."""

    def __init__(
        self, persistent: bool = False, persistent_queues: bool = False, ttl: int = 0
    ) -> None:
        self.clock = Clock()
        self.clock.advance(EPOCH)
        self.engine = RecordingEngine(persistent)
        limits = Limits(memory_high=0)
        self.registry = ConnectionRegistry(
            limits, self.engine.traffic, self.engine.ids, self.engine
        )
        self.backpressure = BackPressure(
            self.clock, limits, DeliveryCounters(), self.registry.connections
        )
        self.transactions = Transactions(self.registry, limits, self.backpressure)
        self.router = Router(
            self.clock,
            self.engine,
            self.registry,
            self.backpressure,
            self.transactions,
            DeliveryPolicy(ttl=ttl),
            persistent_queues,
        )

    def connection(self, name: str = "c1") -> FakeConnection:
        connection = Reader(name)
        self.registry.open(connection)
        return connection

    def routed(self) -> list[tuple[str, bytes]]:
        """:returns: ``(where, body)`` of each engine call since the last, in order."""
        calls, self.engine.calls = self.engine.calls, []
        return [(where, message.body) for where, message in calls]


class Reader(FakeConnection):
    """A connection that records whether it is read from."""

    paused = 0

    def pause_reading(self) -> None:
        self.paused += 1

    def resume_reading(self) -> None:
        self.paused -= 1


def test_each_kind_of_destination_goes_to_its_engine_method() -> None:
    """
    Topics fan out, queues enqueue, reply queues go to their owner, temp queues to the sender's.
    """
    world = World()
    sender = world.connection()
    for destination in ("/topic/a", "/queue/q", "/reply-queue/tmp-x-1", "/temp-queue/mine"):
        assert world.router.send(destination, (), destination.encode(), connection=sender) is None
    assert world.routed() == [
        ("topic", b"/topic/a"),
        ("queue", b"/queue/q"),
        ("reply", b"/reply-queue/tmp-x-1"),
        ("temp", b"/temp-queue/mine"),
    ]


def test_a_stream_send_returns_what_its_append_waits_on() -> None:
    """A SEND to a stream goes to the engine's append, and returns its Deferred for the RECEIPT."""
    world = World()
    world.engine.kept = Deferred()
    assert world.router.send("/stream/s", (), b"x", connection=world.connection()) is (
        world.engine.kept
    )
    assert world.routed() == [("stream", b"x")]


@pytest.mark.parametrize(
    "destination",
    ["/topic/a.*", "/queue/q.#", "/elsewhere/a", "/queue/", "/stream/", "/stream/a.*"],
)
def test_a_destination_the_broker_does_not_serve_is_refused(destination: str) -> None:
    """Wildcards, unknown prefixes and empty queue names are InvalidDestination, routed nowhere."""
    world = World()
    with pytest.raises(InvalidDestination):
        world.router.send(destination, (), b"x")
    assert world.routed() == []


def test_messages_get_broker_unique_ids_and_keep_their_headers() -> None:
    """Each message gets NODE-N as its id; headers the broker does not act on pass as they are."""
    world = World()
    first = world.router.publish("/topic/a", b"1", [("x", "1")])
    second = world.router.publish("/topic/a", b"2")
    assert (first.message_id, second.message_id) == ("n0-1", "n0-2")
    assert first.headers == (("x", "1"),) and not first.persistent


def test_expiry_comes_from_the_headers_or_the_broker_ttl() -> None:
    """expiration is ms from now, expires ms since the epoch, and the TTL applies to the rest."""
    world = World(ttl=2000)
    plain = world.router.publish("/queue/q", b"")
    relative = world.router.publish("/queue/q", b"", [("expiration", "500")])
    absolute = world.router.publish("/queue/q", b"", [("expires", str(int(EPOCH * 1000) + 100))])
    assert (plain.expires, relative.expires) == (EPOCH + 2.0, EPOCH + 0.5)
    assert absolute.expires == pytest.approx(EPOCH + 0.1)


def test_a_temporary_reply_to_is_rewritten_to_the_senders_reply_queue() -> None:
    """reply-to:/temp-queue/NAME becomes the broker-unique reply queue others can send to."""
    world = World()
    sender = world.connection()
    world.router.send("/queue/q", (("reply-to", "/temp-queue/answers"),), b"?", connection=sender)
    [(_, message)] = world.engine.calls
    reply_to = message.headers[0][1]
    assert reply_to.startswith("/reply-queue/tmp-n0-")
    assert world.registry.temp_queue(sender, "/temp-queue/answers").destination == reply_to


def test_a_message_holds_the_plain_lines_it_was_sent_with() -> None:
    """
    Given the SEND's header lines as well as its pairs, the router makes a message that holds
    the lines (one bytes object while it waits) and reads as the same pairs.
    """
    world = World()
    pairs = (("seq", "1"), ("note", "caf\u00e9"))
    world.router.send("/queue/q", pairs, b"x", lines="seq:1\nnote:caf\u00e9".encode())
    [(_, message)] = world.engine.calls
    assert message._headers == "seq:1\nnote:caf\u00e9".encode()
    assert message.headers == pairs


def test_a_header_the_router_acts_on_leaves_the_lines_aside() -> None:
    """
    The lines are the SEND's as it came: a header the router reads or rewrites (here a temporary
    reply-to) makes the message from the pairs it rewrote.
    """
    world = World()
    sender = world.connection()
    pairs = (("reply-to", "/temp-queue/answers"), ("seq", "1"))
    world.router.send(
        "/queue/q", pairs, b"?", connection=sender, lines=b"reply-to:/temp-queue/answers\nseq:1"
    )
    [(_, message)] = world.engine.calls
    assert isinstance(message._headers, tuple)
    assert message.headers[0][1].startswith("/reply-queue/tmp-n0-")
    assert message.headers[1] == ("seq", "1")


def test_a_persistent_message_is_kept_before_it_is_routed() -> None:
    """
    With a persistent engine, persistent:true files the message, then routes it; send returns
    the filing.
    """
    world = World(persistent=True)
    world.engine.kept = Deferred()
    waiting = world.router.send("/queue/q", (("persistent", "true"),), b"p")
    assert waiting is world.engine.kept
    assert world.routed() == [("keep", b"p"), ("queue", b"p")]


def test_persistence_needs_an_engine_that_keeps_messages() -> None:
    """Without one, persistent:true is an ordinary header and nothing is filed."""
    world = World(persistent=False, persistent_queues=True)
    world.router.send("/queue/q", (("persistent", "true"),), b"p")
    assert world.routed() == [("queue", b"p")]
    assert not world.router.persistent_queues


def test_persistent_queues_make_every_queue_send_persistent_but_not_topics() -> None:
    """--persistent-queues files every SEND to a /queue/, and only those."""
    world = World(persistent=True, persistent_queues=True)
    world.router.send("/queue/q", (), b"q")
    world.router.send("/topic/t", (), b"t")
    assert world.routed() == [("keep", b"q"), ("queue", b"q"), ("topic", b"t")]


def test_a_transaction_holds_the_routing_until_commit() -> None:
    """STOMP 1.2, BEGIN: a SEND in a transaction is routed at COMMIT, filed then if persistent."""
    world = World(persistent=True)
    sender = world.connection()
    world.transactions.begin(sender, "tx")
    world.router.send(
        "/queue/q", (("persistent", "true"),), b"1", connection=sender, transaction="tx"
    )
    world.router.send("/topic/t", (), b"2", connection=sender, transaction="tx")
    assert world.routed() == []
    world.transactions.commit(sender, "tx")
    assert world.routed() == [("keep", b"1"), ("queue", b"1"), ("topic", b"2")]
    with pytest.raises(UnknownTransaction):
        world.router.send("/queue/q", (), b"3", connection=sender, transaction="tx")


def test_routing_that_meets_a_blocking_subscriber_pauses_the_sender() -> None:
    """
    A subscriber blocking during the fan-out leaves a Pressure that pauses the sender after
    routing.
    """
    world = World()
    sender, slow = world.connection("sender"), world.connection("slow")
    world.engine.on_topic = lambda message: world.backpressure.block_sender(slow)
    world.router.send("/topic/a", (), b"x", connection=sender)
    assert sender.paused == 1 and world.backpressure.pending is None
    world.backpressure.resume(slow)
    assert sender.paused == 0


def test_in_a_transaction_the_pressure_waits_for_the_commit() -> None:
    """The sender of a transaction is paused by its COMMIT, which routes the messages."""
    world = World()
    sender, slow = world.connection("sender"), world.connection("slow")
    world.engine.on_topic = lambda message: world.backpressure.block_sender(slow)
    world.transactions.begin(sender, "tx")
    world.router.send("/topic/a", (), b"x", connection=sender, transaction="tx")
    assert sender.paused == 0
    world.transactions.commit(sender, "tx")
    assert sender.paused == 1


def test_publish_encodes_text_and_swallows_a_failed_filing() -> None:
    """Text bodies get UTF-8 and a content-type; a filing that fails is nobody's to hear of."""
    world = World(persistent=True)
    world.engine.kept = fail(RuntimeError("disk full"))
    message = world.router.publish("/queue/q", "héllo", [("persistent", "true")])
    assert message.body == "héllo".encode()
    assert ("content-type", "text/plain;charset=utf-8") in message.headers
    typed = world.router.publish("/queue/q", "x", [("content-type", "text/csv")])
    assert [name for name, _ in typed.headers].count("content-type") == 1


def test_while_sampling_each_send_stamps_its_connection_as_a_producer() -> None:
    """Producers per interval: a SEND stamps its connection with the current generation."""
    world = World()
    sender = world.connection()
    world.router.send("/queue/q", (), b"x", connection=sender)
    assert "/queue/q" not in world.engine.traffic.destinations
    world.engine.traffic.sampling = True
    world.engine.traffic.new_generation()
    world.router.send("/queue/q", (), b"x", connection=sender)
    assert world.engine.traffic.destinations["/queue/q"].producers == {sender: 1}


def test_a_grouped_send_carries_its_group_on_the_message() -> None:
    """JMSXGroupID and JMSXGroupSeq are read once, onto the message; a plain SEND has no group."""
    world = World()
    world.router.send(
        "/queue/q", (("JMSXGroupID", "g"), ("JMSXGroupSeq", "-1")), b"last", connection=None
    )
    world.router.send("/queue/q", (), b"plain")
    grouped, plain = (message for _, message in world.engine.calls)
    assert (grouped.group, grouped.closes_group) == ("g", True)
    assert (plain.group, plain.closes_group) == (None, False)


def test_an_engine_with_shared_queues_refuses_grouped_queue_sends() -> None:
    """On the redis engine a grouped SEND to a queue is refused; to a topic it goes."""
    world = World()
    world.engine.stated = evolve(world.engine.stated, message_groups=False)
    world.router = Router(
        world.clock,
        world.engine,
        world.registry,
        world.backpressure,
        world.transactions,
        DeliveryPolicy(),
    )
    with pytest.raises(NotSupported):
        world.router.send("/queue/q", (("JMSXGroupID", "g"),), b"x")
    world.router.send("/topic/t", (("JMSXGroupID", "g"),), b"x")
    assert world.routed() == [("topic", b"x")]


@settings(max_examples=60)
@given(
    headers=st.lists(
        st.tuples(
            st.sampled_from(["x-a", "seq", "ts", "run", "content-type", "correlation-id"]),
            st.text(max_size=6),
        ),
        max_size=5,
    ),
    destination=st.sampled_from(["/queue/q", "/topic/t"]),
    ttl=st.sampled_from([0, 1500]),
    persistent_queues=st.booleans(),
)
def test_a_send_without_a_header_the_broker_acts_on_is_read_as_prepare_reads_it(
    headers: list[tuple[str, str]], destination: str, ttl: int, persistent_queues: bool
) -> None:
    """
    The SEND path's shortcut for headers the broker does not act on gives the message the
    same headers, expiry, persistence, priority and group as the general reading would.
    """
    world = World(persistent=True, persistent_queues=persistent_queues, ttl=ttl)
    pairs = tuple(headers)
    world.router.send(destination, pairs, b"b")
    message = [message for where, message in world.engine.calls if where != "keep"][0]
    kind = Kind.QUEUE if destination.startswith("/queue/") else Kind.TOPIC
    prepared, expires, persistent, priority, group, timing = world.router.send_headers.prepare(
        pairs, None, kind
    )
    assert (message.headers, message.expires, message.persistent, message.priority) == (
        prepared,
        expires,
        persistent,
        priority,
    )
    assert message.group is None and group is None and timing is None
