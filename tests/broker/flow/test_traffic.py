"""Tests of the traffic counters' batched reports to direct topic subscriptions."""

from __future__ import annotations

from twisted.internet.task import Clock

from stompbroker.broker.flow.traffic import TopicTree, Traffic
from stompbroker.broker.queueing.delivery import DeliveryCounters, DeliveryPolicy
from stompbroker.broker.queueing.queues import WorkerQueue
from stompbroker.protocol.message import Message
from tests.support.broker import Inbox


def routed(traffic: Traffic, destination: str, tails: dict[str, bytes]) -> None:
    """Note one topic SEND to ``destination`` whose deliveries encoded ``tails``."""
    message = Message(destination, "m", (), b"body")
    message.wire = dict(tails)
    traffic.routed_directly(destination, traffic.of(destination), message)


def test_direct_subscriptions_are_told_their_deliveries_through_isubscriber() -> None:
    """report_deliveries calls count_deliveries on each matching subscriber with count and tails."""
    traffic = Traffic()
    topics = TopicTree(WorkerQueue, traffic)
    inbox = Inbox("/topic/a", "auto")
    topics.add("/topic/a", inbox)
    queue = WorkerQueue("/topic/a", Clock(), DeliveryPolicy(), DeliveryCounters(), print)
    topics.add("/topic/a", queue)
    routed(traffic, "/topic/a", {"1.2": b"12345"})
    routed(traffic, "/topic/a", {"1.2": b"123"})
    traffic.report_deliveries(topics)
    assert inbox.counted == [(2, {"1.2": 8})]
    traffic.report_deliveries(topics)
    assert inbox.counted == [(2, {"1.2": 8})]


def test_a_subscription_change_reports_only_what_its_pattern_matches() -> None:
    """Adding a direct subscription tells the subscriptions of the destinations it matches only."""
    traffic = Traffic()
    topics = TopicTree(WorkerQueue, traffic)
    on_a, on_b = Inbox("/topic/a", "auto"), Inbox("/topic/b", "auto")
    topics.add("/topic/a", on_a)
    topics.add("/topic/b", on_b)
    routed(traffic, "/topic/a", {"1.2": b"x"})
    routed(traffic, "/topic/b", {"1.2": b"yy"})
    topics.add("/topic/a", Inbox("/topic/a", "auto", subscription_id="late"))
    assert (on_a.counted, on_b.counted) == ([(1, {"1.2": 1})], [])
