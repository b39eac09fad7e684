"""
Exclusive and prioritised consumers and message groups wired into a queue's dispatch,
through real sessions on an in-process broker (``activemq.exclusive``,
``x-single-active-consumer``, ``activemq.priority``/``x-priority``, ``JMSXGroupID``).
"""

from __future__ import annotations

from stompbroker.broker.queueing.dispatch import FeatureDispatch
from tests.support.broker import Client, World

EXCLUSIVE = (("activemq.exclusive", "true"),)
PRIORITY = "activemq.priority"


def bodies(frames: list) -> list[bytes]:
    """The bodies of MESSAGE frames, in order."""
    return [frame.body for frame in frames]


def send(producer: Client, destination: str, *items: str, **headers: str) -> None:
    """One SEND per item, the item as body."""
    for item in items:
        producer.send_frame("SEND", item.encode(), destination=destination, **headers)


def send_grouped(producer: Client, destination: str, *items: str) -> None:
    """One SEND per ``GROUP:BODY`` item, in the group named before the colon."""
    for item in items:
        group, _, body = item.partition(":")
        producer.send_frame(
            "SEND", body.encode(), destination=destination, exact=(("JMSXGroupID", group),)
        )


def queue_of(world: World, destination: str):
    """The broker's queue of ``destination``."""
    return world.broker.engine.queues[destination]


def test_an_exclusive_consumer_gets_everything_and_the_next_takes_over() -> None:
    """activemq.exclusive: one consumer gets all; when it leaves, its unacked go to the next."""
    world = World()
    first, second, producer = world.client(), world.client(), world.client()
    first.send_frame(
        "SUBSCRIBE",
        id="a",
        destination="/queue/q",
        ack="client-individual",
        exact=EXCLUSIVE,
    )
    second.send_frame(
        "SUBSCRIBE",
        id="b",
        destination="/queue/q",
        ack="client-individual",
        exact=EXCLUSIVE,
    )
    send(producer, "/queue/q", "1", "2", "3")
    received = first.messages()
    assert bodies(received) == [b"1", b"2", b"3"] and second.messages() == []
    first.ack(received[0])
    first.send_frame("UNSUBSCRIBE", id="a")
    redelivered = second.messages()
    assert bodies(redelivered) == [b"2", b"3"]
    assert all(frame.get("redelivered") == "true" for frame in redelivered)


def test_a_full_exclusive_consumer_holds_the_queue_back() -> None:
    """Messages wait while the exclusive consumer's window is full; a standby gets none."""
    world = World()
    active, standby, producer = world.client(), world.client(), world.client()
    active.send_frame(
        "SUBSCRIBE",
        id="a",
        destination="/queue/q",
        ack="client-individual",
        prefetch_count="1",
        exact=EXCLUSIVE,
    )
    standby.send_frame("SUBSCRIBE", id="b", destination="/queue/q", ack="client-individual")
    send(producer, "/queue/q", "1", "2")
    [one] = active.messages()
    assert standby.messages() == [] and len(queue_of(world, "/queue/q").pending) == 1
    active.ack(one)
    assert bodies(active.messages()) == [b"2"]


def test_single_active_consumer_is_declared_by_the_first_subscribe() -> None:
    """x-single-active-consumer on the queue's first SUBSCRIBE makes every consumer exclusive."""
    world = World()
    first, second, producer = world.client(), world.client(), world.client()
    first.send_frame("SUBSCRIBE", id="a", destination="/queue/q", x_single_active_consumer="true")
    second.send_frame("SUBSCRIBE", id="b", destination="/queue/q")
    send(producer, "/queue/q", "1", "2")
    assert bodies(first.messages()) == [b"1", b"2"] and second.messages() == []
    first.send_frame("UNSUBSCRIBE", id="a")
    send(producer, "/queue/q", "3")
    assert bodies(second.messages()) == [b"3"]


