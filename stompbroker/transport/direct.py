"""
Send at once when nothing waits: what asyncio's and uvloop's own transports do,
for Twisted's TCP transport.

Twisted's ``FileDescriptor.write`` never sends: it appends to a buffer,
registers the descriptor with the reactor, and sends when the reactor next
finds the socket writable, then unregisters it.  On the asyncio reactor (uvloop,
as the README runs the broker) each registration and each removal is a Python
call into the loop and an ``epoll_ctl``, and the bytes leave one reactor turn
later.  A publisher that waits for its RECEIPT before it sends on (a small
window of receipts) pays that turn on every round trip; so does every
subscriber's delivery.

:func:`direct_writer` gives a write that sends through the transport's own
``writeSomeData`` when its buffer is empty (the common case: the kernel's socket
buffer has room), and hands Twisted whatever the socket did not take, or
everything when something already waits, when the connection is closing, or
when the send failed.  Twisted's buffering, producer back-pressure, closing
and error handling then carry on unchanged, and the bytes keep their order:
the direct path is taken only when Twisted holds nothing of this connection's.

It reads three attributes of ``twisted.internet.abstract.FileDescriptor`` that
are not in an interface (``dataBuffer``, ``offset``, ``_tempDataLen``: the
buffer's two parts).  A transport that is not a socket's own
``FileDescriptor`` or lacks them (TLS, whose wrapper would pass the lookups
through to the socket underneath and so must never be written raw; a test's
string transport; a future Twisted that renames them) gets ``None`` and its
plain ``write``; ``tests/transport/test_direct.py`` checks, on Twisted's real TCP
transport, that the direct path is still taken, so a rename fails a test
instead of silently costing a reactor turn per write.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet.abstract import FileDescriptor
from twisted.internet.interfaces import ISSLTransport

#: What a transport must have for :func:`direct_writer` to send through it.
_NEEDED = ("writeSomeData", "dataBuffer", "offset", "_tempDataLen", "disconnecting", "connected")


def direct_writer(transport: Any) -> Callable[[bytes], None] | None:
    """
    :param transport: a connected Twisted transport.
    :returns: a write that sends at once when the transport holds nothing
        waiting, else hands the bytes to ``transport.write``; ``None`` for a
        transport that is not a Twisted ``FileDescriptor`` socket.
    """
    # A TLS transport wraps the socket's and passes attribute lookups through to
    # it (ProtocolWrapper): only the socket's own transport may be written raw.
    if (
        not isinstance(transport, FileDescriptor)
        or ISSLTransport.providedBy(transport)
        or not all(hasattr(transport, name) for name in _NEEDED)
    ):
        return None
    write = transport.write
    send_some = transport.writeSomeData

    def send(data: bytes) -> None:
        if (
            transport._tempDataLen
            or transport.offset != len(transport.dataBuffer)
            or transport.disconnecting
            or not transport.connected
        ):
            write(data)
            return
        sent = send_some(data)
        if type(sent) is not int:
            # A lost connection: Twisted's own write meets it again and closes.
            write(data)
        elif sent < len(data):
            write(data[sent:])

    return send
