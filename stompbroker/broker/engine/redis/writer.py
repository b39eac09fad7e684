"""
The ordered writer: every write a message causes reaches Redis through it.

:class:`Writer` is the one path every write a message causes takes (``PUBLISH``,
``XADD``, ``XACK``...): commands are queued in call order and sent as one
pipeline per turn of the loop, one pipeline at a time, so Redis applies them in
the order the broker asked for them (per publisher order) and a busy node pays
one round trip for many messages.

A slow Redis is load, not an outage: a pipeline's replies are awaited as long
as they take, while Redis answers a ``PING`` on the side within
``--engine-ping-timeout`` (:mod:`.ping`), and what waits here meanwhile is
bounded: past :class:`~stompbroker.broker.engine.redis.busy.Busy`'s mark the
node stops reading its publishers until the pipelines catch up.

When a pipeline's connection dies, the writer keeps its commands, in order,
and sends them again once Redis answers (redis-py is told not to re-send by
itself: :func:`make_client` ``retries=0``), so that it knows which writes go
twice: a message ``XADD`` ed again carries one more redelivery
(:func:`~stompbroker.broker.engine.redis.codec.mark_resent`), so that if the
first try had reached Redis the second copy says ``redelivered:true``.  While
Redis is away, whoever waits for a reply (a RECEIPT) waits, up to the
:class:`~stompbroker.broker.engine.redis.outage.Outage`'s hold.

It runs on the reactor's asyncio loop, on a redis-py client of its own
(:func:`~stompbroker.broker.engine.redis.connection.make_writer`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import weakref
from collections.abc import Callable, Sequence
from typing import Any, cast

from redis import asyncio as aioredis
from redis.exceptions import (
    ConnectionError,
    NoScriptError,
    OutOfMemoryError,
    ReadOnlyError,
    ResponseError,
)
from twisted.internet.defer import Deferred

from stompbroker.broker.engine.redis.busy import FULL_TEXT, Busy, RedisFull
from stompbroker.broker.engine.redis.clients import (
    BACKOFF_BASE,
    BACKOFF_CAP,
    CONNECTION_ERRORS,
    Connects,
    close_client,
)
from stompbroker.broker.engine.redis.outage import Outage, RedisUnreachable, unreachable_text
from stompbroker.broker.engine.redis.ping import DEFAULT_PING_TIMEOUT, watched
from stompbroker.broker.engine.redis.replicas import (
    PRIMARY_ONLY,
    Durability,
    NotReplicated,
    ReplicaWait,
    expired_text,
)
from stompbroker.broker.engine.redis.replicas import resent as _resent
from stompbroker.broker.engine.redis.scripts import LoadedScripts
from stompbroker.broker.engine.redis.wire import errors, execute, shaped
from stompbroker.broker.engine.redis.wire import pack as wire_pack
from stompbroker.logs import logger

__all__ = ["MAX_BATCH", "Writer"]

log = logger("stompbroker.broker.engine.redis")

#: Marks a batch of messages for one channel among a writer's commands.
_BATCH = object()
#: Most messages in one batch: a node fans a batch out in one go, so a batch
#: must stay small beside its subscribers' buffers (--slow-consumer-buffer).
MAX_BATCH = 128
#: Seconds a ``WAIT`` that only confirms held writes waits for the replicas:
#: short, since nothing fails if it comes back short (the writes stay held).
PROBE_WAIT = 0.1
#: Seconds new messages are refused after Redis refused a write as full
#: (``OOM``): then they are tried again, in case consumers made room.
FULL_HOLD = 1.0
#: Bytes a queued command counts for beyond its last argument (its name, its
#: key, the list that holds it): what :meth:`Writer.held_bytes` adds per command.
COMMAND_BYTES = 64


class Writer:
    """
    Sends commands to Redis in the order they were asked for, a pipeline at a time.

    :param client: the redis-py asyncio client (made with ``retries=0``, for
        the writer alone when ``connects`` is given).
    :param loop: the reactor's asyncio loop.
    :param outage: told when Redis goes away and comes back; its hold bounds
        how long waiters wait (a hold of 0 fails them at once).
    :param back: called each time Redis answers again after an outage.
    :param durability: with replicas, a pipeline that carries a write someone
        waits for as stored (:meth:`command_waited` ``replicated=True``) ends
        with ``WAIT replicas timeout``: one round trip to the replicas for the
        whole pipeline, and its waiters fire only once enough replicas have it.
        Too few: the writes are held (:mod:`.replicas`) and Redis counts as
        away (publishers held) until a later ``WAIT`` confirms them, or the
        hold runs out (then ERROR ``message not replicated``).
    :param connects: counts ``client``'s connections: a held write is confirmed
        only by a ``WAIT`` over the connection it went over, else sent again.
    :param side: a client of its own on which the writer asks whether Redis
        answers while a pipeline's replies are slow (:func:`.ping.watched`);
        without one, a pipeline's replies are awaited as long as they take.
    :param ping_timeout: seconds that ``PING`` may take before Redis counts
        as away (``--engine-ping-timeout``).
    :param busy: told how many bytes wait here (queued, or in the pipeline in
        flight), so that it holds publishers while Redis lags behind them.

    :ivar connected: whether the last pipeline reached the server.  While it is
        ``False``, what was accepted stays queued here and is sent once the
        server is back; the engine refuses new messages only once the outage
        has outlasted its hold.
    :ivar held: the writes that wait for the replicas.
    """

    def __init__(
        self,
        client: aioredis.Redis,
        loop: asyncio.AbstractEventLoop,
        pack: Callable[[str, list[bytes]], bytes] | None = None,
        outage: Outage | None = None,
        back: Callable[[], None] | None = None,
        durability: Durability = PRIMARY_ONLY,
        connects: Connects | None = None,
        side: aioredis.Redis | None = None,
        ping_timeout: float = DEFAULT_PING_TIMEOUT,
        busy: Busy | None = None,
    ) -> None:
        if ping_timeout <= 0:
            raise ValueError(f"--engine-ping-timeout must be more than 0 s, got {ping_timeout}")
        self.client = client
        self.side = side
        self.ping_timeout = ping_timeout
        self.busy = busy
        #: Over this many bytes queued, :attr:`busy` is told at once (else at each pipeline).
        self._bound = busy.high if busy is not None else None
        #: About the bytes of the commands in :attr:`_commands`, and of the pipeline in flight.
        self._queued = 0
        self._in_flight = 0
        #: Until when (loop time) messages are refused: Redis said it was full (:meth:`full`).
        self.full_until = 0.0
        self.durability = durability
        #: The waiters whose writes must reach the replicas before they fire.
        self.replicas = ReplicaWait(durability, connects)
        self._connects = connects
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
        #: Set when the primary moved: ends a back-off between two tries at once.
        self._moved: asyncio.Event = asyncio.Event()
        #: Set unless writes are held while the primary is being replaced (:meth:`pause`).
        self._unpaused: asyncio.Event = asyncio.Event()
        self._unpaused.set()
        #: Per connection, the scripts its server holds (``EVALSHA`` or ``EVAL``).
        self._scripts: weakref.WeakKeyDictionary[Any, LoadedScripts] = weakref.WeakKeyDictionary()
        self._loaded: LoadedScripts | None = None

    def command(self, *args: Any) -> None:
        """Queue a command; nothing waits for it."""
        self._commands.append(args)
        self._count(args)
        if self._running is None:
            self._start()

    def _count(self, args: Sequence[Any]) -> None:
        """Count a queued command's bytes (its last argument: a message's, mostly)."""
        last = args[-1]
        self._add(len(last) if type(last) is bytes else 0)

    def _add(self, size: int) -> None:
        self._queued += size + COMMAND_BYTES
        bound = self._bound
        if bound is not None and self._queued > bound:
            self._tell_busy()

    def _tell_busy(self) -> None:
        busy = self.busy
        if busy is None:
            return
        outage = self.outage
        if outage is not None and outage.expired:
            # Past the hold publishers are read again and told (ERROR), not held.
            busy.held(0)
        else:
            busy.held(self._queued + self._in_flight)

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
            self._add(len(payload))
            return
        batch = self._batch = [_BATCH, channel, [payload]]
        commands.append(batch)
        self._add(len(payload))
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
            self.replicas.add(waiter)
        self._commands.append(args)
        self._count(args)
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
        :returns: about how many bytes the commands queued, in flight or held
            here take: counted in the memory in use (``--memory-high``).
        """
        return self.replicas.held.held_bytes() + self._queued + self._in_flight

    def shed(self) -> int:
        """Nothing queued here can be dropped (it was accepted): :returns: 0."""
        return 0

    def pause(self, paused: bool) -> None:
        """
        Hold every write while a replica is promoted (``True``; until
        :meth:`primary_moved`), or send them again to the primary there is
        (``False``: the promotion did not happen).  What the old primary would
        take meanwhile would be lost when it becomes a replica.
        """
        if not paused:
            self._unpaused.set()
            return
        self._unpaused.clear()
        if self.connected:
            self.connected = False
            if self.outage is not None:
                self.outage.began()
        # A round trip once the writes go on, so that this node hears Redis answer.
        self.command("PING")

    def primary_moved(self) -> None:
        """
        The primary moved, and the connections to the old one were dropped
        (:mod:`.failover`): Redis is away for this node until the new primary
        answers, as after a restart (publishers and receipts held, the writes
        not yet confirmed sent again, the queues' pending lists reconciled).
        """
        if self.connected:
            log.warn("the Redis primary moved; reconnecting to the new one")
            self.connected = False
            if self.outage is not None:
                self.outage.began()
        # A round trip to the new primary, so that this node hears it answer
        # even when nothing else is queued.
        self.command("PING")
        self._unpaused.set()
        self._moved.set()

    def _start(self) -> None:
        self._idle.clear()
        self._running = self._loop.create_task(self._send_all())

    async def _send_all(self) -> None:
        """Send what is queued, pipeline after pipeline, until nothing is left or held."""
        delay = BACKOFF_BASE
        try:
            while self._commands or self.replicas.held:
                await self._unpaused.wait()
                commands: list[Sequence[Any]] = []
                waiters: list[tuple[int, Deferred[Any]]] = []
                try:
                    if self.replicas.held and self._connects is not None:
                        await self._same_connection()
                    commands, self._commands = self._commands, []
                    waiters, self._waiters = self._waiters, []
                    self._in_flight, self._queued = self._queued, 0
                    fresh = self.replicas.asked(waiters)
                    wait = fresh or bool(self.replicas.held)
                    replies = await self._pipeline(commands, wait, probe=not fresh)
                    failed = errors(replies)
                    await self._check_primary(replies, failed, wait)
                except CONNECTION_ERRORS as error:
                    self._lost(commands, waiters, error)
                    delay = (
                        BACKOFF_BASE if await self._backoff(delay) else min(delay * 2, BACKOFF_CAP)
                    )
                    continue
                if not self.connected and self._unpaused.is_set():
                    log.info("Redis is back")
                    self.connected = True
                    if self._back is not None:
                        self._back()
                delay = BACKOFF_BASE
                self._moved.clear()
                self._in_flight = 0
                self._tell_busy()
                self._answer(commands, waiters, replies, failed, wait)
        finally:
            self._running = None
            self._idle.set()

    async def _backoff(self, delay: float) -> bool:
        """
        Wait ``delay`` s before trying again, less if the primary moves meanwhile.

        :returns: whether it moved (the next try goes to the new one at once).
        """
        moved = self._moved
        if not moved.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(moved.wait(), delay)
        was = moved.is_set()
        moved.clear()
        return was

    def _lost(
        self,
        commands: list[Sequence[Any]],
        waiters: list[tuple[int, Deferred[Any]]],
        error: Exception,
    ) -> None:
        """
        The connection died: keep the pipeline's commands, in order, ahead of
        what came meanwhile, marked as sent once already, and ahead of them the
        held writes (the server that has them may be gone).
        """
        self._requeue([_resent(args) for args in commands], waiters)
        self._queued += self._in_flight
        self._in_flight = 0
        self._requeue_held()
        if self.connected:
            log.error("lost Redis: {error}; reconnecting", error=str(error))
            self.connected = False
            if self.outage is not None:
                self.outage.began()
        if self.outage is None or self.outage.expired:
            self._fail_waiters(self._unreachable(None, error))

    def _requeue(
        self, commands: list[Sequence[Any]], waiters: list[tuple[int, Deferred[Any]]]
    ) -> None:
        """Put ``commands`` first in line; the waiters' places after them move up."""
        sent = len(commands)
        self._commands[:0] = commands
        self._waiters = waiters + [(index + sent, waiter) for index, waiter in self._waiters]

    def _requeue_held(self) -> None:
        """Send the held writes again, marked as sent once, their waiters waiting on."""
        commands, waiters = self.replicas.resend()
        if commands:
            log.warn(
                "{count} writes Redis had not confirmed on the replicas are sent again"
                " (the connection to the primary changed)",
                count=len(commands),
            )
            self._requeue(commands, waiters)
            for args in commands:
                self._count(args)

    async def _same_connection(self) -> None:
        """
        Before a ``WAIT`` that should confirm the held writes: connect (if the
        connection was dropped), and send them again if it is not the one they went over.
        """
        pool = self.client.connection_pool
        connection = await pool.get_connection()
        await pool.release(connection)
        if self.replicas.moved_on():
            self._requeue_held()

    async def _check_primary(self, replies: list[Any], failed: list[Exception], wait: bool) -> None:
        """
        :param failed: the error replies among ``replies``.
        :raises ConnectionError: if the server answered as a replica (the
            primary moved): the connection is dropped and the pipeline counts
            as lost, to be sent again to the primary.
        """
        refused: Exception | None = next(
            (reply for reply in failed if isinstance(reply, ReadOnlyError)), None
        )
        if refused is None and wait and isinstance(replies[-1], ResponseError):
            refused = replies[-1]
        if refused is not None:
            await self.client.connection_pool.disconnect()
            raise ConnectionError(
                f"the server answered as a replica ({refused}): the primary moved"
            )

    def _answer(
        self,
        commands: list[Sequence[Any]],
        waiters: list[tuple[int, Deferred[Any]]],
        replies: list[Any],
        failed: list[Exception],
        wait: bool,
    ) -> None:
        """
        Fire the pipeline's waiters, or hold those whose writes the replicas lack.

        :param failed: the error replies among ``replies``.
        """
        replicas = self.replicas
        if replicas.moved_on():
            # The pipeline went over a new connection: it confirms nothing held.
            self._requeue_held()
        said = replicas.short(replies[-1]) if wait else None
        short = None if said is None else NotReplicated("message not replicated", said)
        outage = self.outage
        if wait and short is None:
            replicas.confirm()
        holding = False
        if short is not None and outage is not None:
            outage.began()
            holding = not outage.expired
        if holding:
            replicas.hold(commands, waiters, replies, _held)
        for index, waiter in waiters:
            reply = replies[index]
            if waiter in replicas:
                if short is not None and not isinstance(reply, Exception):
                    if holding:
                        continue
                    replicas.discard(waiter)
                    waiter.errback(short)
                    continue
                replicas.discard(waiter)
            if isinstance(reply, OutOfMemoryError):
                waiter.errback(RedisFull("broker full", FULL_TEXT))
            elif isinstance(reply, NoScriptError):
                # An EVALSHA of a script Redis lacks: its caller sends it whole.
                waiter.errback(reply)
            elif isinstance(reply, Exception):
                waiter.errback(RedisUnreachable("not stored", f"Redis refused: {reply}"))
            else:
                waiter.callback(shaped(self.client, commands[index], reply))
        full = [reply for reply in failed if isinstance(reply, OutOfMemoryError)]
        if full:
            self._full(len(full), str(full[0]))
        for reply in failed:
            if isinstance(reply, ResponseError) and not isinstance(
                reply, (OutOfMemoryError, NoScriptError)
            ):
                log.error("Redis refused a command: {error}", error=str(reply))
        if (
            outage is not None
            and outage.away
            and self.connected
            and short is None
            and not replicas.held
        ):
            outage.ended()

    def _full(self, refused: int, error: str) -> None:
        """
        Redis is full (``maxmemory`` with ``noeviction``) and refused ``refused``
        writes: new messages are refused for :data:`FULL_HOLD` s (:meth:`full`).
        """
        if not self.full():
            log.error(
                "Redis is full and refused {refused} writes ({error}); refusing messages"
                " until it has room",
                refused=refused,
                error=error,
            )
        self.full_until = self._loop.time() + FULL_HOLD

    def full(self) -> bool:
        """
        :returns: whether Redis refused a write as full (``OOM``) within the last
            :data:`FULL_HOLD` s: each new message then gets an ERROR (:class:`RedisFull`)
            rather than be accepted and refused by Redis.
        """
        if self.full_until and self.full_until <= self._loop.time():
            self.full_until = 0.0
        return bool(self.full_until)

    def _gave_up(self, lasted: float) -> None:
        """The outage outlasted its hold: whoever waits hears of it now."""
        if not self.connected:
            self._fail_waiters(self._unreachable(lasted))
        self._tell_busy()
        self.replicas.fail(
            NotReplicated("message not replicated", expired_text(self.durability, lasted))
        )

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
            self.replicas.discard(waiter)
            waiter.errback(error)

    async def _pipeline(
        self, commands: list[Sequence[Any]], wait: bool = False, probe: bool = False
    ) -> list[Any]:
        """
        Send ``commands`` as one pipeline (:mod:`.wire`: packed at once, the
        replies read in one loop under one timeout).

        :param wait: end with ``WAIT`` for the replicas.
        :param probe: it only confirms held writes: a short ``WAIT``
            (:data:`PROBE_WAIT`), so that the writer does not stall what else
            it sends while the replicas are behind.
        :returns: their replies, an error reply as its exception.
        """
        pack = self._pack
        sent: list[Sequence[Any]]
        if list in set(map(type, commands)):
            # A batch of topic messages (a list) goes as one PUBLISH.
            sent = []
            for args in commands:
                if args[0] is _BATCH:
                    assert pack is not None
                    sent.append(("PUBLISH", args[1], pack(args[1], args[2])))
                else:
                    sent.append(args)
        else:
            sent = commands.copy()
        if wait:
            durability = self.durability
            waited = min(durability.timeout, PROBE_WAIT) if probe else durability.timeout
            sent.append(("WAIT", durability.replicas, int(waited * 1000)))
        packed: bytes | Callable[[Any], bytes]
        if any(args[0] == "EVALSHA" for args in sent):
            packed = functools.partial(self._packed, sent=sent)
        else:
            # Every command is a tuple: a batch's list was made one above.
            packed = wire_pack(cast(list[tuple[Any, ...]], sent))
        replies = self._loop.create_task(execute(self.client, packed, len(sent), None))
        if self.side is None:
            answered = await replies
        else:
            answered = await watched(replies, self.side, self.ping_timeout)
        loaded, self._loaded = self._loaded, None
        if loaded is not None:
            loaded.answered(answered)
        return answered

    def _packed(self, connection: Any, sent: list[Sequence[Any]]) -> bytes:
        """
        :returns: the pipeline packed for ``connection``: a script as ``EVALSHA``
            where its server holds it, else as ``EVAL`` (:class:`.LoadedScripts`).
        """
        loaded = self._scripts.get(connection)
        if loaded is None:
            loaded = self._scripts[connection] = LoadedScripts()
            connection.register_connect_callback(loaded.forget)
        self._loaded = loaded
        # Every command is a tuple: a batch's list was made one above.
        return wire_pack(cast(list[tuple[Any, ...]], loaded.commands(sent)))

    async def drained(self) -> None:
        """Wait until everything queued has been sent (or the server is gone for good)."""
        await self._idle.wait()

    async def close(self) -> None:
        """Close the clients (the writer's own, from :func:`make_writer`)."""
        await close_client(self.client)
        if self.side is not None:
            await close_client(self.side)


def _held(args: Sequence[Any]) -> bool:
    """:returns: whether a short pipeline's command is held (topic messages are not)."""
    return args[0] is not _BATCH and args[0] != "PUBLISH"
