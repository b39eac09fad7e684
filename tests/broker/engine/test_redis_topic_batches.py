"""Topic messages between nodes, in binary (stompbroker.broker.engine.redis.topic_batches)."""

from __future__ import annotations

import asyncio
from typing import Any

import hiredis
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from redis import asyncio as aioredis

from stompbroker.broker.engine.redis import writer as writer_module
from stompbroker.broker.engine.redis.connection import Writer
from stompbroker.broker.engine.redis.topic_batches import (
    VERSION,
    TopicBatch,
    UnreadableBatch,
    batch_head,
    encode_message,
    pack,
    unpack,
)
from stompbroker.protocol.message import Message

#: Any text, ':' and non-ASCII included (no lone surrogates: they are not UTF-8).
texts = st.text(st.characters(exclude_categories=("Cs",)), max_size=20)
#: Text a plain header line holds: no ':' and no line break.
line_texts = st.text(
    st.characters(exclude_categories=("Cs",), exclude_characters=":\n\r"), max_size=12
)


def batch_of(origin: str, *messages: Message) -> bytes:
    """:returns: one batch of ``messages``, which have one destination, from ``origin``."""
    records = [encode_message(message) for message in messages]
    return pack(batch_head(origin), messages[0].destination, records)


def unpacked(payload: bytes) -> TopicBatch:
    """:returns: everything ``payload`` holds (no node refuses a destination here)."""
    batch = unpack(payload)
    assert batch is not None
    return batch


def fields(message: Message) -> tuple[object, ...]:
    """:returns: everything a message carries between nodes."""
    return (
        message.destination,
        message.message_id,
        message.headers,
        message.body,
        message.expires,
        message.redeliveries,
        message.persistent,
        message.priority,
        message.group,
        message.closes_group,
    )


@settings(derandomize=True, deadline=None)
@given(
    destination=texts,
    message_id=texts,
    headers=st.lists(st.tuples(texts, texts), max_size=5),
    body=st.binary(max_size=300),
    expires=st.floats(min_value=0, max_value=2e9),
    redeliveries=st.integers(min_value=0, max_value=2**32 - 1),
    persistent=st.booleans(),
    priority=st.integers(min_value=0, max_value=9),
    group=st.none() | texts,
    closes_group=st.booleans(),
)
def test_a_message_with_header_pairs_comes_back_as_it_went(
    destination: str,
    message_id: str,
    headers: list[tuple[str, str]],
    body: bytes,
    expires: float,
    redeliveries: int,
    persistent: bool,
    priority: int,
    group: str | None,
    closes_group: bool,
) -> None:
    """Every field comes back: headers with ':', unicode, repeats and empty text; binary bodies."""
    message = Message(
        destination,
        message_id,
        tuple(headers),
        body,
        expires,
        redeliveries,
        persistent,
        priority,
        group,
        closes_group,
    )
    batch = unpacked(batch_of("node", message, message))
    assert batch.origin == "node"
    assert [fields(copy) for copy in batch.messages] == [fields(message), fields(message)]
    assert batch.body_bytes == 2 * len(body)


@settings(derandomize=True, deadline=None)
@given(
    names=st.lists(line_texts, min_size=1, max_size=5, unique=True),
    value=line_texts,
    body=st.binary(max_size=64),
)
def test_plain_header_lines_cross_as_they_are(names: list[str], value: str, body: bytes) -> None:
    """A SEND's plain header lines stay lines on the receiving node, and read as the same pairs."""
    lines = "\n".join(f"{name}:{value}" for name in names).encode()
    message = Message("/topic/ünïcode", "n-1", lines, body)
    (back,) = unpacked(batch_of("node", message)).messages
    assert back._headers == lines
    assert back.headers == tuple((name, value) for name in names)
    assert back.body == body


class _Client:
    """Stands for Redis behind the writer: records each command of the pipelines it is sent."""

    def __init__(self) -> None:
        self.sent: list[tuple[Any, ...]] = []

    async def execute(self, client: Any, packed: bytes, count: int, timeout: float) -> list[Any]:
        reader = hiredis.Reader()
        reader.feed(packed)
        commands = [tuple(reader.gets()) for _ in range(count)]
        self.sent.extend((args[0].decode(), args[1].decode(), *args[2:]) for args in commands)
        return [1] * count


