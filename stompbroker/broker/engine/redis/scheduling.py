"""
Scheduled delivery shared by every node: due times in a Redis sorted set, by
Redis's clock, each due message claimed by one node in one script.

The rules (which headers, what a fired message carries) are the one node's
(:mod:`stompbroker.broker.features.scheduled_messages`); the router calls
:class:`ClusterScheduling` exactly as it calls the local engine's
:class:`~stompbroker.broker.features.scheduler.Scheduling` (``now_ms``,
``add``, ``arm``, ``stop``), and routes what it fires with its ``fire``.

Keys (``PREFIX`` is the URL's prefix):

- ``PREFIX:sched`` (sorted set): job id (the SEND's message-id) -> when it is
  next due, in ms since the epoch by Redis's ``TIME``;
- ``PREFIX:sched:jobs`` (hash): job id -> its state, ``PERIOD REMAINING FIRED
  LEASED``, a newline, then the message as the codec encodes it;
- ``PREFIX:sched:due`` (channel): "a job is due in N ms", published by the
  script that adds one, so that every node sets its timer for it.

Scripts (each one round trip, atomic in Redis):

- :data:`ADD`: ``TIME``, ``HSET``, ``ZADD`` at Redis's now plus the delay,
  ``PUBLISH`` of the delay.
- :data:`CLAIM`: ``TIME``, ``ZRANGEBYSCORE`` of what is due (at most
  :data:`MOST_PER_CLAIM`), and for each its ``HGET`` and re-arm: a repeat is put
  back a period from now; the last delivery is *leased*, put back
  ``--node-timeout`` from now and marked so, and the node that claimed it
  removes it (``ZREM``, ``HDEL``) in the pipeline right after the writes that
  route it.  A node that dies between its claim and its routing leaves the
  lease to run out: another node fires that delivery again, with the same
  message-id.  Then the earliest due time left (``ZRANGE 0 0 WITHSCORES``), so
  the node knows when to look again.

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
from stompbroker.broker.features.scheduled_messages import Schedule, ScheduledEntry
from stompbroker.logs import logger
from stompbroker.protocol.errors import ProtocolError
from stompbroker.protocol.message import Message

__all__ = ["ADD", "CLAIM", "ClusterScheduling", "JobState", "pack_job", "unpack_job"]

log = logger("stompbroker.broker.engine.redis")

#: Longest a node goes without looking for due jobs, in seconds.
POLL_INTERVAL = 1.0
#: Most jobs one claim takes; a claim that takes this many is followed by another at once.
MOST_PER_CLAIM = 100

#: KEYS: the due set, the jobs hash, the due channel.  ARGV: job id, delay ms, state+message.
ADD = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('PUBLISH', KEYS[3], ARGV[2])
return now
"""

