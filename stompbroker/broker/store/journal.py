"""
How the broker uses its message store: keys, and writes whose outcome someone must hear of.

The store (:mod:`stompbroker.broker.store`) files messages under keys.  A queue's
key is its destination; a durable topic subscription's key is
:func:`durable_key` of its ``(client-id, name)``, which starts with ``durable:``
and so can never be mistaken for a ``/queue/`` destination.

A :class:`Journal` is the store as the broker's queues see it.  Only one kind of
write has someone waiting for it: the adds of a persistent SEND, whose RECEIPT
(or the client's next frame) waits until they are durable; :meth:`Journal.add`
returns that Deferred, failing with :class:`MessageNotStored`, which the session
turns into an ERROR.  Every other write (a delivery mark, a removal after an ACK,
a dead-letter move, a durable subscription) is fire-and-forget: the broker's
memory has already changed, nobody can be told of a failure, so it is logged.

Failures come in episodes (a full disk fails every write that needs space until
there is room again): the log gets the first failure of an episode and, with the
next write that succeeds, how many failed in between, never one line per write.
A removal that failed is asked for again then, so that an acknowledged message
does not come back after a restart.  An ACK is answered whether or not its
removal could be written: the consumer goes on, and at worst the message is
delivered again, marked ``redelivered``, after a restart.
"""

from __future__ import annotations

import json
from typing import Any

from twisted.internet.defer import Deferred, FirstError, gatherResults
from twisted.python.failure import Failure

from stompbroker.broker.store.base import StoreFull, StoreNotOpen
from stompbroker.logs import logger
from stompbroker.protocol.errors import ProtocolError

log = logger("stompbroker.broker.store.journal")

#: What every durable subscription's key starts with.
DURABLE_KEY_PREFIX = "durable:"


def durable_key(durable: tuple[str, str]) -> str:
    """
    Name a durable subscription in the store.

    :param durable: ``(client-id, name)``, as ``ISubscriber.durable`` holds it.
    :returns: ``durable:["client-id", "name"]``: JSON keeps any two strings apart,
        and the prefix keeps the key apart from every queue destination.
    """
    return DURABLE_KEY_PREFIX + json.dumps([durable[0], durable[1]])


def parse_durable_key(key: str) -> tuple[str, str] | None:
    """
    :param key: a store key.
    :returns: the ``(client-id, name)`` that :func:`durable_key` made ``key``
        from, or ``None`` if it did not make it.
    """
    if not key.startswith(DURABLE_KEY_PREFIX):
        return None
    try:
        client_id, name = json.loads(key[len(DURABLE_KEY_PREFIX) :])
    except ValueError:
        return None
    if not isinstance(client_id, str) or not isinstance(name, str):
        return None
    return (client_id, name)


class MessageNotStored(ProtocolError):
    """
    A persistent message could not be written to the store, so its SEND (or
    COMMIT) is not acknowledged; the client gets an ERROR instead of a RECEIPT.
    """


def _nothing(result: Any) -> None:
    return None


def _first_error(failure: Failure) -> Failure:
    """:returns: the failure of the first Deferred that failed in a gathered list."""
    error = failure.value
    if isinstance(error, FirstError):
        return error.subFailure
    return failure


def all_done(deferreds: list[Deferred[Any]]) -> Deferred[None] | None:
    """
    Wait for every one of some store writes.

    :param deferreds: in the order the writes were asked for.
    :returns: ``None`` if there is nothing to wait for; otherwise a Deferred that
        fires with ``None`` once all have fired, or fails as the first that failed.
    """
    if not deferreds:
        return None
    if len(deferreds) == 1:
        return deferreds[0].addCallback(_nothing)
    return gatherResults(deferreds, consumeErrors=True).addCallbacks(_nothing, _first_error)


