"""
The management API's move, copy and dead-letter retry of one local queue, past
what memory holds: through a paged queue's part on disk, in batches.

A paged queue (:mod:`~stompbroker.broker.queueing.paging`) holds a read-ahead in
memory and the rest in the store only.  :class:`QueueTransfer` takes the first
``count`` messages of it as a consumer would meet them: what memory holds, then
the part on disk, read a batch at a time (``IMessageStore.page`` from where the
part starts, in the store's thread) and moved there as it is read: each message
leaves its key for the target's in one store step (the journal's ``move``), and
the part is counted down, as the expiry sweep does.  Each reactor turn handles
at most :data:`BATCH` messages, and the next batch is read only after the
moves of the one before are queued, so a move of any size never holds the
reactor, and the store's order makes every message go exactly once.

A copy reads the part the same way and leaves it as it is; a message the route
leaves (a dead letter with no valid origin) stays where it is, on disk or in
memory.  One read of a part is in flight at a time (its ``reading`` flag, which
the queue's own page reads and its expiry sweep respect too): a transfer that
finds a page being read looks again :data:`WAIT` seconds later, and takes from
memory what that page brought.  A part that a purge drops while a batch is read
ends the transfer.

An object the queue table makes for one call, given the queue it acts on, the
clock, and ``send``: the table's way to send one message's new copy where the
route says (and, for a move, to move it in the store).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from attrs import frozen
from twisted.internet.defer import Deferred

from stompbroker.broker.queueing.paging import PagedPart, message_from_record
from stompbroker.logs import logger
from stompbroker.protocol.frames import Headers
from stompbroker.protocol.message import Message

__all__ = ["BATCH", "WAIT", "QueueTransfer", "Transferred"]

log = logger("stompbroker.broker")

#: Most messages one reactor turn of a transfer takes.
BATCH = 250
#: Seconds a transfer waits while a page of its queue is being read.
WAIT = 0.01

#: ``message -> (destination, headers)``, or ``None`` to leave it where it is.
Route = Callable[[Message], tuple[str, Headers] | None]
#: ``(message, destination, headers, copy)``: send the new message.
Send = Callable[[Message, str, Headers, bool], None]


@frozen
class Transferred:
    """
    What a transfer did.

    :ivar moved: how many messages went (were moved, or copied).
    :ivar considered: how many of the queue's first ``count`` it looked at:
        those that went, and those the route left.
    """

    moved: int
    considered: int


class QueueTransfer:
    """
    One move (or copy) of the first ``count`` messages of a local queue.

    :param clock: ``callLater()``, for the next batch.
    :param queue: the :class:`~stompbroker.broker.queueing.queues.WorkerQueue`.
    :param count: most messages to look at, from its head.
    :param route: where each goes (:data:`Route`).
    :param copy: copy them, leaving them in the queue.
    :param send: sends one (:data:`Send`).
    """

    def __init__(
        self, clock: Any, queue: Any, count: int, route: Route, copy: bool, send: Send
    ) -> None:
        self._clock = clock
        self._queue = queue
        self._count = count
        self._route = route
        self._copy = copy
        self._send = send
        self.moved = 0
        self.considered = 0
        #: Ids of what memory holds that this transfer has looked at and left there.
        self._passed: set[str] = set()
        #: Where the next read of the part starts: ``(after, first_id)``; ``None``
        #: for where the part starts now.
        self._cursor: tuple[int, str | None] | None = None
        #: Whether a read came short: the part holds nothing past the cursor.
        self._exhausted = False
        self._done: Deferred[Transferred] | None = None

    def start(self) -> Transferred | Deferred[Transferred]:
        """
        Take what memory holds, and read on if the part on disk holds more.

        :returns: what it did, at once if memory held all it was asked for (in
            one batch); else a Deferred of it, once the last batch is sent.
        """
        looked = self._from_memory()
        if self._remaining() <= 0 or (looked < BATCH and self._queue.paged is None):
            return self._result()
        self._done = Deferred()
        self._clock.callLater(0, self._step)
        return self._done

    def _remaining(self) -> int:
        return self._count - self.considered

    def _result(self) -> Transferred:
        if not self._copy and self.moved and self._queue.paged is not None:
            # Memory gave up messages: a paged queue reads its next page.
            self._queue.dispatch()
        return Transferred(self.moved, self.considered)

    def _end(self) -> None:
        done, self._done = self._done, None
        assert done is not None
        done.callback(self._result())

    def _step(self) -> None:
        """One batch: from memory if it holds some not looked at, else from disk."""
        looked = self._from_memory()
        queue = self._queue
        paged: PagedPart | None = queue.paged
        if self._remaining() <= 0:
            self._end()
        elif looked:
            self._clock.callLater(0, self._step)
        elif paged is None or queue.journal is None or self._exhausted:
            self._end()
        elif paged.reading:
            self._clock.callLater(WAIT, self._step)
        elif paged.count <= 0:
            # All on disk has gone: the queue ends paging, and takes what
            # memory holds next.
            queue.dispatch()
            self._clock.callLater(0, self._step)
        else:
            after, first_id = self._start_of(paged)
            from_start = (after, first_id) == (paged.after, paged.first_id)
            asked = min(self._remaining(), BATCH)
            paged.reading = True
            read = queue.journal.page(queue.store_key, after, first_id, asked)
            read.addCallbacks(
                self._came,
                self._failed,
                callbackArgs=(paged, asked, from_start),
                errbackArgs=(paged,),
            )

    def _start_of(self, paged: PagedPart) -> tuple[int, str | None]:
        """:returns: where to read: past this transfer's last read, or the part's start if later."""
        if self._cursor is None or (paged.first_id is None and paged.after > self._cursor[0]):
            # The queue has read a page past what this read: memory holds it.
            return (paged.after, paged.first_id)
        return self._cursor

    def _from_memory(self) -> int:
        """
        Send (or leave) up to :data:`BATCH` of what memory holds that this
        transfer has not looked at, head first.

        :returns: how many it looked at.
        """
        queue = self._queue
        limit = min(self._remaining(), BATCH)
        chosen = []
        looked = 0
        for message in queue.pending:
            if looked >= limit:
                break
            if message.message_id in self._passed:
                continue
            looked += 1
            target = self._route(message)
            if target is not None:
                chosen.append((message, *target))
            if target is None or self._copy:
                self._passed.add(message.message_id)
        if not self._copy and chosen:
            gone = {id(message) for message, _, _ in chosen}
            kept = [message for message in queue.pending if id(message) not in gone]
            queue.pending.clear()
            queue.pending.extend(kept)
        for message, destination, headers in chosen:
            self._send(message, destination, headers, self._copy)
        self.considered += looked
        self.moved += len(chosen)
        return looked

    def _came(self, records: list[Any], paged: PagedPart, asked: int, from_start: bool) -> None:
        """A batch of the part came: send what the route says, in a later turn."""
        self._clock.callLater(0, self._take, records, paged, asked, from_start)

    def _take(self, records: list[Any], paged: PagedPart, asked: int, from_start: bool) -> None:
        queue = self._queue
        paged.reading = False
        if queue.paged is not paged:
            # Purged (or closed) meanwhile: the store drops the part itself.
            self._end()
            return
        self._exhausted = len(records) < asked
        if records:
            self._cursor = (records[-1].sequence, None)
        # What memory holds already (a priority above the part) moves from there.
        held = {message.message_id for message in queue.in_memory()}
        taken = []
        for record in records:
            if record.message_id in held:
                continue
            message = message_from_record(record)
            target = self._route(message)
            self.considered += 1
            if target is None:
                continue
            self.moved += 1
            self._send(message, *target, self._copy)
            taken.append(record)
            if record.transient and not self._copy:
                # A non-persistent message leaves nothing stored behind it: its row goes here.
                queue.journal.remove(queue.store_key, record.message_id)
        if not self._copy and records:
            # Read from where the part starts, the first record is where it starts.
            paged.taken(taken, records[0].sequence - 1 if from_start else None)
        self._clock.callLater(0, self._step)

    def _failed(self, failure: Any, paged: PagedPart) -> None:
        paged.reading = False
        log.error(
            "a move from {destination} could not read the store: {error}; it moved {moved}",
            destination=self._queue.destination,
            error=str(failure.value),
            moved=self.moved,
        )
        self._end()
