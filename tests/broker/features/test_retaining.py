"""
Retained messages wired into the broker (:mod:`stompbroker.broker.features.retaining`, the router
and the consumers): ``retain:set`` keeps a topic's last value, a new subscription gets it
first with ``retained:true``, ``retain:remove`` forgets it; persistent ones are stored.
"""

from __future__ import annotations

import pytest

from stompbroker.broker.features.retain_rules import RetainedMessages
from stompbroker.broker.features.retaining import Retaining
from tests.support.broker import World
from tests.support.persistence import PERSISTENT, Setup, send

SET = (("retain", "set"),)
REMOVE = (("retain", "remove"),)


def test_a_new_subscriber_gets_the_retained_message_first() -> None:
    """The copy comes before anything published later, with retained:true and no retain."""
    world = World()
    current, producer = world.client(), world.client()
    current.send_frame("SUBSCRIBE", id="t", destination="/topic/status")
    producer.send_frame("SEND", b"up", SET, destination="/topic/status")
    assert [m.body for m in current.messages()] == [b"up"]
    newcomer = world.client()
    newcomer.send_frame("SUBSCRIBE", id="t", destination="/topic/status")
    producer.send_frame("SEND", b"next", destination="/topic/status")
    first, second = newcomer.messages()
    assert (first.body, first.get("retained"), first.get("retain")) == (b"up", "true", None)
    assert (second.body, second.get("retained")) == (b"next", None)


def test_a_wildcard_subscriber_gets_every_matching_retained_message_oldest_first() -> None:
    """A pattern gets the retained message of each topic it matches, in retention order."""
    world = World()
    producer = world.client()
    producer.send_frame("SEND", b"eu", SET, destination="/topic/prices.eu")
    producer.send_frame("SEND", b"other", SET, destination="/topic/weather.eu")
    producer.send_frame("SEND", b"us", SET, destination="/topic/prices/us")
    reader = world.client()
    reader.send_frame("SUBSCRIBE", id="t", destination="/topic/prices.*")
    assert [m.body for m in reader.messages()] == [b"eu", b"us"]


def test_a_later_set_replaces_and_remove_forgets() -> None:
    """The last retain:set wins; after retain:remove a new subscriber gets nothing first."""
    world = World()
    producer = world.client()
    producer.send_frame("SEND", b"1", SET, destination="/topic/s")
    producer.send_frame("SEND", b"2", SET, destination="/topic/s")
    reader = world.client()
    reader.send_frame("SUBSCRIBE", id="t", destination="/topic/s")
    assert [m.body for m in reader.messages()] == [b"2"]
    producer.send_frame("SEND", b"", REMOVE, destination="/topic/s")
    assert [m.body for m in reader.messages()] == [b""]
    late = world.client()
    late.send_frame("SUBSCRIBE", id="t", destination="/topic/s")
    assert late.frames() == []


def test_a_client_ack_subscriber_gets_it_through_its_queue_and_acks_it() -> None:
    """With ack:client-individual the retained copy is delivered and settled like any message."""
    world = World()
    producer = world.client()
    producer.send_frame("SEND", b"v", SET, destination="/topic/s")
    reader = world.client()
    reader.send_frame("SUBSCRIBE", id="t", destination="/topic/s", ack="client-individual")
    [copy] = reader.messages()
    assert copy.get("retained") == "true"
    reader.ack(copy, receipt="r")
    [receipt] = reader.frames()
    assert receipt.command == "RECEIPT"


def test_a_selector_filters_the_retained_message_too() -> None:
    """A subscription's selector applies to the retained copy as to a published message."""
    world = World()
    producer = world.client()
    producer.send_frame("SEND", b"v", SET + (("kind", "b"),), destination="/topic/s")
    picky, open_ = world.client(), world.client()
    picky.send_frame("SUBSCRIBE", id="t", destination="/topic/s", selector="kind = 'a'")
    open_.send_frame("SUBSCRIBE", id="t", destination="/topic/s", selector="kind = 'b'")
    assert picky.frames() == []
    assert [m.body for m in open_.messages()] == [b"v"]


