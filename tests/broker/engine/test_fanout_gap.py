"""
The topic fan-out tells every topic subscription of this process of a gap
(TopicFanout.mark_gap): direct subscribers, those behind a selector and the
consumers of a topic subscription's queue, once each, and counts them.
"""

from __future__ import annotations

from twisted.internet.task import Clock

from stompbroker.broker.engine.local import LocalEngine
from stompbroker.broker.features.selectors import compile_selector
from stompbroker.broker.routing.topic_tree import SubscriptionTree
from tests.support.broker import Inbox


def test_members_lists_every_subscriber_once_whatever_its_patterns() -> None:
    tree: SubscriptionTree[str] = SubscriptionTree()
    tree.add("/topic/a.b", "exact")
    tree.add("/topic/a.*", "star")
    tree.add("/topic/#", "trailing")
    tree.add("/topic/x.>", "trailing")
    tree.add("/topic/a.b", "star")
    assert sorted(tree.members()) == ["exact", "star", "trailing"]
    assert SubscriptionTree().members() == []


def test_every_kind_of_topic_subscription_is_told_once() -> None:
    engine = LocalEngine(Clock())
    direct, selected, acked = Inbox("/topic/a", "auto"), Inbox("/topic/#", "auto"), Inbox()
    engine.add_subscriber("/topic/a", direct)
    engine.add_subscriber("/topic/#", selected, compile_selector("n > 1"))
    queue = engine.subscription_queue("/topic/*")
    queue.add_consumer(acked, 10, -1)
    assert engine.fanout.mark_gap() == 3
    assert (direct.gaps, selected.gaps, acked.gaps) == (1, 1, 1)
    engine.remove_subscriber("/topic/a", direct)
    assert engine.fanout.mark_gap() == 2
    assert direct.gaps == 1


def test_the_local_engine_misses_no_topic_message() -> None:
    assert LocalEngine(Clock()).topic_gaps() is None
