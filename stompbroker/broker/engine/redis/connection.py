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

:class:`~stompbroker.broker.engine.redis.writer.Writer` (:mod:`.writer`) sends
every write a message causes, in order, a pipeline per turn of the loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from stompbroker.broker.engine.engine_interface import EngineUnavailable
from stompbroker.broker.engine.redis.busy import Busy
from stompbroker.broker.engine.redis.clients import (
    BACKOFF_BASE,
    BACKOFF_CAP,
    CONNECTION_ERRORS,
    MINIMUM_VERSION,
    Connects,
    check_reactor,
    check_server,
    close_client,
    make_client,
    run,
)
from stompbroker.broker.engine.redis.outage import Outage, RedisUnreachable
from stompbroker.broker.engine.redis.ping import DEFAULT_PING_TIMEOUT
from stompbroker.broker.engine.redis.replicas import PRIMARY_ONLY, Durability, NotReplicated
from stompbroker.broker.engine.redis.url import EngineURL
from stompbroker.broker.engine.redis.writer import Writer

# make_client, check_server, close_client, check_reactor, run and the
# constants live in clients.py, Durability and NotReplicated in replicas.py,
# RedisUnreachable in outage.py, the Writer in writer.py; the engine's modules
# have always imported them from here.
__all__ = [
    "BACKOFF_BASE",
    "BACKOFF_CAP",
    "CONNECTION_ERRORS",
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
    "make_writer",
    "run",
]


def make_writer(
    url: EngineURL,
    loop: asyncio.AbstractEventLoop,
    pack: Callable[[str, list[bytes]], bytes] | None = None,
    outage: Outage | None = None,
    back: Callable[[], None] | None = None,
    durability: Durability = PRIMARY_ONLY,
    ping_timeout: float = DEFAULT_PING_TIMEOUT,
    busy: Busy | None = None,
) -> Writer:
    """
    :returns: a :class:`Writer` on a client of its own for ``url``, which never
        sends a command again by itself and counts its connections, and a
        second one for its ``PING`` s (the other arguments are the writer's).
    """
    connects = Connects()
    client = make_client(url, retries=0, connects=connects)
    side = make_client(url, retries=0)
    return Writer(client, loop, pack, outage, back, durability, connects, side, ping_timeout, busy)
