"""
How much memory the broker holds for a stalled subscriber while a publisher floods its topic.

Usage: ``python -m benchmarks.stalled_subscriber [--gigabytes G] [--size BYTES]
[--policy disconnect|drop-oldest|block] [--buffer SIZE] [--timeout S] [--stall S]
[--broker-arg ARG ...]``

It starts ``twistd -n stompbroker`` from this checkout (with ``--slow-consumer
POLICY``, ``--slow-consumer-buffer SIZE`` and any ``--broker-arg``), then opens
three connections to one topic:

- a **stalled** subscriber, with a small receive buffer, that subscribes and
  never reads again;
- a **reader** subscriber that reads and counts everything, in a thread;
- a **publisher** that sends ``G`` GiB in ``BYTES``-byte bodies, asking for a
  receipt every 100 frames and keeping at most 4 receipts outstanding.

While it runs, the broker's resident set (VmRSS) is sampled ten times a second.
It prints one JSON line: the broker's RSS before, at its peak and at the end;
what was published and what the reader got; whether the stalled subscriber was
disconnected; and why the run ended.  Every run ends by itself: after
``--timeout`` seconds, or once no receipt has come for ``--stall`` seconds
(under ``block``, the publisher waits for the stalled subscriber for ever, as it
should, so the run ends that way).  The broker is stopped with SIGTERM at the end.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.launcher import DEFAULT_REACTOR, BrokerProcess
from benchmarks.measure import process_rss_kb

#: A receipt every this many SENDs, and at most this many receipts outstanding.
RECEIPT_EVERY = 100
WINDOW = 4


def open_client(port: int, receive_buffer: int = 0) -> socket.socket:
    """A connected STOMP 1.2 client socket (the CONNECTED frame read)."""
    client = socket.socket()
    if receive_buffer:
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    client.connect(("127.0.0.1", port))
    client.settimeout(10)
    client.sendall(b"CONNECT\naccept-version:1.2\nhost:/\nheart-beat:0,0\n\n\x00")
    read_frame(client)
    return client


def read_frame(client: socket.socket) -> bytes:
    """Read up to and with the next NUL; good enough for frames without a body NUL."""
    data = b""
    while not data.endswith(b"\x00"):
        chunk = client.recv(1)
        if not chunk:
            raise ConnectionError("closed by the broker")
        data += chunk
    return data


def subscribe(client: socket.socket, destination: str) -> None:
    client.sendall(f"SUBSCRIBE\nid:0\ndestination:{destination}\nreceipt:s\n\n\x00".encode())
    if b"RECEIPT" not in read_frame(client):
        raise ConnectionError("no receipt for SUBSCRIBE")


class Reader(threading.Thread):
    """Reads everything sent to a subscriber and counts the frames."""

    def __init__(self, client: socket.socket) -> None:
        super().__init__(daemon=True)
        self.client = client
        self.frames = 0
        self.done = threading.Event()

    def run(self) -> None:
        self.client.settimeout(1)
        while not self.done.is_set():
            try:
                data = self.client.recv(1 << 20)
            except TimeoutError:
                continue
            except OSError:
                return
            if not data:
                return
            self.frames += data.count(b"\x00")


class Sampler(threading.Thread):
    """Samples a process's RSS ten times a second; keeps the peak."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak_kb = 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.1):
            self.peak_kb = max(self.peak_kb, process_rss_kb(self.pid) or 0)


def settle(reader: Reader, quiet: float = 1.0, longest: float = 15.0) -> None:
    """Wait until the reader has had nothing new for ``quiet`` seconds (at most ``longest``)."""
    deadline = time.monotonic() + longest
    count = -1
    while reader.frames != count and time.monotonic() < deadline:
        count = reader.frames
        time.sleep(quiet)


