"""
The redis engine's duplicate-detection script (``lua/dedup_check_add.lua``,
:mod:`stompbroker.broker.engine.redis.duplicates`), run on a real
``redis-server`` through redis-py's ``register_script``: a new id joins its
window and its message is added and published in the same call; a repeat
writes nothing; the window keeps at most its count of ids and none older than
its length, and its key expires with it.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis

from stompbroker.broker.engine.redis.duplicates import DEDUP_CHECK_ADD
from tests.support.redis import redis_client, redis_server  # noqa: F401

WINDOW, STREAM, DURABLE, CHANNEL = "p:dd:/queue/q", "p:q:/queue/q", "p:d:durable", "p:t:/topic/t"


@pytest.fixture
def check_add(redis_client: redis.Redis) -> Any:  # noqa: F811
    return redis_client.register_script(DEDUP_CHECK_ADD)


def queue_send(check_add: Any, duplicate_id: str, count: int = 100, window_ms: int = 60_000) -> int:
    """:returns: the script's answer for a queue message with ``duplicate_id``."""
    return int(
        check_add(
            keys=[WINDOW, STREAM],
            args=[duplicate_id, window_ms, count, f"entry {duplicate_id}", "", ""],
        )
    )


def test_a_new_id_is_recorded_and_its_message_added_a_repeat_writes_nothing(
    redis_client: redis.Redis,  # noqa: F811
    check_add: Any,
) -> None:
    assert queue_send(check_add, "order-1") == 1
    assert queue_send(check_add, "order-1") == 0
    assert queue_send(check_add, "order-2") == 1
    entries = redis_client.xrange(STREAM)
    assert [fields[b"m"] for _, fields in entries] == [b"entry order-1", b"entry order-2"]
    assert redis_client.zrange(WINDOW, 0, -1) == [b"order-1", b"order-2"]


def test_the_window_keeps_its_count_of_ids_the_oldest_leaving_first(
    redis_client: redis.Redis,  # noqa: F811
    check_add: Any,
) -> None:
    for number in range(3):
        assert queue_send(check_add, f"id-{number}", count=2) == 1
    assert redis_client.zcard(WINDOW) == 2
    assert queue_send(check_add, "id-2", count=2) == 0
    assert queue_send(check_add, "id-0", count=2) == 1
    assert redis_client.xlen(STREAM) == 4


def test_an_id_older_than_the_window_is_new_again(
    redis_client: redis.Redis,  # noqa: F811
    check_add: Any,
) -> None:
    assert queue_send(check_add, "late", window_ms=60_000) == 1
    # Age the id by a minute and a second, as the server's clock would.
    [(_, seen)] = redis_client.zrange(WINDOW, 0, -1, withscores=True)
    redis_client.zadd(WINDOW, {"late": seen - 61_000})
    assert queue_send(check_add, "late", window_ms=60_000) == 1
    assert redis_client.xlen(STREAM) == 2


def test_the_window_expires_with_its_length(
    redis_client: redis.Redis,  # noqa: F811
    check_add: Any,
) -> None:
    queue_send(check_add, "once", window_ms=5_000)
    assert 0 < redis_client.pttl(WINDOW) <= 5_000


def test_a_topic_message_is_published_and_added_to_durable_streams_once(
    redis_client: redis.Redis,  # noqa: F811
    check_add: Any,
) -> None:
    listener = redis_client.pubsub()
    listener.subscribe(CHANNEL)
    assert listener.get_message(timeout=5)["type"] == "subscribe"
    for _ in range(2):
        check_add(keys=[WINDOW, DURABLE], args=["t-1", 60_000, 100, "entry", CHANNEL, "batch"])
    published = listener.get_message(timeout=5)
    assert published is not None and published["data"] == b"batch"
    assert listener.get_message(timeout=0.2) is None
    assert redis_client.xlen(DURABLE) == 1
    listener.close()


def test_an_id_alone_is_recorded_with_nothing_to_write(
    redis_client: redis.Redis,  # noqa: F811
    check_add: Any,
) -> None:
    """A message the node routes itself once the id is found new (a limited queue's)."""
    assert int(check_add(keys=[WINDOW], args=["alone", 60_000, 100, "", "", ""])) == 1
    assert int(check_add(keys=[WINDOW], args=["alone", 60_000, 100, "", "", ""])) == 0
    assert redis_client.exists(STREAM) == 0
