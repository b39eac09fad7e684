"""
How long one large message takes from publisher to every subscriber.

Usage: ``python -m benchmarks.large_messages [--sizes MIB,...] [--subscribers N]
[--broker-arg=ARG ...]``

A broker of this checkout starts at its default settings (plus the
``--broker-arg`` options, without a data directory); for each size, N raw-socket
clients subscribe to a topic, one publishes a message of that size with
``content-length``, and the time until every subscriber holds the whole
MESSAGE is printed, with when the publisher's socket took the last byte and
when a small message sent meanwhile by another client arrived (which a broker
busy with the large one would hold up).  Last, the broker's peak resident
memory.  Issue 14 asks for 4 MiB to pass, 16 MiB to two subscribers, and the
time of 16 MiB and 64 MiB.
"""

from __future__ import annotations

import argparse
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.launcher import BrokerProcess
from stompbroker.protocol.frames import Frame
from stompbroker.protocol.parser import FrameParser

MiB = 1024 * 1024


class Client:
    """A raw STOMP 1.2 connection, CONNECTED once constructed."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.socket = socket.create_connection(address)
        self.parser = FrameParser(max_frame_size=1 << 31)
        self.socket.sendall(b"CONNECT\naccept-version:1.2\nhost:/\nheart-beat:0,0\n\n\0")
        self.read_until("CONNECTED")

    def read_until(self, command: str) -> Frame:
        """:returns: the first frame with ``command`` (or an ERROR) read from now on."""
        while True:
            data = self.socket.recv(1 << 20)
            if not data:
                raise ConnectionError(f"closed while waiting for {command}")
            for frame in self.parser.receive_data(data):
                if frame.command in (command, "ERROR"):
                    return frame

    def subscribe(self, destination: str) -> None:
        self.socket.sendall(
            b"SUBSCRIBE\nid:1\ndestination:%b\nreceipt:s\n\n\0" % destination.encode()
        )
        self.read_until("RECEIPT")

    def close(self) -> None:
        self.socket.close()


def deliver_once(address: tuple[str, int], size: int, subscribers: int) -> str:
    """:returns: a line of timings for one message of ``size`` bytes to ``subscribers``."""
    readers = [Client(address) for _ in range(subscribers)]
    for reader in readers:
        reader.subscribe("/topic/large")
    watcher = Client(address)
    watcher.subscribe("/topic/small")
    publisher, bystander = Client(address), Client(address)
    arrived: list[tuple[float, Frame]] = []

    def read(reader: Client) -> None:
        frame = reader.read_until("MESSAGE")
        arrived.append((time.perf_counter(), frame))

    threads = [threading.Thread(target=read, args=(reader,)) for reader in readers]
    for thread in threads:
        thread.start()
    started = time.perf_counter()
    publisher.socket.sendall(
        b"SEND\ndestination:/topic/large\ncontent-length:%d\n\n%b\0" % (size, b"x" * size)
    )
    sent = time.perf_counter() - started
    bystander.socket.sendall(b"SEND\ndestination:/topic/small\n\nsmall\0")
    watcher.read_until("MESSAGE")
    small = time.perf_counter() - started
    for thread in threads:
        thread.join()
    for client in [*readers, watcher, publisher, bystander]:
        client.close()
    whole = all(frame.command == "MESSAGE" and len(frame.body) == size for _, frame in arrived)
    last = max(at for at, _ in arrived) - started
    return (
        f"{size / MiB:6.0f} MiB to {subscribers}: sent in {sent:6.3f} s, all delivered in"
        f" {last:6.3f} s, a small message meanwhile in {small:6.3f} s,"
        f" {'whole' if whole else 'NOT WHOLE'}"
    )


def main(argv: list[str]) -> int:
    """Run the deliveries against a broker of this checkout; print one line each."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.large_messages")
    parser.add_argument("--sizes", default="4,16,16,64,64", help="message sizes in MiB")
    parser.add_argument("--subscribers", type=int, default=2)
    parser.add_argument("--broker-arg", action="append", default=[])
    options = parser.parse_args(argv)
    with (
        tempfile.TemporaryDirectory() as workdir,
        BrokerProcess(
            Path(workdir), "--data-dir", "none", *options.broker_arg, http=None
        ) as broker,
    ):
        for size in options.sizes.split(","):
            print(deliver_once(broker.address, int(size) * MiB, options.subscribers), flush=True)
        status = Path(f"/proc/{broker.pid}/status").read_text().splitlines()
        print(" ".join(line for line in status if line.startswith("VmHWM")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
