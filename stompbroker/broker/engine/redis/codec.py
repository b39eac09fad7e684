"""
How a message travels through Redis, and the names of the keys and channels.

A message is one byte string, the same for a pub/sub ``PUBLISH`` and a stream
entry's one field: a line of compact JSON with everything but the body, a
newline, then the body as it is (no base64: bodies are often most of the
bytes).  Compact JSON never holds a raw newline, so the first one ends it::

    ["NODE","/queue/a","NODE-17",[["k","v"]],0.0,0,false]\\n<body bytes>

The first field is the node that sent it, so that a node can skip its own
messages when they come back from a channel.  Topic messages cross nodes in a
binary form of their own (:mod:`.topic_batches`); this one is what the streams
(queues, durable subscriptions), replies and notices hold.  The expiry is in the sending
node's clock seconds, which are wall-clock seconds on a real reactor (nodes keep
their clocks in step, as any cluster does).

A queue's stream entry is written in a binary form that costs less to make
and to read (:func:`encode_entry`): ``M``, a fixed header of flags, priority,
redelivery count, expiry and the lengths of the parts (:data:`_ENTRY`), then
the origin, destination, ``message-id``, message group and user headers, and
the body.  The user headers are the plain ``name:value`` lines a SEND carried
(:class:`~stompbroker.protocol.message.Message`), copied as they are both ways,
or, for a message whose headers are pairs, their compact JSON.
:func:`decode` reads both forms, by their first byte.

An entry a policy's ``dead-letter`` overflow moved to a dead-letter queue's
stream (:mod:`.shared_limits`, in a Redis script) is the payload it had behind
a marking: :data:`DEAD_LETTER`, the JSON of the dead-letter queue, the copy's
``message-id`` and the ``dead-letter-reason``, and a newline.  :func:`decode`
turns it into the copy one node's dead letters make.
"""

from __future__ import annotations

import json
import struct
from typing import Any

from stompbroker.broker.queueing.dead_letters import DEAD_LETTER_HEADERS
from stompbroker.broker.queueing.groups import GROUP_HEADER, stored_group
from stompbroker.broker.queueing.priorities import parse_priority, stored_priority
from stompbroker.protocol.errors import MalformedFrame
from stompbroker.protocol.message import Message

__all__ = [
    "DEAD_LETTER",
    "ENTRY",
    "ENTRY_BODY_LENGTH",
    "decode",
    "decode_message",
    "encode",
    "encode_entry",
    "mark_resent",
]

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_loads = json.loads
#: A message of a group names its header in its metadata (a C substring test).
_GROUPED = GROUP_HEADER.encode()
#: What an entry moved to a dead-letter stream starts with (an encoded message starts with ``[``).
DEAD_LETTER = b"D"
#: What :func:`encode_entry`'s form starts with.
ENTRY = b"M"
#: Its fixed header after ``M``: flags, priority, redeliveries, expires, then
#: the lengths of origin, destination, message-id, group and headers.
_ENTRY = struct.Struct(">BBIdIIIIII")
#: Where the parts start, after ``M`` and the fixed header.
_START = 1 + _ENTRY.size
#: Where in an entry its body's length is (4 bytes, big-endian: the header's last),
#: for the scripts that count bodies' bytes (:mod:`.shared_bytes`).
ENTRY_BODY_LENGTH = _START - 4
#: Flags: persistent; the headers are plain lines; closes its group; has a group.
_PERSISTENT, _LINES, _CLOSES, _GROUP = 1, 2, 4, 8


def encode(origin: str, message: Message) -> bytes:
    """
    :param origin: the node token of the node that routes it.
    :returns: the message as one byte string for Redis.
    """
    meta = _dumps(
        [
            origin,
            message.destination,
            message.message_id,
            message.headers,
            message.expires,
            message.redeliveries,
            message.persistent,
        ]
    )
    return meta.encode("utf-8") + b"\n" + message.body


def encode_entry(origin: str, message: Message) -> bytes:
    """
    :param origin: the node token of the node that adds it.
    :returns: the message in the binary form of a queue's stream entry.
    """
    headers: Any = message._headers  # the stored form: pairs, or plain lines
    if type(headers) is bytes:
        flags = _LINES if headers else 0
    else:
        lines = _plain_lines(headers)
        if lines is not None:
            headers, flags = lines, _LINES
        else:
            headers, flags = (_dumps(headers).encode() if headers else b""), 0
    if message.persistent:
        flags |= _PERSISTENT
    group = message.group
    if group is None:
        group_bytes = b""
    else:
        flags |= _GROUP | (_CLOSES if message.closes_group else 0)
        group_bytes = group.encode()
    origin_bytes = origin.encode()
    destination = message.destination.encode()
    message_id = message.message_id.encode()
    head = _ENTRY.pack(
        flags,
        message.priority,
        message.redeliveries,
        message.expires,
        len(origin_bytes),
        len(destination),
        len(message_id),
        len(group_bytes),
        len(headers),
        len(message.body),
    )
    return b"".join(
        (ENTRY, head, origin_bytes, destination, message_id, group_bytes, headers, message.body)
    )


