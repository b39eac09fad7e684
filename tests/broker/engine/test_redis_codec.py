"""How a message travels through Redis (stompbroker.broker.engine.redis.codec)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from stompbroker.broker.engine.redis.codec import Names, decode, encode
from stompbroker.protocol.message import Message

texts = st.text(max_size=20)


@settings(derandomize=True, deadline=None)
@given(
    destination=texts,
    headers=st.lists(st.tuples(texts, texts), max_size=4),
    body=st.binary(max_size=64),
    expires=st.floats(min_value=0, max_value=2e9),
    redeliveries=st.integers(min_value=0, max_value=100),
    persistent=st.booleans(),
)
def test_a_message_comes_back_as_it_went(
    destination: str,
    headers: list[tuple[str, str]],
    body: bytes,
    expires: float,
    redeliveries: int,
    persistent: bool,
) -> None:
    """decode(encode(m)) gives back every field and the sending node, newlines in the body too."""
    message = Message(
        destination, "n-1", tuple(headers), body + b"\n", expires, redeliveries, persistent
    )
    origin, back = decode(encode("node", message))
    assert origin == "node"
    assert (back.destination, back.message_id, back.headers, back.body) == (
        destination,
        "n-1",
        tuple(headers),
        body + b"\n",
    )
    assert (back.expires, back.redeliveries, back.persistent) == (expires, redeliveries, persistent)


def test_a_node_recognises_its_own_messages_by_their_first_bytes() -> None:
    """The payload starts with the sending node, which lets a node skip its own echo undecoded."""
    assert encode("abcd", Message("/topic/a", "abcd-1", (), b"x")).startswith(b'["abcd"')


def test_names_keep_brokers_with_different_prefixes_apart() -> None:
    """Every key and channel starts with the prefix; all topics match the nodes' one pattern."""
    names = Names("blue")
    assert names.topic("/topic/a.b") == "blue:t:/topic/a.b"
    assert names.queue("/queue/jobs") == "blue:q:/queue/jobs"
    assert names.topics == "blue:t:*"
    assert names.alive("n1") == "blue:alive:n1"


def test_a_message_keeps_its_priority_through_redis() -> None:
    """The priority a SEND gave comes back from its headers, so queues order it on every node."""
    message = Message("/queue/a", "n-1", (("priority", "7"),), b"x", priority=7)
    assert decode(encode("node", message))[1].priority == 7
    assert decode(encode("node", Message("/queue/a", "n-2", (), b"x")))[1].priority == 4
