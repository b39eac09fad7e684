"""
The management API's DELETE of a ``/queue/`` on the redis engine deletes it
cluster-wide: a real ``redis-server`` and two ``twistd`` nodes; messages sent
on node A, some read ahead and some delivered on node B; the delete through
node A is refused while B has a consumer, and once it has left removes every
message, in Redis and in any priority lane, so that a consumer on B gets none
of them (docs/cluster.md, "Management across nodes"; docs/management.md).
"""

from __future__ import annotations

import json
import time
import uuid
from urllib.parse import quote

from tests.support.clients import connect, publish
from tests.support.policy_calls import WAIT, call
from tests.support.process import BrokerProcess
from tests.support.redis import api_nodes, redis_server  # noqa: F401


def unique() -> str:
    return f"/queue/gone.{uuid.uuid4().hex[:8]}"


def node_name(process: BrokerProcess) -> str:
    _, nodes = call(process, "GET", "nodes")
    return str(next(node["name"] for node in nodes if node["here"]))


def test_delete_through_one_node_is_refused_while_another_node_consumes(
    api_nodes: list[BrokerProcess],  # noqa: F811,
) -> None:
    """A consumer on B makes A's DELETE a 409, and B's consumer keeps its messages."""
    a, b = api_nodes
    queue = unique()
    publish(a.address, queue, ["m0", "m1", "m2"], persistent="true")
    consumer, inbox = connect(b.address)
    consumer.subscribe(queue, id="s", ack="client-individual", receipt="subscribed")
    assert inbox.wait_for(lambda: len(inbox.messages) == 3, WAIT)
    status, answer = call(a, "DELETE", f"destinations/{quote(queue, safe='')}")
    assert status == 409, answer
    assert "consumers" in json.dumps(answer)
    consumer.disconnect()


def test_delete_through_one_node_removes_what_another_node_read_and_every_lane(
    api_nodes: list[BrokerProcess],  # noqa: F811,
) -> None:
    """
    B's consumer takes some messages and leaves (what it held goes back), A's
    DELETE discards all of them (priority 7 ones too) and names A; a consumer
    on B afterwards gets only what is sent after the delete.
    """
    a, b = api_nodes
    queue = unique()
    publish(a.address, queue, [f"m{index}" for index in range(6)], persistent="true")
    publish(a.address, queue, ["high0", "high1"], persistent="true", priority="7")
    consumer, inbox = connect(b.address)
    consumer.subscribe(
        queue,
        id="s",
        ack="client-individual",
        headers={"activemq.prefetchSize": "3"},
        receipt="subscribed",
    )
    assert inbox.wait_for(lambda: len(inbox.messages) == 3, WAIT)
    consumer.disconnect()
    # B unregisters its consumer as it handles the DISCONNECT: until then, 409.
    deadline = time.monotonic() + WAIT
    while (answered := call(a, "DELETE", f"destinations/{quote(queue, safe='')}"))[0] == 409:
        assert time.monotonic() < deadline, answered
        time.sleep(0.05)
    status, answer = answered
    assert status == 200, answer
    assert answer["deleted"] is True
    assert answer["complete"] is True
    assert answer["discarded"] == 8
    assert answer["node"] == node_name(a)
    status, answer = call(b, "GET", f"destinations/{quote(queue, safe='')}/messages")
    assert status == 404, answer
    publish(a.address, queue, ["after"], persistent="true")
    consumer, inbox = connect(b.address)
    consumer.subscribe(queue, id="s", ack="auto", receipt="again")
    assert inbox.wait_for(lambda: any(message.body == b"after" for message in inbox.messages), WAIT)
    consumer.disconnect()
    assert [message.body for message in inbox.messages] == [b"after"]


def test_delete_of_a_queue_no_node_knows_is_404(
    api_nodes: list[BrokerProcess],  # noqa: F811
) -> None:
    """A queue with no stream and no handle anywhere: 404, as on one node."""
    a, _ = api_nodes
    status, answer = call(a, "DELETE", f"destinations/{quote(unique(), safe='')}")
    assert status == 404, answer
