"""
Wildcard consumers on queues across nodes (docs/cluster.md, "Wildcard consumers
on queues"): a real ``redis-server`` and two ``twistd`` nodes, the producer on
A, a wildcard consumer on B, and a plain consumer on A competing with it.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from tests.support.clients import WAIT, Collector, connect, publish, through
from tests.support.process import BrokerProcess
from tests.support.redis import RedisServer, redis_server, two_nodes  # noqa: F401

pytestmark = pytest.mark.integration

INDIVIDUAL = "client-individual"


def take(consumers: list[tuple[Any, Collector]], count: int) -> None:
    """
    Acknowledge each message as it comes, on every consumer, until ``count``
    came in all (or the wait is over).
    """
    acked = [0] * len(consumers)
    deadline = time.monotonic() + 3 * WAIT
    while time.monotonic() < deadline:
        for index, (connection, inbox) in enumerate(consumers):
            messages = list(inbox.messages)
            for message in messages[acked[index] :]:
                connection.ack(message.headers["ack"])
            acked[index] = len(messages)
        if sum(acked) >= count:
            return
        time.sleep(0.02)


def test_a_wildcard_consumer_on_one_node_takes_from_queues_sent_to_on_another(
    nodes: list[BrokerProcess],
) -> None:
    """
    ``eu`` exists before the SUBSCRIBE, ``us`` is made after it: the wildcard
    consumer on B gets each of their messages once, naming its queue, within its
    window of 2; a plain consumer of ``eu`` on A competes, and each message goes
    to one of them.
    """
    a, b = nodes
    base = f"/queue/orders{uuid.uuid4().hex[:8]}"
    eu, us = f"{base}.eu", f"{base}.us"
    publish(a.address, eu, [f"eu-{n}" for n in range(6)])
    wild, wild_inbox = connect(b.address)
    wild.subscribe(f"{base}.>", id="all", ack=INDIVIDUAL, headers={"activemq.prefetchSize": "2"})
    # Queues that exist are found in Redis's set of names, after the RECEIPT.
    take([(wild, wild_inbox)], 6)
    early, wild_inbox.messages[:] = list(wild_inbox.messages), []
    assert sorted(m.body for m in early) == [f"eu-{n}".encode() for n in range(6)]
    plain, plain_inbox = connect(a.address)
    plain.subscribe(eu, id="eu", ack=INDIVIDUAL, headers={"activemq.prefetchSize": "2"})
    sender, sent = connect(a.address)
    for n in range(6, 30):
        sender.send(eu, f"eu-{n}".encode())
        sender.send(us, f"us-{n}".encode())
    sender.send(us, b"last", receipt="done")
    assert sent.wait_for(lambda: "done" in sent.receipts)
    take([(wild, wild_inbox), (plain, plain_inbox)], 24 + 24 + 1)
    through(wild_inbox, (a.address, us))
    wild_got = early + wild_inbox.messages
    got = [(m.headers["destination"], m.body.decode()) for m in wild_got]
    got += [(m.headers["destination"], m.body.decode()) for m in plain_inbox.messages]
    expected = [(eu, f"eu-{n}") for n in range(30)]
    expected += [(us, f"us-{n}") for n in range(6, 30)] + [(us, "last")]
    assert sorted(got) == sorted(expected)
    assert all(m.headers["subscription"] == "all" for m in wild_got)
    assert not wild_inbox.errors and not plain_inbox.errors
    assert {m.headers["destination"] for m in plain_inbox.messages} <= {eu}
    # The queue made after the SUBSCRIBE reached the wildcard consumer alone.
    assert [m.body for m in wild_inbox.messages if m.headers["destination"] == us][-1] == b"last"
    for connection in (wild, plain, sender):
        connection.disconnect()


def test_a_nacked_message_of_a_wildcard_consumer_comes_back_to_it(
    nodes: list[BrokerProcess],
) -> None:
    """NACK on one of the queues: redelivered, naming its queue, as on one queue."""
    a, b = nodes
    base = f"/queue/nack{uuid.uuid4().hex[:8]}"
    wild, inbox = connect(b.address)
    wild.subscribe(f"{base}.*", id="all", ack=INDIVIDUAL, receipt="subscribed")
    assert inbox.wait_for(lambda: "subscribed" in inbox.receipts)
    publish(a.address, f"{base}.x", [b"once"])
    assert inbox.wait_for(lambda: len(inbox.messages) == 1), inbox.bodies()
    wild.nack(inbox.messages[0].headers["ack"])
    assert inbox.wait_for(lambda: len(inbox.messages) == 2), inbox.bodies()
    again = inbox.messages[1]
    assert (again.body, again.headers["destination"]) == (b"once", f"{base}.x")
    assert again.headers.get("redelivered") == "true"
    wild.ack(again.headers["ack"])
    wild.disconnect()
