"""
The redis-py clients a node uses, and where they connect: the server of a
``redis://`` URL, or the primary the Sentinels of a ``redis+sentinel://`` URL
name now.

A primary can move (a Sentinel failover) while a client is connected to it.
Each client treats a ``READONLY`` answer (the server is a replica now) as a
lost connection: it drops the connection and the next one asks again where
the primary is (redis-py's Sentinel connections do the same; the plain ones
here do it too, so that no ``READONLY`` reaches a STOMP client as an ERROR).
With Sentinel, a node asks every Sentinel at once and believes the one with
the newest configuration (:class:`NewestSentinel`): right after a failover, a
Sentinel that has not heard of it yet still names the old primary.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from redis import asyncio as aioredis
from redis.asyncio.connection import Connection, ConnectionPool, SSLConnection
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import MasterNotFoundError, Sentinel
from redis.backoff import ExponentialBackoff
from redis.exceptions import (
    AuthenticationError,
    ConnectionError,
    ReadOnlyError,
    RedisError,
    ResponseError,
)
from redis.exceptions import TimeoutError as RedisTimeout
from twisted.internet.defer import Deferred

from stompbroker.broker.engine.engine_interface import EngineUnavailable
from stompbroker.broker.engine.redis.url import EngineURL

__all__ = [
    "BACKOFF_BASE",
    "BACKOFF_CAP",
    "CONNECTION_ERRORS",
    "Connects",
    "MINIMUM_VERSION",
    "NewestSentinel",
    "check_reactor",
    "check_server",
    "close_client",
    "evicting",
    "make_client",
    "run",
]

#: The oldest server the engine works with: streams with ``XAUTOCLAIM``, ``GETDEL``.
MINIMUM_VERSION = (6, 2)
#: Back-off between reconnection attempts: from BACKOFF_BASE doubling to BACKOFF_CAP s.
BACKOFF_BASE = 0.05
BACKOFF_CAP = 2.0
#: Errors that mean the server is away (rather than a command being wrong).
CONNECTION_ERRORS = (ConnectionError, RedisTimeout, OSError)
#: Seconds a node waits for every Sentinel's answer before it takes the newest
#: of those it has (a Sentinel that is down must not slow every reconnect).
ANSWER_WAIT = 0.5


class Connects:
    """
    Counts a client's connections as they are made (redis-py's
    ``redis_connect_func``): a count that changed between two commands means
    the second went over a new connection, maybe to another server.

    :ivar count: connections made so far.
    """

    def __init__(self) -> None:
        self.count = 0

    async def connected(self, connection: Any) -> None:
        """Set up a new ``connection`` as redis-py would (log in, select), and count it."""
        await connection.on_connect()
        self.count += 1


class _PrimaryConnection(Connection):
    """A connection to a server that must be a primary: ``READONLY`` drops it."""

    async def read_response(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await super().read_response(*args, **kwargs)
        except ReadOnlyError:
            await self.disconnect()
            raise ConnectionError("the server is a replica now (READONLY)") from None


class _PrimarySSLConnection(_PrimaryConnection, SSLConnection):
    """:class:`_PrimaryConnection` over TLS."""


class NewestSentinel(Sentinel):
    """
    redis-py's Sentinel client, but the primary it names is the one of the
    newest configuration (``config-epoch``) any Sentinel that answers within
    :data:`ANSWER_WAIT` knows: redis-py's takes the first Sentinel's word.
    """

    async def discover_master(self, service_name: str) -> tuple[str, int]:
        """
        :returns: the primary's (address, port).
        :raises MasterNotFoundError: if no Sentinel names a primary that is up.
        """
        asks = [asyncio.ensure_future(sentinel.sentinel_masters()) for sentinel in self.sentinels]
        done, pending = await asyncio.wait(asks, timeout=ANSWER_WAIT)
        best = self._newest(done, service_name)
        if best is None and pending:
            more, pending = await asyncio.wait(pending)
            best = self._newest(more, service_name)
        for ask in pending:
            ask.cancel()
        if best is None:
            errors = ", ".join(repr(ask.exception()) for ask in done if ask.exception())
            raise MasterNotFoundError(f"No master found for {service_name!r} {errors}".strip())
        return best["ip"], best["port"]

    def _newest(self, answers: Any, service_name: str) -> dict[str, Any] | None:
        best: dict[str, Any] | None = None
        for ask in answers:
            if ask.cancelled() or ask.exception() is not None:
                continue
            state = ask.result().get(service_name)
            if not state or not self.check_master_state(state, service_name):
                continue
            if best is None or state.get("config-epoch", 0) > best.get("config-epoch", 0):
                best = state
        return best


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
    url: EngineURL,
    *,
    forever: bool = False,
    retries: int = 3,
    backoff_cap: float = BACKOFF_CAP,
    connects: Connects | None = None,
) -> aioredis.Redis:
    """
    :param forever: retry a command that lost its connection for ever, with the
        back-off (for the pub/sub reader, which must come back by itself).
    :param retries: otherwise, how often to send a command again after its
        connection died: 0 for the writer and the queues' reads, which must
        know that a command may have reached Redis without its reply.
    :param backoff_cap: the longest wait between two attempts to reconnect.
    :param connects: counts the client's connections as they are made.
    :returns: a client for ``url`` (it connects on first use).  With Sentinel
        (``url.sentinels``), each new connection asks the Sentinels where the
        primary is (:class:`NewestSentinel`); either way a ``READONLY`` answer
        drops the connection, so the next one goes to the primary.
    """
    backoff = ExponentialBackoff(cap=backoff_cap, base=BACKOFF_BASE)
    retry = Retry(backoff, -1 if forever else retries)
    options: dict[str, Any] = {
        "db": url.db,
        "username": url.username,
        "password": url.password,
        "retry": retry,
        "retry_on_error": [ConnectionError, RedisTimeout],
        "socket_connect_timeout": 5,
        "health_check_interval": 0,
        "decode_responses": False,
        # A bound coroutine function: redis-py awaits only what asyncio calls one.
        "redis_connect_func": None if connects is None else connects.connected,
    }
    if not url.sentinels:
        pool = ConnectionPool(
            connection_class=_PrimarySSLConnection if url.tls else _PrimaryConnection,
            host=url.host,
            port=url.port,
            **options,
        )
        return aioredis.Redis.from_pool(pool)
    sentinel = NewestSentinel(list(url.sentinels), sentinel_kwargs=sentinel_options(url))
    client: aioredis.Redis = sentinel.master_for(
        url.master, redis_class=aioredis.Redis, ssl=url.tls, **options
    )
    return client


def sentinel_options(url: EngineURL) -> dict[str, Any]:
    """:returns: how a node connects to the Sentinels of ``url``."""
    return {
        "password": url.sentinel_password,
        "ssl": url.tls,
        "socket_connect_timeout": 2,
        "socket_timeout": 2,
    }


async def close_client(client: aioredis.Redis) -> None:
    """Close ``client``, and with Sentinel its connections to the Sentinels."""
    await client.aclose()
    sentinel = getattr(client.connection_pool, "sentinel_manager", None)
    if sentinel is not None:
        await sentinel.aclose()


async def check_server(client: aioredis.Redis, url: EngineURL) -> str:
    """
    Connect, log in, and check the server's version, and that it evicts no keys.

    :returns: the server's version, as it says it.
    :raises EngineUnavailable: with what to do about it, if the server cannot be
        reached, refuses the password, is older than :data:`MINIMUM_VERSION`,
        or would evict keys when full (:func:`evicting`).
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
    try:
        memory: dict[Any, Any] = await client.info("memory")
    except RedisError as error:
        raise EngineUnavailable(f"Redis at {url.masked}: {error}") from None
    refusal = evicting(memory)
    if refusal is not None:
        raise EngineUnavailable(f"Redis at {url.masked} {refusal}")
    return version


def evicting(memory: dict[Any, Any]) -> str | None:
    """
    :param memory: what ``INFO memory`` says (``maxmemory``, ``maxmemory_policy``).
    :returns: why the engine refuses a server that would evict keys when full
        (an evicted stream entry is a message lost, without a word to anyone),
        or ``None`` when it would not: no ``maxmemory``, or ``noeviction``
        (then a full Redis refuses writes, and the engine says so: docs/cluster.md).
    """

    def field(name: str) -> str:
        value = memory.get(name, memory.get(name.encode(), ""))
        return value.decode() if isinstance(value, bytes) else str(value)

    limit = field("maxmemory") or "0"
    policy = field("maxmemory_policy") or "noeviction"
    if limit == "0" or policy == "noeviction":
        return None
    return (
        f"evicts keys when full (maxmemory {limit} bytes, maxmemory-policy {policy}):"
        " an evicted message is lost; set maxmemory-policy noeviction (or no maxmemory)"
    )
