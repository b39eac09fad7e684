"""
The write window: how many store writes one connection may have pending before
its session stops reading from it.

Theory of operation.  A frame whose effect the broker writes to its store (a
persistent SEND, a COMMIT, an ACK or NACK of stored messages) gets back a
Deferred that fires once the write is durable.  The session does not wait for
it before it handles the client's next frame: it reads on, handles and routes
while the store's writer commits, so that a producer that pipelines its SENDs
shares each fsync among many of them instead of paying one per frame.  What
does wait (:mod:`stompbroker.protocol.receipts`): the frame's RECEIPT, every
later RECEIPT (they keep frame order), an ERROR for a later frame, and BEGIN,
COMMIT and DISCONNECT, which are handled only once every earlier write is done.

When the broker delivers is not decided here: it routes a persistent message
as it is sent, and a queue consumer gets it only once the store has recorded
the delivery, which the writer commits after the message itself (see
:mod:`stompbroker.broker.queueing.queues`); the messages of one connection are routed in
the order it sent them.

The window bounds what one connection may have pending:
``SessionConfig.max_pending_writes`` writes, or ``max_pending_write_bytes``
bytes of SEND bodies.  At either, the session stops reading from the socket
(the frames of a read already made are still handled) until writes finish and
it is below both again: the producer is held back by TCP, as it was when every
such frame waited for its write.

A connection lost with writes pending loses nothing it sent: the store finishes
the writes, and the session writes nothing more.
"""

from __future__ import annotations

from stompbroker.protocol.config import SessionConfig
from stompbroker.protocol.parts import Reading

#: Why a session has stopped reading: its window of pending store writes is full.
BY_WINDOW = "window"


class WriteWindow:
    """
    The count of a session's pending store writes; held by the session's
    :class:`~stompbroker.protocol.receipts.Receipts`, which tells it when a
    write starts and ends.

    :param reading: the session's reading, which it pauses at the bound.
    :param config: the listener's settings (``max_pending_writes`` and
        ``max_pending_write_bytes``).
    """

    __slots__ = ("pending", "pending_bytes", "_config", "_full", "_reading")

    def __init__(self, reading: Reading, config: SessionConfig) -> None:
        self._reading = reading
        self._config = config
        #: Store writes asked for and not done, and the bytes they count.
        self.pending = 0
        self.pending_bytes = 0
        #: Whether the window is at its bound (and reading paused for it).
        self._full = False

    def started(self, size: int) -> None:
        """A write is pending: at the bound, read nothing more until some are done."""
        self.pending += 1
        self.pending_bytes += size
        config = self._config
        if not self._full and (
            self.pending >= config.max_pending_writes
            or self.pending_bytes >= config.max_pending_write_bytes
        ):
            self._full = True
            self._reading.pause(BY_WINDOW)

    def ended(self, size: int) -> None:
        """A write is done (or failed): below the bound again, read again."""
        self.pending -= 1
        self.pending_bytes -= size
        if self._full:
            config = self._config
            if (
                self.pending < config.max_pending_writes
                and self.pending_bytes < config.max_pending_write_bytes
            ):
                self._full = False
                self._reading.resume(BY_WINDOW)
