"""
Wildcard consumers on queues on the real broker (``twistd -n stompbroker``), driven
by ``stomp.py``, as docs/destinations.md ("Wildcard consumers on queues") says.
"""

from __future__ import annotations

import uuid
from typing import Any

from tests.support.clients import connect, flush_deliveries, publish
from tests.support.process import BrokerProcess

INDIVIDUAL = "client-individual"


def test_a_pattern_takes_from_every_matching_queue_within_one_window(
    broker: BrokerProcess,
) -> None:
    """Queues before and after the SUBSCRIBE, one window of 2, each MESSAGE naming its queue."""
    base = f"/queue/w{uuid.uuid4().hex[:10]}"
    other = f"/queue/x{uuid.uuid4().hex[:10]}"
    publish(broker.address, f"{base}.a", ["a1", "a2"])
    publish(broker.address, other, ["not-mine"])
    connection, inbox = connect(broker.address)
    connection.subscribe(
        f"{base}.>", id="all", ack=INDIVIDUAL, headers={"activemq.prefetchSize": "2"}
    )
    publish(broker.address, f"{base}.b", ["b1"])
    publish(broker.address, f"{base}.c.d", ["c1"])
    got: list[Any] = []
    for _ in range(4):
        flush_deliveries(connection, inbox)
        batch, inbox.messages[:] = list(inbox.messages), []
        assert len(batch) <= 2, [m.body for m in batch]
        if not batch:
            break
        got.extend(batch)
        for message in batch:
            connection.ack(message.headers["ack"])
    assert sorted((m.headers["destination"], m.body) for m in got) == [
        (f"{base}.a", b"a1"),
        (f"{base}.a", b"a2"),
        (f"{base}.b", b"b1"),
        (f"{base}.c.d", b"c1"),
    ]
    assert {m.headers["subscription"] for m in got} == {"all"}
    connection.disconnect()
    plain, plain_inbox = connect(broker.address)
    plain.subscribe(other, id="p", ack="auto")
    assert plain_inbox.wait_for(lambda: plain_inbox.bodies() == [b"not-mine"])
    plain.disconnect()


def test_a_send_to_a_queue_pattern_is_an_error(broker: BrokerProcess) -> None:
    """SEND names one queue: a wildcard gets the ERROR it always did."""
    connection, inbox = connect(broker.address)
    connection.send("/queue/orders.>", b"x", receipt="r")
    assert inbox.wait_for(lambda: bool(inbox.errors)), "no ERROR"
    assert inbox.errors[0].headers["message"] == "wildcard in queue destination"
