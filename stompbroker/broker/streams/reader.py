"""
One stream subscription's cursor: :class:`StreamReader`.

A reader has one position, the offset it reads next, and moves it only when it
hands an entry to its consumer; replayed entries and live ones pass through the
same position, so between the replay and the live tail there is no gap and no
duplicate.  While its consumer has room it reads on: from the log's cache at
once, from the backend a page at a time (one read in flight, a page of at most
the consumer's window); once it reaches the end it waits at the tail, where the
log offers it each new entry, delivered at once while there is room.  When the
consumer's window is full, or its connection's socket is behind, the reader
leaves the tail and reads again, from its position, once an ACK or the socket
makes room: a slow reader costs the broker one page, never the log.

It stands where a queue stands for the broker's consumers
(:class:`~stompbroker.broker.queueing.delivery.Consumer` ``.queue``): an ACK or NACK
settles what the consumer holds and makes room (a stream is not consumed, so a
NACK redelivers nothing: a client reads again from an offset), and
``dispatch`` is called when the socket catches up.  An ``auto`` subscription
is handed a window's worth per reactor turn, so that its socket can push back.

Counting: a reader given the broker's
:class:`~stompbroker.broker.flow.traffic.Traffic` counts each entry it hands
out as a delivery of the stream (and an ACK's messages as acknowledged), as a
queue counts its own: one call per delivery, nothing more.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

from stompbroker.broker.queueing.delivery import Consumer
from stompbroker.broker.streams.entries import StreamEntry
from stompbroker.broker.streams.log import StreamLog
from stompbroker.logs import logger
from stompbroker.protocol.message import Message

if TYPE_CHECKING:
    from stompbroker.broker.flow.traffic import Traffic

log = logger("stompbroker.broker")


class StreamReader:
    """
    One subscription's place in a stream.

    :param stream: the :class:`~stompbroker.broker.streams.log.StreamLog`.
    :param clock: ``callLater``, to go on with an ``auto`` replay next turn.
    :param position: the first offset to read.
    :param since: deliver only entries appended at this POSIX time or later.
    :param traffic: the counters its deliveries and acknowledgements count in;
        ``None`` counts nothing.

    :ivar position: the offset it reads next.
    """

    __slots__ = (
        "destination",
        "stream",
        "position",
        "consumer",
        "consumers",
        "pending",
        "_since",
        "_clock",
        "_page",
        "_reading",
        "_later",
        "_traffic",
    )

    def __init__(
        self,
        stream: StreamLog,
        clock: Any,
        position: int,
        since: float = 0.0,
        traffic: Traffic | None = None,
    ) -> None:
        self.destination = stream.destination
        self.stream = stream
        self.position = position
        self.consumer: Consumer | None = None
        self.consumers: list[Consumer] = []
        #: Nothing waits here: a stream is read, not queued.
        self.pending: tuple[Message, ...] = ()
        self._since = since
        self._clock = clock
        #: Entries read from the backend and not yet delivered: at most a page.
        self._page: deque[StreamEntry] = deque()
        self._reading = False
        self._later: Any = None
        self._traffic = traffic

    def __repr__(self) -> str:
        return f"<StreamReader {self.destination!r} at {self.position}>"

    # -- what the broker's consumers call ------------------------------------

    def add_consumer(
        self,
        subscriber: Any,
        window: int,
        max_redeliveries: int,
        *,
        selector: Any = None,
        options: Any = None,
    ) -> Consumer:
        """
        Start reading for ``subscriber``; a reader has one consumer.

        ``selector`` and ``options`` are the :class:`IQueue` signature's: the
        broker refuses a selector on a stream before it gets here, and consumer
        options (priorities, exclusivity) mean nothing to a reader of its own.
        """
        consumer = self.consumer = Consumer(subscriber, self, window, max_redeliveries)
        self.consumers.append(consumer)
        self.stream.attached.add(self)
        if not self._reading:
            self._tell_start()
        self.pump()
        return consumer

    def remove_consumer(self, consumer: Consumer) -> None:
        """Stop reading: leave the tail, and forget what the consumer holds."""
        consumer.take_all()
        self.consumer = None
        self.consumers.clear()
        self._page.clear()
        self.stream.readers.discard(self)
        self.stream.attached.discard(self)
        if self._later is not None and self._later.active():
            self._later.cancel()
        self._later = None

    def acknowledge(self, consumer: Consumer, messages: list[Message]) -> list[Any]:
        """Settled messages make room: read on."""
        if self._traffic is not None:
            self._traffic.acked(messages)
        self.pump()
        return []

    def requeue(self, consumer: Consumer, messages: list[Message]) -> list[Any]:
        """A NACK settles as an ACK does: a stream is not consumed, nothing comes back."""
        self.pump()
        return []

    def reject(self, messages: list[Message]) -> list[Any]:
        """A NACK with ``requeue:false``: the same."""
        self.pump()
        return []

    def dispatch(self) -> None:
        """The consumer's socket has caught up: read on."""
        self.pump()

    def is_idle(self) -> bool:
        """:returns: whether nobody reads here any more."""
        return self.consumer is None

    # -- reading ---------------------------------------------------------------

    def pump(self) -> None:
        """Hand the consumer entries while it has room, reading the log as needed."""
        consumer = self.consumer
        if consumer is None or self._reading:
            return
        stream = self.stream
        page = self._page
        batch = consumer.window
        handed = 0
        while consumer.has_room():
            if not page:
                got = stream.read(self.position, batch)
                if isinstance(got, list):
                    if not got:
                        # At the end: wait at the tail.
                        stream.readers.add(self)
                        return
                    page.extend(got)
                else:
                    self._reading = True
                    got.addCallbacks(self._page_read, self._read_failed)
                    return
            entry = page.popleft()
            self.position = entry.offset + 1
            if entry.timestamp >= self._since:
                self._deliver(consumer, entry.message)
                handed += 1
                if consumer.auto and handed >= batch:
                    self._go_on_later()
                    return
        stream.readers.discard(self)

    def appended(self, entry: StreamEntry) -> None:
        """
        The log has a new entry, and this reader is at the tail: deliver it now if
        there is room, else leave the tail and read it later.
        """
        consumer = self.consumer
        if (
            consumer is not None
            and not self._page
            and not self._reading
            and self.position <= entry.offset
            and consumer.has_room()
        ):
            self.position = entry.offset + 1
            if entry.timestamp >= self._since:
                # The live tail's hot path: counted inline, no hop through _deliver.
                traffic = self._traffic
                if traffic is not None:
                    traffic.delivered(entry.message, consumer.auto)
                consumer.deliver(entry.message)
            return
        self.stream.readers.discard(self)

    def _deliver(self, consumer: Consumer, message: Message) -> None:
        """Hand one entry's message to the consumer, counting it."""
        traffic = self._traffic
        if traffic is not None:
            traffic.delivered(message, consumer.auto)
        consumer.deliver(message)

    def _page_read(self, entries: list[StreamEntry]) -> None:
        self._reading = False
        if self.consumer is None:
            return
        position = self.position
        self._page.extend(entry for entry in entries if entry.offset >= position)
        stream = self.stream
        if not self._page:
            # The backend has nothing at or after our position (what was there
            # was trimmed): what came since is in the cache, if anything.
            if not stream.cached:
                self.position = max(position, stream.next_offset)
                stream.readers.add(self)
                return
            self.position = max(position, stream.cache_start)
        self.pump()

    def start_at(self, position: int) -> None:
        """Start reading at ``position``, once a remote engine has found it (see :meth:`wait`)."""
        self.position = position
        self._reading = False
        self._tell_start()
        self.pump()

    def _tell_start(self) -> None:
        """
        Tell the subscriber, if it asks (``stream_position``), the offset it
        reads first: where a resumed session goes on when it was handed nothing
        (a ``next`` or ``last`` start names another offset once the stream has
        grown).  Not for a ``timestamp`` start, whose first offset may be
        earlier than what it delivers, and which names the same entries later.
        """
        consumer = self.consumer
        if consumer is None or self._since:
            return
        told = getattr(consumer.subscriber, "stream_position", None)
        if told is not None:
            told(self.position)

    def wait(self) -> None:
        """Read nothing until :meth:`start_at` says where to start."""
        self._reading = True

    def _read_failed(self, failure: Any) -> None:
        self._reading = False
        log.failure("reading stream {destination} failed", failure, destination=self.destination)
        self._go_on_later(1.0)

    def _go_on_later(self, delay: float = 0.0) -> None:
        if self._later is None or not self._later.active():
            self._later = self._clock.callLater(delay, self.pump)