def test_a_later_single_active_declaration_changes_nothing() -> None:
    """A SUBSCRIBE declaring single-active on a queue that has consumers is round-robin still."""
    world = World()
    first, second, producer = world.client(), world.client(), world.client()
    first.send_frame("SUBSCRIBE", id="a", destination="/queue/q")
    second.send_frame("SUBSCRIBE", id="b", destination="/queue/q", x_single_active_consumer="true")
    send(producer, "/queue/q", "1", "2")
    assert bodies(first.messages()) == [b"1"] and bodies(second.messages()) == [b"2"]


def test_higher_priority_consumers_with_room_are_served_first() -> None:
    """x-priority: the higher consumer gets messages until full; then the lower one."""
    world = World()
    low, high, producer = world.client(), world.client(), world.client()
    low.send_frame("SUBSCRIBE", id="l", destination="/queue/q", ack="client-individual")
    high.send_frame(
        "SUBSCRIBE",
        id="h",
        destination="/queue/q",
        ack="client-individual",
        prefetch_count="2",
        x_priority="10",
    )
    send(producer, "/queue/q", "1", "2", "3")
    assert bodies(high.messages()) == [b"1", b"2"]
    assert bodies(low.messages()) == [b"3"]


def test_activemq_priority_means_the_same() -> None:
    """activemq.priority orders consumers as x-priority does."""
    world = World()
    low, high, producer = world.client(), world.client(), world.client()
    low.send_frame("SUBSCRIBE", id="l", destination="/queue/q", exact=((PRIORITY, "1"),))
    high.send_frame("SUBSCRIBE", id="h", destination="/queue/q", exact=((PRIORITY, "5"),))
    send(producer, "/queue/q", "1", "2")
    assert bodies(high.messages()) == [b"1", b"2"] and low.messages() == []


def test_a_bad_consumer_priority_is_an_error() -> None:
    """A priority that is not an integer is an ERROR naming the header; nothing is subscribed."""
    world = World()
    client = world.client()
    client.send_frame("SUBSCRIBE", id="x", destination="/queue/q", x_priority="high")
    [error] = client.frames()
    assert error.command == "ERROR" and error.get("message") == "invalid x-priority header"
    assert "/queue/q" not in world.broker.engine.queues


def test_the_plain_dispatch_comes_back_when_option_consumers_leave() -> None:
    """A queue drops its feature dispatch once no consumer asks for priorities."""
    world = World()
    special, plain = world.client(), world.client()
    special.send_frame("SUBSCRIBE", id="s", destination="/queue/q", x_priority="3")
    plain.send_frame("SUBSCRIBE", id="p", destination="/queue/q")
    queue = queue_of(world, "/queue/q")
    assert isinstance(queue._features, FeatureDispatch)
    special.send_frame("UNSUBSCRIBE", id="s")
    assert queue._features is None


def test_a_group_goes_to_one_consumer_in_order() -> None:
    """JMSXGroupID: each group's messages all go to one consumer, in order; the first is marked."""
    world = World()
    a, b, producer = world.client(), world.client(), world.client()
    a.send_frame("SUBSCRIBE", id="a", destination="/queue/q")
    b.send_frame("SUBSCRIBE", id="b", destination="/queue/q")
    send_grouped(producer, "/queue/q", "x:1", "y:1", "x:2", "x:3", "y:2")
    got_a, got_b = a.messages(), b.messages()
    assert bodies(got_a) == [b"1", b"2", b"3"] and bodies(got_b) == [b"1", b"2"]
    assert {f.get("JMSXGroupID") for f in got_a} == {"x"}
    assert [f.get("JMSXGroupFirstForConsumer") for f in got_a] == ["true", None, None]


