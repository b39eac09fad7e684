"""
Writes sent at once when nothing waits (``stompbroker.transport.direct``), on
Twisted's own TCP connection class over a socket pair, with a reactor that only
records what is registered with it.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from twisted.internet import main, tcp
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.ssl import CertificateOptions
from twisted.internet.testing import StringTransport
from twisted.protocols.tls import TLSMemoryBIOFactory

from stompbroker.transport.direct import direct_writer


class RecordingReactor:
    """Just what a ``FileDescriptor`` asks of its reactor, recorded."""

    def __init__(self) -> None:
        self.writers: set[object] = set()

    def addWriter(self, writer: object) -> None:  # noqa: N802 (Twisted's name)
        self.writers.add(writer)

    def removeWriter(self, writer: object) -> None:  # noqa: N802
        self.writers.discard(writer)

    def addReader(self, reader: object) -> None:  # noqa: N802
        pass

    def removeReader(self, reader: object) -> None:  # noqa: N802
        pass

    def callLater(self, *args: object, **kwargs: object) -> None:  # noqa: N802
        pass


@pytest.fixture
def pair() -> Iterator[tuple[tcp.Connection, socket.socket, RecordingReactor]]:
    """Twisted's TCP connection on one end of a socket pair; the other end to read."""
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    theirs.settimeout(2)
    reactor = RecordingReactor()
    connection = tcp.Connection(ours, Protocol(), reactor=reactor)
    connection.connected = 1
    yield connection, theirs, reactor
    ours.close()
    theirs.close()


def received(peer: socket.socket, count: int) -> bytes:
    """:returns: ``count`` bytes read from ``peer``."""
    data = b""
    while len(data) < count:
        data += peer.recv(count - len(data))
    return data


def test_twisteds_tcp_connection_still_offers_the_direct_path(pair) -> None:
    """Twisted's TCP transport has what the direct write needs: a rename would fail here."""
    connection, _, _ = pair
    assert direct_writer(connection) is not None


def test_a_transport_without_a_socket_buffer_keeps_its_own_write() -> None:
    """A string transport (as TLS or a test's) gets no direct write."""
    assert direct_writer(StringTransport()) is None


def test_a_tls_transport_is_never_written_raw(pair) -> None:
    """TLS wraps the socket's transport and forwards lookups to it: it keeps its own write."""
    connection, _, _ = pair
    wrapper = TLSMemoryBIOFactory(
        CertificateOptions(), False, Factory.forProtocol(Protocol)
    ).buildProtocol(None)
    wrapper.makeConnection(connection)
    assert hasattr(wrapper, "writeSomeData")
    assert direct_writer(wrapper) is None


def test_a_write_goes_out_at_once_without_the_reactor(pair) -> None:
    """With nothing waiting, the bytes are sent in the call, and nothing is registered."""
    connection, peer, reactor = pair
    send = direct_writer(connection)
    send(b"MESSAGE\n\nhello\x00")
    assert received(peer, 15) == b"MESSAGE\n\nhello\x00"
    assert reactor.writers == set()
    assert connection.dataBuffer == b"" and connection._tempDataLen == 0


def test_what_the_socket_does_not_take_waits_in_twisted_and_keeps_its_order(pair) -> None:
    """A partial send leaves the rest to Twisted; later writes queue behind it, in order."""
    connection, peer, reactor = pair
    taken: list[int] = []
    real_send_some = connection.writeSomeData

    def send_three(data: bytes) -> int:
        taken.append(len(data))
        return real_send_some(bytes(data[:3]))

    connection.writeSomeData = send_three
    send = direct_writer(connection)
    send(b"abcdef")
    assert reactor.writers == {connection}
    send(b"ghi")
    assert taken == [6]
    connection.writeSomeData = real_send_some
    connection.doWrite()
    assert received(peer, 9) == b"abcdefghi"
    assert reactor.writers == set()


def test_a_lost_connection_is_left_to_twisted_to_find(pair) -> None:
    """When the send fails, the bytes go to Twisted's buffer, whose next write closes."""
    connection, _, reactor = pair
    connection.writeSomeData = lambda data: main.CONNECTION_LOST
    send = direct_writer(connection)
    send(b"abc")
    assert connection._tempDataLen == 3
    assert reactor.writers == {connection}


def test_a_closing_connection_writes_through_twisted(pair) -> None:
    """Once closing, writes go to Twisted's buffer, so its flush-then-close stays in charge."""
    connection, _, reactor = pair
    send = direct_writer(connection)
    connection.disconnecting = True
    send(b"abc")
    assert connection._tempDataLen == 3
    assert reactor.writers == {connection}