def test_a_writer_publishes_each_channels_run_of_messages_as_one_batch() -> None:
    """
    Messages for one channel in a row are one PUBLISH, whose batch names their
    destination once and keeps their order; another channel starts another batch.
    """
    client = _Client()
    head = batch_head("node")
    messages = [Message(f"/topic/{n // 3}", f"n-{n}", (), b"%d" % n) for n in range(5)]

    async def main() -> None:
        writer = Writer(
            aioredis.Redis(),
            asyncio.get_running_loop(),
            lambda channel, records: pack(head, channel[len("p:t:") :], records),
        )
        for message in messages:
            writer.publish("p:t:" + message.destination, encode_message(message))
        await writer.drained()

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(writer_module, "execute", client.execute)
        asyncio.run(main())
    assert [args[:2] for args in client.sent] == [
        ("PUBLISH", "p:t:/topic/0"),
        ("PUBLISH", "p:t:/topic/1"),
    ]
    back = [message for args in client.sent for message in unpacked(args[2]).messages]
    assert [(m.destination, m.message_id, m.body) for m in back] == [
        (m.destination, m.message_id, m.body) for m in messages
    ]


def test_a_node_recognises_its_own_batches_by_their_head() -> None:
    """A batch starts with its node's head, and no other node's head is a prefix of it."""
    batch = batch_of("abcd", Message("/topic/a", "abcd-1", (), b"x"))
    assert batch.startswith(batch_head("abcd"))
    assert not batch.startswith(batch_head("abc"))


def test_a_node_token_must_fit_the_head() -> None:
    """A node token longer than 255 bytes is refused with ValueError."""
    with pytest.raises(ValueError, match="255"):
        batch_head("n" * 256)


@pytest.mark.parametrize(
    ("payload", "origin", "reason"),
    [
        (b"B" + b"old\n" + b"\0\0\0\x02[]", "old", "JSON form"),
        (b"T" + bytes((VERSION + 6, 3)) + b"new....", "new", f"format version {VERSION + 6}"),
        (b"hello", None, "not a topic batch"),
        (b"", None, "not a topic batch"),
    ],
)
def test_a_batch_of_another_form_is_refused_with_its_node(
    payload: bytes, origin: str | None, reason: str
) -> None:
    """An older node's JSON batch, another version, or no batch: UnreadableBatch, saying so."""
    with pytest.raises(UnreadableBatch, match=reason) as raised:
        unpack(payload)
    assert raised.value.origin == origin


@pytest.mark.parametrize("cut", [1, 3, 20, 40, 90])
def test_a_batch_cut_short_is_refused_whole(cut: int) -> None:
    """A batch cut in its last record or its destination raises UnreadableBatch, not a short one."""
    batch = batch_of(
        "node", Message("/topic/a", "n-1", (), b"x"), Message("/topic/a", "n-2", (), b"y" * 20)
    )
    with pytest.raises(UnreadableBatch, match="damaged") as raised:
        unpack(batch[:-cut])
    assert raised.value.origin == "node"


def test_a_head_cut_short_is_refused() -> None:
    """A batch whose node token is cut short raises UnreadableBatch."""
    with pytest.raises(UnreadableBatch, match="head"):
        unpack(batch_head("node")[:-2])


def test_header_pairs_that_need_no_escaping_cross_as_lines() -> None:
    """Pairs without ':' or line breaks cross as lines; a ':' or a repeated name keeps pairs."""
    plain = Message("/topic/a", "n-1", (("seq", "1"), ("größe", "ß")), b"x")
    (back,) = unpacked(batch_of("node", plain)).messages
    assert back._headers == "seq:1\ngröße:ß".encode()
    colon = Message("/topic/a", "n-2", (("url", "http://x"),), b"x")
    (back,) = unpacked(batch_of("node", colon)).messages
    assert back._headers == (("url", "http://x"),)
    twice = Message("/topic/a", "n-3", (("a", "1"), ("a", "2")), b"x")
    (back,) = unpacked(batch_of("node", twice)).messages
    assert back._headers == (("a", "1"), ("a", "2"))


def test_a_batch_nobody_here_subscribes_to_is_not_decoded() -> None:
    """With ``wanted`` answering no for its destination, unpack returns None, records unread."""
    asked: list[str] = []

    def wanted(destination: str) -> bool:
        asked.append(destination)
        return destination == "/topic/wanted"

    message = Message("/topic/other", "n-1", (), b"x")
    assert unpack(batch_of("node", message), wanted) is None
    damaged = batch_of("node", Message("/topic/wanted", "n-2", (), b"y"))[:-1]
    with pytest.raises(UnreadableBatch):
        unpack(damaged, wanted)
    assert asked == ["/topic/other", "/topic/wanted"]
