"""
Queue browsers (:mod:`stompbroker.broker.features.browsing`): SUBSCRIBE ``browser:true``
through real sessions on an in-process broker, Apollo's convention.
"""

from __future__ import annotations

from tests.support.broker import World


def test_a_browser_gets_copies_in_delivery_order_then_the_end_marker() -> None:
    """Every waiting message, higher priority first, oldest first within one; then browser:end."""
    world = World()
    producer, browser = world.client(), world.client()
    for body, priority in (("a", "4"), ("b", "9"), ("c", "4")):
        producer.send_frame("SEND", body.encode(), destination="/queue/q", priority=priority)
    browser.send_frame("SUBSCRIBE", id="b", destination="/queue/q", browser="true")
    *copies, end = browser.messages()
    assert [frame.body for frame in copies] == [b"b", b"a", b"c"]
    assert (end.get("browser"), end.body, end.get("subscription")) == ("end", b"", "b")
    assert world.broker.engine.depth("/queue/q") == 3


def test_browsing_consumes_nothing() -> None:
    """After a browse a consumer still gets every message, and the browser gets no more."""
    world = World()
    producer, browser, consumer = world.client(), world.client(), world.client()
    producer.send_frame("SEND", b"1", destination="/queue/q")
    browser.send_frame("SUBSCRIBE", id="b", destination="/queue/q", browser="true")
    browser.messages()
    consumer.send_frame("SUBSCRIBE", id="c", destination="/queue/q")
    producer.send_frame("SEND", b"2", destination="/queue/q")
    assert [frame.body for frame in consumer.messages()] == [b"1", b"2"]
    assert browser.frames() == []
    browser.send_frame("UNSUBSCRIBE", id="b", receipt="r")
    assert [frame.command for frame in browser.frames()] == ["RECEIPT"]


def test_browsing_an_empty_queue_gets_the_end_marker_and_leaves_no_queue() -> None:
    """An empty (or unknown) queue browses as the end marker alone, and is not kept."""
    world = World()
    browser = world.client()
    browser.send_frame("SUBSCRIBE", id="b", destination="/queue/none", browser="true")
    [end] = browser.messages()
    assert end.get("browser") == "end"
    assert "/queue/none" not in world.broker.engine.queues


def test_a_receipt_comes_before_the_copies() -> None:
    """As for any SUBSCRIBE, the RECEIPT precedes what the subscription is sent."""
    world = World()
    producer, browser = world.client(), world.client()
    producer.send_frame("SEND", b"1", destination="/queue/q")
    browser.send_frame("SUBSCRIBE", id="b", destination="/queue/q", browser="true", receipt="r")
    assert [frame.command for frame in browser.frames()] == ["RECEIPT", "MESSAGE", "MESSAGE"]


def test_browser_false_is_an_ordinary_subscription() -> None:
    """browser:false consumes as any SUBSCRIBE does."""
    world = World()
    producer, consumer = world.client(), world.client()
    producer.send_frame("SEND", b"1", destination="/queue/q")
    consumer.send_frame("SUBSCRIBE", id="c", destination="/queue/q", browser="false")
    assert [frame.body for frame in consumer.messages()] == [b"1"]
    assert world.broker.engine.depth("/queue/q") == 0


def test_a_browser_of_a_temporary_queue_sees_its_own_queue() -> None:
    """A connection may browse its own temporary queue."""
    world = World()
    client = world.client()
    client.send_frame("SEND", b"1", destination="/temp-queue/mine")
    client.send_frame("SUBSCRIBE", id="b", destination="/temp-queue/mine", browser="true")
    assert [frame.get("browser") for frame in client.messages()] == [None, "end"]


def refused(headers: dict[str, str]) -> str | None:
    """The ERROR message a browser SUBSCRIBE with ``headers`` gets."""
    world = World()
    client = world.client()
    client.send_frame("SUBSCRIBE", id="b", **headers)
    [error] = client.frames()
    assert error.command == "ERROR"
    return error.get("message")


def test_a_topic_cannot_be_browsed() -> None:
    """browser:true on a topic is an ERROR: a topic holds nothing to browse."""
    assert refused({"destination": "/topic/t", "browser": "true"}) == "only queues can be browsed"


def test_a_browser_must_be_auto_ack() -> None:
    """A browser acknowledges nothing, so another ack mode is an ERROR."""
    message = refused({"destination": "/queue/q", "browser": "true", "ack": "client"})
    assert message == "a queue browser acknowledges nothing"


def test_a_bad_browser_header_is_an_error() -> None:
    """browser must be true or false."""
    assert refused({"destination": "/queue/q", "browser": "yes"}) == "invalid browser header"
