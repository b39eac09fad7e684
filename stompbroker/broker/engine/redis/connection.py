"""
The redis-py asyncio client on Twisted's asyncio reactor.

Twisted's ``asyncio`` reactor (and ``uvloop``, the same reactor on uvloop's
loop) runs an asyncio event loop, so redis-py's ``redis.asyncio`` client runs on
the reactor's own thread: a coroutine is started with
:func:`asyncio.ensure_future` and its result comes back as a Deferred
(``Deferred.fromFuture``).  The engine's code, called from the reactor, and the
coroutines, run by the loop, never run at the same time, so they share the
broker's objects without locks.  Any other reactor is refused at start
(:func:`check_reactor`).

:class:`Writer` is the one path every write a message causes takes (``PUBLISH``,
``XADD``, ``XACK``...): commands are queued in call order and sent as one
pipeline per turn of the loop, one pipeline at a time, so Redis applies them in
the order the broker asked for them (per publisher order) and a busy node pays
one round trip for many messages.

When a pipeline's connection dies, the writer keeps its commands, in order,
and sends them again once Redis answers (redis-py is told not to re-send by
itself: :func:`make_client` ``retries=0``), so that it knows which writes go
twice: a message ``XADD`` ed again carries one more redelivery
(:func:`~stompbroker.broker.engine.redis.codec.mark_resent`), so that if the
first try had reached Redis the second copy says ``redelivered:true``.  While
Redis is away, whoever waits for a reply (a RECEIPT) waits, up to the
:class:`~stompbroker.broker.engine.redis.outage.Outage`'s hold.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, cast

from attrs import frozen
from redis import asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import ExponentialBackoff
from redis.exceptions import AuthenticationError, ConnectionError, RedisError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeout
from twisted.internet.defer import Deferred

from stompbroker.broker.engine.base import EngineUnavailable
from stompbroker.broker.engine.redis.codec import mark_resent
from stompbroker.broker.engine.redis.outage import Outage, unreachable_text
from stompbroker.broker.engine.redis.url import EngineURL
from stompbroker.broker.engine.redis.wire import REPLY_TIMEOUT, execute, shaped
from stompbroker.broker.engine.redis.wire import pack as wire_pack
from stompbroker.logs import logger
from stompbroker.protocol.errors import ProtocolError

__all__ = [
    "MINIMUM_VERSION",
    "Durability",
    "EngineUnavailable",
    "NotReplicated",
    "PRIMARY_ONLY",
    "RedisUnreachable",
    "Writer",
    "check_reactor",
    "check_server",
    "close_client",
    "make_client",
    "run",
]

log = logger("stompbroker.broker.engine.redis")

#: The oldest server the engine works with: streams with ``XAUTOCLAIM``, ``GETDEL``.
MINIMUM_VERSION = (6, 2)
#: Back-off between reconnection attempts: from BACKOFF_BASE doubling to BACKOFF_CAP s.
BACKOFF_BASE = 0.05
BACKOFF_CAP = 2.0
#: Errors that mean the server is away (rather than a command being wrong).
CONNECTION_ERRORS = (ConnectionError, RedisTimeout, OSError)


#: Marks a batch of messages for one channel among a writer's commands.
_BATCH = object()
#: Most messages in one batch: a node fans a batch out in one go, so a batch
#: must stay small beside its subscribers' buffers (--slow-consumer-buffer).
MAX_BATCH = 128


class RedisUnreachable(ProtocolError):
    """
    A frame needs the Redis server, and it is away: the client gets an ERROR
    (the node reconnects by itself; the client may try again).
    """


class NotReplicated(RedisUnreachable):
    """
    A receipted write reached the primary, but fewer replicas than
    ``--engine-wait-replicas`` confirmed it within ``--engine-wait-timeout``:
    the client gets an ERROR (the message is stored, and may be lost on failover).
    """


@frozen
class Durability:
    """
    What a RECEIPT of a persistent SEND waits for (``--engine-wait-replicas``,
    ``--engine-wait-timeout``).

    :ivar replicas: how many replicas must have the write (Redis's ``WAIT``);
        0: the primary's answer is enough.
    :ivar timeout: seconds ``WAIT`` waits for them.
    """

    replicas: int = 0
    timeout: float = 1.0


#: The default: a RECEIPT waits for the primary only.
PRIMARY_ONLY = Durability()


def check_reactor(reactor: Any) -> asyncio.AbstractEventLoop:
    """
    :returns: the asyncio loop that ``reactor`` runs.
    :raises EngineUnavailable: if ``reactor`` is not Twisted's asyncio reactor.
    """
    loop: asyncio.AbstractEventLoop | None = getattr(reactor, "_asyncioEventloop", None)
    if loop is None:
        raise EngineUnavailable(
            "the redis engine runs on Twisted's asyncio reactor: start twistd with"
            " -r uvloop (or -r asyncio)"
        )
    return loop


def run(loop: asyncio.AbstractEventLoop, coroutine: Coroutine[Any, Any, Any]) -> Deferred[Any]:
    """:returns: a Deferred of the coroutine, run as a task on ``loop``."""
    return Deferred.fromFuture(asyncio.ensure_future(coroutine, loop=loop))


def make_client(
    url: EngineURL, *, forever: bool = False, retries: int = 3, backoff_cap: float = BACKOFF_CAP
) -> aioredis.Redis:
    """
    :param forever: retry a command that lost its connection for ever, with the
        back-off (for the pub/sub reader, which must come back by itself).
    :param retries: otherwise, how often to send a command again after its
        connection died: 0 for the writer and the queues' reads, which must
        know that a command may have reached Redis without its reply.
    :param backoff_cap: the longest wait between two attempts to reconnect.
    :returns: a client for ``url`` (it connects on first use).  With Sentinel
        (``url.sentinels``), redis-py's Sentinel client: each new connection
        asks the Sentinels where the primary is, so that after a failover the
        client's next connection goes to the new primary (and a connection to a
        primary demoted meanwhile is closed on its first write: ``READONLY``).
    """
    backoff = ExponentialBackoff(cap=backoff_cap, base=BACKOFF_BASE)
    retry = Retry(backoff, -1 if forever else retries)
    options: dict[str, Any] = {
        "db": url.db,
        "username": url.username,
        "password": url.password,
        "ssl": url.tls,
        "retry": retry,
        "retry_on_error": [ConnectionError, RedisTimeout],
        "socket_connect_timeout": 5,
        "health_check_interval": 0,
        "decode_responses": False,
    }
    if not url.sentinels:
        return aioredis.Redis(host=url.host, port=url.port, **options)
    sentinel = Sentinel(
        list(url.sentinels),
        sentinel_kwargs={
            "password": url.sentinel_password,
            "ssl": url.tls,
            "socket_connect_timeout": 2,
            "socket_timeout": 2,
        },
    )
    client: aioredis.Redis = sentinel.master_for(url.master, redis_class=aioredis.Redis, **options)
    return client


async def close_client(client: aioredis.Redis) -> None:
    """Close ``client``, and with Sentinel its connections to the Sentinels."""
    await client.aclose()
    sentinel = getattr(client.connection_pool, "sentinel_manager", None)
    if sentinel is not None:
        await sentinel.aclose()


async def check_server(client: aioredis.Redis, url: EngineURL) -> str:
    """
    Connect, log in, and check the server's version.

    :returns: the server's version, as it says it.
    :raises EngineUnavailable: with what to do about it, if the server cannot be
        reached, refuses the password, or is older than :data:`MINIMUM_VERSION`.
    """
    try:
        info: dict[Any, Any] = await client.info("server")
    except AuthenticationError as error:
        raise EngineUnavailable(
            f"Redis at {url.masked} refused the login: {error}; check the password"
            " (in the URL, ?password_file= or --engine-password-file)"
        ) from None
    except ResponseError as error:
        if "NOAUTH" in str(error) or "WRONGPASS" in str(error):
            raise EngineUnavailable(f"Redis at {url.masked} needs a password: {error}") from None
        raise EngineUnavailable(f"Redis at {url.masked} answered: {error}") from None
    except CONNECTION_ERRORS as error:
        raise EngineUnavailable(f"cannot reach Redis at {url.masked}: {error}") from None
    except RedisError as error:
        raise EngineUnavailable(f"Redis at {url.masked}: {error}") from None
    version = str(info.get("redis_version", info.get(b"redis_version", "0")))
    numbers = tuple(int(part) for part in version.split(".")[:2] if part.isdigit())
    if numbers < MINIMUM_VERSION:
        raise EngineUnavailable(
            f"Redis at {url.masked} is version {version}; the redis engine needs"
            f" {'.'.join(map(str, MINIMUM_VERSION))} or later (Redis 7 or Valkey 7/8)"
        )
    return version


class Writer:
    """
    Sends commands to Redis in the order they were asked for, a pipeline at a time.

    :param client: the redis-py asyncio client (made with ``retries=0``).
    :param loop: the reactor's asyncio loop.
    :param outage: told when Redis goes away and comes back; its hold bounds
        how long waiters wait (a hold of 0 fails them at once).
    :param back: called each time Redis answers again after an outage.
    :param durability: with replicas, a pipeline that carries a write someone
        waits for as stored (:meth:`command_waited` ``replicated=True``) ends
        with ``WAIT replicas timeout``: one round trip to the replicas for the
        whole pipeline, and its waiters fire only once enough replicas have it.

    :ivar connected: whether the last pipeline reached the server.  While it is
        ``False``, what was accepted stays queued here and is sent once the
        server is back; the engine refuses new messages only once the outage
        has outlasted its hold.
    """

    def __init__(
        self,
        client: aioredis.Redis,
        loop: asyncio.AbstractEventLoop,
        pack: Callable[[str, list[bytes]], bytes] | None = None,
        outage: Outage | None = None,
        back: Callable[[], None] | None = None,
        durability: Durability = PRIMARY_ONLY,
    ) -> None:
        self.client = client
        self.durability = durability
        #: The waiters whose writes must reach the replicas before they fire.
        self._replicated: set[Deferred[Any]] = set()
        self.connected = True
        self.outage = outage
        self._back = back
        if outage is not None:
            outage.on_expiry(self._gave_up)
        self._loop = loop
        #: Makes one payload of a batch of messages for one channel (:meth:`publish`).
        self._pack = pack
        #: The batch :meth:`publish` may still add to: the last command, if it is one.
        self._batch: list[Any] | None = None
        #: Commands not yet sent, each an args tuple (or a batch, a list: :meth:`publish`).
        self._commands: list[Sequence[Any]] = []
        #: (index in _commands after which it fires, Deferred) for those who wait.
        self._waiters: list[tuple[int, Deferred[Any]]] = []
        self._running: asyncio.Task[None] | None = None
        self._idle: asyncio.Event = asyncio.Event()
        self._idle.set()

    def command(self, *args: Any) -> None:
        """Queue a command; nothing waits for it."""
        self._commands.append(args)
        if self._running is None:
            self._start()

    def publish(self, channel: str, payload: bytes) -> None:
        """
        Queue a message for a pub/sub channel: messages for the same channel with
        no other command between them go as one ``PUBLISH`` of a batch (the
        ``pack`` given, with the channel and the payloads), so that a busy
        publisher costs every node one pub/sub message per turn of the loop
        rather than one per message.
        """
        commands = self._commands
        batch = self._batch
        if (
            batch is not None
            and commands
            and commands[-1] is batch
            and batch[1] == channel
            and len(batch[2]) < MAX_BATCH
        ):
            batch[2].append(payload)
            return
        batch = self._batch = [_BATCH, channel, [payload]]
        commands.append(batch)
        if self._running is None:
            self._start()

    def command_waited(self, *args: Any, replicated: bool = False) -> Deferred[Any]:
        """
        Queue a command.

        :param replicated: a write a RECEIPT promises: with a
            :class:`Durability` of replicas, wait for them too.
        :returns: a Deferred that fires with its reply once Redis has it, or
            fails with :class:`RedisUnreachable` (the command stays queued), or
            :class:`NotReplicated`.
        """
        waiter: Deferred[Any] = Deferred()
        if replicated and self.durability.replicas:
            self._replicated.add(waiter)
        self._commands.append(args)
        outage = self.outage
        if not self.connected and (outage is None or outage.expired):
            # Away past the hold: the command is sent when Redis is back; nobody waits.
            waiter.errback(self._unreachable(None if outage is None else outage.lasted()))
        else:
            self._waiters.append((len(self._commands) - 1, waiter))
        if self._running is None:
            self._start()
        return waiter

    def held_bytes(self) -> int:
        """
        :returns: about how many bytes the commands queued here hold: counted in
            the memory in use (``--memory-high``) while Redis is away; 0 while
            it is there (what is queued then leaves within a turn of the loop).
        """
        if self.connected:
            return 0
        total = 0
        for args in self._commands:
            for arg in args[2] if args[0] is _BATCH else args:
                if isinstance(arg, bytes):
                    total += len(arg)
            total += 64
        return total

    def shed(self) -> int:
        """Nothing queued here can be dropped (it was accepted): :returns: 0."""
        return 0

    def _start(self) -> None:
        self._idle.clear()
        self._running = self._loop.create_task(self._send_all())

    async def _send_all(self) -> None:
        """Send what is queued, pipeline after pipeline, until nothing is left."""
        delay = BACKOFF_BASE
        try:
            while self._commands:
                commands, self._commands = self._commands, []
                waiters, self._waiters = self._waiters, []
                wait = any(waiter in self._replicated for _, waiter in waiters)
                try:
                    replies = await self._pipeline(commands, wait)
                except CONNECTION_ERRORS as error:
                    # Keep them, in order, ahead of what came meanwhile (whose
                    # waiters' places move up), marked as sent once already.
                    sent = len(commands)
                    self._commands[:0] = [_resent(args) for args in commands]
                    self._waiters = waiters + [
                        (index + sent, waiter) for index, waiter in self._waiters
                    ]
                    if self.connected:
                        log.error("lost Redis: {error}; reconnecting", error=str(error))
                        self.connected = False
                        if self.outage is not None:
                            self.outage.began()
                    if self.outage is None or self.outage.expired:
                        self._fail_waiters(self._unreachable(None, error))
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, BACKOFF_CAP)
                    continue
                if not self.connected:
                    log.info("Redis is back")
                    self.connected = True
                    if self.outage is not None:
                        self.outage.ended()
                    if self._back is not None:
                        self._back()
                delay = BACKOFF_BASE
                short = self._short_of_replicas(replies[-1]) if wait else None
                for index, waiter in waiters:
                    reply = replies[index]
                    if waiter in self._replicated:
                        self._replicated.discard(waiter)
                        if short is not None and not isinstance(reply, Exception):
                            waiter.errback(short)
                            continue
                    if isinstance(reply, Exception):
                        waiter.errback(RedisUnreachable("not stored", f"Redis refused: {reply}"))
                    else:
                        waiter.callback(shaped(self.client, commands[index], reply))
                for reply in replies:
                    if isinstance(reply, ResponseError):
                        log.error("Redis refused a command: {error}", error=str(reply))
        finally:
            self._running = None
            self._idle.set()

    def _short_of_replicas(self, reply: Any) -> NotReplicated | None:
        """:returns: the error for ``WAIT``'s reply if fewer replicas than asked have the writes."""
        wanted = self.durability.replicas
        if isinstance(reply, int) and reply >= wanted:
            return None
        said = f"Redis answered {reply}" if isinstance(reply, Exception) else f"{reply} did"
        return NotReplicated(
            "message not replicated",
            f"the message is stored on the broker's Redis primary, but {wanted} of its"
            f" replicas did not confirm it within {self.durability.timeout:g} s ({said};"
            " --engine-wait-replicas): a failover may lose it",
        )

    def _gave_up(self, lasted: float) -> None:
        """The outage outlasted its hold: whoever waits hears of it now."""
        if not self.connected:
            self._fail_waiters(self._unreachable(lasted))

    @staticmethod
    def _unreachable(lasted: float | None, error: Exception | None = None) -> RedisUnreachable:
        if lasted is not None:
            return RedisUnreachable("message not stored", unreachable_text(lasted))
        return RedisUnreachable(
            "message not stored",
            f"the broker's Redis server is unreachable ({error}); the broker is"
            " reconnecting: send again later",
        )

    def _fail_waiters(self, error: RedisUnreachable) -> None:
        """Fail every waiter now (their commands stay queued and will still be sent)."""
        waiters, self._waiters = self._waiters, []
        for _, waiter in waiters:
            self._replicated.discard(waiter)
            waiter.errback(error)

    async def _pipeline(self, commands: list[Sequence[Any]], wait: bool = False) -> list[Any]:
        """
        Send ``commands`` as one pipeline (:mod:`.wire`: packed at once, the
        replies read in one loop under one timeout).

        :returns: their replies, an error reply as its exception.
        """
        pack = self._pack
        sent: list[Sequence[Any]] = []
        for args in commands:
            if args[0] is _BATCH:
                assert pack is not None
                sent.append(("PUBLISH", args[1], pack(args[1], args[2])))
            else:
                sent.append(args)
        timeout = REPLY_TIMEOUT
        if wait:
            durability = self.durability
            sent.append(("WAIT", durability.replicas, int(durability.timeout * 1000)))
            timeout += durability.timeout
        # Every command is a tuple: a batch's list was made one above.
        packed = wire_pack(cast(list[tuple[Any, ...]], sent))
        return await execute(self.client, packed, len(sent), timeout)

    async def drained(self) -> None:
        """Wait until everything queued has been sent (or the server is gone for good)."""
        await self._idle.wait()


class _Resent(tuple):
    """A command sent once already: marked once, however often it is sent again."""

    __slots__ = ()


def _resent(args: Sequence[Any]) -> Sequence[Any]:
    """
    :returns: a command to send again after its connection died: a message's
        ``XADD`` with the message marked as redelivered, once; others as they are.
    """
    if isinstance(args, _Resent) or not isinstance(args, tuple):
        return args
    if len(args) == 5 and args[0] == "XADD" and args[3] == "m":
        return _Resent((*args[:4], mark_resent(args[4])))
    return _Resent(args)
