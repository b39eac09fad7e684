"""
Streams (``/stream/NAME``) on the redis engine: one Redis stream per
destination, shared by every node.

Theory of operation.  A SEND runs :data:`APPEND` in the server: ``XADD`` the
message, ``PUBLISH`` the new entry (its id and the message) on the stream's
channel, and trim the oldest entries while the stream holds more than
``--stream-max-bytes`` (a counter key keeps its size) or they are older than
``--stream-max-age``: one script, so every node sees the entries on the channel
in the stream's own order.  Every node holds one pattern subscription to all
stream channels from its start, and adds what arrives to its
:class:`~stompbroker.broker.streams.log.StreamLog` of that stream, a mirror
(``complete=False``) made when it is first needed: its cache holds what the
node has seen since, and readers read the rest from Redis with ``XRANGE``, a
page at a time (:class:`RedisStreamBackend`).  Because the subscription comes
before any read, an entry is either in the answer of a read or arrives on the
channel after it, and a reader, which moves only forwards, sees it once.

Offsets come from the entry ids Redis gives (``MS-SEQ``): ``MS << 20 | SEQ``,
a 64-bit integer that only grows (the stream keeps its last id when trimmed
empty), and ``timestamp=SECONDS`` is an ``XRANGE`` from ``MS-0``.  ``last`` and
``next`` ask the server for the newest entry first (``XREVRANGE ... COUNT 1``).
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred, succeed
from zope.interface import implementer

from stompbroker.broker.engine.redis.codec import decode, encode
from stompbroker.broker.engine.redis.keys import Keys
from stompbroker.broker.engine.redis.scripts import load
from stompbroker.broker.streams.backends import IStreamBackend, RecoveredStream
from stompbroker.broker.streams.entries import StreamEntry, entry_size, stamped
from stompbroker.broker.streams.offsets import StreamLimits, StreamStart
from stompbroker.broker.streams.reader import StreamReader
from stompbroker.broker.streams.registry import Streams
from stompbroker.logs import logger
from stompbroker.protocol.message import Message

log = logger("stompbroker.broker.engine.redis")

#: Bits of an offset that hold the sequence number within a millisecond.
SEQUENCE_BITS = 20
_SEQUENCE_MASK = (1 << SEQUENCE_BITS) - 1

#: lua/stream_append.lua (what it takes and answers is said there).
APPEND = load("stream_append")


def offset_of(entry_id: bytes | str) -> int:
    """:returns: the offset of a Redis stream entry id ``MS-SEQ``."""
    text = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    ms, _, sequence = text.partition("-")
    return int(ms) << SEQUENCE_BITS | min(int(sequence), _SEQUENCE_MASK)


def entry_id_of(offset: int) -> str:
    """:returns: the Redis stream entry id of an offset (the least id at or after it)."""
    return f"{offset >> SEQUENCE_BITS}-{offset & _SEQUENCE_MASK}"


def entry_of(entry_id: bytes | str, payload: bytes) -> StreamEntry:
    """:returns: the entry of a Redis stream entry, as every reader gets it."""
    offset = offset_of(entry_id)
    timestamp = (offset >> SEQUENCE_BITS) / 1000.0
    _, message = decode(payload)
    message = stamped(message, offset, timestamp)
    return StreamEntry(
        offset,
        timestamp,
        message,
        entry_size(message.headers, message.body),
    )


@implementer(IStreamBackend)
class RedisStreamBackend:
    """
    Reads a node's stream mirrors from Redis; appends and trims are :data:`APPEND`'s.

    :param writer: the engine's :class:`~stompbroker.broker.engine.redis.writer.Writer`,
        so that a read is sent after the writes before it.
    :param names: the engine's key names.
    """

    def __init__(self, writer: Any, names: Keys) -> None:
        self._writer = writer
        self._names = names

    def append(self, destination: str, entry: StreamEntry) -> None:
        """Nothing: the entry is in Redis already (the node learnt it from there)."""

    def read(self, destination: str, offset: int, limit: int) -> Deferred[list[StreamEntry]]:
        """:returns: a Deferred of ``XRANGE`` from ``offset``, ``COUNT limit``."""
        read: Deferred[list[Any]] = self._writer().command_waited(
            "XRANGE", self._names.stream(destination), entry_id_of(offset), "+", "COUNT", limit
        )
        return read.addCallback(_entries)

    def trim(self, destination: str, first: int) -> None:
        """Nothing: :data:`APPEND` trims in the server."""

    def recover(self, limits: StreamLimits) -> Deferred[list[RecoveredStream]]:
        """:returns: nothing: a node learns streams when it needs them."""
        return succeed([])


def _entries(reply: list[Any]) -> list[StreamEntry]:
    return [entry_of(entry_id, fields[b"m"]) for entry_id, fields in reply]


class RedisStreams:
    """
    What the redis engine does for streams: append, learn entries from the
    channel, start readers.

    :param streams: the node's :class:`~stompbroker.broker.streams.registry.Streams`
        of mirrors.
    :param writer: returns the engine's writer (made when the engine opens).
    :param names: the engine's key names.
    :param node: this node's token, in each message it appends.
    :param limits: the retention :data:`APPEND` applies.
    """

    def __init__(
        self, streams: Streams, writer: Any, names: Keys, node: str, limits: StreamLimits
    ) -> None:
        self.streams = streams
        self._writer = writer
        self._names = names
        self._node = node
        self._limits = limits

    def append(self, message: Message) -> Deferred[None]:
        """:returns: a Deferred that fires once Redis has the entry (it reaches readers
        from the channel)."""
        return self._run(message.destination, encode(self._node, message)).addCallback(_nothing)

    def trim(self) -> None:
        """Apply retention by age to the streams this node knows (nobody may append)."""
        if self._limits.max_age:
            for destination in list(self.streams.logs):
                self._run(destination, b"").addErrback(_nothing)

    def _run(self, destination: str, payload: bytes) -> Deferred[Any]:
        names = self._names
        written: Deferred[Any] = self._writer().command_waited(
            "EVALSHA",
            APPEND,
            2,
            names.stream(destination),
            names.stream_size(destination),
            names.stream_channel(destination),
            self._limits.max_bytes,
            int(self._limits.max_age * 1000),
            payload,
        )
        return written

    def arrived(self, channel: bytes, data: bytes) -> None:
        """An entry came on a stream channel: add it to this node's mirror, if it has one."""
        destination = channel.decode()[len(self._names.stream_channel("")) :]
        stream = self.streams.logs.get(destination)
        if stream is None:
            return
        entry_id, _, payload = data.partition(b"\n")
        stream.add_entry(entry_of(entry_id, payload))

    def lost(self) -> None:
        """The channel was lost: what the mirrors cached may have gaps, forget it."""
        for stream in self.streams.logs.values():
            stream.forget_cache()

    def reader(self, destination: str, start: StreamStart) -> StreamReader:
        """:returns: a cursor at ``start``; for ``last`` and ``next`` once Redis said where."""
        streams = self.streams
        stream = streams.log(destination)
        clock, traffic = streams.clock, streams.traffic
        kind = start.kind
        if kind == "timestamp":
            position = int(start.value * 1000) << SEQUENCE_BITS
            return StreamReader(stream, clock, position, start.value, traffic)
        if kind in ("first", "offset"):
            return StreamReader(stream, clock, int(start.value), traffic=traffic)
        reader = StreamReader(stream, clock, 0, traffic=traffic)
        reader.wait()
        newest: Deferred[list[Any]] = self._writer().command_waited(
            "XREVRANGE", self._names.stream(destination), "+", "-", "COUNT", 1
        )
        newest.addCallback(_start_of, kind == "last", reader)
        newest.addErrback(_start_failed, reader)
        return reader


def _start_of(reply: list[Any], last: bool, reader: StreamReader) -> None:
    if not reply:
        reader.start_at(0)
        return
    offset = offset_of(reply[0][0])
    reader.start_at(offset if last else offset + 1)


def _start_failed(failure: Any, reader: StreamReader) -> None:
    log.failure("finding where {stream} ends failed", failure, stream=reader.destination)
    reader.start_at(reader.stream.next_offset)


def _nothing(result: Any) -> None:
    return None
