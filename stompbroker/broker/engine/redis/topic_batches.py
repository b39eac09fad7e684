"""
How topic messages cross nodes: a batch of them as one pub/sub payload, in a
compact binary form made for the one job of going from one node to the others.

Every node decodes every topic message any other node publishes, so the form
is chosen for what a node spends per message, not for reading by eye: a fixed
record head packed and unpacked by one :class:`struct.Struct` call, then the
fields' bytes as they are.  A SEND's user headers travel as the plain header
lines it came with when the message still holds them (see
:class:`~stompbroker.protocol.message.Message`), so neither node splits or
joins them, and the receiving node copies them into its MESSAGE frames as
one process does; otherwise (an escaped header, a ``:`` in a value) as
length-prefixed pairs, which keep any text.  Priority and group travel as
fields, not derived again from the headers.

A batch holds the messages of one channel, so of one destination, which it
names once::

    b"T" VERSION(1 byte) len(origin)(1 byte) origin
    len(destination)(uint32) destination  record...

    record := head(30 bytes, little-endian: four uint32 lengths of message-id,
              headers, group and body; expires, a double; redeliveries, uint32;
              priority, byte; flags, byte) message-id headers group body

Flags: 1 persistent, 2 closes its group, 4 has a group, 8 headers as pairs.

The version byte makes a cluster of mixed versions fail loudly rather than
deliver damaged messages: a node reads only :data:`VERSION`, and counts and
logs any other batch (:class:`UnreadableBatch`).  A node of an older version,
which published JSON batches starting with ``B``, fails on these too.

Stream entries (queues, durable subscriptions) keep the JSON form of
:mod:`.codec`: they stay in Redis across versions, and are decoded once per
delivery to one consumer rather than on every node.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from attrs import frozen

from stompbroker.protocol.frames import Headers
from stompbroker.protocol.message import Message

__all__ = [
    "VERSION",
    "TopicBatch",
    "UnreadableBatch",
    "batch_head",
    "encode_message",
    "pack",
    "unpack",
]

#: What a batch starts with.
MAGIC = b"T"
#: The form this node writes and reads.
VERSION = 1
_HEAD = MAGIC + bytes((VERSION,))
#: The JSON batches of the versions before :data:`VERSION` started with this.
_JSON_BATCH = b"B"
_LENGTH = struct.Struct("<I")
_RECORD = struct.Struct("<IIIIdIBB")
_PAIR = struct.Struct("<II")
PERSISTENT = 1
CLOSES_GROUP = 2
GROUPED = 4
PAIRS = 8


@frozen
class TopicBatch:
    """
    What a batch held.

    :ivar origin: the node that published it.
    :ivar messages: its messages, in order, all to one destination.
    :ivar body_bytes: the length of their bodies, together.
    """

    origin: str
    messages: list[Message]
    body_bytes: int


class UnreadableBatch(ValueError):
    """
    A payload on the topic channels that this node cannot read: a batch of
    another form (a node of another version in the cluster), or damaged.

    :ivar origin: the node that sent it, when that could be read, else ``None``.
    :ivar reason: what is wrong with it, for the log.
    """

    def __init__(self, reason: str, origin: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.origin = origin


def batch_head(origin: str) -> bytes:
    """
    :param origin: the node token of the node that publishes the batch.
    :returns: what every batch from ``origin`` starts with (a node skips its
        own batches by it, undecoded).
    :raises ValueError: for a token longer than 255 bytes.
    """
    node = origin.encode()
    if len(node) > 255:
        raise ValueError(f"a node token of {len(node)} bytes (255 at most)")
    return _HEAD + bytes((len(node),)) + node


def pack(head: bytes, destination: str, records: list[bytes]) -> bytes:
    """
    :param head: :func:`batch_head` of the publishing node.
    :param destination: the destination of every message in ``records``.
    :param records: messages :func:`encode_message` made, in order.
    :returns: them as one pub/sub payload.
    """
    name = destination.encode()
    return b"".join((head, _LENGTH.pack(len(name)), name, *records))


def encode_message(message: Message) -> bytes:
    """
    :returns: ``message`` as one record of a batch (:func:`pack`); its
        destination is the batch's.
    """
    headers = message._headers  # the stored form: plain lines or pairs
    flags = PERSISTENT if message.persistent else 0
    if not isinstance(headers, bytes):
        lines = _plain_lines(headers)
        if lines is None:
            headers = _pack_pairs(headers)
            flags |= PAIRS
        else:
            headers = lines
    group = message.group
    if group is None:
        group_bytes = b""
    else:
        group_bytes = group.encode()
        flags |= GROUPED
    if message.closes_group:
        flags |= CLOSES_GROUP
    message_id = message.message_id.encode()
    body = message.body
    head = _RECORD.pack(
        len(message_id),
        len(headers),
        len(group_bytes),
        len(body),
        message.expires,
        message.redeliveries,
        message.priority,
        flags,
    )
    return b"".join((head, message_id, headers, group_bytes, body))


def unpack(batch: bytes, wanted: Callable[[str], object] | None = None) -> TopicBatch | None:
    """
    :param wanted: called with the batch's destination: if it answers a false
        value (no subscriber here), the records are not decoded.
    :returns: what ``batch`` holds, or ``None`` if it is not wanted.
    :raises UnreadableBatch: for a batch of another form or version, or damaged
        (nothing of a damaged batch is returned).
    """
    if not batch.startswith(_HEAD):
        raise _foreign(batch)
    end = len(batch)
    start = 3 + batch[2] if end > 2 else end + 1
    if start > end:
        raise UnreadableBatch("a topic batch cut short in its head")
    try:
        origin = batch[3:start].decode()
    except UnicodeDecodeError:
        raise UnreadableBatch("a topic batch whose node is not UTF-8") from None
    try:
        return _records(origin, batch, start, end, wanted)
    except (struct.error, UnicodeDecodeError, ValueError) as error:
        raise UnreadableBatch(f"a damaged topic batch ({error})", origin) from None


def _records(
    origin: str, batch: bytes, position: int, end: int, wanted: Callable[[str], object] | None
) -> TopicBatch | None:
    """:returns: the batch whose destination and records go from ``position`` to ``end``."""
    (size,) = _LENGTH.unpack_from(batch, position)
    position += _LENGTH.size
    cut = position + size
    if cut > end:
        raise ValueError("a destination runs past the end")
    # One string for every message: its hash is worked out once.
    destination = batch[position:cut].decode()
    if wanted is not None and not wanted(destination):
        return None
    position = cut
    unpack_head = _RECORD.unpack_from
    head_size = _RECORD.size
    messages = []
    body_bytes = 0
    while position < end:
        sizes = unpack_head(batch, position)
        position += head_size
        cut = position + sizes[0]
        message_id = batch[position:cut].decode()
        position, cut = cut, cut + sizes[1]
        flags = sizes[7]
        headers: Headers | bytes = batch[position:cut]
        if flags & PAIRS:
            headers = _unpack_pairs(batch[position:cut])
        position, cut = cut, cut + sizes[2]
        group = batch[position:cut].decode() if flags & GROUPED else None
        position, cut = cut, cut + sizes[3]
        if cut > end:
            raise ValueError("a record runs past the end")
        body_bytes += sizes[3]
        messages.append(
            Message(
                destination,
                message_id,
                headers,
                batch[position:cut],
                sizes[4],
                sizes[5],
                flags & PERSISTENT == PERSISTENT,
                sizes[6],
                group,
                flags & CLOSES_GROUP == CLOSES_GROUP,
            )
        )
        position = cut
    return TopicBatch(origin, messages, body_bytes)


def _plain_lines(headers: Headers) -> bytes | None:
    """
    :returns: header pairs as the plain lines a message may hold instead (see
        :class:`~stompbroker.protocol.message.Message`), which read back as the
        same pairs and go into MESSAGE frames as they are; ``None`` when some
        text needs escaping in a frame (a ``:``, a line break, a backslash), a
        name comes twice (lines hold none twice), or there are none.  A SEND
        whose ``content-length`` is not its last header, for one, arrives as
        pairs: it crosses as lines all the same.
    """
    count = len(headers)
    if not count or (count > 1 and len({name for name, _ in headers}) != count):
        return None
    text = "\n".join([f"{name}:{value}" for name, value in headers])
    if text.count(":") != count or text.count("\n") != count - 1 or "\\" in text or "\r" in text:
        return None
    return text.encode()


def _pack_pairs(headers: Headers) -> bytes:
    """:returns: header pairs as (name length, value length, name, value) each."""
    parts = []
    for name, value in headers:
        name_bytes = name.encode()
        value_bytes = value.encode()
        parts.append(_PAIR.pack(len(name_bytes), len(value_bytes)))
        parts.append(name_bytes)
        parts.append(value_bytes)
    return b"".join(parts)


def _unpack_pairs(packed: bytes) -> Headers:
    """:returns: the pairs :func:`_pack_pairs` packed."""
    pairs = []
    position = 0
    end = len(packed)
    while position < end:
        name_size, value_size = _PAIR.unpack_from(packed, position)
        position += _PAIR.size
        cut = position + name_size
        name = packed[position:cut].decode()
        position, cut = cut, cut + value_size
        if cut > end:
            raise ValueError("a header runs past the end")
        pairs.append((name, packed[position:cut].decode()))
        position = cut
    return tuple(pairs)


def _foreign(batch: bytes) -> UnreadableBatch:
    """:returns: the error for a payload that is not a batch of :data:`VERSION`."""
    if batch.startswith(MAGIC) and len(batch) > 2:
        origin = batch[3 : 3 + batch[2]].decode(errors="replace")
        return UnreadableBatch(
            f"a topic batch of format version {batch[1]} (this node reads {VERSION}):"
            " a node of another stompbroker version",
            origin,
        )
    if batch.startswith(_JSON_BATCH) and b"\n" in batch:
        origin = batch[1 : batch.index(b"\n")].decode(errors="replace")
        return UnreadableBatch(
            f"a topic batch in the JSON form of stompbroker before topic batch format {VERSION}:"
            " a node of an older version",
            origin,
        )
    return UnreadableBatch(f"not a topic batch (it starts with {batch[:16]!r})")
