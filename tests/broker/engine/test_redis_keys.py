"""The names of the redis engine's keys and channels (stompbroker.broker.engine.redis.keys)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stompbroker.broker.engine.redis import keys
from stompbroker.broker.engine.redis.keys import Keys, stream_destination


def hash_tag(key: str) -> str:
    """:returns: the part of ``key`` Redis Cluster hashes (its first ``{...}``, else all of it)."""
    start = key.find("{")
    end = key.find("}", start + 1)
    return key if start < 0 or end < 0 or end == start + 1 else key[start + 1 : end]


def test_names_keep_brokers_with_different_prefixes_apart() -> None:
    """Every key and channel starts with the prefix; all topics match the nodes' one pattern."""
    names = Keys("blue")
    assert names.topic("/topic/a.b") == "blue:t:/topic/a.b"
    assert names.queue("/queue/jobs") == "blue:{q:/queue/jobs}"
    assert names.topics == "blue:t:*"
    assert names.alive("n1") == "blue:alive:n1"


def queue_keys(prefix: str, destination: str) -> list[str]:
    """:returns: every key of one queue."""
    streams = [
        *keys.lane_streams(prefix, destination),
        keys.node_stream(prefix, "node-1", destination),
        keys.returned_stream(prefix, destination),
    ]
    return [
        *streams,
        *(keys.byte_counter(stream) for stream in streams),
        *(keys.recount_mark(stream) for stream in streams),
        *(keys.record_key("node-1", stream) for stream in streams),
        keys.mode_key(prefix, destination),
        keys.registry_key(prefix, destination),
        keys.groups_key(prefix, destination),
        keys.lease_key(prefix, destination),
    ]


@given(destination=st.text(st.characters(blacklist_characters="{}"), max_size=20))
def test_the_keys_of_one_queue_share_a_hash_slot(destination: str) -> None:
    """A script over a queue's keys stays in one slot of a Redis Cluster: they share a hash tag."""
    destination = "/queue/" + destination
    tags = {hash_tag(key) for key in queue_keys("sb", destination)}
    assert tags == {"q:" + destination}


def test_the_keys_of_a_stream_and_of_a_durable_subscription_share_their_hash_slot() -> None:
    """A ``/stream/``'s entries and byte count, a durable subscription's stream and its counters."""
    names = Keys("sb")
    assert hash_tag(names.stream("/stream/s")) == hash_tag(names.stream_size("/stream/s"))
    durable = names.durable("durable:[a]")
    assert {hash_tag(durable), hash_tag(keys.byte_counter(durable))} == {"d:durable:[a]"}


def test_the_scheduled_messages_keys_share_a_hash_slot() -> None:
    """The claim script takes due jobs from all three at once."""
    names = Keys("sb")
    due, jobs, flying = names.schedule_due, names.schedule_jobs, names.schedule_flying
    assert {hash_tag(due), hash_tag(jobs), hash_tag(flying)} == {"sched"}
    expiry = (names.expiry_lease, names.expiry_used, names.expiry_tags)
    assert {hash_tag(key) for key in expiry} == {"expiry"}


@pytest.mark.parametrize(
    "key",
    [
        "sb:{q:/queue/a.b}",
        "sb:{q:/queue/a.b}:lane:7",
        "sb:{q:/queue/a.b}:node:n-1",
        "sb:{q:/queue/a.b}:returned",
    ],
)
def test_every_stream_of_a_queue_names_its_destination(key: str) -> None:
    """Statistics count a queue's lanes, nodes' own streams and returned stream as the queue's."""
    assert keys.destination_of("sb", key) == "/queue/a.b"


def test_a_durable_subscriptions_stream_names_its_key_and_other_keys_themselves() -> None:
    """A key that is no queue's is its own name (for statistics)."""
    assert keys.destination_of("sb", "sb:{d:durable:[x]}") == "durable:[x]"
    assert keys.destination_of("sb", "other:{q:/queue/a}") == "other:{q:/queue/a}"


def test_a_streams_key_gives_its_destination_back_and_no_other_key_does() -> None:
    key = Keys("p").stream("/stream/audit")
    assert stream_destination("p", key) == "/stream/audit"
    assert stream_destination("p", key + ":bytes") is None
    assert stream_destination("p", Keys("p").queue("/queue/q")) is None
