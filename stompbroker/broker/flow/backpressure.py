"""
Back-pressure: when the broker stops reading from a publisher, and when it reads again.

Three things pause a publisher (the mechanisms are in
:mod:`stompbroker.broker.flow.publisher_pauses`):

- memory in use over the high mark (:class:`~stompbroker.broker.flow.publisher_pauses.MemoryWatch`,
  sampled on a timer): every connection that publishes is paused after its SEND,
  until memory falls under the low mark.  Memory in use is the allocator's
  figure plus what the *holders* (:meth:`BackPressure.count_held`: the resume
  buffers of resumable sessions) say they hold, and the holders shed first:
  publishers are paused only when memory is over the mark once they have
  dropped what they can;
- a slow subscriber under the ``block`` policy that the publisher's message
  reached: the subscriber's session calls :meth:`BackPressure.block_sender`
  from inside the fan-out, and the publisher is paused until that subscriber's
  connection catches up (:meth:`BackPressure.resume`) or closes;
- an alarm the engine raises (:meth:`BackPressure.alarm_on`): the redis engine's
  while its server is away, up to ``--engine-outage-hold``
  (:mod:`stompbroker.broker.engine.redis.outage`), and while its writer holds
  more than its bound for a Redis that answers slowly
  (:mod:`stompbroker.broker.engine.redis.busy`): every connection that
  publishes is paused after its SEND until the alarm is off, as for memory;
- the disk alarm (:mod:`~stompbroker.broker.flow.disk_alarm`, sampled on a
  timer): while the message store's disk has less room than
  ``--disk-free-limit``, a connection is paused after a SEND of a *persistent*
  message (:meth:`BackPressure.hold_persistent_sender`, which the router calls
  while :attr:`BackPressure.disk_full` is set), until there is room again;
- a hold the engine asks for the sender of the message being routed
  (:meth:`BackPressure.hold_sender`): the redis engine's while the queue sent
  to grows faster than this node's consumers of it take out
  (:mod:`stompbroker.broker.engine.redis.queue_credit`): that publisher is
  paused until the engine releases the reason (:meth:`BackPressure.release_held`).

Theory of operation
-------------------
Both are known by the time a SEND (or a COMMIT) has been routed, and neither
while nothing is wrong: :attr:`BackPressure.pending` is ``None`` nearly always,
so that the router's one test after each SEND is an attribute read.  Otherwise it
is a :class:`Pressure`, the value that says why the sender of the message just
routed must stop being read: the router hands it over with the sender's
connection (:meth:`BackPressure.pause_sender`), which clears what that message
caused and keeps the memory mark's part while memory stays high.

The sender's session learns that it must pause through
:meth:`stompbroker.interfaces.IConnection.pause_reading`, which the
:class:`~stompbroker.broker.flow.publisher_pauses.Throttle` calls once per connection, whatever
the number of reasons, and :meth:`~stompbroker.interfaces.IConnection.resume_reading`
once no reason is left; the transport turns those into ``pauseProducing`` and
``resumeProducing``.  Subscribers are never paused for memory: their ACKs and
their reading are what frees it.

Slow subscribers under the ``drop-oldest`` and ``disconnect`` policies pause
nobody: their drops are counted here (:meth:`BackPressure.count_dropped`) and
logged once per episode.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Container
from typing import Any

from attrs import frozen

from stompbroker.broker.flow.broker_limits import Limits
from stompbroker.broker.flow.disk_alarm import DISK, DiskAlarm, DiskWatch
from stompbroker.broker.flow.publisher_pauses import (
    MEMORY,
    MemoryWatch,
    Throttle,
    allocated_bound,
    memory_gauge,
)
from stompbroker.broker.queueing.delivery import DeliveryCounters
from stompbroker.logs import logger

log = logger("stompbroker.broker")


@frozen
class Pressure:
    """
    Why the sender of the message just routed must stop being read.

    :ivar memory: memory in use is over the high mark.
    :ivar blocked_by: the connections of slow subscribers under the ``block``
        policy that the message reached; the sender waits for each of them.
    :ivar alarms: the engine's alarms that are on (:meth:`BackPressure.alarm_on`).
    :ivar held_for: what the engine holds this sender for alone
        (:meth:`BackPressure.hold_sender`): a queue whose consumers are behind.
    """

    memory: bool = False
    blocked_by: tuple[Any, ...] = ()
    alarms: frozenset[str] = frozenset()
    held_for: tuple[str, ...] = ()


@frozen
class MemoryAlarm:
    """
    The memory watermark as an operator sees it (the console, ``/api/overview``, ``/metrics``).

    :ivar enabled: whether the watermark runs (``--memory-high`` not 0, and
        memory measurable here).
    :ivar alarm: memory went over the high mark and has not fallen under the low
        mark since: publishers are paused after each SEND.
    :ivar in_use: memory in use at the latest sample, in bytes (0 when off).
    :ivar high: the high mark, in bytes (0: off).
    :ivar low: the low mark, in bytes.
    :ivar since: when the alarm went off, in clock seconds; ``None`` without an alarm.
    :ivar paused_publishers: connections not read from now, for memory or for a
        slow subscriber under the ``block`` policy.
    """

    enabled: bool
    alarm: bool
    in_use: int
    high: int
    low: int
    since: float | None
    paused_publishers: int


#: The pressure while memory is over the high mark and no subscriber blocks.
MEMORY_PRESSURE = Pressure(memory=True)
#: Seconds between log lines about resume buffers shed for memory.
SHED_LOG_INTERVAL = 10.0


class BackPressure:
    """
    The publishers the broker does not read from, and why.

    :param clock: ``callLater`` for the memory samples; the reactor or a ``task.Clock``.
    :param limits: the broker's :class:`~stompbroker.broker.flow.broker_limits.Limits`: the
        memory marks.
    :param counters: the broker-wide counters, for drops and slow disconnects.
    :param connections: the connections open now; a sender or a blocking
        subscriber that is not among them is closing already, and holds nobody.
    :param disk_space: the message store's ``disk_space``, which the disk alarm
        samples; ``None`` for a broker whose store keeps nothing on disk here.

    :ivar pending: ``None``, or what the message being routed calls for (see
        the module notes).
    :ivar throttle: the paused publishers and their reasons.
    :ivar memory_gauge: measures the memory in use for the watermark; ``None``
        where it cannot be measured.  Tests replace it before the broker starts.
    :ivar memory_gauge_kind: what the gauge measures, for the log.
    :ivar disk_space: what the disk alarm samples (the ``disk_space`` parameter);
        tests replace it before the broker starts.
    :ivar disk_full: the disk alarm is on: the router holds each connection
        that sends a persistent message.
    """

    def __init__(
        self,
        clock: Any,
        limits: Limits,
        counters: DeliveryCounters,
        connections: Container[Any],
        disk_space: Callable[[], Any] | None = None,
    ) -> None:
        self.pending: Pressure | None = None
        self.throttle = Throttle()
        self.memory_gauge: Callable[[], int] | None
        self.memory_gauge, self.memory_gauge_kind = memory_gauge()
        #: The gauge the bound below is known to be above: a gauge a test puts
        #: in its place is read on every sample.
        self._bounded_gauge = (
            self.memory_gauge
            if self.memory_gauge_kind == "allocated" and os.path.exists("/proc/self/status")
            else None
        )
        self._clock = clock
        self._limits = limits
        self._counters = counters
        self._connections = connections
        self._watch: MemoryWatch | None = None
        #: What keeps memory the broker can do without (see :meth:`count_held`).
        self._holders: list[Any] = []
        #: Bytes shed since the last log line, and when that was: one line per episode.
        self._shed_bytes = 0
        self._shed_logged = float("-inf")
        #: Slow subscribers dropping messages now, so that each episode is logged once.
        self._dropping: set[Any] = set()
        #: When memory went over the high mark, while it is.
        self._alarm_since: float | None = None
        #: The engine's alarms that are on (an outage of its server).
        self._alarms: frozenset[str] = frozenset()
        self.disk_full = False
        self.disk_space = disk_space
        self._disk_watch: DiskWatch | None = None
        #: When the disk alarm went off, while it is on.
        self._disk_since: float | None = None
        #: Those of them that log nothing here (``alarm_on(loud=False)``).
        self._quiet: frozenset[str] = frozenset()

    # -- the memory watermark ------------------------------------------------------

    def start(self) -> None:
        """Start the memory watermark and the disk alarm, those that are on and can measure."""
        self._start_memory_watch()
        self._start_disk_watch()

    def _start_memory_watch(self) -> None:
        high = self._limits.memory_high
        if not high or self._watch is not None:
            return
        if self.memory_gauge is None:
            log.warn("memory watermark off: memory in use cannot be measured on this system")
            return
        gauge = self.memory_gauge
        holders = self._holders

        def in_use() -> int:
            return gauge() + sum(int(holder.held_bytes()) for holder in holders)

        def in_use_at_most() -> int:
            return allocated_bound() + sum(int(holder.held_bytes()) for holder in holders)

        bounded = gauge is self._bounded_gauge
        self._watch = MemoryWatch(
            self._clock,
            in_use if holders else gauge,
            high,
            self._limits.memory_low_mark,
            self._memory_high,
            self._memory_low,
            shed=self._shed if holders else None,
            bound=(in_use_at_most if holders else allocated_bound) if bounded else None,
        )
        self._watch.start()

    def count_held(self, holder: Any) -> None:
        """
        Count what ``holder`` keeps in the memory in use, and let it drop some
        of that before publishers are paused.  Call before the broker starts.

        :param holder: has ``held_bytes() -> int``, the bytes it holds now
            (counted in full on top of the allocator's figure, which sees small
            objects at an estimate: the figure errs high, never low), and
            ``shed() -> int``, which drops some of them and returns how many:
            the :class:`~stompbroker.protocol.resume.resume_book.ResumeBook`.
        """
        self._holders.append(holder)

    def _shed(self) -> int:
        freed = sum(int(holder.shed()) for holder in self._holders)
        if freed:
            self._shed_bytes += freed
            now = self._clock.seconds()
            if now >= self._shed_logged + SHED_LOG_INTERVAL:
                log.warn(
                    "memory in use is over the high mark: dropped the oldest {freed} bytes"
                    " of resume buffers",
                    freed=self._shed_bytes,
                )
                self._shed_logged = now
                self._shed_bytes = 0
        return freed

    def stop(self) -> None:
        """Stop sampling memory and disk."""
        if self._watch is not None:
            self._watch.stop()
            self._watch = None
        if self._disk_watch is not None:
            self._disk_watch.stop()
            self._disk_watch = None

    def memory_alarm(self) -> MemoryAlarm:
        """:returns: the watermark's state now, for operators."""
        watch = self._watch
        return MemoryAlarm(
            enabled=watch is not None,
            alarm=watch is not None and watch.over,
            in_use=watch.last if watch is not None else 0,
            high=self._limits.memory_high,
            low=self._limits.memory_low_mark,
            since=self._alarm_since if watch is not None and watch.over else None,
            paused_publishers=len(self.throttle),
        )

    def _memory_high(self, used: int) -> None:
        self._alarm_since = self._clock.seconds()
        log.warn(
            "memory in use {used} bytes is over the high mark {high}: pausing publishers",
            used=used,
            high=self._limits.memory_high,
        )
        pending = self.pending
        if pending is None and not self._alarms:
            self.pending = MEMORY_PRESSURE
        else:
            self.pending = Pressure(True, pending.blocked_by if pending else (), self._alarms)

    def _memory_low(self, used: int) -> None:
        log.info(
            "memory in use {used} bytes is under the low mark {low}: resuming {count} publishers",
            used=used,
            low=self._limits.memory_low_mark,
            count=len(self.throttle),
        )
        pending = self.pending
        blocked_by = pending.blocked_by if pending else ()
        self.pending = (
            Pressure(False, blocked_by, self._alarms) if blocked_by or self._alarms else None
        )
        self.throttle.release(MEMORY)

    # -- the disk alarm ---------------------------------------------------------------

    def _start_disk_watch(self) -> None:
        limit = self._limits.disk_free_limit
        if self.disk_space is None or not limit.enabled or self._disk_watch is not None:
            return
        self._disk_watch = DiskWatch(
            self._clock, self.disk_space, limit, self._disk_low, self._disk_ok
        )
        self._disk_watch.start()

    def disk_alarm(self) -> DiskAlarm:
        """:returns: the disk alarm's state now, for operators."""
        watch = self._disk_watch
        space = watch.last if watch is not None else None
        return DiskAlarm(
            enabled=watch is not None,
            alarm=self.disk_full,
            free=space.free if space is not None else 0,
            total=space.total if space is not None else 0,
            limit=watch.limit_bytes() if watch is not None else 0,
            since=self._disk_since if self.disk_full else None,
            held_publishers=self.throttle.held_for(DISK),
        )

    def _disk_low(self, space: Any, limit: int) -> None:
        self.disk_full = True
        self._disk_since = self._clock.seconds()
        log.warn(
            "disk alarm: {free} bytes left for the message store, under --disk-free-limit"
            " {limit}: holding connections that publish persistent messages",
            free=space.free,
            limit=limit,
        )

    def _disk_ok(self, space: Any, limit: int) -> None:
        self.disk_full = False
        self._disk_since = None
        log.info(
            "disk alarm over: {free} bytes left for the message store: resuming {count} publishers",
            free=space.free,
            count=self.throttle.held_for(DISK),
        )
        self.throttle.release(DISK)

    def hold_persistent_sender(self, connection: Any) -> None:
        """
        Pause the connection that just sent a persistent message, while the disk alarm is on.

        :param connection: the sender; ``None`` for Python code publishing.
        """
        if connection is not None and connection in self._connections:
            self.throttle.hold(connection, DISK)

    # -- the engine's alarms ------------------------------------------------------------

    def alarm_on(self, reason: str, loud: bool = True) -> None:
        """
        Pause every publisher after its next SEND (or COMMIT) until :meth:`alarm_off`.

        :param reason: what the alarm is (the redis engine's
            :data:`~stompbroker.broker.engine.redis.outage.OUTAGE`), logged.
        :param loud: log it (and its end); an alarm that comes and goes many
            times a second under steady load (the redis engine's
            :data:`~stompbroker.broker.engine.redis.busy.BUSY`) says so itself.
        """
        if reason in self._alarms:
            return
        if loud:
            log.warn("pausing publishers: {reason}", reason=reason)
        else:
            self._quiet = self._quiet | {reason}
        self._alarms = self._alarms | {reason}
        pending = self.pending
        self.pending = Pressure(
            pending.memory if pending else False,
            pending.blocked_by if pending else (),
            self._alarms,
            pending.held_for if pending else (),
        )

    def alarm_off(self, reason: str) -> None:
        """Read again the publishers paused for ``reason`` alone."""
        if reason not in self._alarms:
            return
        if reason in self._quiet:
            self._quiet = self._quiet - {reason}
        else:
            log.info(
                "resuming {count} publishers: {reason} no more",
                count=len(self.throttle),
                reason=reason,
            )
        self._alarms = self._alarms - {reason}
        pending = self.pending
        if pending is not None:
            self.pending = (
                Pressure(pending.memory, pending.blocked_by, self._alarms, pending.held_for)
                if pending.memory or pending.blocked_by or self._alarms or pending.held_for
                else None
            )
        self.throttle.release(reason)

    # -- publishers ------------------------------------------------------------------

    def block_sender(self, subscriber: Any) -> None:
        """
        Pause the publisher of the message being routed until ``subscriber`` catches up.

        Called by a slow subscriber's connection under the ``block`` policy for
        each message it takes over its buffer limit.

        :param subscriber: the slow subscriber's connection.
        """
        pending = self.pending
        if pending is None:
            self.pending = Pressure(False, (subscriber,))
        else:
            self.pending = Pressure(
                pending.memory, pending.blocked_by + (subscriber,), pending.alarms, pending.held_for
            )

    def hold_sender(self, reason: str) -> None:
        """
        Pause the publisher of the message being routed until :meth:`release_held`
        is called with ``reason``; the others go on.

        :param reason: what it waits for (the redis engine's
            :func:`~stompbroker.broker.engine.redis.queue_credit.behind_reason`).
        """
        pending = self.pending
        if pending is None:
            self.pending = Pressure(held_for=(reason,))
        elif reason not in pending.held_for:
            self.pending = Pressure(
                pending.memory, pending.blocked_by, pending.alarms, pending.held_for + (reason,)
            )

    def release_held(self, reason: str) -> None:
        """Read again the publishers :meth:`hold_sender` paused for ``reason`` alone."""
        self.throttle.release(reason)

    def pause_sender(self, connection: Any) -> None:
        """
        Apply :attr:`pending` to the connection whose SEND (or COMMIT) was just
        routed, and clear what that message caused.

        :param connection: the sender; ``None`` for Python code publishing.
        """
        pressure = self.pending
        if pressure is None:
            return
        # What the message caused is settled now; the memory mark's and the alarms' parts stay.
        alarms = pressure.alarms
        if alarms:
            self.pending = Pressure(pressure.memory, (), alarms)
        else:
            self.pending = MEMORY_PRESSURE if pressure.memory else None
        if connection is None or connection not in self._connections:
            # Python code published it, or the sender is closing already.
            return
        for subscriber in pressure.blocked_by:
            if subscriber in self._connections:
                self.throttle.hold(connection, subscriber)
        if pressure.memory:
            self.throttle.hold(connection, MEMORY)
        for alarm in alarms:
            self.throttle.hold(connection, alarm)
        for reason in pressure.held_for:
            self.throttle.hold(connection, reason)

    # -- slow subscribers ---------------------------------------------------------------

    def resume(self, connection: Any) -> None:
        """
        A connection has caught up: the publishers it blocked go on, and its drop
        episode, if any, ends.
        """
        if connection in self._dropping:
            self._dropping.discard(connection)
            log.info("slow consumer {peer} caught up", peer=connection.peer)
        self.throttle.release(connection)

    def count_dropped(self, connection: Any, count: int, disconnected: bool = False) -> None:
        """
        Count topic messages a slow subscriber will never get.

        :param connection: the slow subscriber's connection.
        :param count: how many were dropped.
        :param disconnected: whether the connection is being closed for being slow.
        """
        self._counters.dropped += count
        if disconnected:
            self._counters.slow_disconnects += 1
            # What still comes for it until it is closed is counted, not logged.
            self._dropping.add(connection)
            log.warn(
                "disconnecting slow consumer {peer}: its buffer is full;"
                " {count} messages dropped with it",
                peer=connection.peer,
                count=count,
            )
        elif connection not in self._dropping:
            self._dropping.add(connection)
            log.warn("slow consumer {peer}: dropping its oldest messages", peer=connection.peer)

    def forget(self, connection: Any) -> None:
        """A connection has gone: it is paused no more, and holds no publisher."""
        self.throttle.forget(connection)
        self._dropping.discard(connection)
