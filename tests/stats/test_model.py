"""
The stats model on a broker with a ``task.Clock``, recording subscribers and fake
connections: what routing counts per destination, the gauges, the intervals a
sampler makes of them, forgetting, and the views (``/stats``, the live topic,
``/queue/monitor``).  Definitions are those of docs/monitoring.md.
"""

from __future__ import annotations

from typing import Any

import pytest
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

import stompbroker
from stompbroker.broker.engine.node_figures import StreamRange
from stompbroker.broker.flow.traffic import UNREAD_LIMIT, TopicTree, Traffic
from stompbroker.broker.queueing.delivery import DeliveryPolicy
from stompbroker.broker.queueing.queues import WorkerQueue
from stompbroker.broker.routing.virtual_hosts import VirtualHost
from stompbroker.broker.service import Broker
from stompbroker.broker.streams.offsets import StreamLimits
from stompbroker.protocol.message import Message
from stompbroker.protocol.session import SessionConfig, StompSession
from stompbroker.stats.documents import live_document, monitor_text, stats_document
from stompbroker.stats.model import FORGET_AFTER, Interval, Sampler, StatsModel
from stompbroker.stats.schema import (
    FLOW_COUNTERS,
    BrokerRecord,
    DestinationRecord,
    record_from_dict,
    record_to_dict,
)
from tests.support.broker import EPOCH, FakeConnection, Inbox
from tests.support.broker import World as BrokerWorld
from tests.support.process import run_python
from tests.support.session import PLAIN_TCP

RSS = 50_000_000
DEFAULT_POLICY = DeliveryPolicy()


class World(BrokerWorld):
    """The shared broker world on a clock, with a stats model whose sampler starts at once."""

    def __init__(self, policy: DeliveryPolicy = DEFAULT_POLICY, **options: Any) -> None:
        super().__init__(policy, **options)
        self.model = StatsModel(self.broker, rss=lambda: RSS)
        self.sampler = self.model.sampler()
        assert self.sampler.sample() is None

    def subscribe(  # type: ignore[override]
        self, destination: str, ack_mode: str = "auto", on: str = "c1", **kw: Any
    ) -> Inbox:
        return super().subscribe(destination, ack_mode, on=on, **kw)

    def send_from(
        self, destination: str, *bodies: bytes, on: str | None = "c1", headers: Any = (), **kw: Any
    ) -> None:
        """SEND each body from connection ``on`` (``None``: Python code in the broker)."""
        connection = self.connection(on) if on is not None else None
        for body in bodies:
            self.broker.send(destination, headers, body, connection=connection, **kw)

    def interval(self, seconds: float = 10.0, sampler: Sampler | None = None) -> Interval:
        self.clock.advance(seconds)
        interval = (sampler or self.sampler).sample()
        assert interval is not None
        return interval


def record(interval: Interval, destination: str) -> DestinationRecord:
    return interval.by_destination()[destination]


def flows(interval: Interval, destination: str) -> dict[str, int]:
    """:returns: the flow counters of a destination's record that are not 0."""
    found = record(interval, destination)
    return {name: getattr(found, name) for name in FLOW_COUNTERS if getattr(found, name)}


# -- what routing counts ----------------------------------------------------------


def test_topic_send_counts_each_delivery_once_per_matching_subscription() -> None:
    """
    A topic SEND counts one message in, and one delivery (acknowledged: auto) per subscription it
    reached, wildcards included.
    """
    world = World()
    world.subscribe("/topic/prices.eur")
    world.subscribe("/topic/prices.*", on="c2")
    world.subscribe("/topic/other", on="c3")
    world.send_from("/topic/prices.eur", b"12345", b"678")
    interval = world.interval()
    assert flows(interval, "/topic/prices.eur") == {
        "messages_in": 2,
        "messages_delivered": 4,
        "messages_acked": 4,
        "bytes_in": 8,
        "bytes_out": 16,
    }
    assert record(interval, "/topic/prices.eur").consumers == 2


def test_topic_message_nobody_subscribes_to_is_in_but_not_dropped() -> None:
    """
    A topic message no subscription matches counts in, and is not a dropped message (it was due to
    nobody).
    """
    world = World()
    world.send_from("/topic/void", b"x")
    assert flows(world.interval(), "/topic/void") == {"messages_in": 1, "bytes_in": 1}


