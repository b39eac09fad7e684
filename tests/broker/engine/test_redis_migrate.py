"""The renaming of an older version's keys (stompbroker.broker.engine.redis.migrate)."""

from __future__ import annotations

import pytest
import redis

from stompbroker.broker.engine.redis.keys import Keys, byte_counter, lane_stream, record_key
from stompbroker.broker.engine.redis.migrate import migrate, renamed
from tests.support.redis import RedisServer, redis_server  # noqa: F401

NAMES = Keys("sb")
QUEUE = NAMES.queue("/queue/a:b")


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("sb:q:/queue/a:b", QUEUE),
        ("sb:qp:7:/queue/a:b", lane_stream("sb", "/queue/a:b", 7)),
        ("sb:qm:/queue/a:b", QUEUE + ":mode"),
        ("sb:qc:/queue/a:b", QUEUE + ":consumers"),
        ("sb:qg:/queue/a:b", QUEUE + ":groups"),
        ("sb:ql:/queue/a:b", QUEUE + ":lease"),
        ("sb:qret:/queue/a:b", QUEUE + ":returned"),
        ("sb:qn:ab12cd34:/queue/a:b", QUEUE + ":node:ab12cd34"),
        ("sb:qb:q:/queue/a:b", byte_counter(QUEUE)),
        ("sb:qb:qp:7:/queue/a:b", byte_counter(lane_stream("sb", "/queue/a:b", 7))),
        (
            "sb:qr:ab12cd34:sb:qn:ab12cd34:/queue/a:b",
            record_key("ab12cd34", QUEUE + ":node:ab12cd34"),
        ),
        ('sb:d:durable:["c","s"]', NAMES.durable('durable:["c","s"]')),
        ("sb:s:/stream/x", NAMES.stream("/stream/x")),
        ("sb:sb:/stream/x", NAMES.stream_size("/stream/x")),
        ("sb:sched", NAMES.schedule_due),
        ("sb:sched:jobs", NAMES.schedule_jobs),
        ("sb:sched:flying", NAMES.schedule_flying),
        ("sb:qused", NAMES.expiry_used),
        ("sb:qused:tag", NAMES.expiry_tags),
    ],
)
def test_every_renamed_key_kind_gets_its_new_name(old: str, new: str) -> None:
    assert renamed("sb", old) == new


@pytest.mark.parametrize(
    "key",
    [
        "sb:queues",
        "sb:durables",
        "sb:alive:n1",
        "sb:retained",
        QUEUE,
        "other:q:/queue/a",
        "sb:qp:x:/queue/a",
    ],
)
def test_keys_that_kept_their_names_or_are_not_ours_stay(key: str) -> None:
    assert renamed("sb", key) is None


@pytest.mark.integration
def test_a_queue_written_by_an_older_version_is_readable_under_its_new_names(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    """Its entries, its group's pending list and its byte counter move as they are."""
    client = redis.Redis(port=redis_server.port)
    client.flushdb()
    client.xgroup_create("sb:q:/queue/a:b", "nodes", id="0", mkstream=True)
    client.xadd("sb:q:/queue/a:b", {"m": b"one"})
    client.xreadgroup("nodes", "n1", {"sb:q:/queue/a:b": ">"})
    client.set("sb:qb:q:/queue/a:b", 3)
    client.set(QUEUE + ":mode", "already new")
    client.set("sb:qm:/queue/a:b", "old")
    assert migrate(client, "sb") == 2
    assert client.xpending(QUEUE, "nodes")["pending"] == 1
    assert client.get(byte_counter(QUEUE)) == b"3"
    assert client.get(QUEUE + ":mode") == b"already new"
    assert client.get("sb:qm:/queue/a:b") == b"old"
    client.close()
