"""
Composite destinations wired into the router and the session: one SEND to
``/queue/a,/topic/b`` reaches each part as if sent to it alone, and needs the
write right on every part.
"""

from __future__ import annotations

from twisted.internet.defer import succeed

from stompbroker.protocol.session import SessionConfig
from tests.support.broker import World
from tests.support.session import RecordingAccess, connected, error_of, frame


def test_a_composite_send_reaches_every_part() -> None:
    """Each part gets the message, named by that part, as if the SEND had named it alone."""
    world = World()
    topic_reader, queue_reader, producer = world.client(), world.client(), world.client()
    topic_reader.send_frame("SUBSCRIBE", id="t", destination="/topic/prices.*")
    queue_reader.send_frame("SUBSCRIBE", id="q", destination="/queue/audit")
    producer.send_frame(
        "SEND", b"42", destination="/queue/audit, /topic/prices.eur", receipt="r", n="1"
    )
    [receipt] = producer.frames()
    assert receipt.get("receipt-id") == "r"
    [from_topic] = topic_reader.messages()
    [from_queue] = queue_reader.messages()
    assert (from_topic.body, from_topic.get("destination"), from_topic.get("n")) == (
        b"42",
        "/topic/prices.eur",
        "1",
    )
    assert (from_queue.body, from_queue.get("destination")) == (b"42", "/queue/audit")


def test_a_part_named_twice_is_sent_to_once() -> None:
    """Duplicate parts (a topic in either spelling) get one copy."""
    world = World()
    reader, producer = world.client(), world.client()
    reader.send_frame("SUBSCRIBE", id="t", destination="/topic/a.b")
    producer.send_frame("SEND", b"x", destination="/topic/a.b,/topic/a/b")
    assert len(reader.messages()) == 1


def test_an_empty_or_bad_part_is_an_error_naming_it() -> None:
    """A doubled comma or an unknown kind of part is an ERROR that says which part."""
    world = World()
    producer = world.client()
    producer.send_frame("SEND", b"x", destination="/queue/a,,/queue/b")
    [error] = producer.frames()
    assert error.command == "ERROR"
    assert "part 2" in (error.get("message") or "")
    other = world.client()
    other.send_frame("SEND", b"x", destination="/queue/a,/nowhere/b")
    [error] = other.frames()
    assert "part 2" in (error.get("message") or "")
    assert world.broker.engine.depth("/queue/a") == 0


def test_persistent_composite_sends_are_filed_under_each_queue() -> None:
    """Each queue part of a persistent composite SEND keeps its own copy."""
    world = World()
    producer = world.client()
    producer.send_frame("SEND", b"x", destination="/queue/a,/queue/b", persistent="true")
    assert (world.broker.engine.depth("/queue/a"), world.broker.engine.depth("/queue/b")) == (1, 1)


def test_a_composite_send_needs_the_write_right_on_every_part() -> None:
    """The write right is checked part by part; one refused part refuses the SEND."""
    access = RecordingAccess(refused="/queue/secret")
    config = SessionConfig(authenticator=lambda *_: succeed("who"), access=access)
    session, transport, _, broker = connected(config=config)
    session.receive_data(
        frame("SEND", ("destination", "/topic/open, /queue/secret"), ("receipt", "r"))
    )
    assert access.checks == [("who", "write", "/topic/open"), ("who", "write", "/queue/secret")]
    assert error_of(transport).get("receipt-id") == "r"
    assert broker.named("send") == []
