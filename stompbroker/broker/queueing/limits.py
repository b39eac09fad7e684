"""
A policy's limits on one queue: its maximum length in messages and bytes, what
overflow does, and the time a message may wait (docs/policies.md).

An object a :class:`~stompbroker.broker.queueing.queues.WorkerQueue` holds only
while a policy limits it, so that a queue without one pays one attribute test
per message.  Only waiting messages count (as RabbitMQ counts ready ones): what
consumers hold unacknowledged does not.

The byte count is not kept up to date as messages leave (that would cost the
plain dispatch loop): it is summed when the queue could be over the limit, that
is when its length times the largest body seen exceeds it.
"""

from __future__ import annotations

from typing import Any

from stompbroker.broker.features.policies import PolicySettings
from stompbroker.protocol.errors import LimitExceeded
from stompbroker.protocol.message import Message

#: The ``dead-letter-reason`` of a message that overflow pushed out.
MAX_LENGTH = "maxlen"


class QueueLimits:
    """
    :param policy: the name of the policy in force, for the ERROR.
    :param settings: its settings (at least one limit or a TTL).
    :param clock: ``seconds()``, for the TTL.
    """

    __slots__ = ("policy", "settings", "_clock", "_largest")

    def __init__(self, policy: str, settings: PolicySettings, clock: Any) -> None:
        self.policy = policy
        self.settings = settings
        self._clock = clock
        self._largest = 0

    def admit(self, queue: Any, message: Message) -> None:
        """
        A message sent to the queue: give it the policy's TTL, and refuse it if
        the queue is full and overflow is ``reject-publish``.

        :raises LimitExceeded: naming the limit and the policy.
        """
        settings = self.settings
        if settings.overflow == "reject-publish":
            over = self._over(queue, len(message.body))
            if over is not None:
                raise LimitExceeded(
                    f"queue {queue.destination} is full",
                    f"{over} reached (policy {self.policy}); overflow is reject-publish",
                )
        ttl = settings.message_ttl
        if ttl is not None:
            expires = self._clock.seconds() + ttl / 1000.0
            if not message.expires or expires < message.expires:
                message.expires = expires

    def trim(self, queue: Any, added: Message) -> None:
        """After a message is added: push the oldest out while the queue is over a limit."""
        if self.settings.overflow == "reject-publish":
            return
        pending = queue.pending
        if len(added.body) > self._largest:
            self._largest = len(added.body)
        dead_letter = self.settings.overflow == "dead-letter"
        while pending and self._over(queue, 0, after=True) is not None:
            message = pending.popleft()
            if dead_letter:
                queue.dead_letter(message, MAX_LENGTH)
            else:
                queue.drop(message)

    def _over(self, queue: Any, adding: int, after: bool = False) -> str | None:
        """
        :param queue: the queue, whose messages paged out to the store count too
            (:mod:`~stompbroker.broker.queueing.paging`): memory holds the oldest,
            so the head pushed out is always in memory.
        :param adding: the body size of a message about to be added (0 if none).
        :param after: the message is in the queue already.
        :returns: the limit that adding would exceed (or that is exceeded), or ``None``.
        """
        settings = self.settings
        pending = queue.pending
        paged = queue.paged
        count = len(pending) + (0 if after else 1)
        if paged is not None:
            count += paged.count
        if settings.max_length is not None and count > settings.max_length:
            return f"max-length {settings.max_length}"
        limit = settings.max_length_bytes
        if limit is None:
            return None
        if adding > self._largest:
            self._largest = adding
        if count * self._largest <= limit:
            return None
        total = adding + (paged.size if paged is not None else 0)
        for message in pending:
            size = len(message.body)
            total += size
            if size > self._largest:
                self._largest = size
        if total > limit:
            return f"max-length-bytes {limit}"
        return None