def test_client_ack_topic_subscription_counts_its_deliveries_from_its_queue() -> None:
    """
    A topic subscription with its own queue counts a delivery when its window lets one out, not when
    routed.
    """
    world = World()
    world.subscribe("/topic/t")
    tracked = world.subscribe("/topic/t", "client-individual", on="c2", prefetch=1)
    world.send_from("/topic/t", b"ab", b"cd")
    interval = world.interval()
    assert flows(interval, "/topic/t") == {
        "messages_in": 2,
        "messages_delivered": 3,
        "messages_acked": 2,
        "bytes_in": 4,
        "bytes_out": 6,
    }
    assert (record(interval, "/topic/t").depth, record(interval, "/topic/t").in_flight) == (1, 1)
    world.broker.ack(tracked.connection, tracked.received[0].message_id, subscriber=tracked)
    assert flows(world.interval(), "/topic/t") == {
        "messages_delivered": 1,
        "messages_acked": 1,
        "bytes_out": 2,
    }


def test_queue_counts_deliveries_acks_nacks_and_redeliveries() -> None:
    """
    A queue counts in, delivered (redeliveries included), acked, nacked and redelivered, and its
    gauges.
    """
    world = World()
    world.send_from("/queue/jobs", b"1", b"2", b"3")
    inbox = world.subscribe("/queue/jobs", "client-individual", on="worker", prefetch=2)
    first, second = inbox.received
    world.broker.ack(inbox.connection, first.message_id, subscriber=inbox)
    world.broker.nack(inbox.connection, second.message_id, subscriber=inbox)
    interval = world.interval()
    assert flows(interval, "/queue/jobs") == {
        "messages_in": 3,
        "messages_delivered": 4,
        "messages_acked": 1,
        "messages_nacked": 1,
        "messages_redelivered": 1,
        "bytes_in": 3,
        "bytes_out": 4,
    }
    jobs = record(interval, "/queue/jobs")
    assert (jobs.depth, jobs.in_flight, jobs.consumers, jobs.producers) == (0, 2, 1, 1)


def test_auto_ack_queue_deliveries_count_as_acknowledged() -> None:
    """On an auto-ack queue subscription every delivery counts as acknowledged once written."""
    world = World()
    world.subscribe("/queue/q")
    world.send_from("/queue/q", b"a", b"b")
    found = flows(world.interval(), "/queue/q")
    assert (found["messages_delivered"], found["messages_acked"]) == (2, 2)


def test_dead_letters_expiry_and_drops_count_under_the_destination_sent_to() -> None:
    """A message dead-lettered, expired or discarded counts under the destination it was sent to."""
    world = World(DeliveryPolicy(max_redeliveries=0))
    inbox = world.subscribe("/queue/work", "client")
    world.send_from("/queue/work", b"poison")
    world.broker.nack(inbox.connection, inbox.received[0].message_id, subscriber=inbox)
    world.send_from("/topic/news", b"stale", headers=(("expires", "1"),))
    world.broker.send("/topic/news", (("expires", "1"),), b"old", connection=None)
    world.send_from("/reply-queue/gone", b"late")
    interval = world.interval()
    assert flows(interval, "/queue/work")["messages_dead_lettered"] == 1
    assert flows(interval, "/topic/news")["messages_expired"] == 2
    assert flows(interval, "/reply-queue/gone") == {
        "messages_in": 1,
        "messages_dropped": 1,
        "bytes_in": 4,
    }
    assert record(interval, "/queue/DLQ.work").depth == 1


def test_closing_a_topic_subscription_drops_what_its_queue_held() -> None:
    """Messages still in a client-ack topic subscription's queue when it goes count as dropped."""
    world = World()
    tracked = world.subscribe("/topic/t", "client", prefetch=1)
    world.send_from("/topic/t", b"1", b"2", b"3")
    world.broker.unsubscribe(tracked)
    assert flows(world.interval(), "/topic/t")["messages_dropped"] == 3