def stalled_is_closed(client: socket.socket) -> bool:
    """:returns: whether the broker has closed the stalled subscriber's connection."""
    client.settimeout(5)
    try:
        while True:
            data = client.recv(1 << 20)
            if not data:
                return True
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def publish(
    client: socket.socket, destination: str, total: int, size: int, deadline: float, stall: float
) -> tuple[int, str]:
    """
    Send ``total`` bytes of bodies, flow-controlled by receipts.

    :returns: the frames sent, and why publishing ended.
    """
    head = f"SEND\ndestination:{destination}\n".encode()
    body = b"\n" + b"x" * size + b"\x00"
    batch = (head + body) * (RECEIPT_EVERY - 1)
    count = 0
    outstanding = 0
    receipt = 0
    client.settimeout(stall)
    while count * size < total:
        if time.monotonic() > deadline:
            return count, "timeout"
        receipt += 1
        try:
            client.sendall(batch + head + b"receipt:%d\n" % receipt + body)
        except TimeoutError:
            return count, "stalled"
        count += RECEIPT_EVERY
        outstanding += 1
        while outstanding >= WINDOW:
            try:
                read_frame(client)
            except TimeoutError:
                return count, "stalled"
            outstanding -= 1
    return count, "complete"


def run(args: argparse.Namespace) -> dict[str, Any]:
    broker = BrokerProcess(
        Path(tempfile.mkdtemp(prefix="stalled-")),
        "--slow-consumer",
        args.policy,
        "--slow-consumer-buffer",
        args.buffer,
        "--data-dir",
        "none",
        *args.broker_arg,
        reactor=DEFAULT_REACTOR,
    )
    destination = "/topic/flood"
    try:
        stalled = open_client(broker.port, receive_buffer=4096)
        subscribe(stalled, destination)
        reading = open_client(broker.port)
        subscribe(reading, destination)
        reader = Reader(reading)
        reader.start()
        publisher = open_client(broker.port)
        sampler = Sampler(broker.pid)
        before_kb = process_rss_kb(broker.pid)
        sampler.start()
        started = time.monotonic()
        sent, ended = publish(
            publisher,
            destination,
            int(args.gigabytes * (1 << 30)),
            args.size,
            started + args.timeout,
            args.stall,
        )
        elapsed = time.monotonic() - started
        settle(reader)
        after_kb = process_rss_kb(broker.pid)
        sampler.done.set()
        reader.done.set()
        disconnected = stalled_is_closed(stalled)
        for client in (stalled, reading, publisher):
            client.close()
    finally:
        broker.stop()
    log = broker.log()
    return {
        "benchmark": "stalled-subscriber",
        "policy": args.policy,
        "buffer": args.buffer,
        "size": args.size,
        "published_frames": sent,
        "published_mb": round(sent * args.size / (1 << 20), 1),
        "reader_frames": reader.frames,
        "elapsed_s": round(elapsed, 2),
        "publish_mb_per_s": round(sent * args.size / (1 << 20) / elapsed, 1) if elapsed else 0,
        "ended": ended,
        "broker_rss_before_kb": before_kb,
        "broker_rss_peak_kb": sampler.peak_kb,
        "broker_rss_after_kb": after_kb,
        "stalled_disconnected": disconnected,
        "slow_consumers_disconnected": log.count("disconnecting slow consumer"),
        "slow_consumers_dropping": log.count("dropping its oldest messages"),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.stalled_subscriber",
        description="Broker memory with one stalled subscriber while a publisher floods its topic.",
    )
    parser.add_argument("--gigabytes", type=float, default=1.0, help="GiB to publish (default 1)")
    parser.add_argument("--size", type=int, default=10000, help="body bytes (default 10000)")
    parser.add_argument(
        "--policy", default="disconnect", choices=("disconnect", "drop-oldest", "block")
    )
    parser.add_argument("--buffer", default="8M", help="--slow-consumer-buffer (default 8M)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds at most (default 300)")
    parser.add_argument(
        "--stall", type=float, default=10, help="seconds without a receipt that end the run"
    )
    parser.add_argument(
        "--broker-arg", action="append", default=[], help="another broker option (repeatable)"
    )
    result = run(parser.parse_args(argv))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
