"""
A policy's queue ``expires`` on the redis engine's shared queues: a real
``redis-server`` and two ``twistd`` nodes.  A queue sent to on node B that no
node consumes from is deleted with its messages once the policy's time has
passed since it was made; a consumer on node A keeps it, and the time counts
again from that consumer's leaving (docs/policies.md, "With the redis
engine"; docs/cluster.md, "Queue expiry on shared queues").
"""

from __future__ import annotations

import time
import uuid
from urllib.parse import quote

from tests.support.clients import connect, publish
from tests.support.policy_calls import WAIT, call, eventually, names
from tests.support.process import BrokerProcess
from tests.support.redis import api_nodes, redis_server  # noqa: F401

#: The policy's expires, in ms; a sweep runs once a second.
EXPIRES = 1500


def set_expires(a: BrokerProcess, b: BrokerProcess, name: str) -> None:
    """Set a policy with :data:`EXPIRES` on ``a`` and wait until ``b`` has it."""
    status, answer = call(
        a,
        "PUT",
        f"policies/{name}",
        {"pattern": f"{name}.>", "apply-to": "queues", "definition": {"expires": EXPIRES}},
    )
    assert status == 200, answer
    eventually(lambda: name in names(b))


def exists(process: BrokerProcess, queue: str) -> bool:
    status, answer = call(process, "GET", f"destinations/{quote(queue, safe='')}/messages")
    assert status in (200, 404), answer
    return status == 200


def test_a_queue_no_node_consumes_from_is_deleted_with_its_messages(
    api_nodes: list[BrokerProcess],  # noqa: F811
) -> None:
    """Sent to on B, never consumed: gone on A's API after the expiry, messages too."""
    a, b = api_nodes
    set_expires(a, b, "brief")
    queue = f"/queue/brief.{uuid.uuid4().hex[:8]}"
    publish(b.address, queue, ["m0", "m1"], persistent="true")
    assert exists(a, queue)
    started = time.monotonic()
    eventually(lambda: not exists(a, queue))
    assert time.monotonic() - started >= EXPIRES / 1000.0 - 1.0
    publish(b.address, queue, ["after"], persistent="true")
    reader, got = connect(a.address)
    reader.subscribe(queue, id="1")
    assert got.wait_for(lambda: b"after" in got.bodies(), WAIT)
    assert got.bodies() == [b"after"]
    reader.disconnect()


def test_a_consumer_on_another_node_keeps_the_queue_until_it_leaves(
    api_nodes: list[BrokerProcess],  # noqa: F811
) -> None:
    """A consumer on A holds the queue past the expiry; after it leaves, the time runs again."""
    a, b = api_nodes
    set_expires(a, b, "kept")
    queue = f"/queue/kept.{uuid.uuid4().hex[:8]}"
    consumer, inbox = connect(a.address)
    consumer.subscribe(queue, id="1", ack="client-individual", receipt="subscribed")
    assert inbox.wait_for(lambda: "subscribed" in inbox.receipts, WAIT)
    time.sleep(EXPIRES / 1000.0 + 1.5)
    publish(b.address, queue, ["kept"], persistent="true")
    assert inbox.wait_for(lambda: inbox.bodies() == [b"kept"], WAIT)
    consumer.disconnect()
    publish(b.address, queue, ["waiting"], persistent="true")
    left = time.monotonic()
    eventually(lambda: not exists(b, queue))
    assert time.monotonic() - left >= EXPIRES / 1000.0 - 1.0
