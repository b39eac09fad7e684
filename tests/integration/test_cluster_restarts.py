"""
Redis restarted under load costs no correctness (docs/cluster.md, "Redis away"): every
receipted message is delivered, a second copy only with ``redelivered:true``, no consumer is
cut off, publishers are held (not sent an ERROR) within ``--engine-outage-hold``, and a
message a node's read claimed but never received is taken from its pending list.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from stompbroker.broker.engine.redis.codec import encode
from stompbroker.broker.engine.redis.keys import Keys
from stompbroker.protocol.message import Message
from tests.support.clients import connect
from tests.support.redis import RedisServer, drain, flowing, node, steady_load

pytestmark = pytest.mark.integration

#: Redis restarts in the load test, each a SIGKILL (a crash) and a start on the same AOF.
RESTARTS = 3
#: How long Redis stays away each time, in seconds: the fault being injected.
AWAY = 1.5


def test_redis_killed_under_load_loses_nothing_and_duplicates_only_as_redelivered(
    tmp_path: Path,
) -> None:
    """
    Redis SIGKILLed and started again three times under a steady persistent load between
    two nodes: every receipted message is delivered, any second copy says redelivered, the
    consumer (acknowledging throughout) is never cut off, and the publisher gets no ERROR.
    """
    server = RedisServer(tmp_path)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = node(tmp_path / "a", server)
    b = node(tmp_path / "b", server)
    try:
        with steady_load(a, b) as (publisher, inbox):
            for _ in range(RESTARTS):
                # Barrier: the load flows (new messages reach the consumer) before each crash.
                assert flowing(inbox, timeout=15)
                server.kill()
                time.sleep(AWAY)
                server.start()
            assert flowing(inbox, timeout=15)
            receipted = drain(publisher, inbox)
            assert receipted <= set(inbox.bodies()), sorted(receipted - set(inbox.bodies()))[:10]
    finally:
        a.stop()
        b.stop()
        server.stop()


def test_an_entry_a_nodes_read_claimed_but_never_received_is_delivered(tmp_path: Path) -> None:
    """
    An entry in node B's pending list that B never received (its read reached Redis, the
    reply was lost) reaches B's consumer, redelivered, within the slow check.
    """
    import redis

    server = RedisServer(tmp_path)
    b = node(tmp_path, server)
    queue = f"/queue/stranded.{uuid.uuid4().hex[:8]}"
    client = redis.Redis(host="127.0.0.1", port=server.port)
    names = Keys("stompbroker")
    try:
        consumer, inbox = connect(b.address)
        consumer.subscribe(
            queue, id="c", ack="client-individual", headers={"prefetch-count": 1}, receipt="on"
        )
        assert inbox.wait_for(lambda: "on" in inbox.receipts)
        publisher, sent = connect(b.address)
        publisher.send(queue, b"first", headers={"persistent": "true"}, receipt="r")
        assert sent.wait_for(lambda: "r" in sent.receipts)
        # B's one consumer holds "first": B has no room and reads nothing more.
        assert inbox.wait_for(lambda: inbox.bodies() == [b"first"])
        stream = names.queue(queue)
        (holder,) = [row["name"] for row in client.xinfo_consumers(stream, names.group)]
        lost = Message(queue, "lost-1", (("persistent", "true"),), b"lost", 0.0, 0, True)
        client.xadd(stream, {"m": encode("elsewhere", lost)})
        # As B's read would, whose reply the connection lost.
        claimed = client.xreadgroup(names.group, holder, {stream: ">"}, count=10)
        assert [fields[b"m"].endswith(b"lost") for _, fields in claimed[0][1]] == [True]
        consumer.ack(inbox.messages[0].headers["ack"])
        assert inbox.wait_for(lambda: b"lost" in inbox.bodies(), timeout=10)
        (message,) = [m for m in inbox.messages if m.body == b"lost"]
        assert message.headers.get("redelivered") == "true"
        assert inbox.bodies() == [b"first", b"lost"]
        consumer.disconnect()
        publisher.disconnect()
    finally:
        client.close()
        b.stop()
        server.stop()
