"""
A policy's settings on the shared ``/queue/`` streams of the redis engine
(docs/policies.md, docs/cluster.md): applied where a node adds the entry, so
that every node's SEND meets the same policy, whichever node set it.

- ``message-ttl``: the sending node gives the message the sooner of the
  policy's TTL and its own ``expires`` before it encodes it (as one node does
  at admission), so that every node that reads the entry expires it as any.
- ``max-length`` with ``drop-head``: ``XADD stream MAXLEN n`` (exact, not
  ``~``): Redis trims the oldest entries as it adds the new one, in the same command.
- ``max-length`` with ``reject-publish``: one script (:data:`ADD_UNLESS_FULL`)
  compares ``XLEN`` with the limit and adds the entry only below it, in one
  round trip; a refused SEND's Deferred fails with
  :class:`~stompbroker.protocol.errors.LimitExceeded` naming the limit and the
  policy, which the session turns into the ERROR (after the receipts before it).
- ``max-length`` with ``dead-letter``: one script (:data:`ADD_DEAD_LETTERING`)
  moves the oldest entries out (``XRANGE`` + ``XDEL``) to the dead-letter
  queue's stream, each as its payload behind a marking
  (:data:`~stompbroker.broker.engine.redis.codec.DEAD_LETTER`) that the
  reading node's decoder turns into the dead letter a single node makes, then
  adds the new entry: atomic, one round trip, and no decoding on the node.

- ``max-length-bytes`` (with any overflow, and with ``max-length`` beside it):
  one script (:data:`~.shared_bytes.ADD_SIZED`) that keeps a byte counter
  beside the stream (:mod:`.shared_bytes`).

A stream counts every entry it holds: those waiting, and those nodes have read
and not yet settled (the one-node queue counts only the waiting ones).
"""

from __future__ import annotations

from typing import Any

from attrs import frozen
from twisted.internet.defer import Deferred

from stompbroker.broker.engine.redis.keys import byte_counter, recount_mark
from stompbroker.broker.engine.redis.scripts import load
from stompbroker.broker.engine.redis.shared_bytes import ADD_SIZED
from stompbroker.broker.features.policies import Policies
from stompbroker.broker.queueing.limits import MAX_LENGTH
from stompbroker.broker.routing.destinations import dead_letter_destination, is_dead_letter_queue
from stompbroker.protocol.errors import LimitExceeded
from stompbroker.protocol.message import Message

__all__ = ["ADD_DEAD_LETTERING", "ADD_UNLESS_FULL", "SharedLimit", "SharedLimits"]

#: lua/add_unless_full.lua (what it takes and answers is said there).
ADD_UNLESS_FULL = load("add_unless_full")

#: lua/add_dead_lettering.lua (what it takes and answers is said there).
ADD_DEAD_LETTERING = load("add_dead_lettering")