def test_transactional_sends_count_when_committed() -> None:
    """
    A SEND in a transaction counts in when its transaction commits, never if it aborts; its
    connection is a producer at once.
    """
    world = World()
    connection = world.connection()
    world.broker.begin(connection, "tx")
    world.send_from("/queue/q", b"x", transaction="tx")
    held = record(world.interval(), "/queue/q")
    assert (held.messages_in, held.producers) == (0, 1)
    world.broker.commit(connection, "tx")
    assert flows(world.interval(), "/queue/q") == {"messages_in": 1, "bytes_in": 1}
    world.broker.begin(connection, "tx2")
    world.send_from("/queue/q", b"y", transaction="tx2")
    world.broker.abort(connection, "tx2")
    assert flows(world.interval(), "/queue/q") == {}


# -- producers and intervals ---------------------------------------------------------------


def test_producers_are_distinct_connections_per_interval_for_each_sampler() -> None:
    """producers counts the distinct connections that sent during each sampler's own interval."""
    world = World()
    slow = world.model.sampler()
    slow.sample()
    world.send_from("/queue/q", b"1", b"2", on="a")
    world.send_from("/queue/q", b"3", on="b")
    world.send_from("/queue/q", b"4", on=None)
    assert record(world.interval(), "/queue/q").producers == 2
    world.send_from("/queue/q", b"5", on="a")
    assert record(world.interval(), "/queue/q").producers == 1
    assert record(slow.sample(), "/queue/q").producers == 2
    assert record(world.interval(), "/queue/q").producers == 0


def test_intervals_carry_deltas_real_seconds_and_the_broker_record() -> None:
    """
    Flow counters are deltas over the interval, interval_s the clock time between samples, and the
    broker record counts churn and rates.
    """
    world = World()
    world.send_from("/topic/a", b"x" * 10)
    world.connection("c2")
    world.broker.close_connection(world.connection("c2"))
    first = world.interval(4.0)
    world.send_from("/topic/a", b"y", b"z")
    second = world.interval(2.5)
    assert record(first, "/topic/a").messages_in == 1
    assert record(second, "/topic/a").messages_in == 2
    assert record(second, "/topic/a").interval_s == 2.5
    assert second.broker == BrokerRecord(
        ts=EPOCH + 6.5,
        interval_s=2.5,
        uptime_s=6.5,
        connections=1,
        connections_opened=0,
        connections_closed=0,
        rss_bytes=RSS,
        messages_per_second=0.8,
    )
    assert (first.broker.connections_opened, first.broker.connections_closed) == (2, 1)
    assert record(second, "/topic/a").ts == second.broker.ts


def test_stream_counts_appends_reads_and_acks_and_its_readers_gauges() -> None:
    """
    A stream counts each append in, each entry handed to a reader as delivered (an auto reader's
    as acknowledged too, a client reader's on its ACK), and its readers as consumers and in-flight.
    """
    world = World()
    world.send_from("/stream/audit", b"one", b"two", b"three")
    first = {"x-stream-offset": "first"}
    replaying = world.subscribe("/stream/audit", "client-individual", prefetch=2, headers=first)
    assert replaying.bodies() == [b"one", b"two"]
    world.ack(replaying, 0)
    tailing = world.subscribe("/stream/audit", "auto", on="c2", subscription_id="t")
    world.send_from("/stream/audit", b"four")
    assert replaying.bodies() == [b"one", b"two", b"three"]
    assert tailing.bodies() == [b"four"]
    interval = world.interval()
    assert flows(interval, "/stream/audit") == {
        "messages_in": 4,
        "messages_delivered": 4,
        "messages_acked": 2,
        "bytes_in": 15,
        "bytes_out": 15,
    }
    audit = record(interval, "/stream/audit")
    assert (audit.depth, audit.in_flight, audit.consumers, audit.producers) == (0, 2, 2, 1)
    assert interval.broker.messages_per_second == pytest.approx(0.4)