#: KEYS: the due set, the jobs hash.  ARGV: most jobs, lease ms.
#: Returns {now, next due or -1, job, state+message, job, state+message, ...}.
CLAIM = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local jobs = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
local out = {now, -1}
for _, job in ipairs(jobs) do
  local value = redis.call('HGET', KEYS[2], job)
  if not value then
    redis.call('ZREM', KEYS[1], job)
  else
    local nl = string.find(value, '\\n', 1, true)
    local period, remaining, fired, leased =
      string.match(string.sub(value, 1, nl - 1), '^(%d+) (%-?%d+) (%d+) ([01])$')
    period = tonumber(period)
    remaining = tonumber(remaining)
    fired = tonumber(fired)
    if leased == '0' then
      fired = fired + 1
      if remaining == 0 then
        leased = '1'
      elseif remaining > 0 then
        remaining = remaining - 1
      end
    end
    local due = now + period
    if leased == '1' then
      due = now + tonumber(ARGV[2])
    end
    value = string.format('%d %d %d %s', period, remaining, fired, leased) .. string.sub(value, nl)
    redis.call('HSET', KEYS[2], job, value)
    redis.call('ZADD', KEYS[1], due, job)
    out[#out + 1] = job
    out[#out + 1] = value
  end
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if first[2] then
  out[2] = tonumber(first[2])
end
return out
"""


def pack_job(origin: str, message: Message, schedule: Schedule) -> bytes:
    """
    :returns: what the jobs hash keeps of a scheduled message before its first
        delivery: its state line, then the message.
    """
    head = f"{schedule.period} {schedule.repeat} 0 0\n".encode()
    return head + encode(origin, message)


class JobState:
    """
    A claimed job, as :data:`CLAIM` left it.

    :ivar period: ms between deliveries.
    :ivar remaining: deliveries after this one; -1 for no end.
    :ivar fired: deliveries so far, this one included.
    :ivar leased: this is the last delivery, which the claiming node must remove.
    :ivar message: what to route.
    """

    __slots__ = ("period", "remaining", "fired", "leased", "message")

    def __init__(
        self, period: int, remaining: int, fired: int, leased: bool, message: Message
    ) -> None:
        self.period = period
        self.remaining = remaining
        self.fired = fired
        self.leased = leased
        self.message = message


def unpack_job(value: bytes) -> JobState:
    """
    :returns: the state and message of a job as the jobs hash keeps it.
    :raises ValueError: for bytes :func:`pack_job` and :data:`CLAIM` did not make.
    """
    end = value.index(b"\n")
    period, remaining, fired, leased = value[:end].split(b" ")
    _, message = decode(value[end + 1 :])
    return JobState(int(period), int(remaining), int(fired), leased == b"1", message)


class ClusterScheduling:
    """
    The scheduled messages of every node, in Redis; the interface the router's
    :class:`~stompbroker.broker.features.scheduler.Scheduling` has.

    :param engine: the :class:`~stompbroker.broker.engine.redis.engine.RedisEngine`.
    :param fire: routes one due entry (the router's ``fire``); a
        :class:`~stompbroker.protocol.errors.ProtocolError` it raises is logged.
    """

    def __init__(self, engine: Any, fire: Callable[[ScheduledEntry[Message]], None]) -> None:
        self._engine = engine
        self._fire = fire
        prefix = engine.names.prefix
        self.due_set = f"{prefix}:sched"
        self.jobs = f"{prefix}:sched:jobs"
        self.channel = f"{prefix}:sched:due"
        self._claim_script: Any = None
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
            :class:`~stompbroker.broker.engine.redis.connection.RedisUnreachable`;
            otherwise ``None``.
        """
        engine = self._engine
        if not engine.writer.connected:
            engine._check_connected()
        delay = max(0, schedule.due - self.now_ms())
        args = (
            "EVAL",
            ADD,
            3,
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
        self._claim_script = self._engine.client.register_script(CLAIM)
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
        reply = await self._claim_script(
            keys=[self.due_set, self.jobs], args=[MOST_PER_CLAIM, lease], client=engine.client
        )
        self._claiming = False
        now, next_due = int(reply[0]), int(reply[1])
        jobs = reply[2:]
        for index in range(0, len(jobs), 2):
            self._deliver(jobs[index], jobs[index + 1])
        if len(jobs) >= 2 * MOST_PER_CLAIM or self._again:
            self._again = False
            self._look_in(0)
        elif next_due < 0:
            self._look_in(POLL_INTERVAL)
        else:
            self._look_in(min(POLL_INTERVAL, max(0, next_due - now) / 1000.0))

    def _deliver(self, job: bytes, value: bytes) -> None:
        """Route one claimed job, and end it if this was its last delivery."""
        key = job.decode()
        try:
            state = unpack_job(value)
        except ValueError:
            log.warn("dropped a malformed scheduled job {job}", job=key)
            self._end(key)
            return
        entry = ScheduledEntry(
            key,
            state.message,
            0,
            state.period,
            state.remaining,
            state.fired,
            finished=state.leased,
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
        if state.leased:
            # After the writes that routed it, in the same pipeline.
            self._end(key)

    def _end(self, key: str) -> None:
        writer = self._engine.writer
        writer.command("ZREM", self.due_set, key)
        writer.command("HDEL", self.jobs, key)