def test_a_full_owner_does_not_stall_other_groups_and_keeps_its_order() -> None:
    """A group whose owner is full waits in order; other groups' messages pass it."""
    world = World()
    a, b, producer = world.client(), world.client(), world.client()
    a.send_frame(
        "SUBSCRIBE", id="a", destination="/queue/q", ack="client-individual", prefetch_count="1"
    )
    b.send_frame("SUBSCRIBE", id="b", destination="/queue/q", ack="client-individual")
    send_grouped(producer, "/queue/q", "x:1", "x:2", "x:3", "y:1", "y:2")
    [x1] = a.messages()
    assert bodies(b.messages()) == [b"1", b"2"]
    a.ack(x1)
    [x2] = a.messages()
    assert x2.body == b"2"
    a.ack(x2)
    assert bodies(a.messages()) == [b"3"]


def test_a_nacked_grouped_message_comes_back_to_its_owner_first() -> None:
    """After a NACK the owner gets the message again before the group's later messages."""
    world = World()
    a, b, producer = world.client(), world.client(), world.client()
    a.send_frame(
        "SUBSCRIBE", id="a", destination="/queue/q", ack="client-individual", prefetch_count="2"
    )
    b.send_frame("SUBSCRIBE", id="b", destination="/queue/q", ack="client-individual")
    send_grouped(producer, "/queue/q", "x:1", "x:2", "x:3")
    x1, x2 = a.messages()
    a.ack(x1, "NACK")
    again = a.messages()
    assert bodies(again) == [b"1"] and again[0].get("redelivered") == "true"
    a.ack(x2)
    a.ack(again[0])
    assert bodies(a.messages()) == [b"3"] and b.messages() == []


def test_a_group_moves_when_its_owner_leaves() -> None:
    """When the owner leaves, its unacked messages and the group go to another consumer, marked."""
    world = World()
    a, b, producer = world.client(), world.client(), world.client()
    a.send_frame("SUBSCRIBE", id="a", destination="/queue/q", ack="client-individual")
    send_grouped(producer, "/queue/q", "x:1", "x:2")
    a.messages()
    b.send_frame("SUBSCRIBE", id="b", destination="/queue/q", ack="client-individual")
    a.send_frame("UNSUBSCRIBE", id="a")
    send_grouped(producer, "/queue/q", "x:3")
    moved = b.messages()
    assert bodies(moved) == [b"1", b"2", b"3"]
    assert [f.get("JMSXGroupFirstForConsumer") for f in moved] == ["true", None, None]


def test_sequence_minus_one_closes_a_group() -> None:
    """JMSXGroupSeq:-1 goes to the owner; the group's next message picks an owner afresh."""
    world = World()
    a, b, producer = world.client(), world.client(), world.client()
    a.send_frame("SUBSCRIBE", id="a", destination="/queue/q")
    b.send_frame("SUBSCRIBE", id="b", destination="/queue/q")
    send_grouped(producer, "/queue/q", "x:1")
    producer.send_frame(
        "SEND", b"2", destination="/queue/q", exact=(("JMSXGroupID", "x"), ("JMSXGroupSeq", "-1"))
    )
    send(producer, "/queue/q", "plain")
    send_grouped(producer, "/queue/q", "x:3")
    assert bodies(a.messages()) == [b"1", b"2", b"3"]
    assert bodies(b.messages()) == [b"plain"]
    assert len(queue_of(world, "/queue/q")._features.groups) == 1


def test_a_bad_group_header_is_an_error() -> None:
    """An empty JMSXGroupID is an ERROR; nothing is queued."""
    world = World()
    producer = world.client()
    producer.send_frame("SEND", b"x", destination="/queue/q", exact=(("JMSXGroupID", ""),))
    [error] = producer.frames()
    assert error.get("message") == "empty JMSXGroupID header"
    assert world.broker.engine.depth("/queue/q") == 0


def test_groups_and_priorities_together() -> None:
    """A group's owner is chosen by consumer priority, and the group stays with it."""
    world = World()
    low, high, producer = world.client(), world.client(), world.client()
    low.send_frame("SUBSCRIBE", id="l", destination="/queue/q")
    high.send_frame("SUBSCRIBE", id="h", destination="/queue/q", x_priority="9")
    send_grouped(producer, "/queue/q", "x:1", "y:1", "x:2")
    assert bodies(high.messages()) == [b"1", b"1", b"2"] and low.messages() == []