def test_stream_state_carries_its_retained_range_as_retention_moves_it() -> None:
    """
    A stream's state holds what its log keeps: first and last offset, entries, bytes; retention
    by age moves the range, and a stream trimmed empty keeps its place and is not forgotten. Its
    records carry the entries and bytes kept, and an idle empty stream has none.
    """
    world = World(stream_limits=StreamLimits(max_age=80))
    world.send_from("/stream/audit", b"one", b"two")
    world.clock.advance(20)
    world.send_from("/stream/audit", b"three")
    log = world.broker.engine.stream_logs()["/stream/audit"]
    kept = world.model.snapshot().destinations["/stream/audit"].stream
    assert kept == StreamRange(first_offset=0, last_offset=2, messages=3, bytes=log.size)
    assert kept.bytes > len(b"onetwothree")
    world.clock.advance(70)
    kept = world.model.snapshot().destinations["/stream/audit"].stream
    assert kept == StreamRange(first_offset=2, last_offset=2, messages=1, bytes=log.size)
    audit = record(world.interval(0), "/stream/audit")
    assert (audit.retained_messages, audit.retained_bytes) == (1, log.size)
    world.interval(FORGET_AFTER * 2)
    world.interval(FORGET_AFTER * 2)
    state = world.model.snapshot().destinations["/stream/audit"]
    assert state.stream == StreamRange(first_offset=3, last_offset=None, messages=0, bytes=0)
    assert state.totals[FLOW_COUNTERS.index("messages_in")] == 3
    assert "/stream/audit" not in world.interval().by_destination()


def test_idle_destinations_without_gauges_have_no_record() -> None:
    """An interval has records for destinations with traffic or a gauge above zero only."""
    world = World()
    world.send_from("/topic/once", b"x")
    world.subscribe("/queue/idle")
    world.interval()
    assert set(world.interval().by_destination()) == {"/queue/idle"}


# -- forgetting ----------------------------------------------------------------------------


def test_long_idle_destinations_are_forgotten_and_come_back_from_zero() -> None:
    """
    A destination idle for FORGET_AFTER with no queue is forgotten; sent to again, its counters
    restart and deltas stay right.
    """
    world = World()
    world.send_from("/topic/rare", b"x")
    world.send_from("/queue/kept", b"x")
    world.interval()
    world.interval(FORGET_AFTER / 2)
    world.interval(FORGET_AFTER)
    assert "/topic/rare" not in world.broker.traffic.destinations
    assert "/queue/kept" in world.broker.traffic.destinations
    world.send_from("/topic/rare", b"y")
    assert flows(world.interval(), "/topic/rare") == {"messages_in": 1, "bytes_in": 1}


def test_a_destination_is_not_forgotten_before_every_sampler_has_seen_it() -> None:
    """Forgetting waits until every sampler's latest snapshot has the destination's final counts."""
    world = World()
    slow = world.model.sampler()
    slow.sample()
    world.send_from("/topic/t", b"x")
    world.interval()
    world.interval(FORGET_AFTER)
    world.interval(FORGET_AFTER)
    assert "/topic/t" in world.broker.traffic.destinations
    assert record(slow.sample(), "/topic/t").messages_in == 1
    world.interval(FORGET_AFTER)
    assert "/topic/t" not in world.broker.traffic.destinations


def test_without_a_sampler_nothing_stamps_producers_and_counters_stay_bounded() -> None:
    """
    A broker nobody samples keeps no producer stamps and at most UNREAD_LIMIT destinations'
    counters.
    """
    broker = Broker(Clock())
    connection = FakeConnection()
    broker.open_connection(connection)
    broker.send("/topic/a", (), b"x", connection=connection)
    assert broker.traffic.destinations["/topic/a"].producers == {}
    for n in range(UNREAD_LIMIT + 5):
        broker.traffic.of(f"/topic/t{n}")
    assert len(broker.traffic.destinations) <= UNREAD_LIMIT


# -- the topic tree -----------------------------------------------------------------------


def test_topic_tree_counts_the_queues_registered_in_it() -> None:
    """TopicTree counts queue registrations, ignoring repeats and removals of what is not there."""
    tree = TopicTree(WorkerQueue)
    queue = WorkerQueue("/topic/a", Clock(), DeliveryPolicy(), Broker(Clock()).counters, print)
    subscriber = Inbox("/topic/a", "auto")
    tree.add("/topic/a", queue)
    tree.add("/topic/a", queue)
    tree.add("/topic/a", subscriber)
    matches = tree.match("/topic/a")
    assert (tree.queues, tree.direct(matches), len(matches)) == (1, 1, 2)
    tree.remove("/topic/b", queue)
    tree.remove("/topic/a", queue)
    tree.remove("/topic/a", queue)
    assert (tree.queues, tree.direct(tree.match("/topic/a"))) == (0, 1)


