"""How a message travels through Redis (stompbroker.broker.engine.redis.codec)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stompbroker.broker.engine.redis.codec import (
    DEAD_LETTER,
    ENTRY,
    decode,
    decode_message,
    encode,
    encode_entry,
    mark_resent,
)
from stompbroker.protocol.message import Message

texts = st.text(max_size=20)


#: Header names a SEND may carry with any value (the router checks the others'
#: values: priority, JMSXGroupID, JMSXGroupSeq).
free_names = texts.filter(lambda name: name not in ("priority", "JMSXGroupID", "JMSXGroupSeq"))


@settings(derandomize=True, deadline=None)
@given(
    destination=texts,
    headers=st.lists(st.tuples(free_names, texts), max_size=4),
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


def test_a_message_keeps_its_priority_through_redis() -> None:
    """The priority a SEND gave comes back from its headers, so queues order it on every node."""
    message = Message("/queue/a", "n-1", (("priority", "7"),), b"x", priority=7)
    assert decode(encode("node", message))[1].priority == 7
    assert decode(encode("node", Message("/queue/a", "n-2", (), b"x")))[1].priority == 4


header_lines = st.lists(
    st.tuples(
        st.text(st.characters(blacklist_characters=":\n\r\\"), min_size=1, max_size=8),
        st.text(st.characters(blacklist_characters="\n\r\\"), max_size=12),
    ),
    min_size=1,
    max_size=4,
    unique_by=lambda pair: pair[0],
).map(lambda pairs: "\n".join(f"{name}:{value}" for name, value in pairs).encode())


@settings(derandomize=True, deadline=None)
@given(
    destination=texts,
    message_id=texts,
    headers=st.one_of(st.lists(st.tuples(free_names, texts), max_size=4).map(tuple), header_lines),
    body=st.binary(max_size=64),
    expires=st.floats(min_value=0, max_value=2e9),
    redeliveries=st.integers(min_value=0, max_value=2**32 - 1),
    persistent=st.booleans(),
    priority=st.integers(min_value=0, max_value=9),
    group=st.one_of(st.none(), texts),
    closes_group=st.booleans(),
    origin=texts,
)
def test_a_queue_entry_comes_back_as_it_went(
    destination: str,
    message_id: str,
    headers: tuple[tuple[str, str], ...] | bytes,
    body: bytes,
    expires: float,
    redeliveries: int,
    persistent: bool,
    priority: int,
    group: str | None,
    closes_group: bool,
    origin: str,
) -> None:
    """
    decode(encode_entry(m)) gives back every field, plain header lines as plain
    lines; decode_message the same message without its origin.
    """
    message = Message(
        destination, message_id, headers, body, expires, redeliveries, persistent, priority
    )
    if group is not None:
        message.group, message.closes_group = group, closes_group
    payload = encode_entry(origin, message)
    assert payload.startswith(ENTRY)
    back_origin, back = decode(payload)
    assert back_origin == origin
    assert (back.destination, back.message_id, back.body) == (destination, message_id, body)
    assert back.headers == message.headers
    assert (back.expires, back.redeliveries, back.persistent, back.priority) == (
        expires,
        redeliveries,
        persistent,
        priority,
    )
    assert (back.group, back.closes_group) == (group, closes_group and group is not None)
    # Messages compare by identity: the same message encodes the same.
    assert encode_entry(origin, decode_message(payload)) == encode_entry(origin, back)


@pytest.mark.parametrize(
    "headers",
    [(("a", "1"), ("b", "x y")), (("a", "1"),), b"a:1\nb:2"],
)
def test_plain_headers_travel_as_the_lines_a_send_carries(headers: Any) -> None:
    """The reading node gets header lines it can copy into MESSAGE frames as they are."""
    message = Message("/queue/a", "n-1", headers, b"body")
    back = decode(encode_entry("n", message))[1]
    assert isinstance(back._headers, bytes) and back.headers == message.headers


@pytest.mark.parametrize(
    "headers",
    [
        (("a", "1:2"),),
        (("a", "x\ny"),),
        (("a", "x\ry"),),
        (("a\nb", "1"),),
        (("a:b", "1"),),
        (("a", "\\"),),
        (("a", "1"), ("a", "2")),
    ],
)
def test_headers_that_need_escaping_travel_as_pairs(headers: Any) -> None:
    """Colons, line ends and backslashes (or a name twice) keep the pairs' form."""
    back = decode(encode_entry("n", Message("/queue/a", "n-1", headers, b"body")))[1]
    assert back._headers == headers


def test_a_resent_queue_entry_stays_in_its_form_with_one_more_redelivery() -> None:
    payload = encode_entry("n", Message("/queue/a", "n-1", b"a:b", b"body"))
    again = mark_resent(payload)
    assert again.startswith(ENTRY)
    assert decode(again)[1].redeliveries == 1


@settings(derandomize=True, deadline=None)
@given(
    st.one_of(
        st.binary(max_size=80),
        st.binary(max_size=80).map(lambda tail: ENTRY + tail),
        st.binary(max_size=80).map(lambda tail: b"[" + tail),
        st.binary(max_size=80).map(lambda tail: DEAD_LETTER + tail),
    )
)
def test_bytes_that_are_no_message_raise_value_error_only(payload: bytes) -> None:
    """
    Whatever is in an entry, decode makes a message of it or raises ValueError;
    decode_message makes the same message, or raises ValueError too.
    """
    try:
        origin, message = decode(payload)
    except ValueError:
        with pytest.raises(ValueError):
            decode_message(payload)
        return
    assert isinstance(origin, str) and isinstance(message, Message)
    assert encode_entry(origin, decode_message(payload)) == encode_entry(origin, message)


def test_a_header_no_send_could_carry_makes_the_entry_unreadable() -> None:
    """A stored priority that is no number raises ValueError, as any damage does."""
    payload = encode("n", Message("/queue/a", "n-1", (("priority", "high"),), b"x"))
    with pytest.raises(ValueError, match="priority"):
        decode(payload)


def test_a_queue_entry_cut_short_or_grown_is_refused() -> None:
    payload = encode_entry("n", Message("/queue/a", "n-1", b"a:b", b"body"))
    for damaged in (payload[:-1], payload + b"x", payload[:10]):
        with pytest.raises(ValueError):
            decode(damaged)
