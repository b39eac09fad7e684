"""
A pipeline of commands to Redis in one write, and its replies in one read loop.

The :class:`~stompbroker.broker.engine.redis.writer.Writer` sends every
write a message causes (an ``XADD`` per queue message, ``XACK``/``XDEL`` per
batch settled) as one pipeline per turn of the loop.  redis-py's pipeline costs
a few microseconds per command on top of Redis's own work: it packs each
command through its encoder, and reads each reply through three coroutines and
an asyncio timeout of its own.  A node that sends tens of thousands of queue
messages a second spent about 40 % of its CPU there.  This module does the same
on a connection of the same client (so that it connects, logs in, follows
Sentinel and TLS as the client does): :func:`pack` makes the whole pipeline's
bytes at once, and :func:`execute` reads every reply with the connection's
hiredis reader in one loop, under one timeout for the whole pipeline.  Without
hiredis it reads each reply through redis-py, as its pipeline does.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from redis import asyncio as aioredis
from redis.exceptions import ConnectionError, DataError, ReadOnlyError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeout

try:
    from redis._parsers.hiredis import NOT_ENOUGH_DATA
except ImportError:  # an older redis-py: each reply through redis-py
    NOT_ENOUGH_DATA = None

__all__ = ["errors", "execute", "pack", "shaped"]

#: Seconds a pipeline's replies may take, beyond any ``WAIT`` it carries (as
#: redis-py's default socket timeout).
REPLY_TIMEOUT = 5.0


#: The packed heads of the commands sent most, all but their last argument:
#: ``XADD stream * m`` before each message, say (bounded by :data:`MAX_HEADS`).
_heads: dict[tuple[Any, ...], bytes] = {}
MAX_HEADS = 1024
#: The length lines of the last arguments of those commands, by size (most
#: messages of a publisher are of a few sizes; bounded by :data:`MAX_HEADS`).
_lengths: dict[int, bytes] = {}


def pack(commands: Iterable[tuple[Any, ...]]) -> bytes:
    """
    :param commands: each the tuple of arguments of a command (``str``, ``bytes``,
        ``int`` or ``float``), as redis-py's ``execute_command`` takes them; a
        command's name is one word (``SCRIPT``, ``LOAD``: not ``SCRIPT LOAD``).
    :returns: the commands in the Redis protocol (RESP), one after another.
    :raises DataError: for an argument of another type (as redis-py does).

    A command whose arguments but the last are strings and whose last is
    ``bytes`` (a message's ``XADD``) has its head packed once and kept.
    """
    out: list[bytes] = []
    append = out.append
    heads = _heads
    lengths = _lengths
    for args in commands:
        last = args[-1]
        if type(last) is bytes:
            head = heads.get(args[:-1])
            if head is None:
                head = _head(args)
            append(head)
            size = len(last)
            length = lengths.get(size)
            if length is None:
                length = _length(size)
            append(length)
            append(last)
            append(b"\r\n")
            continue
        append(b"*%d\r\n" % len(args))
        _pack_args(args, append)
    return b"".join(out)


def _length(size: int) -> bytes:
    """:returns: a bulk string's length line (``$117\\r\\n``), kept for the next of that size."""
    length = b"$%d\r\n" % size
    if len(_lengths) >= MAX_HEADS:
        _lengths.clear()
    _lengths[size] = length
    return length


def _head(args: tuple[Any, ...]) -> bytes:
    """:returns: a command's packed head, all but its last argument; kept if all are strings."""
    parts: list[bytes] = [b"*%d\r\n" % len(args)]
    first = args[:-1]
    _pack_args(first, parts.append)
    head = b"".join(parts)
    if all(type(arg) is str for arg in first):
        if len(_heads) >= MAX_HEADS:
            _heads.clear()
        _heads[first] = head
    return head


def _pack_args(args: Iterable[Any], append: Any) -> None:
    for arg in args:
        kind = type(arg)
        if kind is str:
            arg = arg.encode()
        elif kind is not bytes:
            arg = _encoded(arg)
        append(b"$%d\r\n" % len(arg))
        append(arg)
        append(b"\r\n")


def _encoded(arg: Any) -> bytes:
    """:returns: an argument other than ``str`` or ``bytes`` as redis-py encodes it."""
    if isinstance(arg, bool):
        raise DataError(f"invalid input of type bool: {arg!r}; convert it to bytes, str or int")
    if isinstance(arg, int):
        return b"%d" % arg
    if isinstance(arg, float):
        return repr(arg).encode()
    if isinstance(arg, str):
        return arg.encode()
    if isinstance(arg, (bytes, bytearray, memoryview)):
        return bytes(arg)
    raise DataError(
        f"invalid input of type {type(arg).__name__}; convert it to bytes, str, int or float"
    )


def shaped(client: aioredis.Redis, args: Sequence[Any], reply: Any) -> Any:
    """
    :returns: a command's raw reply as redis-py's pipeline gives it (through
        the client's response callback for the command: ``HGETALL`` as a dict,
        ``XRANGE`` as ``(id, fields)`` pairs...); an error reply as it is.
    """
    if isinstance(reply, Exception):
        return reply
    callback = client.response_callbacks.get(args[0])
    return reply if callback is None else callback(reply)


async def execute(
    client: aioredis.Redis,
    packed: bytes | Callable[[Any], bytes],
    count: int,
    timeout: float | None = REPLY_TIMEOUT,
) -> list[Any]:
    """
    Send a packed pipeline on one of ``client``'s connections and read its replies.

    :param packed: what :func:`pack` made of ``count`` commands, or what
        makes it for the connection they go over (:class:`.scripts.LoadedScripts`).
    :param timeout: seconds the first reply may take, and each read of more
        after it (so that a long pipeline, after an outage, is not cut short);
        ``None``: as long as they take (the writer's pipelines, whose caller
        asks on the side whether Redis answers: :mod:`.ping`).
    :returns: the replies in order, as Redis gave them (:func:`shaped` makes
        one what redis-py's pipeline gives), an error reply as its
        ``ResponseError`` (as redis-py's ``execute(raise_on_error=False)``).
    :raises ConnectionError: when the connection dies (it is closed, so that
        its next use connects again), or, with Sentinel, when the server became
        a replica (``READONLY``).
    :raises TimeoutError: redis-py's, when the replies do not come in time.
    """
    pool = client.connection_pool
    connection = await pool.get_connection()
    try:
        if not isinstance(packed, bytes):
            packed = packed(connection)
        await connection.send_packed_command(packed, check_health=False)
        try:
            async with asyncio.timeout(timeout) as deadline:
                replies = await _read(connection, count, _Patience(deadline, timeout))
        except TimeoutError:
            raise RedisTimeout(f"Redis did not answer within {timeout:g} s") from None
        except OSError as error:
            raise ConnectionError(f"Error while reading from Redis: {error}") from None
        if getattr(pool, "is_master", False):
            for reply in errors(replies):
                if isinstance(reply, ReadOnlyError):
                    raise ConnectionError("The previous master is now a replica")
    except BaseException:
        await connection.disconnect(nowait=True)
        raise
    finally:
        await pool.release(connection)
    return replies


class _Patience:
    """Moves a pipeline's deadline on each time Redis sends more of its replies."""

    __slots__ = ("_deadline", "_seconds", "_loop")

    def __init__(self, deadline: asyncio.Timeout, seconds: float | None) -> None:
        self._deadline = deadline
        self._seconds = seconds
        self._loop = asyncio.get_running_loop()

    def renew(self) -> None:
        if self._seconds is not None:
            self._deadline.reschedule(self._loop.time() + self._seconds)


async def _read(connection: Any, count: int, patience: _Patience) -> list[Any]:
    """:returns: ``count`` replies read from ``connection``, error replies as exceptions."""
    parser = connection._parser
    reader = getattr(parser, "_reader", None)
    if NOT_ENOUGH_DATA is None or reader is None or not hasattr(parser, "read_from_socket"):
        return await _read_each(connection, count, patience)
    gets = reader.gets
    replies: list[Any] = []
    append = replies.append
    while True:
        reply = gets()
        while reply is not NOT_ENOUGH_DATA:
            append(reply)
            if len(replies) == count:
                for error in errors(replies):
                    if isinstance(error, ConnectionError):
                        # LOADING and the like: the server cannot serve now.
                        raise error
                return replies
            reply = gets()
        await parser.read_from_socket()
        patience.renew()


def errors(replies: list[Any]) -> list[Exception]:
    """
    :returns: the error replies among ``replies``, in order: most often none,
        which one pass over their types in C tells (a pipeline of queue
        messages has one reply each).
    """
    for kind in set(map(type, replies)):
        if issubclass(kind, Exception):
            return [reply for reply in replies if isinstance(reply, Exception)]
    return []


async def _read_each(connection: Any, count: int, patience: _Patience) -> list[Any]:
    """Read reply after reply through redis-py (a connection without hiredis)."""
    replies: list[Any] = []
    for _ in range(count):
        try:
            replies.append(await connection.read_response(timeout=math.inf))
        except ResponseError as error:
            replies.append(error)
        patience.renew()
    return replies