def test_an_exclusive_newcomer_of_higher_priority_takes_the_groups_over() -> None:
    """When a higher-priority exclusive consumer takes over, groups move to it, marked first."""
    world = World()
    old, new, producer = world.client(), world.client(), world.client()
    old.send_frame("SUBSCRIBE", id="o", destination="/queue/q", exact=EXCLUSIVE)
    send_grouped(producer, "/queue/q", "x:1")
    assert bodies(old.messages()) == [b"1"]
    new.send_frame(
        "SUBSCRIBE", id="n", destination="/queue/q", exact=(*EXCLUSIVE, ("x-priority", "5"))
    )
    send_grouped(producer, "/queue/q", "x:2")
    [moved] = new.messages()
    assert moved.body == b"2" and moved.get("JMSXGroupFirstForConsumer") == "true"
    assert old.messages() == []


def test_a_waiting_grouped_message_counts_in_the_queue_depth() -> None:
    """A message waiting for its group's full owner stays in the queue: depth and browse see it."""
    world = World()
    owner, producer, browser = world.client(), world.client(), world.client()
    owner.send_frame(
        "SUBSCRIBE", id="o", destination="/queue/q", ack="client-individual", prefetch_count="1"
    )
    send_grouped(producer, "/queue/q", "x:1", "x:2")
    assert world.broker.engine.depth("/queue/q") == 1
    browser.send_frame("SUBSCRIBE", id="b", destination="/queue/q", browser="true")
    assert bodies(browser.messages()) == [b"2", b""]


def test_a_nacked_message_goes_ahead_of_its_groups_waiting_line() -> None:
    """With later messages of its group waiting for the full owner, a NACKed one goes first."""
    world = World()
    owner, producer = world.client(), world.client()
    owner.send_frame(
        "SUBSCRIBE", id="o", destination="/queue/q", ack="client-individual", prefetch_count="1"
    )
    send_grouped(producer, "/queue/q", "x:1", "x:2", "x:3")
    [first] = owner.messages()
    assert world.broker.engine.depth("/queue/q") == 2
    owner.ack(first, "NACK")
    received = []
    for _ in range(3):
        [message] = owner.messages()
        received.append(message.body)
        owner.ack(message)
    assert received == [b"1", b"2", b"3"]


def test_a_waiting_closing_message_closes_its_group_when_it_goes() -> None:
    """JMSXGroupSeq:-1 waiting in its line closes the group once handed out; the next re-picks."""
    world = World()
    a, b, producer = world.client(), world.client(), world.client()
    a.send_frame(
        "SUBSCRIBE", id="a", destination="/queue/q", ack="client-individual", prefetch_count="1"
    )
    send_grouped(producer, "/queue/q", "x:1")
    producer.send_frame(
        "SEND", b"2", destination="/queue/q", exact=(("JMSXGroupID", "x"), ("JMSXGroupSeq", "-1"))
    )
    b.send_frame("SUBSCRIBE", id="b", destination="/queue/q", ack="client-individual")
    [x1] = a.messages()
    assert b.messages() == []
    a.ack(x1)
    [x2] = a.messages()
    assert x2.body == b"2"
    send_grouped(producer, "/queue/q", "x:3")
    [x3] = b.messages()
    assert x3.get("JMSXGroupFirstForConsumer") == "true"


def test_lines_go_back_to_the_queue_when_their_owner_leaves() -> None:
    """A leaving owner's unacked messages, then its groups' lines, go to the next consumer."""
    world = World()
    a, b, producer = world.client(), world.client(), world.client()
    a.send_frame(
        "SUBSCRIBE", id="a", destination="/queue/q", ack="client-individual", prefetch_count="1"
    )
    send_grouped(producer, "/queue/q", "x:1", "x:2", "x:3")
    a.messages()
    b.send_frame("SUBSCRIBE", id="b", destination="/queue/q", ack="client-individual")
    assert b.messages() == []
    a.send_frame("UNSUBSCRIBE", id="a")
    assert bodies(b.messages()) == [b"1", b"2", b"3"]