def test_a_queue_made_without_the_brokers_counters_counts_in_its_own() -> None:
    """
    A WorkerQueue built without traffic counters (tests, embedding) still works and counts
    privately.
    """
    queue = WorkerQueue("/queue/q", Clock(), DeliveryPolicy(), Broker(Clock()).counters, print)
    inbox = Inbox("/queue/q", "auto")
    queue.add_consumer(inbox, 1, -1)
    sent = Message("/queue/q", "m1", (), b"x")
    queue.publish(sent)
    assert inbox.received == [sent]
    assert isinstance(queue._traffic, Traffic)
    assert queue._traffic.destinations["/queue/q"].totals()[:3] == (1, 1, 1)


# -- views ------------------------------------------------------------------------------------


def test_stats_document_has_totals_gauges_rates_and_connections() -> None:
    """
    The /stats document gives counters since the start, gauges now and rates over the latest
    interval.
    """
    world = World()
    world.subscribe("/queue/q", "client")
    world.send_from("/queue/q", b"abcd", b"efgh")
    latest = world.interval(2.0)
    world.send_from("/queue/q", b"ijkl")
    document = stats_document(world.model, latest, "stompbroker/test")
    queue = document["destinations"]["/queue/q"]
    assert (queue["messages_in"], queue["bytes_in"], queue["in_flight"]) == (3, 12, 3)
    assert (queue["messages_in_per_second"], queue["producers"]) == (1.0, 1)
    assert document["broker"]["messages_in"] == 3
    assert document["broker"]["messages_per_second"] == 1.0
    assert document["server"] == "stompbroker/test"
    assert [c["address"] for c in document["connections"]] == ["127.0.0.1:1"]


def test_live_document_states_time_and_interval_once() -> None:
    """The live topic's JSON holds the interval's records without their repeated fields."""
    world = World()
    world.send_from("/topic/a", b"x")
    document = live_document(world.interval(5.0))
    assert document["interval_s"] == 5.0
    assert document["ts"] == "2023-11-14T22:13:25.000Z"
    assert document["broker"]["connections"] == 1
    [destination] = document["destinations"]
    assert destination["destination"] == "/topic/a"
    assert "ts" not in destination and "kind" not in destination


def test_monitor_text_lists_queues_in_stompservers_format() -> None:
    """
    /queue/monitor bodies list each queue with size, dequeued and enqueued lines, as stompserver
    did.
    """
    world = World()
    world.send_from("/queue/a", b"1", b"2")
    world.subscribe("/queue/b")
    world.send_from("/queue/b", b"3")
    world.send_from("/topic/t", b"4")
    assert monitor_text(world.model.snapshot()) == (
        "Queue: /queue/a\nsize: 2\ndequeued: 0\nenqueued: 2\n\n"
        "Queue: /queue/b\nsize: 0\ndequeued: 1\nenqueued: 1\n\n"
    )


def test_live_and_monitor_documents_name_a_vhosts_destinations_as_clients_do() -> None:
    """The live topic's records and /queue/monitor show no internal name of a virtual host."""
    shop = VirtualHost("shop")
    world = World()
    world.send_from(shop.internal("/queue/a"), b"1")
    world.send_from("/queue/a", b"2", b"3")
    records = live_document(world.interval(5.0))["destinations"]
    assert sorted((r["destination"], r.get("vhost", "/"), r["messages_in"]) for r in records) == [
        ("/queue/a", "/", 2),
        ("/queue/a", "shop", 1),
    ]
    assert monitor_text(world.model.snapshot()) == (
        "Queue: shop:/queue/a\nsize: 1\ndequeued: 0\nenqueued: 1\n\n"
        "Queue: /queue/a\nsize: 2\ndequeued: 0\nenqueued: 2\n\n"
    )


@pytest.mark.parametrize("kind", [DestinationRecord, BrokerRecord])
def test_records_validate_as_the_export_schema(kind: type) -> None:
    """
    Every record the sampler makes is a valid record of the export schema (round-trips through
    JSON).
    """
    world = World()
    world.send_from("/queue/q", b"x")
    for made in world.interval().records():
        if isinstance(made, kind):
            assert record_from_dict(record_to_dict(made)) == made


# -- connections ----------------------------------------------------------------------


