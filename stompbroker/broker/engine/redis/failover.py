"""
Following a Sentinel failover at once: every node subscribes to ``+switch-master``
on each Sentinel of its ``redis+sentinel://`` URL (as ioredis's
``FailoverDetector`` does), and when one announces a new primary for the
node's master name, the node drops every connection it has to the old one
(the writer's, the queues' reads, the pub/sub one).  They connect again to the
primary the Sentinels name now, and the node goes through what a Redis restart
costs it (:meth:`~stompbroker.broker.engine.redis.writer.Writer.primary_moved`):
publishers and receipts held, the writes not yet confirmed sent again, each
queue's pending list reconciled.

Without this, after ``SENTINEL FAILOVER`` a node would keep writing to the old
primary until the Sentinels reconfigure it as a replica (about 10 s, when they
next poll it), and what it wrote there meanwhile would be lost.

A Sentinel that is down or restarts is subscribed to again with the back-off;
when it comes back, the node asks where the primary is, in case it missed a
switch meanwhile.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from redis import asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError
from redis.exceptions import TimeoutError as RedisTimeout

from stompbroker.broker.engine.redis.clients import (
    BACKOFF_BASE,
    BACKOFF_CAP,
    CONNECTION_ERRORS,
    sentinel_options,
)
from stompbroker.broker.engine.redis.url import EngineURL
from stompbroker.logs import logger

__all__ = ["CHANNEL", "PROMOTING", "FailoverWatch", "follow_failovers", "promoting", "switched_to"]

log = logger("stompbroker.broker.engine.redis")

#: What the Sentinels publish once they have switched a master to a new address.
CHANNEL = b"+switch-master"
#: What the Sentinel that leads a failover publishes just before it promotes a replica.
PROMOTING = b"+failover-state-send-slaveof-noone"
#: Seconds a node holds its writes once a promotion begins, at most, waiting
#: for ``+switch-master`` (a failover that aborts never announces one).
PAUSE_LIMIT = 10.0


def promoting(payload: bytes, master: str) -> bool:
    """
    :param payload: a ``+failover-state-send-slaveof-noone`` message:
        ``slave <ip:port> <ip> <port> @ <master name> <ip> <port>``.
    :returns: whether it is about ``master``.
    """
    parts = payload.decode("utf-8", "replace").split()
    return len(parts) == 8 and parts[4] == "@" and parts[5] == master


def switched_to(payload: bytes, master: str) -> tuple[str, int] | None:
    """
    :param payload: a ``+switch-master`` message:
        ``<master name> <old ip> <old port> <new ip> <new port>``.
    :returns: the new primary's (address, port) if it is about ``master``, else ``None``
        (another master, or a message that does not parse).
    """
    parts = payload.decode("utf-8", "replace").split()
    if len(parts) != 5 or parts[0] != master or not parts[4].isdigit():
        return None
    return parts[3], int(parts[4])


class FailoverWatch:
    """
    Listens to every Sentinel for ``+switch-master`` and moves the node's
    clients to the new primary.

    :param url: the engine's Sentinel URL.
    :param loop: the reactor's asyncio loop.
    :param clients: every client the node has on the primary: their
        connections are dropped on a switch.
    :param moved: called once they are (the writer's ``primary_moved``).
    :param pause: called with ``True`` when a promotion begins (the writer
        holds its writes: what the old primary takes from then on may be
        lost), and with ``False`` if no switch follows within :data:`PAUSE_LIMIT`.

    :ivar switches: switches followed so far.
    :ivar primary: the primary's (address, port) as last announced or found.
    """

    def __init__(
        self,
        url: EngineURL,
        loop: asyncio.AbstractEventLoop,
        clients: Sequence[aioredis.Redis],
        moved: Callable[[], None],
        pause: Callable[[bool], None] | None = None,
    ) -> None:
        self.url = url
        self.switches = 0
        self.primary: tuple[str, int] | None = None
        self._loop = loop
        self._clients = list(clients)
        self._moved = moved
        self._pause = pause
        self._resume: asyncio.TimerHandle | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._sentinels: list[aioredis.Redis] = []
        self._switching: asyncio.Lock = asyncio.Lock()

    def start(self, primary: tuple[str, int] | None) -> None:
        """
        Subscribe to every Sentinel (in the background: a Sentinel that is
        down must not keep the node from starting).

        :param primary: where the node's clients are connected now.
        """
        self.primary = primary
        backoff = ExponentialBackoff(cap=BACKOFF_CAP, base=BACKOFF_BASE)
        for host, port in self.url.sentinels:
            sentinel = aioredis.Redis(
                host=host,
                port=port,
                retry=Retry(backoff, -1),
                retry_on_error=[ConnectionError, RedisTimeout],
                **{**sentinel_options(self.url), "socket_timeout": None},
            )
            self._sentinels.append(sentinel)
            self._tasks.append(self._loop.create_task(self._listen(sentinel)))

    async def _listen(self, sentinel: aioredis.Redis) -> None:
        """Follow what one Sentinel announces, until closed."""
        delay = BACKOFF_BASE
        pubsub = sentinel.pubsub()
        while True:
            try:
                await pubsub.subscribe(CHANNEL, PROMOTING)
                connection: Any = pubsub.connection
                connection.register_connect_callback(self._resubscribed)
                break
            except CONNECTION_ERRORS:
                await asyncio.sleep(delay)
                delay = min(delay * 2, BACKOFF_CAP)
        while True:
            try:
                response = await pubsub.parse_response(block=True)
            except CONNECTION_ERRORS as error:
                log.warn("lost a Sentinel: {error}; reconnecting", error=str(error))
                await asyncio.sleep(delay)
                delay = min(delay * 2, BACKOFF_CAP)
                continue
            delay = BACKOFF_BASE
            if not response or response[0] != b"message":
                continue
            if response[1] == CHANNEL:
                new = switched_to(response[2], self.url.master)
                if new is not None:
                    await self._switch(new)
            elif response[1] == PROMOTING and promoting(response[2], self.url.master):
                self._promoting()

    def _promoting(self) -> None:
        """A replica is being promoted: hold the writes until the switch is announced."""
        if self._pause is None or self._resume is not None:
            return
        log.warn(
            "the Sentinels are promoting a replica of {master}: holding this node's"
            " writes until they name the new primary",
            master=self.url.master,
        )
        self._pause(True)
        self._resume = self._loop.call_later(PAUSE_LIMIT, self._unpause)

    def _unpause(self) -> None:
        """No switch came (the failover was aborted): write to the primary there is."""
        self._resume = None
        if self._pause is not None:
            self._pause(False)

    def _resubscribed(self, connection: Any) -> None:
        """A Sentinel is back: it may have announced a switch meanwhile."""
        self._loop.create_task(self._check())

    async def _check(self) -> None:
        """Ask the Sentinels where the primary is, and follow it if it moved."""
        if not self._clients:
            return
        manager = getattr(self._clients[0].connection_pool, "sentinel_manager", None)
        if manager is None:
            return
        try:
            primary = await manager.discover_master(self.url.master)
        except CONNECTION_ERRORS:
            return
        await self._switch((str(primary[0]), int(primary[1])))

    async def _switch(self, new: tuple[str, int]) -> None:
        """Drop every connection to the old primary (once per new primary, whoever says it)."""
        async with self._switching:
            if new == self.primary:
                return
            old, self.primary = self.primary, new
            self.switches += 1
            log.warn(
                "the Sentinels moved the Redis primary {master} from {old} to {new}:"
                " dropping this node's connections to the old one",
                master=self.url.master,
                old="?" if old is None else f"{old[0]}:{old[1]}",
                new=f"{new[0]}:{new[1]}",
            )
            for client in self._clients:
                try:
                    await client.connection_pool.disconnect()
                except CONNECTION_ERRORS as error:
                    log.warn("dropping a connection failed: {error}", error=str(error))
            if self._resume is not None:
                self._resume.cancel()
                self._resume = None
            self._moved()

    async def close(self) -> None:
        """Stop listening, and close the connections to the Sentinels."""
        if self._resume is not None:
            self._resume.cancel()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except (asyncio.CancelledError, *CONNECTION_ERRORS):
                pass
        for sentinel in self._sentinels:
            await sentinel.aclose()


def follow_failovers(
    url: EngineURL,
    loop: asyncio.AbstractEventLoop,
    clients: Sequence[aioredis.Redis],
    moved: Callable[[], None],
    pause: Callable[[bool], None] | None = None,
) -> FailoverWatch | None:
    """:returns: a :class:`FailoverWatch` for a Sentinel URL (not started), else ``None``."""
    return FailoverWatch(url, loop, clients, moved, pause) if url.sentinels else None