class Journal:
    """
    The message store as the broker's queues use it.

    :param store: an :class:`~stompbroker.broker.store.base.IMessageStore`; the broker opens it.

    :ivar stopping: set when the broker stops: writes refused by the closed
        store are then expected and not logged.
    """

    def __init__(self, store: Any) -> None:
        self.store: Any = store
        self.stopping = False
        #: Writes failed since the last that succeeded: 0 outside a failure episode.
        self.failing = 0
        #: Removals that failed, asked for again when writes succeed again.
        self._unremoved: list[tuple[str, str]] = []

    def add(self, keys: list[str], message: Any) -> Deferred[None] | None:
        """
        File a persistent message under each key that keeps it.

        :param keys: queue destinations and durable subscription keys.
        :param message: a :class:`stompbroker.protocol.message.Message`.
        :returns: ``None`` if there is no key; otherwise a Deferred that fires with
            ``None`` once every add is durable, or fails with
            :class:`MessageNotStored`.
        """
        if len(keys) == 1:
            # One queue, the usual case: one link on the store's Deferred, not two.
            added: Deferred[None] = self.store.add(keys[0], message)
            return added.addCallbacks(_nothing, self._not_stored, errbackArgs=(message,))
        done = all_done([self.store.add(key, message) for key in keys])
        if done is None:
            return None
        return done.addErrback(self._not_stored, message)

    def schedule(self, record: Any, message: Any) -> Deferred[None]:
        """
        Keep a persistent scheduled message, as a SEND that waits for it.

        :param record: its :class:`~stompbroker.broker.store.base.ScheduledRecord`.
        :param message: the message, for the log.
        :returns: a Deferred that fires once it is durable, or fails with
            :class:`MessageNotStored`.
        """
        done: Deferred[None] = self.store.schedule(record)
        return done.addErrback(self._not_stored, message)

    def reschedule(self, record: Any) -> Deferred[bool]:
        """
        Update the schedule of a message that has fired and repeats.

        :returns: see :meth:`_written`.
        """
        written = self.store.schedule(record)
        return self._written(written, f"reschedule {record.message_id}", "scheduled")

    def unschedule(self, message_id: str) -> Deferred[bool]:
        """
        Forget a scheduled message that has fired for the last time.

        :returns: see :meth:`_written`.
        """
        written = self.store.unschedule(message_id)
        return self._written(written, f"unschedule {message_id}", "scheduled")

    def retain(self, topic: str, message: Any) -> Deferred[None]:
        """
        Keep a topic's persistent retained message, as a SEND that waits for it.

        :returns: a Deferred that fires once it is durable, or fails with
            :class:`MessageNotStored`.
        """
        done: Deferred[None] = self.store.retain(topic, message)
        return done.addErrback(self._not_stored, message)

    def unretain(self, topic: str) -> Deferred[bool]:
        """
        Forget a topic's retained message.

        :returns: see :meth:`_written`.
        """
        return self._written(self.store.unretain(topic), "forget retained message", topic)

    def _not_stored(self, failure: Failure, message: Any) -> Failure:
        if not failure.check(StoreFull):
            # The store logs a full disk itself, once when it fills and once when it has room.
            if not self.failing:
                log.error(
                    "persistent message {message_id} to {destination} not stored: {error}",
                    message_id=message.message_id,
                    destination=message.destination,
                    error=str(failure.value),
                )
            self.failing += 1
        return Failure(
            MessageNotStored(
                "message not stored",
                f"the broker could not store this persistent message ({failure.value}), so"
                " it is not acknowledged; it may still be delivered from memory, so a resend"
                " can give a duplicate",
            )
        )

    def delivered(self, key: str, message_id: str) -> Deferred[bool] | None:
        """
        Record that a message is being handed to a consumer, so that after a crash
        it comes back with ``redelivered:true``.

        :returns: ``None`` if the mark is recorded already (the SQLite store's
            mark of a message whose insert it joins: a flowing queue's every
            delivery), so that the message is written to its consumer at once,
            with no Deferred to wait for; otherwise see :meth:`_written`: the
            message is written to its consumer once this fires.
        """
        written = self.store.mark_delivered(key, message_id)
        if written.called and not isinstance(written.result, Failure):
            self._succeeded(None)
            return None
        return self._written(written, "mark delivered", key)

    def delay(self, key: str, message_id: str, due: float) -> Deferred[bool]:
        """
        Record when a NACKed message may be delivered again, so that its wait
        outlives a restart.

        :returns: see :meth:`_written`.
        """
        return self._written(self.store.delay(key, message_id, due), "delay", key)

    def remove(self, key: str, message_id: str, *, lazy: bool = False) -> Deferred[bool]:
        """
        Forget a message that was acknowledged (or handed to an ``auto``
        consumer), expired, or discarded.

        :param lazy: for an ACK: no delivery waits for it, so the store may hold
            it for a commit that others start (see ``IMessageStore.remove``).
        :returns: see :meth:`_written`.
        """
        removed: Deferred[Any] = self.store.remove(key, message_id, lazy=lazy)
        return removed.addCallbacks(
            self._succeeded, self._not_removed, errbackArgs=(key, message_id)
        )

    def _not_removed(self, failure: Failure, key: str, message_id: str) -> bool:
        """A removal failed: log it as any write, and ask for it again once writes succeed."""
        if not self.stopping:
            self._unremoved.append((key, message_id))
        return self._failed(failure, f"remove {message_id}", key)

    def move(self, key: str, message_id: str, to_key: str, copy: Any) -> Deferred[bool]:
        """
        Replace a message by its dead-letter copy, filed under the dead-letter
        queue's key, in one step.

        :returns: see :meth:`_written`.
        """
        written = self.store.move(key, message_id, to_key, copy)
        return self._written(written, f"dead-letter {message_id}", key)

    def page(self, key: str, after: int, first_id: str | None, limit: int) -> Deferred[list[Any]]:
        """
        Read the next messages of a paged queue (``IMessageStore.page``), for the
        queue that asked: it logs a failure and asks again.

        :returns: a Deferred firing with the records, in order.
        """
        records: Deferred[list[Any]] = self.store.page(key, after, first_id, limit)
        return records

    def add_transient(self, key: str, message: Any) -> Deferred[bool]:
        """
        Keep a non-persistent message of a paged queue on disk instead of in memory
        (``IMessageStore.add_transient``): nobody waits for it.

        :returns: see :meth:`_written`; a message the store could not take is
            lost, as the log says (once per episode).
        """
        written = self.store.add_transient(key, message)
        return self._written(written, f"page out non-persistent {message.message_id}", key)

    def remove_transient(self, key: str, through: int) -> Deferred[bool]:
        """
        Forget a paged queue's non-persistent messages that a page has read back
        into memory, up to the store sequence ``through``.

        :returns: see :meth:`_written`.
        """
        written = self.store.remove_transient(key, through)
        return self._written(written, "remove paged non-persistent messages", key)

    def expired(
        self, key: str, after: int, first_id: str | None, now: float, limit: int
    ) -> Deferred[Any]:
        """
        Find the expired messages of a paged queue's part on disk
        (``IMessageStore.expired``), for its sweep, which logs a failure and
        sweeps again later.

        :returns: a Deferred firing with an
            :class:`~stompbroker.broker.store.base.ExpiredPage`.
        """
        found: Deferred[Any] = self.store.expired(key, after, first_id, now, limit)
        return found

    def remove_paged(self, key: str, after: int, first_id: str | None) -> Deferred[bool]:
        """
        Forget the part of a queue that was on disk only (a purge).

        :returns: see :meth:`_written`.
        """
        written = self.store.remove_after(key, after, first_id)
        return self._written(written, "remove paged messages", key)

    def add_subscription(self, key: str, pattern: str) -> Deferred[bool]:
        """
        Record a durable subscription, so that it is rebuilt at the next start.

        :returns: see :meth:`_written`.
        """
        written = self.store.add_subscription(key, pattern)
        return self._written(written, "record durable subscription", key)

    def remove_subscription(self, key: str) -> Deferred[bool]:
        """
        Drop a durable subscription and its backlog.

        :returns: see :meth:`_written`.
        """
        return self._written(self.store.remove_subscription(key), "remove subscription", key)

    def _written(self, written: Deferred[Any], operation: str, key: str) -> Deferred[bool]:
        """
        :returns: a Deferred that never fails: it fires with ``True`` once the
            write is durable, ``False`` if it failed (which is logged here, as
            most writes have nobody else to tell).
        """
        return written.addCallbacks(self._succeeded, self._failed, errbackArgs=(operation, key))

    def _succeeded(self, result: Any) -> bool:
        if self.failing:
            self._episode_over()
        elif self._unremoved:
            self._retry_removals()
        return True

    def _failed(self, failure: Failure, operation: str, key: str) -> bool:
        if self.stopping and failure.check(StoreNotOpen):
            return False
        if failure.check(StoreFull):
            # Logged by the store, once each way; a removal it refused is retried below.
            return False
        if not self.failing:
            log.error(
                "message store could not {operation} in {key}: {error}",
                operation=operation,
                key=key,
                error=str(failure.value),
            )
        self.failing += 1
        return False

    def _episode_over(self) -> None:
        """A write succeeded after some failed: say how many, and retry the removals."""
        log.info(
            "message store writes succeed again; {failed} failed since the first logged",
            failed=self.failing,
        )
        self.failing = 0
        self._retry_removals()

    def _retry_removals(self) -> None:
        unremoved, self._unremoved = self._unremoved, []
        for key, message_id in unremoved:
            self.remove(key, message_id, lazy=True)


def settled(written: list[Deferred[bool]]) -> Deferred[None] | None:
    """
    Wait for the writes an ACK or NACK caused (removals, dead-letter moves).

    :param written: Deferreds from :class:`Journal`'s methods, which never fail.
    :returns: ``None`` if there is nothing to wait for; otherwise a Deferred
        that fires with ``None`` once all are written or have failed: an ACK is
        answered either way (the journal logs and retries what failed), since
        refusing it would stop a consumer that can do nothing about the disk.
    """
    if not written:
        return None
    if len(written) == 1:
        # An ACK of one message: gathering one result would cost a DeferredList.
        return written[0].addCallback(_nothing)
    return gatherResults(written).addCallback(_nothing)