@frozen
class SharedLimit:
    """
    What of the policy in force on one shared queue its stream applies.

    :ivar policy: the policy's name, for the ERROR.
    :ivar max_length: most entries its stream holds, or ``None``.
    :ivar overflow: ``drop-head``, ``reject-publish`` or ``dead-letter``.
    :ivar message_ttl: ms a message may wait, or ``None``.
    :ivar dead_letter: the dead-letter queue of ``dead-letter`` overflow
        (``None`` when the queue is a dead-letter queue: its overflow is dropped).
    :ivar max_bytes: most bytes of message bodies its stream holds, or ``None``.
    """

    policy: str
    max_length: int | None
    overflow: str
    message_ttl: int | None = None
    dead_letter: str | None = None
    max_bytes: int | None = None

    def stamp(self, message: Message, now: float) -> None:
        """Give ``message`` the policy's TTL, if sooner than its own expiry."""
        if self.message_ttl is not None:
            expires = now + self.message_ttl / 1000.0
            if not message.expires or expires < message.expires:
                message.expires = expires

    def add(
        self, engine: Any, message: Message, stream: str, payload: bytes, *, waited: bool
    ) -> Deferred[None] | None:
        """
        Add an entry within the limit.

        :param engine: the redis engine: its writer, names, ids and counters.
        :param waited: a RECEIPT waits for it (a persistent SEND): the Deferred
            fires once Redis has it, with ``--engine-wait-replicas`` its replicas.
        :returns: a Deferred when ``waited`` or the policy rejects (it fails with
            :class:`LimitExceeded` when the stream is full), else ``None``.
        """
        writer = engine.writer
        if self.max_bytes is not None:
            return self._sized(engine, message, stream, payload, waited)
        if self.max_length is None or (self.overflow == "dead-letter" and self.dead_letter is None):
            args: tuple[Any, ...] = ("XADD", stream, "*", "m", payload)
            if self.max_length is not None:
                args = ("XADD", stream, "MAXLEN", self.max_length, "*", "m", payload)
        elif self.overflow == "drop-head":
            args = ("XADD", stream, "MAXLEN", self.max_length, "*", "m", payload)
        elif self.overflow == "dead-letter":
            return self._dead_lettering(engine, message, stream, payload, waited)
        else:
            added: Deferred[Any] = writer.command_waited(
                "EVALSHA", ADD_UNLESS_FULL, 1, stream, self.max_length, payload, replicated=waited
            )
            return added.addCallback(self._added, message.destination)
        if not waited:
            writer.command(*args)
            return None
        stored: Deferred[Any] = writer.command_waited(*args, replicated=True)
        return stored.addCallback(_nothing)

    def enqueue(self, engine: Any, message: Message, stream: str, payload: bytes) -> None:
        """
        Add a message no SEND brings (a dead letter) as one node's queue takes
        it: never refused (``reject-publish`` refuses SENDs only: it is added
        over the limit), the oldest pushed out by the other overflows, and
        counted in the stream's byte count.
        """
        if self.overflow != "reject-publish":
            self.add(engine, message, stream, payload, waited=False)
        elif self.max_bytes is not None:
            self._sized(engine, message, stream, payload, False, overflow="keep")
        else:
            engine.writer.command("XADD", stream, "*", "m", payload)

    def _dead_lettering(
        self, engine: Any, message: Message, stream: str, payload: bytes, waited: bool
    ) -> Deferred[None] | None:
        """Add through :data:`ADD_DEAD_LETTERING`, counting what it moved under the queue."""
        target = self.dead_letter
        assert target is not None
        engine.queue_names.met(target)
        added: Deferred[Any] = engine.writer.command_waited(
            "EVALSHA",
            ADD_DEAD_LETTERING,
            3,
            stream,
            engine.names.queue(target),
            byte_counter(engine.names.queue(target)),
            self.max_length,
            payload,
            target,
            engine.ids.new_message_id(),
            MAX_LENGTH,
            replicated=waited,
        )
        added.addCallback(_count_moved, engine, message)
        return added.addCallback(_nothing) if waited else None

    def _sized(
        self,
        engine: Any,
        message: Message,
        stream: str,
        payload: bytes,
        waited: bool,
        overflow: str | None = None,
    ) -> Deferred[None] | None:
        """
        Add through :data:`~.shared_bytes.ADD_SIZED`, keeping the stream's byte count.

        :param overflow: what to do over the limit, if not the policy's.
        """
        overflow = overflow or self.overflow
        target = self.dead_letter if overflow == "dead-letter" else None
        dead_stream = stream
        if target is not None:
            engine.queue_names.met(target)
            dead_stream = engine.names.queue(target)
        added: Deferred[Any] = engine.writer.command_waited(
            "EVALSHA",
            ADD_SIZED,
            5,
            stream,
            byte_counter(stream),
            recount_mark(stream),
            dead_stream,
            byte_counter(dead_stream),
            self.max_bytes,
            -1 if self.max_length is None else self.max_length,
            overflow,
            payload,
            len(message.body),
            target or "",
            engine.ids.new_message_id() if target is not None else "",
            MAX_LENGTH,
            replicated=waited,
        )
        added.addCallback(self._sized_added, engine, message)
        if waited or overflow == "reject-publish":
            return added
        return None

    def _sized_added(self, reply: Any, engine: Any, message: Message) -> None:
        """Count what went to the dead-letter queue; a refusal fails with the limit's name."""
        accepted, detail = reply[0], reply[1]
        if int(accepted) == 0:
            limit = detail.decode() if isinstance(detail, bytes) else str(detail)
            value = self.max_bytes if limit == "max-length-bytes" else self.max_length
            raise LimitExceeded(
                f"queue {message.destination} is full",
                f"{limit} {value} reached (policy {self.policy}); overflow is reject-publish",
            )
        _count_moved(detail, engine, message)

    def _added(self, reply: Any, destination: str) -> None:
        if reply == 0:
            raise LimitExceeded(
                f"queue {destination} is full",
                f"max-length {self.max_length} reached (policy {self.policy});"
                " overflow is reject-publish",
            )


def _nothing(result: Any) -> None:
    return None


def _count_moved(moved: Any, engine: Any, message: Message) -> None:
    """Count the dead letters under the queue they left, as one node does."""
    for _ in range(int(moved or 0)):
        engine.counters.dead_lettered += 1
        engine.traffic.count((message,), "messages_dead_lettered")


def shared_limit(policies: Policies, destination: str, prefix: str) -> SharedLimit | None:
    """
    :param prefix: the ``--dead-letter-prefix``.
    :returns: what of the policy in force on ``destination`` its stream applies, or ``None``.
    """
    policy = policies.policy_for(destination)
    if policy is None:
        return None
    settings = policy.settings
    if (
        settings.max_length is None
        and settings.max_length_bytes is None
        and settings.message_ttl is None
    ):
        return None
    dead_letter = None
    if settings.overflow == "dead-letter" and not is_dead_letter_queue(destination, prefix):
        dead_letter = settings.dead_letter or dead_letter_destination(destination, prefix)
        if dead_letter == destination:
            dead_letter = None
    return SharedLimit(
        policy.name,
        settings.max_length,
        settings.overflow,
        settings.message_ttl,
        dead_letter,
        settings.max_length_bytes,
    )


class SharedLimits:
    """
    The limits of the shared queues, per destination, cached until the policies change
    (so that a queue no policy limits costs one dictionary look-up per SEND).

    :param policies: the node's policies (the configuration's and the cluster's).
    :param prefix: the ``--dead-letter-prefix``.
    """

    def __init__(self, policies: Policies, prefix: str) -> None:
        self._policies = policies
        self._prefix = prefix
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
        found = self._cached[destination] = shared_limit(self._policies, destination, self._prefix)
        return found
