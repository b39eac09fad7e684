"""
Every frame the broker writes ends with NUL and LF, so that a client reading
the way PHP's PECL stomp extension does loses nothing of a burst.

That extension reads a frame's command line, its headers up to the empty line,
its body (``content-length`` bytes, or up to the NUL), then one more byte,
which it takes for the LF that RabbitMQ and ActiveMQ put after the NUL: a frame
ending at its NUL would lose the next frame's first byte (``ESSAGE``).  The
reader below does exactly that, over the bytes the real TCP adapter, session
and broker write to a ``StringTransport``.
"""

from __future__ import annotations

from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from stompbroker.broker.service import Broker
from stompbroker.protocol.config import SessionConfig
from stompbroker.transport.tcp import stomp_server_factory


def read_like_pecl(data: bytes) -> list[tuple[str, dict[str, str], bytes]]:
    """
    :returns: the frames in ``data`` as the PECL extension reads them: a
        heart-beat EOL where a command should start is skipped, a frame's NUL is
        followed by one byte it swallows.
    """
    frames = []
    position = 0
    while position < len(data):
        if data[position : position + 1] == b"\n":
            position += 1
            continue
        line_end = data.index(b"\n", position)
        command = data[position:line_end].decode()
        position = line_end + 1
        headers: dict[str, str] = {}
        while data[position : position + 1] != b"\n":
            line_end = data.index(b"\n", position)
            name, _, value = data[position:line_end].decode().partition(":")
            headers.setdefault(name, value)
            position = line_end + 1
        position += 1
        if "content-length" in headers:
            body_end = position + int(headers["content-length"])
        else:
            body_end = data.index(b"\0", position)
        frames.append((command, headers, data[position:body_end]))
        position = body_end + 2  # the NUL, and the byte after it
    return frames


def connect(factory: object, version: str) -> tuple[object, StringTransport]:
    protocol = factory.buildProtocol(None)  # type: ignore[attr-defined]
    transport = StringTransport()
    protocol.makeConnection(transport)
    accept = f"accept-version:{version}\n" if version != "1.0" else ""
    protocol.dataReceived(f"CONNECT\n{accept}host:/\n\n\0".encode())
    return protocol, transport


def test_a_burst_of_every_kind_of_frame_reads_whole_the_pecl_way() -> None:
    """
    CONNECTED, RECEIPTs, MESSAGE frames (with and without content-length in
    the SEND, to a topic and a queue) and an ERROR, written in one burst, each
    read with its command and body intact, for every version.
    """
    for version in ("1.0", "1.1", "1.2"):
        broker = Broker(Clock())
        broker.startService()
        factory = stomp_server_factory(broker, Clock())
        consumer, consumer_out = connect(factory, version)
        producer, producer_out = connect(factory, version)
        consumer.dataReceived(  # type: ignore[attr-defined]
            b"SUBSCRIBE\nid:t\ndestination:/topic/burst\n\n\0"
            b"SUBSCRIBE\nid:q\ndestination:/queue/burst\nreceipt:r-sub\n\n\0"
        )
        sends = b"".join(
            b"SEND\ndestination:/%s/burst\n%s\n%d\0"
            % (kind, b"content-length:1\n" if number % 2 else b"", number)
            for number in range(5)
            for kind in (b"topic", b"queue")
        )
        producer.dataReceived(sends + b"DISCONNECT\nreceipt:r-bye\n\n\0")  # type: ignore[attr-defined]
        consumer.dataReceived(b"BOGUS\n\n\0")  # type: ignore[attr-defined]
        got = read_like_pecl(consumer_out.value())
        assert [command for command, _, _ in got] == (
            ["CONNECTED", "RECEIPT"] + ["MESSAGE"] * 10 + ["ERROR"]
        ), version
        messages = [(headers["destination"], body) for _, headers, body in got[2:12]]
        assert sorted(messages) == sorted(
            (f"/{kind}/burst", b"%d" % number) for number in range(5) for kind in ("topic", "queue")
        )
        assert [command for command, _, _ in read_like_pecl(producer_out.value())] == [
            "CONNECTED",
            "RECEIPT",
        ]
        broker.stopService()


def test_a_heart_beat_stays_one_eol() -> None:
    """A heart-beat is an EOL alone: no NUL, nothing added."""
    clock = Clock()
    broker = Broker(clock)
    broker.startService()
    factory = stomp_server_factory(broker, clock, SessionConfig(heartbeat=(1000, 1000)))
    protocol = factory.buildProtocol(None)
    transport = StringTransport()
    protocol.makeConnection(transport)
    protocol.dataReceived(b"CONNECT\naccept-version:1.2\nhost:/\nheart-beat:1000,1000\n\n\0")
    transport.clear()
    for _ in range(3):
        protocol.dataReceived(b"\n")
        clock.advance(1.0)
    assert transport.value() == b"\n" * len(transport.value())
    assert transport.value()
    broker.stopService()