def test_browse_and_purge_see_waiting_lines() -> None:
    """Management's browse and purge see the messages waiting in groups' lines too."""
    world = World()
    owner, producer = world.client(), world.client()
    owner.send_frame(
        "SUBSCRIBE", id="o", destination="/queue/q", ack="client-individual", prefetch_count="1"
    )
    send_grouped(producer, "/queue/q", "x:1", "x:2", "y:1")
    queue = queue_of(world, "/queue/q")
    assert len(queue.browse(10)) == 2
    assert queue.purge() == 2 and len(queue.pending) == 0


def test_a_message_waiting_in_a_line_expires() -> None:
    """The expiry sweep finds messages waiting in groups' lines; the others wait on in order."""
    world = World()
    owner, producer = world.client(), world.client()
    owner.send_frame(
        "SUBSCRIBE", id="o", destination="/queue/q", ack="client-individual", prefetch_count="1"
    )
    send_grouped(producer, "/queue/q", "x:1")
    producer.send_frame(
        "SEND", b"2", destination="/queue/q", expiration="500", exact=(("JMSXGroupID", "x"),)
    )
    send_grouped(producer, "/queue/q", "x:3")
    [first] = owner.messages()
    world.clock.advance(2)
    assert world.broker.engine.depth("/queue/q") == 1
    owner.ack(first)
    assert bodies(owner.messages()) == [b"3"]


def test_waiting_lines_move_to_an_exclusive_consumer_that_takes_over() -> None:
    """Messages waiting for a full owner go to a higher-priority exclusive newcomer, in order."""
    world = World()
    old, new, producer = world.client(), world.client(), world.client()
    old.send_frame(
        "SUBSCRIBE",
        id="o",
        destination="/queue/q",
        ack="client-individual",
        prefetch_count="1",
        exact=EXCLUSIVE,
    )
    send_grouped(producer, "/queue/q", "x:1", "x:2", "x:3")
    assert bodies(old.messages()) == [b"1"]
    new.send_frame(
        "SUBSCRIBE", id="n", destination="/queue/q", exact=(*EXCLUSIVE, ("x-priority", "5"))
    )
    moved = new.messages()
    assert bodies(moved) == [b"2", b"3"] and moved[0].get("JMSXGroupFirstForConsumer") == "true"
    assert old.messages() == []


def test_a_single_active_declaration_made_elsewhere_is_followed() -> None:
    """A single-active declaration (a cluster's one): the queue's consumers follow it."""
    world = World()
    first, second, producer = world.client(), world.client(), world.client()
    first.send_frame("SUBSCRIBE", id="a", destination="/queue/q")
    second.send_frame("SUBSCRIBE", id="b", destination="/queue/q")
    queue = queue_of(world, "/queue/q")
    queue.declare_single_active(True)
    send(producer, "/queue/q", "1", "2")
    assert bodies(first.messages()) == [b"1", b"2"] and second.messages() == []
    queue.declare_single_active(False)
    send(producer, "/queue/q", "3", "4")
    assert len(first.messages()) == 1 and len(second.messages()) == 1


def test_a_group_owner_decided_elsewhere_takes_the_group() -> None:
    """A group owner a cluster decided: the group goes to that consumer, not the next one."""
    world = World()
    first, second, producer = world.client(), world.client(), world.client()
    first.send_frame("SUBSCRIBE", id="a", destination="/queue/q")
    second.send_frame("SUBSCRIBE", id="b", destination="/queue/q")
    queue = queue_of(world, "/queue/q")
    chosen = queue.consumers[1]
    assert queue.assign_owner("x", chosen)
    assert not queue.assign_owner("x", queue.consumers[0])
    send_grouped(producer, "/queue/q", "x:1", "x:2", "x:3")
    assert bodies(second.messages()) == [b"1", b"2", b"3"] and first.messages() == []
