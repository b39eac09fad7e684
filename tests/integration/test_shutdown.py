"""
Graceful stop of the real broker: SIGTERM stops accepting, tells every client with an
ERROR that the broker is shutting down, flushes, and exits within --shutdown-timeout.
"""

from __future__ import annotations

import signal
import socket
import time
from pathlib import Path

from tests.support.clients import RawClient, raw_connect
from tests.support.process import BrokerProcess

#: twistd ends by raising the signal that stopped it again, once it has shut down cleanly.
TERMINATED = -signal.SIGTERM


def test_sigterm_tells_clients_flushes_and_exits(tmp_path: Path) -> None:
    """Each client gets ERROR "broker shutting down" after what was sent to it, then EOF."""
    broker = BrokerProcess(tmp_path, "--data-dir", "none", http=None)
    try:
        subscriber = raw_connect(broker.address)
        assert subscriber.subscribe("/topic/last").command == "RECEIPT"
        publisher = raw_connect(broker.address)
        publisher.send(b"SEND\ndestination:/topic/last\nreceipt:p\n\nlast words\x00")
        assert publisher.read_frames(count=1)[0].command == "RECEIPT"
        broker.process.send_signal(signal.SIGTERM)
        received = subscriber.read_frames(count=2, timeout=5)
        assert [frame.command for frame in received] == ["MESSAGE", "ERROR"]
        assert received[0].body == b"last words"
        [error] = publisher.read_frames(count=1, timeout=5)
        for client, last in ((subscriber, received[1]), (publisher, error)):
            assert last.get("message") == "broker shutting down"
            assert client.closed_by_peer(timeout=5)
        assert broker.process.wait(timeout=10) == TERMINATED
        assert "shutting down: telling 2 clients" in broker.log()
        try:
            socket.create_connection(broker.address, timeout=1).close()
        except OSError:
            pass
        else:
            raise AssertionError("the stopped broker still accepts connections")
    finally:
        broker.stop()


def test_shutdown_timeout_bounds_a_stop_held_up_by_a_client_that_does_not_read(
    tmp_path: Path,
) -> None:
    """A client that never reads cannot hold the broker up for longer than --shutdown-timeout."""
    broker = BrokerProcess(
        tmp_path,
        "--data-dir",
        "none",
        "--shutdown-timeout",
        "1",
        "--slow-consumer",
        "block",
        http=None,
    )
    try:
        stalled = RawClient(broker.address)
        stalled.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stalled.connect()
        assert stalled.subscribe("/topic/full").command == "RECEIPT"
        publisher = raw_connect(broker.address)
        frame = b"SEND\ndestination:/topic/full\n\n" + b"x" * 60000 + b"\x00"
        publisher.socket.settimeout(5)
        for _ in range(200):
            try:
                publisher.send(frame)
            except TimeoutError:
                break
        started = time.monotonic()
        broker.process.send_signal(signal.SIGTERM)
        assert broker.process.wait(timeout=15) == TERMINATED
        assert time.monotonic() - started < 6
        assert "did not close within 1" in broker.log()
    finally:
        broker.stop()
