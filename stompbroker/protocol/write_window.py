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

from stompbroker.protocol.parts import SessionPart

#: Why a session has stopped reading: its window of pending store writes is full.
BY_WINDOW = "window"


class WriteWindowMixin(SessionPart):
    """
    The count of a session's pending store writes.  Mixed into
    :class:`~stompbroker.protocol.session.StompSession`, whose slots hold its
    state (:data:`SLOTS`): every persistent SEND passes here twice.
    """

    __slots__ = ()

    #: The session's slots this part owns.
    SLOTS: tuple[str, ...] = ("_pending_writes", "_pending_write_bytes")

    _pending_writes: int
    _pending_write_bytes: int

    def _init_write_window(self) -> None:
        #: Store writes asked for and not done, and the bytes they count.
        self._pending_writes = 0
        self._pending_write_bytes = 0

    def _write_started(self, size: int) -> None:
        """A write is pending: at the bound, read nothing more until some are done."""
        self._pending_writes += 1
        self._pending_write_bytes += size
        config = self.config
        if (
            self._pending_writes >= config.max_pending_writes
            or self._pending_write_bytes >= config.max_pending_write_bytes
        ) and BY_WINDOW not in self._read_pauses:
            self._pause_reading(BY_WINDOW)

    def _write_ended(self, size: int) -> None:
        """A write is done (or failed): below the bound again, read again."""
        self._pending_writes -= 1
        self._pending_write_bytes -= size
        if BY_WINDOW in self._read_pauses:
            config = self.config
            if (
                self._pending_writes < config.max_pending_writes
                and self._pending_write_bytes < config.max_pending_write_bytes
            ):
                self._resume_reading(BY_WINDOW)
