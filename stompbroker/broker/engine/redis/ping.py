"""
Whether Redis answers at all: a ``PING`` on the side of a busy pipeline
(``--engine-ping-timeout``).

A pipeline of a busy node may take Redis seconds to apply (tens of thousands
of ``XADD`` s queued behind the pipelines of other nodes), and a pipeline that
ends with ``WAIT`` takes as long as the replicas do: how long its replies take
says how busy Redis is, not whether it is there.  So the writer waits for a
pipeline's replies as long as they take (a dead connection still ends it at
once), and once it has waited :data:`PATIENCE` it asks on a connection of its
own, the way redis-py's health check asks before it uses an idle connection:
``PING``.  Redis serves each connection in turn, so a ``PING`` is answered
within milliseconds however long the pipeline is.  Only a ``PING`` left
unanswered for the ping timeout makes Redis *away* (an outage: publishers
held up to ``--engine-outage-hold``, then ``broker unavailable``); its answer,
whatever it is (even ``BUSY`` from a long script), means Redis is there, and
the node waits on.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TypeVar

from redis import asyncio as aioredis
from redis.exceptions import ConnectionError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeout

from stompbroker.broker.engine.redis.clients import CONNECTION_ERRORS

__all__ = ["DEFAULT_PING_TIMEOUT", "PATIENCE", "answers", "watched"]

T = TypeVar("T")

#: Seconds a ``PING`` may take before Redis counts as away: longer than any
#: pause of a healthy server (a fork for a snapshot, an AOF rewrite's fsync).
DEFAULT_PING_TIMEOUT = 5.0
#: Seconds a pipeline's replies may take before the writer asks whether Redis answers.
PATIENCE = 1.0
#: Turns of the loop a late ``PING`` is given before it counts as unanswered:
#: a node whose own loop was held up (a long batch of frames) has the reply
#: in its socket already, and must not take its own delay for Redis's silence.
GRACE_TURNS = 3


async def answers(side: aioredis.Redis, timeout: float) -> bool:
    """
    :param side: a client whose connections carry nothing else (the busy
        pipeline's connection would answer only after the pipeline).
    :returns: whether Redis answered a ``PING`` within ``timeout`` seconds
        (any answer: an error reply is an answer).
    """
    ping: asyncio.Future[object] = asyncio.ensure_future(side.ping())
    await asyncio.wait({ping}, timeout=timeout)
    for _ in range(GRACE_TURNS):
        if ping.done():
            break
        await asyncio.sleep(0)
    if not ping.done():
        ping.cancel()
        with contextlib.suppress(asyncio.CancelledError, *CONNECTION_ERRORS):
            await ping
        return False
    error = ping.exception()
    return error is None or (
        isinstance(error, ResponseError) and not isinstance(error, ConnectionError)
    )


async def watched(
    work: asyncio.Future[T], side: aioredis.Redis, timeout: float, patience: float = PATIENCE
) -> T:
    """
    Wait for ``work`` (a pipeline's replies) as long as Redis answers ``PING`` s.

    :param side: where to ``PING`` (:func:`answers`).
    :param timeout: ``--engine-ping-timeout``.
    :param patience: seconds between two ``PING`` s while ``work`` goes on.
    :returns: what ``work`` returns.
    :raises TimeoutError: redis-py's, once a ``PING`` went unanswered: ``work``
        is cancelled (which drops its connection).
    """
    try:
        while True:
            await asyncio.wait({work}, timeout=patience)
            if work.done():
                return work.result()
            if not await answers(side, timeout) and not work.done():
                work.cancel()
                with contextlib.suppress(asyncio.CancelledError, *CONNECTION_ERRORS):
                    await work
                raise RedisTimeout(f"Redis did not answer a PING within {timeout:g} s")
    except asyncio.CancelledError:
        work.cancel()
        raise