class Wire:
    """A session's transport that keeps what is written."""

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.transport = StringTransport()
        self.credentials = PLAIN_TCP

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def close(self) -> None:
        """Nothing to close."""

    def pause_reading(self) -> None:
        """Nothing to pause."""

    def resume_reading(self) -> None:
        """Nothing to resume."""

    def kind(self) -> str:
        """A plain TCP connection, as far as statistics know."""
        return "tcp"


def test_connection_stats_count_frames_and_bytes_each_way() -> None:
    """
    Each connection shows its address, version, transport, frames and bytes each way, subscriptions
    and age.
    """
    world = World()
    wire = Wire()
    session = StompSession(world.broker, wire, world.clock, SessionConfig(), "10.0.0.7:5555")
    session.connection_made()
    world.clock.advance(3)
    incoming = (
        b"CONNECT\naccept-version:1.2\nhost:h\n\n\x00SUBSCRIBE\nid:1\ndestination:/topic/t\n\n\x00"
    )
    session.receive_data(incoming)
    world.send_from("/topic/t", b"hello", on=None)
    [described] = world.model.connections()
    assert described.to_dict() == {
        "session": session.session_id,
        "address": "10.0.0.7:5555",
        "user": None,
        "version": "1.2",
        "transport": "tcp",
        "frames_in": 2,
        "frames_out": 2,
        "bytes_in": len(incoming),
        "bytes_out": sum(len(data) for data in wire.written),
        "messages_in": 0,
        "messages_out": 1,
        "subscriptions": 1,
        "connected_since": "2023-11-14T22:13:20.000Z",
    }


def connected(world: World, name: str, version: str, *subscribe: str) -> tuple[StompSession, Wire]:
    """A session of ``version`` over a Wire, connected and subscribed to each pattern given."""
    wire = Wire()
    session = StompSession(world.broker, wire, world.clock, SessionConfig(), f"10.0.0.1:{name}")
    session.connection_made()
    frames = f"CONNECT\naccept-version:{version}\nhost:h\n\n\x00"
    for number, pattern in enumerate(subscribe):
        frames += f"SUBSCRIBE\nid:{number}\ndestination:{pattern}\n\n\x00"
    session.receive_data(frames.encode())
    return session, wire


def test_topic_deliveries_reach_each_connections_counters_exactly() -> None:
    """
    Frames and bytes out of auto-ack topic subscribers, counted per SEND and reported in batches,
    equal what each connection was written, while subscriptions come and go between messages.
    """
    world = World()
    wild, wild_wire = connected(world, "wild", "1.2", "/topic/a.*")
    exact, exact_wire = connected(world, "exact", "1.1", "/topic/a.b")
    world.send_from("/topic/a.b", b"x:1", b"x\n2", b"3", on=None)
    world.send_from("/topic/a.c", b"c1", b"c2", on=None)
    late, late_wire = connected(world, "late", "1.0", "/topic/a.b")
    world.send_from("/topic/a.b", b"all three", on=None)
    exact.receive_data(b"UNSUBSCRIBE\nid:0\n\n\x00")
    world.send_from("/topic/a.b", b"wild and late", headers=(("k", "v:w"),), on=None)
    by_address = {stats.address: stats for stats in world.model.connections()}
    for session, wire in ((wild, wild_wire), (exact, exact_wire), (late, late_wire)):
        stats = by_address[session.peer]
        assert (stats.frames_out, stats.bytes_out) == (
            len(wire.written),
            sum(len(data) for data in wire.written),
        )
    assert by_address[wild.peer].frames_out == 1 + 7


@pytest.mark.integration
def test_the_schema_module_loads_no_twisted() -> None:
    """
    Importing stompbroker.stats.schema (as the Spark drivers do) loads neither Twisted nor the
    broker, but for the module of counter names that imports nothing: the package imports its
    embedding API lazily.
    """
    check = (
        "import sys, stompbroker.stats.schema, stompbroker.stats.export; "
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('twisted', 'autobahn')"
        " or m.startswith('stompbroker.broker')"
        " and m not in ('stompbroker.broker', 'stompbroker.broker.flow',"
        " 'stompbroker.broker.flow.counter_names')); "
        "print(loaded); sys.exit(1 if loaded else 0)"
    )
    finished = run_python("-c", check)
    assert finished.returncode == 0, finished.stdout
    assert stompbroker.Broker is Broker
