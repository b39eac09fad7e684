"""
One socket write per connection per read, however many frames the read fans out.

A publisher's read of 64 KiB can hold hundreds of SENDs; on a topic with N
subscribers each of them becomes N MESSAGE frames.  Handing each frame to
Twisted's ``transport.write`` costs about a microsecond of Python (buffer
bookkeeping, the producer check, registering the writer with the reactor):
at fan-out rates that was a fifth of the broker's time.  Twisted already sends
each connection's buffer in one system call per reactor turn; this module does
the same one level up.  While the broker handles what one connection sent,
every connection's writes are gathered in a list, and when the handling ends
each connection that got any is written once, with its frames joined in order.

The connection that sent the read is written first; the others in the order
they were first written to.  Writes made outside the handling of a read
(heart-beats and other timers, the message store's callbacks, an application
publishing through the embedding API) go straight to the transport, so nothing
waits for a read that may never come.  Latency does not change: the gathered
writes reach the transport in the same reactor turn, before it next polls.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class WriteCoalescer:
    """
    Knows whether a read is being handled, and which connections wrote meanwhile.

    One per reactor (the process has one): deliveries cross connections and
    listeners, so TCP and WebSocket connections share it.
    """

    __slots__ = ("_handling", "_written")

    def __init__(self) -> None:
        self._handling = False
        #: The writers that gathered something during the current read.
        self._written: list[CoalescedWrite] = []

    def handle(
        self,
        receive: Callable[[bytes], Any],
        data: bytes,
        reader: CoalescedWrite | None = None,
    ) -> None:
        """
        Handle a read, then write out what it made each connection send.

        :param receive: what takes the bytes (a session's ``receive_data``, or
            the WebSocket protocol's own ``dataReceived``).
        :param data: the bytes read.
        :param reader: the write of the connection that sent ``data``, written
            out first: its answers (a RECEIPT a publisher waits for before it
            sends on) leave before the fan-out to everyone else, so the client
            can send its next frames while the broker writes to the others.
        """
        if self._handling:
            receive(data)
            return
        self._handling = True
        try:
            receive(data)
        finally:
            self._handling = False
            if reader is not None:
                reader.flush()
            self.flush()

    def flush(self) -> None:
        """Write out every connection's gathered frames."""
        while self._written:
            written, self._written = self._written, []
            for writer in written:
                writer.flush()


#: The process's coalescer, which every adapter uses unless given another.
COALESCER = WriteCoalescer()


class CoalescedWrite:
    """
    A connection's write function: gathers during a read, writes straight otherwise.

    :param write: the transport's write, which gets the joined bytes.
    :param coalescer: the process's :class:`WriteCoalescer`.
    """

    __slots__ = ("_write", "_coalescer", "_pending")

    def __init__(self, write: Callable[[bytes], Any], coalescer: WriteCoalescer) -> None:
        self._write = write
        self._coalescer = coalescer
        self._pending: list[bytes] | None = None

    def __call__(self, data: bytes) -> None:
        coalescer = self._coalescer
        if not coalescer._handling:
            self._write(data)
            return
        pending = self._pending
        if pending is None:
            self._pending = [data]
            coalescer._written.append(self)
        else:
            pending.append(data)

    #: The same, as a bound method: adapters hand this to the session, since a
    #: bound method is called without the slot lookup that calling an instance
    #: takes (about 600 of the 2 000 instructions of each call, by callgrind).
    write = __call__

    def flush(self) -> None:
        """Write what was gathered, in the order it was written; before a close, too."""
        pending = self._pending
        if pending is not None:
            self._pending = None
            self._write(pending[0] if len(pending) == 1 else b"".join(pending))
