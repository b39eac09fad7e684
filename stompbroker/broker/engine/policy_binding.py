"""
Applies the per-destination policies (:mod:`stompbroker.broker.features.policies`)
to the queues a :class:`~stompbroker.broker.engine.queue_table.QueueTable` holds:
when a queue is made, and to every queue at once when the policies change.

Two things a policy does to a queue live here: its limits (a
:class:`~stompbroker.broker.queueing.limits.QueueLimits` the queue holds, or
none), and its expiry: a ``/queue/`` that nobody consumes from for the policy's
``expires`` is deleted with what it holds (its persistent messages leave the
store), as RabbitMQ's queue TTL.  The clock starts when the queue is made and
whenever its last consumer leaves.
"""

from __future__ import annotations

from typing import Any

from stompbroker.broker.features.policies import Policies
from stompbroker.broker.queueing.limits import QueueLimits
from stompbroker.broker.queueing.queues import WorkerQueue
from stompbroker.broker.routing.destinations import QUEUE_PREFIX
from stompbroker.logs import logger

log = logger("stompbroker.broker")


class PolicyBinding:
    """
    :param policies: the policies in force; this binding watches them.
    :param clock: ``seconds()`` and ``callLater()``.
    :param queues: destination -> queue: the table's (read when policies change).
    :param delete: deletes a queue of ``queues`` and what it holds.
    """

    def __init__(self, policies: Policies, clock: Any, queues: dict[str, Any], delete: Any) -> None:
        self.policies = policies
        self._clock = clock
        self._queues = queues
        self._delete = delete
        #: queue -> its expiry's DelayedCall, while one runs.
        self._timers: dict[Any, Any] = {}
        policies.watch(self.reapply)

    def apply(self, queue: Any) -> None:
        """Give ``queue`` the limits and expiry of the policy in force on it (or none)."""
        if not isinstance(queue, WorkerQueue):
            return
        policy = self.policies.policy_for(queue.destination)
        settings = None if policy is None else policy.settings
        if policy is None or settings is None or not settings.limits_queue:
            queue.limits = None
        else:
            queue.limits = QueueLimits(policy.name, settings, self._clock)
        self._cancel(queue)
        if settings is not None and settings.expires is not None and not queue.consumers:
            self.unused(queue)

    def reapply(self) -> None:
        """The policies changed: every queue gets what is in force now."""
        for queue in list(self._queues.values()):
            self.apply(queue)

    def unused(self, queue: Any) -> None:
        """``queue``'s last consumer left (or it was made): start its expiry, if it has one."""
        if not isinstance(queue, WorkerQueue) or not queue.destination.startswith(QUEUE_PREFIX):
            return
        settings = self.policies.settings_for(queue.destination)
        if settings is None or settings.expires is None:
            return
        self._cancel(queue)
        self._timers[queue] = self._clock.callLater(settings.expires / 1000.0, self._expire, queue)

    def _cancel(self, queue: Any) -> None:
        timer = self._timers.pop(queue, None)
        if timer is not None and timer.active():
            timer.cancel()

    def _expire(self, queue: WorkerQueue) -> None:
        self._timers.pop(queue, None)
        if queue.consumers or self._queues.get(queue.destination) is not queue:
            return
        log.info(
            "queue {destination} expired unused: deleted with {count} messages",
            destination=queue.destination,
            count=queue.depth(),
        )
        queue.purge()
        self._delete(queue)
