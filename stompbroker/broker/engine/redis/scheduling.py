"""
Scheduled delivery shared by every node: due times in a Redis sorted set, by
Redis's clock, each due message claimed by one node in one script.

The rules (which headers, what a fired message carries) are the one node's
(:mod:`stompbroker.broker.features.schedule_rules`); the router calls
:class:`ClusterScheduling` exactly as it calls the local engine's
:class:`~stompbroker.broker.features.schedule_timer.Scheduling` (``now_ms``,
``add``, ``arm``, ``stop``), and routes what it fires with its ``fire``.

Keys (``PREFIX`` is the URL's prefix):

- ``PREFIX:{sched}`` (sorted set): job id (the SEND's message-id) -> when it is
  next due, in ms since the epoch by Redis's ``TIME``;
- ``PREFIX:{sched}:jobs`` (hash): job id -> its state, ``PERIOD REMAINING FIRED
  DONE FLYING``, a newline, then the message as the codec encodes it;
- ``PREFIX:{sched}:flying`` (sorted set): ``FIRED JOB``, one delivery claimed
  and not yet routed -> when its lease runs out, in ms by Redis's ``TIME``;
- ``PREFIX:sched:due`` (channel): "a job is due in N ms", published by the
  script that adds one, so that every node sets its timer for it.

Scripts (each one round trip, atomic in Redis):

- :data:`ADD`: ``TIME``, ``HSET``, ``ZADD`` at Redis's now plus the delay,
  ``PUBLISH`` of the delay.
- :data:`CLAIM`: ``TIME``; first the deliveries whose lease ran out (their
  claimer died before routing them: ``ZRANGEBYSCORE`` of the flying set, and
  per delivery ``HGET`` of its job and ``ZADD`` of a new lease), then what is
  due (``ZRANGEBYSCORE``, at most :data:`MOST_PER_CLAIM`), and for each its
  ``HGET``, the next repeat re-armed a period from now (``ZADD``; ``ZREM``
  after the last), its state written back (``HSET``: one more fired, one more
  flying) and the delivery leased (``ZADD`` to the flying set,
  ``--node-timeout`` from now).  Then the earliest due time or lease end left
  (``ZRANGE 0 0 WITHSCORES`` of each), so the node knows when to look again.
- :data:`SETTLE`: the claiming node, in the pipeline right after the writes
  that route what it claimed, ends the leases of one claim (``ZREM``, and per
  job ``HGET`` and ``HSET`` of its flying count, ``HDEL`` once its last
  delivery is routed).  A node that dies between its claim and its routing
  leaves the lease to run out: the next claim of another node routes that
  delivery (the first one with the SEND's message-id), while the repeats
  after it stay armed.  So each delivery is routed once, by one node, whether
  or not the node that claimed it is still there.  A claim answered
  ``--node-timeout`` or more after it was asked routes nothing (another node
  may have claimed the same deliveries meanwhile).  Twice only if a node dies,
  or stops past ``--node-timeout``, after routing and before its settle
  reaches Redis, as any write in flight.

Each node keeps one timer: for the earliest due time the last claim reported,
or a due notice announced, and at most :data:`POLL_INTERVAL` ahead (a node
that missed a notice while its pub/sub connection was away still looks).  All
nodes' timers go off at a due time; the script gives each entry to one of them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from redis.exceptions import RedisError
from twisted.internet.defer import Deferred

from stompbroker.broker.engine.redis.codec import decode, encode
from stompbroker.broker.engine.redis.connection import CONNECTION_ERRORS, run
from stompbroker.broker.engine.redis.scripts import load, run_script
from stompbroker.broker.features.schedule_rules import Schedule, ScheduledEntry
from stompbroker.logs import logger
from stompbroker.protocol.errors import ProtocolError
from stompbroker.protocol.message import Message

__all__ = ["ADD", "CLAIM", "SETTLE", "ClusterScheduling", "JobState", "pack_job", "unpack_job"]

log = logger("stompbroker.broker.engine.redis")

#: Longest a node goes without looking for due jobs, in seconds.
POLL_INTERVAL = 1.0
#: Most jobs one claim takes; a claim that takes this many is followed by another at once.
MOST_PER_CLAIM = 100

#: lua/schedule_add.lua (what it takes and answers is said there).
ADD = load("schedule_add")


#: lua/schedule_claim.lua (what it takes and answers is said there).
CLAIM = load("schedule_claim")

#: lua/schedule_settle.lua (what it takes and answers is said there).
SETTLE = load("schedule_settle")


def pack_job(origin: str, message: Message, schedule: Schedule) -> bytes:
    """
    :returns: what the jobs hash keeps of a scheduled message before its first
        delivery: its state line, then the message.
    """
    head = f"{schedule.period} {schedule.repeat} 0 0 0\n".encode()
    return head + encode(origin, message)


class JobState:
    """
    A job as the jobs hash keeps it, read back from a claim.

    :ivar period: ms between deliveries.
    :ivar remaining: deliveries after the latest claimed; -1 for no end.
    :ivar fired: deliveries claimed so far.
    :ivar done: the last delivery was claimed (the job is no longer due).
    :ivar flying: deliveries claimed and not yet routed.
    :ivar message: what to route.
    """

    __slots__ = ("period", "remaining", "fired", "done", "flying", "message")

    def __init__(
        self, period: int, remaining: int, fired: int, done: bool, flying: int, message: Message
    ) -> None:
        self.period = period
        self.remaining = remaining
        self.fired = fired
        self.done = done
        self.flying = flying
        self.message = message

    def is_last(self, fired: int) -> bool:
        """:returns: whether delivery number ``fired`` of this job is its last."""
        return self.done and fired == self.fired


def unpack_job(value: bytes) -> JobState:
    """
    :returns: the state and message of a job as the jobs hash keeps it.
    :raises ValueError: for bytes :func:`pack_job` and :data:`CLAIM` did not make.
    """
    end = value.index(b"\n")
    fields = value[:end].split(b" ")
    if len(fields) == 4:
        # Written before the flying count was kept.
        fields.append(b"0")
    period, remaining, fired, done, flying = fields
    _, message = decode(value[end + 1 :])
    return JobState(int(period), int(remaining), int(fired), done == b"1", int(flying), message)


class ClusterScheduling:
    """
    The scheduled messages of every node, in Redis; the interface the router's
    :class:`~stompbroker.broker.features.schedule_timer.Scheduling` has.

    :param engine: the :class:`~stompbroker.broker.engine.redis.engine.RedisEngine`.
    :param fire: routes one due entry (the router's ``fire``); a
        :class:`~stompbroker.protocol.errors.ProtocolError` it raises is logged.
    """

    def __init__(self, engine: Any, fire: Callable[[ScheduledEntry[Message]], None]) -> None:
        self._engine = engine
        self._fire = fire
        names = engine.names
        self.due_set = names.schedule_due
        self.jobs = names.schedule_jobs
        self.flying = names.schedule_flying
        self.channel = names.schedule_channel
        self._timer: Any = None
        #: When the timer goes off, in this node's clock seconds.
        self._timer_at = 0.0
        self._claiming = False
        self._again = False
        self._running = False
        #: Deliveries this node fired (for tests and statistics).
        self.fired = 0

    def now_ms(self) -> int:
        """:returns: this node's clock in ms since the epoch (the SEND's delays count from it)."""
        return int(self._engine.clock.seconds() * 1000)

    def add(self, message: Message, schedule: Schedule) -> Deferred[None] | None:
        """
        File a message in Redis until it is due: by Redis's clock, the delay
        from now that ``schedule`` gives by this node's.

        :returns: for a persistent message, a Deferred that fires once Redis has
            it (the SEND's RECEIPT waits on it), or fails with
            :class:`~stompbroker.broker.engine.redis.outage.RedisUnreachable`;
            otherwise ``None``.
        """
        engine = self._engine
        if not engine.writer.connected:
            engine._check_connected()
        delay = max(0, schedule.due - self.now_ms())
        args = (
            "EVALSHA",
            ADD,
            2,
            self.due_set,
            self.jobs,
            self.channel,
            message.message_id,
            delay,
            pack_job(engine.ids.node, message, schedule),
        )
        if not message.persistent:
            engine.writer.command(*args)
            return None
        stored: Deferred[Any] = engine.writer.command_waited(*args)
        return stored.addCallback(lambda _: None)

    def arm(self) -> None:
        """Start looking for due jobs (the engine is connected)."""
        self._running = True
        self._claim_now()

    def stop(self) -> None:
        """Stop looking: the node is stopping (the jobs stay in Redis for the others)."""
        self._running = False
        timer, self._timer = self._timer, None
        if timer is not None and timer.active():
            timer.cancel()

    def notice(self, payload: bytes) -> None:
        """A job was added, due in ``payload`` ms: look then, unless this node looks sooner."""
        try:
            delay = int(payload) / 1000.0
        except ValueError:
            log.warn("ignored a malformed scheduled job notice")
            return
        self._look_in(delay)

    def _look_in(self, delay: float) -> None:
        if not self._running:
            return
        clock = self._engine.clock
        at = clock.seconds() + delay
        timer = self._timer
        if timer is not None and timer.active():
            if self._timer_at <= at:
                return
            timer.cancel()
        self._timer_at = at
        self._timer = clock.callLater(delay, self._claim_now)

    def _claim_now(self) -> None:
        self._timer = None
        if not self._running:
            return
        if self._claiming:
            self._again = True
            return
        self._claiming = True
        claimed = run(self._engine.loop, self._claim())
        claimed.addErrback(self._failed)

    def _failed(self, failure: Any) -> None:
        self._claiming = False
        if not failure.check(*CONNECTION_ERRORS, RedisError):
            log.failure("claiming due scheduled messages failed", failure)
        self._look_in(POLL_INTERVAL)

    async def _claim(self) -> None:
        engine = self._engine
        lease = int(engine.node_timeout * 1000)
        asked = engine.clock.seconds()
        reply = await run_script(
            engine.client,
            CLAIM,
            3,
            self.due_set,
            self.jobs,
            self.flying,
            MOST_PER_CLAIM,
            lease,
        )
        self._claiming = False
        now, next_due = int(reply[0]), int(reply[1])
        claimed = reply[2:]
        if claimed and engine.clock.seconds() - asked >= engine.node_timeout:
            # The node was paused or cut off past the leases: another node may
            # have claimed and routed these meanwhile.  Left to their leases,
            # they are routed once, by whoever claims them next.
            log.warn(
                "left {count} scheduled deliveries to the next claim: their claim took"
                " longer than --node-timeout",
                count=len(claimed) // 3,
            )
            claimed = []
        routed: list[Any] = []
        for index in range(0, len(claimed), 3):
            job, fired = claimed[index], int(claimed[index + 1])
            self._deliver(job.decode(), fired, claimed[index + 2])
            if fired >= 0:
                routed += [job, fired]
        if routed:
            # After the writes that routed them, in the same ordered pipeline.
            engine.writer.command("EVALSHA", SETTLE, 2, self.flying, self.jobs, *routed)
        if len(claimed) >= 3 * MOST_PER_CLAIM or self._again:
            self._again = False
            self._look_in(0)
        elif next_due < 0:
            self._look_in(POLL_INTERVAL)
        else:
            self._look_in(min(POLL_INTERVAL, max(0, next_due - now) / 1000.0))

    def _deliver(self, key: str, fired: int, value: bytes) -> None:
        """
        Route delivery number ``fired`` of one claimed job (-1: CLAIM found its
        state unreadable and removed it); a malformed job is removed whole, as
        it would fail again.
        """
        try:
            if fired < 0:
                raise ValueError(key)
            state = unpack_job(value)
        except ValueError:
            log.warn("dropped a malformed scheduled job {job}", job=key)
            writer = self._engine.writer
            writer.command("ZREM", self.due_set, key)
            writer.command("HDEL", self.jobs, key)
            return
        entry = ScheduledEntry(
            key,
            state.message,
            0,
            state.period,
            state.remaining,
            fired,
            finished=state.is_last(fired),
        )
        self.fired += 1
        try:
            self._fire(entry)
        except ProtocolError as error:
            log.warn(
                "scheduled message {message_id} to {destination} not delivered: {error}",
                message_id=key,
                destination=state.message.destination,
                error=error.message,
            )
