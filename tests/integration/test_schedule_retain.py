"""
Scheduled delivery and retained messages on the real broker (``twistd -n stompbroker``),
driven by ``stomp.py`` as docs/destinations.md describes them: delays, bad headers, the
retained copy a new subscriber gets first, the write right retain needs, both surviving
a SIGKILL when persistent (across nodes: tests/integration/test_cluster_features.py).
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from tests.support.clients import connect, flush_deliveries, publish, through
from tests.support.passwords import secured_module
from tests.support.process import BrokerProcess, BrokerStarter

PERSISTENT = {"persistent": "true"}


def unique(kind: str) -> str:
    """:returns: a destination of the kind no other test uses."""
    return f"/{kind}/t{uuid.uuid4().hex[:10]}"


def test_a_delayed_message_arrives_after_its_delay(broker: BrokerProcess) -> None:
    """AMQ_SCHEDULED_DELAY:1000 holds a queue message about a second, then delivers it once."""
    queue = unique("queue")
    connection, inbox = connect(broker.address)
    connection.subscribe(queue, id="q", receipt="s")
    assert inbox.wait_for(lambda: "s" in inbox.receipts)
    sent = time.monotonic()
    publish(broker.address, queue, [b"later"], AMQ_SCHEDULED_DELAY="1000")
    assert inbox.wait_for(lambda: inbox.messages, timeout=10)
    assert time.monotonic() - sent >= 0.9
    [message] = inbox.messages
    assert message.body == b"later"
    assert message.headers["scheduledJobId"] == message.headers["message-id"]
    assert "AMQ_SCHEDULED_DELAY" not in message.headers
    connection.disconnect()


def test_x_delay_delays_a_topic_message(broker: BrokerProcess) -> None:
    """RabbitMQ's x-delay holds a topic message too; nothing arrives before it is due."""
    topic = unique("topic")
    connection, inbox = connect(broker.address)
    connection.subscribe(topic, id="t", receipt="s")
    assert inbox.wait_for(lambda: "s" in inbox.receipts)
    publish(broker.address, topic, [b"n"], **{"x-delay": "700"})
    assert not inbox.wait_for(lambda: inbox.messages, timeout=0.3)
    assert inbox.wait_for(lambda: inbox.bodies() == [b"n"], timeout=10)
    connection.disconnect()


def test_a_bad_delay_is_an_error_naming_the_header(broker: BrokerProcess) -> None:
    """A delay that is not a whole number of ms gets an ERROR, and nothing is queued."""
    queue = unique("queue")
    connection, inbox = connect(broker.address)
    connection.send(queue, b"x", headers={"AMQ_SCHEDULED_DELAY": "soon"})
    assert inbox.wait_for(lambda: inbox.errors)
    assert inbox.errors[0].headers["message"] == "invalid AMQ_SCHEDULED_DELAY header"
    reader, collected = connect(broker.address)
    reader.subscribe(queue, id="q")
    flush_deliveries(reader, collected)
    assert collected.messages == []
    reader.disconnect()


def test_a_new_subscriber_gets_the_retained_message_first(broker: BrokerProcess) -> None:
    """retain:set keeps the last value; a new subscriber gets it marked retained:true."""
    topic = unique("topic")
    publish(broker.address, topic, [b"old", b"current"], retain="set")
    connection, inbox = connect(broker.address)
    connection.subscribe(topic, id="t")
    assert inbox.wait_for(lambda: inbox.messages)
    flush_deliveries(connection, inbox)
    [copy] = inbox.messages
    assert (copy.body, copy.headers["retained"]) == (b"current", "true")
    assert "retain" not in copy.headers
    connection.disconnect()
    publish(broker.address, topic, [b""], retain="remove")
    late, collected = connect(broker.address)
    late.subscribe(topic, id="t")
    flush_deliveries(late, collected)
    assert collected.messages == []
    late.disconnect()


def test_retain_on_a_queue_is_an_error(broker: BrokerProcess) -> None:
    """retain is for topics: a SEND to a queue with it is refused."""
    connection, inbox = connect(broker.address)
    connection.send(unique("queue"), b"x", headers={"retain": "set"})
    assert inbox.wait_for(lambda: inbox.errors)
    assert inbox.errors[0].headers["message"] == "retain is for topics only"


ACCESS = """
[users.alice]
read = ["/topic/#"]
write = ["/topic/status.#"]

[users.bob]
read = ["/topic/#"]
"""


#: alice may write to /topic/status.# and bob may only read.
secured = secured_module(ACCESS, ("alice", "a-pass", ()), ("bob", "b-pass", ()))


def test_retain_needs_the_write_right(secured: BrokerProcess) -> None:
    """With the write right a retain:set is kept; without it, it is an ERROR and kept nowhere."""
    alice, alice_inbox = connect(secured.address, login="alice", passcode="a-pass")
    alice.send("/topic/status.a", b"by alice", headers={"retain": "set"}, receipt="r")
    assert alice_inbox.wait_for(lambda: "r" in alice_inbox.receipts)
    bob, bob_inbox = connect(secured.address, login="bob", passcode="b-pass")
    bob.send("/topic/status.b", b"by bob", headers={"retain": "set"})
    assert bob_inbox.wait_for(lambda: bob_inbox.errors)
    assert bob_inbox.errors[0].headers["message"] == (
        "access denied: no write right on '/topic/status.b'"
    )
    reader, inbox = connect(secured.address, login="bob", passcode="b-pass")
    reader.subscribe("/topic/status.*", id="t")
    through(inbox, (alice, "/topic/status.a"))
    assert [(m.body, m.headers["retained"]) for m in inbox.messages] == [(b"by alice", "true")]
    for connection in (alice, reader):
        connection.disconnect()


def test_persistent_scheduled_and_retained_messages_survive_a_sigkill(
    tmp_path: Path, start: BrokerStarter
) -> None:
    """
    After SIGKILL and a restart on the same data directory, a persistent scheduled message
    is delivered at about its original time, and a persistent retained message is given
    to a new subscriber.
    """
    data = tmp_path / "data"
    broker = start(data)
    sent = time.time()
    publish(
        broker.address, "/queue/later", [b"scheduled"], AMQ_SCHEDULED_DELAY="4000", **PERSISTENT
    )
    publish(broker.address, "/topic/state", [b"retained"], retain="set", **PERSISTENT)
    broker.kill()
    broker = start(data)
    try:
        connection, inbox = connect(broker.address)
        connection.subscribe("/topic/state", id="t")
        connection.subscribe("/queue/later", id="q")
        assert inbox.wait_for(lambda: len(inbox.messages) == 2, timeout=15)
        retained, scheduled = inbox.messages
        assert (retained.body, retained.headers["retained"]) == (b"retained", "true")
        assert scheduled.body == b"scheduled"
        assert time.time() - sent >= 3.9
        connection.disconnect()
    finally:
        broker.stop()