def _plain_lines(headers: Any) -> bytes | None:
    """
    :returns: header pairs as the plain lines a SEND could have carried them in
        (:class:`~stompbroker.protocol.message.Message`), so that the node that
        reads the entry copies them into its MESSAGE frames as they are; ``None``
        if a name or value needs escaping, or a name comes twice (or there are none).
    """
    count = len(headers)
    if count == 1:
        # The commonest case, without counting (a count parses its arguments).
        name, value = headers[0]
        text = f"{name}:{value}"
        if ":" in name or ":" in value or "\n" in text or "\\" in text or "\r" in text:
            return None
        return text.encode()
    if not count:
        return None
    text = "\n".join(map(":".join, headers))
    if (
        text.count(":") != count
        or text.count("\n") != count - 1
        or "\\" in text
        or "\r" in text
        or (count > 1 and len(dict(headers)) != count)
    ):
        return None
    return text.encode()


def _decode_entry(payload: bytes) -> tuple[str, Message]:
    """:returns: the node and the message of :func:`encode_entry`'s bytes."""
    message, origin = _entry_message(payload)
    return payload[_START:origin].decode(), message


def _entry_message(payload: bytes) -> tuple[Message, int]:
    """:returns: the message of :func:`encode_entry`'s bytes, and where its origin ends."""
    try:
        (
            flags,
            priority,
            redeliveries,
            expires,
            origin,
            destination,
            message_id,
            group,
            headers,
            body,
        ) = _ENTRY.unpack_from(payload, 1)
    except struct.error:
        raise ValueError("a queue entry cut short") from None
    # Each part's length, from here on where it ends.
    origin += _START
    destination += origin
    message_id += destination
    group += message_id
    headers += group
    if headers + body != len(payload):
        raise ValueError("a queue entry whose parts do not add up to its length")
    lines: Any = payload[group:headers]
    if not flags & _LINES:
        lines = tuple(tuple(pair) for pair in _loads(lines)) if lines else ()
    elif not lines:
        raise ValueError("a queue entry with empty header lines")
    message = Message(
        payload[origin:destination].decode(),
        payload[destination:message_id].decode(),
        lines,
        payload[headers:],
        expires,
        redeliveries,
        bool(flags & _PERSISTENT),
        priority,
    )
    if flags & _GROUP:
        message.group = payload[message_id:group].decode()
        message.closes_group = bool(flags & _CLOSES)
    return message, origin


def decode(payload: bytes) -> tuple[str, Message]:
    """
    :returns: the node that sent it, and the message.
    :raises ValueError: for bytes that neither :func:`encode` nor
        :func:`encode_entry` made.
    """
    try:
        first = payload[:1]
        if first == ENTRY:
            return _decode_entry(payload)
        if first == DEAD_LETTER:
            return _dead_letter(payload)
        return _decode_json(payload)
    except (TypeError, IndexError, KeyError, MalformedFrame) as error:
        # MalformedFrame: a priority or group header no SEND could have carried.
        raise ValueError(f"not a message: {error}") from None


def decode_message(payload: bytes) -> Message:
    """
    :returns: the message alone, as :func:`decode` reads it: a queue's reader
        has no use for the node that added it, and skips decoding its name.
    :raises ValueError: as :func:`decode` does.
    """
    if payload[:1] != ENTRY:
        return decode(payload)[1]
    try:
        return _entry_message(payload)[0]
    except (TypeError, IndexError, KeyError, MalformedFrame) as error:
        raise ValueError(f"not a message: {error}") from None


def _decode_json(payload: bytes) -> tuple[str, Message]:
    """:returns: the node and the message of :func:`encode`'s bytes."""
    end = payload.index(b"\n")
    origin, destination, message_id, headers, expires, redeliveries, persistent = _loads(
        payload[:end]
    )
    headers = tuple(tuple(pair) for pair in headers)
    message = Message(
        destination,
        message_id,
        headers,
        payload[end + 1 :],
        expires,
        redeliveries,
        bool(persistent),
        # Derived from the headers, as recovery does: the format stays what older nodes read.
        parse_priority(stored_priority(headers)),
    )
    if _GROUPED in payload[:end]:
        message.group, message.closes_group = stored_group(headers)
    return origin, message


def _dead_letter(payload: bytes) -> tuple[str, Message]:
    """:returns: the copy a marked entry stands for, with the headers that say why."""
    end = payload.index(b"\n")
    target, message_id, reason = _loads(payload[1:end])
    origin, message = decode(payload[end + 1 :])
    headers = tuple(pair for pair in message.headers if pair[0] not in DEAD_LETTER_HEADERS)
    headers += (
        ("original-destination", message.destination),
        ("original-message-id", message.message_id),
        ("dead-letter-reason", reason),
    )
    copy = Message(
        target,
        message_id,
        headers,
        message.body,
        persistent=message.persistent,
        priority=message.priority,
        group=message.group,
        closes_group=message.closes_group,
    )
    return origin, copy


def mark_resent(payload: bytes) -> bytes:
    """
    :returns: the message in ``payload`` with one more redelivery, for a write
        sent again after its connection died: the first try may have reached
        Redis, so the copy this one makes must say ``redelivered:true``.
    :raises ValueError: for bytes that :func:`encode` did not make.
    """
    origin, message = decode(payload)
    message.redeliveries += 1
    return (encode_entry if payload[:1] == ENTRY else encode)(origin, message)
