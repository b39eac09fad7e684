"""
A policy's ``max-length`` on the shared ``/queue/`` streams of the redis engine
(docs/policies.md, docs/cluster.md): applied where a node adds the entry, so
that every node's SEND meets the same limit, whichever node set the policy.

- ``drop-head``: ``XADD stream MAXLEN n`` (exact, not ``~``): Redis trims the
  oldest entries as it adds the new one, in the same command.
- ``reject-publish``: one script (:data:`ADD_UNLESS_FULL`) compares ``XLEN``
  with the limit and adds the entry only below it, in one round trip; a
  refused SEND's Deferred fails with
  :class:`~stompbroker.protocol.errors.LimitExceeded` naming the limit and the
  policy, which the session turns into the ERROR (after the receipts before it).

A stream counts every entry it holds: those waiting, and those nodes have read
and not yet settled (the one-node queue counts only the waiting ones).  The
other settings (``max-length-bytes``, ``dead-letter`` overflow, ``message-ttl``,
``expires``) are not applied to shared streams: :func:`shared_limit` leaves
them out, and docs/cluster.md says so.
"""

from __future__ import annotations

from typing import Any

from attrs import frozen
from twisted.internet.defer import Deferred

from stompbroker.broker.features.policies import Policies
from stompbroker.protocol.errors import LimitExceeded

__all__ = ["ADD_UNLESS_FULL", "SharedLimit", "SharedLimits"]

#: KEYS: the stream.  ARGV: the limit, the entry's payload.
#: Returns the new entry's id, or 0 when the stream holds the limit already.
ADD_UNLESS_FULL = """
if redis.call('XLEN', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
return redis.call('XADD', KEYS[1], '*', 'm', ARGV[2])
"""


@frozen
class SharedLimit:
    """
    The limit of the policy in force on one shared queue.

    :ivar policy: the policy's name, for the ERROR.
    :ivar max_length: most entries its stream holds.
    :ivar reject: ``reject-publish`` (else ``drop-head``).
    """

    policy: str
    max_length: int
    reject: bool

    def add(
        self, writer: Any, destination: str, stream: str, payload: bytes, *, waited: bool
    ) -> Deferred[None] | None:
        """
        Add an entry within the limit.

        :param waited: a RECEIPT waits for it (a persistent SEND): the Deferred
            fires once Redis has it, with ``--engine-wait-replicas`` its replicas.
        :returns: a Deferred when ``waited`` or the policy rejects (it fails with
            :class:`LimitExceeded` when the stream is full), else ``None``.
        """
        if not self.reject:
            args = ("XADD", stream, "MAXLEN", self.max_length, "*", "m", payload)
            if not waited:
                writer.command(*args)
                return None
            stored: Deferred[Any] = writer.command_waited(*args, replicated=True)
            return stored.addCallback(_nothing)
        added: Deferred[Any] = writer.command_waited(
            "EVAL", ADD_UNLESS_FULL, 1, stream, self.max_length, payload, replicated=waited
        )
        return added.addCallback(self._added, destination)

    def _added(self, reply: Any, destination: str) -> None:
        if reply == 0:
            raise LimitExceeded(
                f"queue {destination} is full",
                f"max-length {self.max_length} reached (policy {self.policy});"
                " overflow is reject-publish",
            )


def _nothing(result: Any) -> None:
    return None


def shared_limit(policies: Policies, destination: str) -> SharedLimit | None:
    """:returns: what of the policy in force on ``destination`` its stream applies, or ``None``."""
    policy = policies.policy_for(destination)
    if policy is None:
        return None
    settings = policy.settings
    if settings.max_length is None or settings.overflow == "dead-letter":
        return None
    return SharedLimit(policy.name, settings.max_length, settings.overflow == "reject-publish")


class SharedLimits:
    """
    The limits of the shared queues, per destination, cached until the policies change
    (so that a queue no policy limits costs one dictionary look-up per SEND).

    :param policies: the node's policies (the configuration's and the cluster's).
    """

    def __init__(self, policies: Policies) -> None:
        self._policies = policies
        self._cached: dict[str, SharedLimit | None] = {}
        policies.watch(self._cached.clear)

    def of(self, destination: str) -> SharedLimit | None:
        """:returns: the limit on ``destination``'s stream, or ``None``."""
        try:
            return self._cached[destination]
        except KeyError:
            pass
        if len(self._cached) >= 10_000:
            self._cached.clear()
        found = self._cached[destination] = shared_limit(self._policies, destination)
        return found
