"""
Selectors wired into the broker: SUBSCRIBE ``selector`` on topics and queues,
through real sessions on an in-process broker.
"""

from __future__ import annotations

import pytest

from stompbroker.broker.features.selecting import SelectingSubscriber
from stompbroker.broker.queueing import dispatch
from tests.support.broker import World


def bodies(frames: list) -> list[bytes]:
    """The bodies of MESSAGE frames, in order."""
    return [frame.body for frame in frames]


def test_a_topic_subscription_with_a_selector_gets_only_what_it_selects() -> None:
    """Each subscription of a topic gets the messages its selector selects; one without gets all."""
    world = World()
    picky, everyone, producer = world.client(), world.client(), world.client()
    picky.send_frame("SUBSCRIBE", id="p", destination="/topic/t", selector="amount > 100")
    everyone.send_frame("SUBSCRIBE", id="e", destination="/topic/t")
    for amount in ("50", "150", "lots"):
        producer.send_frame("SEND", amount.encode(), destination="/topic/t", amount=amount)
    assert bodies(picky.messages()) == [b"150"]
    assert bodies(everyone.messages()) == [b"50", b"150", b"lots"]


def test_a_client_ack_topic_subscription_with_a_selector_queues_only_what_it_selects() -> None:
    """With client acknowledgement the selector filters before the subscription's own queue."""
    world = World()
    picky, producer = world.client(), world.client()
    picky.send_frame(
        "SUBSCRIBE", id="p", destination="/topic/t.*", ack="client", selector="kind = 'a'"
    )
    for kind in ("a", "b", "a"):
        producer.send_frame("SEND", kind.encode(), destination="/topic/t.x", kind=kind)
    received = picky.messages()
    assert bodies(received) == [b"a", b"a"]
    picky.ack(received[-1])
    assert world.broker.counters.acknowledged == 2


def test_selected_topic_deliveries_are_counted_once_each() -> None:
    """Traffic counts a selecting subscription's deliveries, not the messages it skipped."""
    world = World()
    picky, producer = world.client(), world.client()
    picky.send_frame("SUBSCRIBE", id="p", destination="/topic/t", selector="n = 1")
    for n in ("1", "2", "1"):
        producer.send_frame("SEND", b"x", destination="/topic/t", n=n)
    counted = world.broker.traffic.destinations["/topic/t"]
    assert (counted.messages_in, counted.messages_delivered) == (3, 2)


def test_unsubscribe_takes_the_selecting_subscriber_out_of_the_tree() -> None:
    """After UNSUBSCRIBE nothing stands in the topic tree for the subscription."""
    world = World()
    client = world.client()
    client.send_frame("SUBSCRIBE", id="p", destination="/topic/t", selector="n = 1")
    [standing] = world.broker.engine.topics.match("/topic/t")
    assert isinstance(standing, SelectingSubscriber)
    client.send_frame("UNSUBSCRIBE", id="p")
    assert world.broker.engine.topics.match("/topic/t") == ()


def test_a_queue_message_nobody_selects_waits_without_blocking_the_others() -> None:
    """A message no consumer selects stays queued; those behind it are delivered."""
    world = World()
    reds, producer = world.client(), world.client()
    reds.send_frame("SUBSCRIBE", id="r", destination="/queue/q", selector="colour = 'red'")
    for colour in ("blue", "red", "blue", "red"):
        producer.send_frame("SEND", colour.encode(), destination="/queue/q", colour=colour)
    assert bodies(reds.messages()) == [b"red", b"red"]
    assert world.broker.engine.depth("/queue/q") == 2
    blues = world.client()
    blues.send_frame("SUBSCRIBE", id="b", destination="/queue/q", selector="colour = 'blue'")
    assert bodies(blues.messages()) == [b"blue", b"blue"]


def test_queue_consumers_with_selectors_share_what_several_select_round_robin() -> None:
    """Messages that both consumers select alternate between them, as without selectors."""
    world = World()
    first, second, producer = world.client(), world.client(), world.client()
    first.send_frame("SUBSCRIBE", id="a", destination="/queue/q", selector="n > 0")
    second.send_frame("SUBSCRIBE", id="b", destination="/queue/q")
    for n in range(4):
        producer.send_frame("SEND", str(n).encode(), destination="/queue/q", n=str(n))
    assert bodies(first.messages()) == [b"1", b"3"]
    assert bodies(second.messages()) == [b"0", b"2"]


def test_a_full_consumer_does_not_lose_its_selected_messages() -> None:
    """A selected message waits while its consumer's window is full, and comes after an ACK."""
    world = World()
    consumer, producer = world.client(), world.client()
    consumer.send_frame(
        "SUBSCRIBE",
        id="a",
        destination="/queue/q",
        ack="client-individual",
        prefetch_count="1",
        selector="n <> 0",
    )
    for n in range(4):
        producer.send_frame("SEND", str(n).encode(), destination="/queue/q", n=str(n))
    [one] = consumer.messages()
    consumer.ack(one)
    [two] = consumer.messages()
    consumer.ack(two)
    assert bodies(consumer.messages()) == [b"3"]


def test_the_scan_past_unselected_messages_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A dispatch puts aside at most SCAN_LIMIT messages; one further back waits (documented)."""
    monkeypatch.setattr(dispatch, "SCAN_LIMIT", 3)
    world = World()
    producer = world.client()
    for body in (b"x", b"x", b"x", b"wanted"):
        producer.send_frame("SEND", body, destination="/queue/q", n="1" if body == b"x" else "2")
    consumer = world.client()
    consumer.send_frame("SUBSCRIBE", id="a", destination="/queue/q", selector="n = 2")
    assert consumer.messages() == []
    assert world.broker.engine.depth("/queue/q") == 4


def test_the_plain_dispatch_comes_back_when_the_last_selector_leaves() -> None:
    """A queue drops its feature dispatch once no consumer has a selector."""
    world = World()
    client = world.client()
    client.send_frame("SUBSCRIBE", id="a", destination="/queue/q", selector="n = 1")
    client.send_frame("SUBSCRIBE", id="b", destination="/queue/q")
    queue = world.broker.engine.queues["/queue/q"]
    assert queue._features is not None
    client.send_frame("UNSUBSCRIBE", id="a")
    assert queue._features is None


def test_a_bad_selector_is_an_error_naming_its_column() -> None:
    """A selector that does not parse is an ERROR that says where and what was expected."""
    world = World()
    client = world.client()
    client.send_frame("SUBSCRIBE", id="a", destination="/queue/q", selector="n = ")
    [error] = client.frames()
    assert error.command == "ERROR"
    assert "column 5" in (error.get("message") or "")
    assert "expected" in (error.get("message") or "")


def test_a_selector_on_a_durable_subscription_is_refused() -> None:
    """Durable subscriptions outlive the SUBSCRIBE that would carry a selector: an ERROR."""
    world = World()
    client = world.client(client_id="c")
    client.send_frame(
        "SUBSCRIBE",
        exact=(("activemq.subscriptionName", "d"),),
        id="a",
        destination="/topic/t",
        selector="n = 1",
    )
    [error] = client.frames()
    assert error.command == "ERROR"
    assert "durable" in (error.get("message") or "")