def test_a_new_durable_subscription_gets_it_but_a_resumed_one_does_not() -> None:
    """Durable subscriptions get the retained message when created, not each time they resume."""
    world = World()
    producer = world.client()
    producer.send_frame("SEND", b"v", SET, destination="/topic/s")
    first = world.client(client_id="c1")
    first.send_frame("SUBSCRIBE", id="d", destination="/topic/s", durable_subscription_name="n")
    assert [m.body for m in first.messages()] == [b"v"]
    first.send_frame("DISCONNECT")
    again = world.client(client_id="c1")
    again.send_frame("SUBSCRIBE", id="d", destination="/topic/s", durable_subscription_name="n")
    assert again.frames() == []


@pytest.mark.parametrize(
    "destination, headers, expected",
    [
        ("/queue/q", SET, "retain is for topics only"),
        ("/topic/s", (("retain", "yes"),), "invalid retain header"),
    ],
)
def test_bad_retain_is_an_error_and_routes_nothing(
    destination: str, headers: tuple[tuple[str, str], ...], expected: str
) -> None:
    """retain on a queue, or a value other than set/true/remove, is an ERROR; nothing moves."""
    world = World()
    reader, producer = world.client(), world.client()
    reader.send_frame("SUBSCRIBE", id="t", destination="/topic/s")
    producer.send_frame("SEND", b"x", headers, destination=destination)
    [error] = producer.frames()
    assert error.command == "ERROR" and expected in (error.get("message") or "")
    assert reader.frames() == []
    assert world.broker.engine.depth("/queue/q") == 0
    assert len(world.broker.engine.retained or ()) == 0


def test_too_many_retained_topics_refuses_the_send_and_routes_nothing() -> None:
    """Past the limit a retain:set on a new topic is an ERROR, and it is not published."""
    world = World()
    limited = RetainedMessages(max_topics=1)
    world.broker.router.send_headers.retaining = Retaining(limited, None)
    reader, producer = world.client(), world.client()
    reader.send_frame("SUBSCRIBE", id="t", destination="/topic/#")
    producer.send_frame("SEND", b"1", SET, destination="/topic/a")
    producer.send_frame("SEND", b"2", SET, destination="/topic/b")
    [error] = producer.frames()
    assert "too many retained messages" in (error.get("message") or "")
    assert [m.body for m in reader.messages()] == [b"1"]


# -- persistent retained messages -------------------------------------------------------


def test_a_persistent_retained_message_survives_a_restart(setup: Setup) -> None:
    """retain:set with persistent:true is stored, and a subscriber after a restart gets it."""
    broker = setup.broker()
    [waiting] = send(broker, "/topic/s", b"kept", headers=PERSISTENT + SET)
    assert waiting is not None
    broker = setup.restart()
    inbox = setup.subscribe(broker, "/topic/s", ack_mode="auto")
    [copy] = inbox.received
    assert (copy.body, dict(copy.headers).get("retained")) == (b"kept", "true")


def test_a_non_persistent_replacement_or_a_remove_clears_the_stored_copy(setup: Setup) -> None:
    """A persistent retained message replaced or removed does not come back after a restart."""
    broker = setup.broker()
    send(broker, "/topic/a", b"old", headers=PERSISTENT + SET)
    send(broker, "/topic/a", b"new", headers=SET)
    send(broker, "/topic/b", b"b", headers=PERSISTENT + SET)
    send(broker, "/topic/b", b"", headers=REMOVE)
    setup.settle()
    assert setup.stored().retained == ()
    broker = setup.restart()
    inbox = setup.subscribe(broker, "/topic/#", ack_mode="auto")
    assert inbox.received == []


def test_an_expired_stored_retained_message_is_forgotten_at_start(setup: Setup) -> None:
    """A persistent retained message that expired while the broker was down is not given back."""
    broker = setup.broker()
    send(broker, "/topic/s", b"x", headers=PERSISTENT + SET + (("expiration", "1000"),))
    broker = setup.restart(down=5)
    setup.settle()
    assert setup.stored().retained == ()
    inbox = setup.subscribe(broker, "/topic/s", ack_mode="auto")
    assert inbox.received == []


def test_retain_on_a_composite_with_a_queue_sends_to_no_part() -> None:
    """retain with a queue among a composite's parts is refused before the topic part gets it."""
    world = World()
    reader, producer = world.client(), world.client()
    reader.send_frame("SUBSCRIBE", id="t", destination="/topic/s")
    producer.send_frame("SEND", b"x", SET, destination="/topic/s,/queue/q")
    [error] = producer.frames()
    assert error.get("message") == "retain is for topics only"
    assert reader.frames() == []
    assert len(world.broker.engine.retained or ()) == 0
