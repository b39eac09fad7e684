"""
The redis engine's streams below the broker (:mod:`stompbroker.broker.engine.redis.streams`):
offsets from entry ids, and the append script's retention by bytes and age and
its publish, run on a real ``redis-server`` with a plain redis-py client.
"""

from __future__ import annotations

import time

import pytest
import redis

from stompbroker.broker.engine.redis.codec import encode
from stompbroker.broker.engine.redis.keys import Keys
from stompbroker.broker.engine.redis.streams import (
    APPEND,
    entry_id_of,
    entry_of,
    offset_of,
)
from stompbroker.broker.streams.offsets import OFFSET_HEADER
from stompbroker.protocol.message import Message
from tests.support.redis import redis_client, redis_server  # noqa: F401

NAMES = Keys("test")


@pytest.fixture
def client(redis_client: redis.Redis) -> redis.Redis:  # noqa: F811
    return redis_client


def append(client: redis.Redis, body: bytes, max_bytes: int = 10**9, max_age_ms: int = 0) -> bytes:
    payload = encode("n1", Message("/stream/s", "m", (), body)) if body else b""
    return client.eval(  # type: ignore[no-any-return]
        APPEND,
        2,
        NAMES.stream("/stream/s"),
        NAMES.stream_size("/stream/s"),
        NAMES.stream_channel("/stream/s"),
        max_bytes,
        max_age_ms,
        payload,
    )


@pytest.mark.parametrize("entry_id", ["0-0", "0-1", "1764000000000-0", "1764000000000-7"])
def test_offsets_and_entry_ids_map_both_ways(entry_id: str) -> None:
    """An entry id's offset maps back to the same id."""
    assert entry_id_of(offset_of(entry_id)) == entry_id


def test_offsets_grow_with_entry_ids_and_fit_a_signed_64_bit_integer() -> None:
    """Later ids give larger offsets, below 2**63 for centuries of milliseconds."""
    ids = ["1764000000000-0", "1764000000000-1", "1764000000001-0", "4102444800000-5"]
    offsets = [offset_of(entry_id) for entry_id in ids]
    assert offsets == sorted(offsets) and offsets[-1] < 2**63


def test_an_entry_carries_its_offset_and_time() -> None:
    """An entry read from Redis is stamped with x-stream-offset and timed by its id."""
    entry = entry_of(b"1764000000123-2", encode("n1", Message("/stream/s", "m", (), b"x")))
    assert dict(entry.message.headers)[OFFSET_HEADER] == str(entry.offset)
    assert entry.timestamp == 1764000000.123 and entry.message.body == b"x"


def test_the_script_trims_the_oldest_entries_over_max_bytes(client: redis.Redis) -> None:
    """Past max_bytes the oldest entries go; the size counter matches what is kept."""
    for _ in range(50):
        append(client, b"x" * 100, max_bytes=2000)
    kept = client.xrange(NAMES.stream("/stream/s"))
    size = sum(len(fields[b"m"]) for _, fields in kept)
    assert 0 < size <= 2000 and len(kept) < 50
    assert int(client.get(NAMES.stream_size("/stream/s"))) == size


def test_the_script_trims_by_age_even_without_an_append(client: redis.Redis) -> None:
    """Entries older than max_age go, on an append or a trim-only run; the last id stays."""
    first = append(client, b"old", max_age_ms=100_000)
    time.sleep(0.25)
    assert append(client, b"", max_age_ms=200) is None
    assert client.xlen(NAMES.stream("/stream/s")) == 0
    later = append(client, b"new", max_age_ms=200)
    assert offset_of(later) > offset_of(first)


def test_the_script_publishes_each_entry_with_its_id(client: redis.Redis) -> None:
    """Every node learns a new entry, with its id, on the stream's channel."""
    pubsub = client.pubsub()
    pubsub.psubscribe(NAMES.streams)
    assert pubsub.get_message(timeout=1)["type"] == "psubscribe"
    entry_id = append(client, b"hello")
    published = pubsub.get_message(timeout=1)
    assert published["channel"] == NAMES.stream_channel("/stream/s").encode()
    received_id, _, payload = published["data"].partition(b"\n")
    assert received_id == entry_id and entry_of(received_id, payload).message.body == b"hello"
    pubsub.close()
