"""
A backlog larger than memory: build it, kill the broker, restart it, drain it.

Usage: ``python -m benchmarks.paging [--megabytes MB] [--size BYTES] [--memory-high SIZE]
[--queue-memory SIZE] [--window W] [--fit-megabytes MB] [--non-persistent] [--json-out FILE]
[--page-cost STORED | --move COUNT]``

What it measures, on one ``twistd -n stompbroker`` on a fresh data directory:

1. **build**: one producer sends ``--megabytes`` of persistent messages of
   ``--size`` bytes to one queue with no consumer, each with a receipt, at most
   ``--window`` receipts outstanding; the broker's RSS is sampled every 0.2 s.
   Reported: the receipted rate of each tenth of the backlog (a held producer
   shows as a tenth far slower than the first: ``build_slowest_tenth_share`` is
   the slowest tenth's rate over the first's), and the peak RSS;
2. **restart**: SIGKILL, then a new broker on the same directory: the seconds
   from its start to its STOMP port listening (and, to compare, the same for
   the first start, on an empty directory), and its RSS a second later;
3. **drain**: one consumer (``ack:client``, an ACK every 500 messages,
   ``prefetch-count`` 1000) takes the whole backlog; each message's ``seq``
   header must come exactly once and in order.  Reported: the drain rate;
4. **fit**: the same build and drain of ``--fit-megabytes``, which the
   queues' memory budget holds whole, on another fresh directory (no restart):
   the drain rate of a queue that never paged, for comparison.

With ``--non-persistent`` every message is sent without ``persistent:true``
(its receipt does not wait for the disk): a paged queue keeps them as transient
rows, which a restart drops, so step 2 is left out and the drain follows the
build on the same broker.

``--page-cost STORED`` times one page instead, in process (:func:`page_cost`);
``--move COUNT`` one management API move of a paged queue of COUNT messages,
and how long a client waits meanwhile (:func:`move_cost`).

The broker runs with ``--memory-high`` (and the ``--queue-memory`` it derives,
unless given);
the figures go to ``benchmarks/JOURNAL.md`` and docs/persistence.md.
"""

from __future__ import annotations

import argparse
import base64
import json
import shutil
import socket
import sqlite3
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from benchmarks.launcher import BrokerProcess, BrokerStarter
from benchmarks.measure import RssSampler, resident_bytes
from benchmarks.wire import command_of, connect_frame, encode_frame, header_of, split_frames

#: The queue the backlog builds in.
QUEUE = "/queue/backlog"
#: Seconds between two RSS samples.
SAMPLE_EVERY = 0.2
#: How long a socket read may wait before the run counts as stuck.
READ_TIMEOUT = 120.0
#: ACK every this many messages (ack:client acknowledges all before too).
ACK_EVERY = 500


class Client:
    """A blocking STOMP connection: enough to publish with receipts and to drain."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.socket = socket.create_connection(address)
        self.socket.settimeout(READ_TIMEOUT)
        self.buffer = b""
        self.socket.sendall(connect_frame("/", None, None))
        [connected] = self.frames(1)
        if command_of(connected) != b"CONNECTED":
            raise RuntimeError(f"not connected: {connected[:200]!r}")

    def frames(self, at_least: int = 1) -> list[bytes]:
        """:returns: the next complete frames, at least ``at_least`` of them."""
        got: list[bytes] = []
        while len(got) < at_least:
            data = self.socket.recv(1 << 20)
            if not data:
                raise RuntimeError("the broker closed the connection")
            frames, self.buffer = split_frames(self.buffer + data)
            got.extend(frame for frame in frames if frame.strip(b"\n"))
        return got

    def close(self) -> None:
        self.socket.close()


def build(
    address: tuple[str, int], count: int, size: int, window: int, persistent: bool = True
) -> list[float]:
    """
    Send ``count`` messages with receipts, persistent unless told otherwise.

    :returns: the seconds each tenth of them took to be receipted.
    """
    client = Client(address)
    body = b"x" * size
    kind = (("persistent", "true"),) if persistent else ()
    tenth = max(1, count // 10)
    times: list[float] = []
    sent = receipted = 0
    started = last = time.perf_counter()
    while receipted < count:
        frames = []
        while sent < count and sent - receipted < window:
            frames.append(
                encode_frame(
                    "SEND",
                    (("destination", QUEUE), *kind, ("seq", str(sent)), ("receipt", str(sent))),
                    body,
                )
            )
            sent += 1
        if frames:
            client.socket.sendall(b"".join(frames))
        for frame in client.frames():
            if command_of(frame) != b"RECEIPT":
                raise RuntimeError(f"unexpected frame: {frame[:300]!r}")
            receipted += 1
            if receipted % tenth == 0:
                now = time.perf_counter()
                times.append(now - last)
                last = now
    client.close()
    times.append(time.perf_counter() - started)
    return times


def drain(address: tuple[str, int], count: int) -> float:
    """
    Take ``count`` messages; check that their ``seq`` headers come once, in order.

    :returns: the seconds it took.
    """
    client = Client(address)
    client.socket.sendall(
        encode_frame(
            "SUBSCRIBE",
            (("destination", QUEUE), ("id", "s"), ("ack", "client"), ("prefetch-count", "1000")),
        )
    )
    started = time.perf_counter()
    expected = 0
    while expected < count:
        for frame in client.frames():
            if command_of(frame) != b"MESSAGE":
                raise RuntimeError(f"unexpected frame: {frame[:300]!r}")
            seq = int(header_of(frame, "seq") or -1)
            if seq != expected:
                raise RuntimeError(f"message {seq} came where {expected} should have")
            expected += 1
            if expected % ACK_EVERY == 0 or expected == count:
                ack = header_of(frame, "ack") or header_of(frame, "message-id") or ""
                client.socket.sendall(encode_frame("ACK", (("id", ack),)))
    elapsed = time.perf_counter() - started
    client.close()
    return elapsed


def start_timed(starter: BrokerStarter, data: Path, options: tuple[str, ...]) -> tuple[Any, float]:
    """:returns: a broker, and the seconds from its start to listening."""
    began = time.perf_counter()
    broker = starter(data, *options)
    return broker, time.perf_counter() - began


def run(args: argparse.Namespace) -> dict[str, Any]:
    count = args.megabytes * 1024 * 1024 // args.size
    fit = args.fit_megabytes * 1024 * 1024 // args.size
    options: tuple[str, ...] = ("--memory-high", args.memory_high)
    if args.queue_memory is not None:
        options += ("--queue-memory", args.queue_memory)
    mb = args.size / (1024 * 1024)
    persistent = not args.non_persistent
    report: dict[str, Any] = {
        "messages": count,
        "size": args.size,
        "memory_high": args.memory_high,
        "persistent": persistent,
    }
    with tempfile.TemporaryDirectory(prefix="paging-") as place:
        root = Path(place)
        starter = BrokerStarter(root / "runs")
        broker, first = start_timed(starter, root / "data", options)
        report["first_listen_s"] = first
        try:
            idle = resident_bytes(broker.pid)
            sampler = RssSampler(broker.pid, SAMPLE_EVERY)
            tenths = build(broker.address, count, args.size, args.window, persistent)
            report["idle_rss_mb"] = idle / 1e6
            report["build_peak_rss_mb"] = sampler.stop() / 1e6
            total = tenths.pop()
            report["build_mb_per_s"] = count * mb / total
            rates = [count / 10 * mb / t for t in tenths]
            report["build_tenths_mb_per_s"] = [round(rate, 1) for rate in rates]
            report["build_slowest_tenth_share"] = min(rates) / rates[0] if rates else None
            if persistent:
                broker.kill()
                broker, listen = start_timed(starter, root / "data", options)
                report["restart_listen_s"] = listen
                time.sleep(1.0)
                report["restart_rss_mb"] = resident_bytes(broker.pid) / 1e6
            sampler = RssSampler(broker.pid, SAMPLE_EVERY)
            seconds = drain(broker.address, count)
            report["drain_peak_rss_mb"] = sampler.stop() / 1e6
            report["drain_msgs_per_s"] = count / seconds
        finally:
            broker.stop()
        broker = starter(root / "fit", *options)
        try:
            build(broker.address, fit, args.size, args.window, persistent)
            seconds = drain(broker.address, fit)
            report["fit_messages"] = fit
            report["fit_drain_msgs_per_s"] = fit / seconds
        finally:
            broker.stop()
    return report


def page_cost(stored: int, read_ahead: int, size: int) -> dict[str, float]:
    """
    What one page costs, in process: the range read in the store's thread (which
    holds up that group's commit), and making its records messages again in the
    reactor thread (which holds up everything else).

    :returns: milliseconds per page, the median of 20 pages from the middle of
        a store of ``stored`` messages; and the bytes each message takes in the
        database file, index entries included.
    """
    from stompbroker.broker.queueing.paging import message_from_record
    from stompbroker.broker.store.base import stored_message
    from stompbroker.broker.store.sqlite_records import insert_message, read_page
    from stompbroker.broker.store.sqlite_schema import prepare_schema
    from stompbroker.protocol.message import Message

    with tempfile.TemporaryDirectory(prefix="paging-cost-") as place:
        path = Path(place) / "messages.sqlite3"
        connection = sqlite3.connect(path, isolation_level=None)
        connection.execute("PRAGMA journal_mode = WAL")
        prepare_schema(connection, path)
        body = b"x" * size
        connection.execute("BEGIN")
        for n in range(1, stored + 1):
            message = Message(QUEUE, f"m-{n}", (("persistent", "true"),), body)
            insert_message(stored_message(QUEUE, n, message), connection)
            if n % 2 == 0:
                # A second key between, as a broker with two queues files them.
                other = Message("/queue/other", f"o-{n}", (), body)
                insert_message(stored_message("/queue/other", stored + n, other), connection)
        connection.execute("COMMIT")
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        on_disk = path.stat().st_size / (stored + stored // 2)
        reads, makes = [], []
        for page in range(20):
            after = stored // 2 + page * read_ahead
            began = time.perf_counter()
            records = read_page(QUEUE, after, None, read_ahead, connection)
            read = time.perf_counter()
            [message_from_record(record) for record in records]
            made = time.perf_counter()
            reads.append((read - began) * 1000)
            makes.append((made - read) * 1000)
        connection.close()
    reads.sort()
    makes.sort()
    return {
        "read_ms": reads[len(reads) // 2],
        "make_ms": makes[len(makes) // 2],
        "disk_bytes_per_message": on_disk,
    }


#: The access file of the broker --move runs: ``admin`` may move, anonymous
#: clients send and probe.
MOVE_ACCESS = """
[anonymous]
read = ["#"]
write = ["#"]

[users.admin]
read = ["#"]
write = ["#"]
admin = ["#"]
"""


def probe(address: tuple[str, int], stop: threading.Event, times: list[float]) -> None:
    """
    Until ``stop``: a SEND to a topic with a receipt every 5 ms, each round
    trip's seconds appended to ``times``: how long the reactor keeps a client waiting.
    """
    client = Client(address)
    number = 0
    while not stop.is_set():
        number += 1
        began = time.perf_counter()
        client.socket.sendall(
            encode_frame("SEND", (("destination", "/topic/probe"), ("receipt", str(number))), b".")
        )
        client.frames()
        times.append(time.perf_counter() - began)
        time.sleep(0.005)
    client.close()


def move_cost(count: int, size: int, read_ahead: int, queue_memory: str) -> dict[str, Any]:
    """
    Build a paged queue of ``count`` persistent messages, then move it whole to
    another queue with one management API call, while :func:`probe` times a
    client's round trips.

    :returns: the move's seconds, how many it moved, and the probe's round trips
        (median, 99th percentile, most) before and during the move, in ms.
    """
    work = Path(tempfile.mkdtemp(prefix="stompbroker-move-"))
    access = work / "access.toml"
    access.write_text(MOVE_ACCESS)
    options = ("--data-dir", str(work / "data"), "--queue-memory", queue_memory)
    with BrokerProcess(
        work / "broker",
        *options,
        *("--read-ahead", str(read_ahead), "--auth", "memory:admin:secret"),
        *("--allow-anonymous", "--access", str(access)),
    ) as broker:
        build(broker.address, count, size, 200)
        stop = threading.Event()
        times: list[float] = []
        prober = threading.Thread(target=probe, args=(broker.address, stop, times))
        prober.start()
        time.sleep(1.0)
        before = sorted(times)
        request = urllib.request.Request(
            f"http://127.0.0.1:{broker.http_port}/api/destinations/%2Fqueue%2Fbacklog/move",
            data=json.dumps({"to": "/queue/moved"}).encode(),
            headers={
                "Content-Type": "application/json",
                "Authorization": "Basic " + base64.b64encode(b"admin:secret").decode(),
            },
            method="POST",
        )
        began = time.perf_counter()
        with urllib.request.urlopen(request, timeout=3600) as response:
            moved = json.load(response)["moved"]
        took = time.perf_counter() - began
        stop.set()
        prober.join()
    shutil.rmtree(work, ignore_errors=True)
    during = sorted(times[len(before) :])

    def ms(found: list[float], share: float) -> float:
        return round(found[min(len(found) - 1, int(len(found) * share))] * 1000, 1)

    return {
        "messages": count,
        "moved": moved,
        "move_s": round(took, 2),
        "probe_ms_before": [ms(before, 0.5), ms(before, 0.99), ms(before, 1.0)],
        "probe_ms_during": [ms(during, 0.5), ms(during, 0.99), ms(during, 1.0)],
    }


def build_parser() -> argparse.ArgumentParser:
    """:returns: the command line's parser."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--megabytes", type=int, default=1024)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--memory-high", default="256M")
    parser.add_argument("--queue-memory", default=None)
    parser.add_argument("--window", type=int, default=200)
    parser.add_argument("--fit-megabytes", type=int, default=32)
    parser.add_argument(
        "--non-persistent",
        action="store_true",
        help="send without persistent:true (transient rows once paged; no restart step)",
    )
    parser.add_argument("--json-out")
    parser.add_argument(
        "--page-cost",
        type=int,
        metavar="STORED",
        help="only time one page of --read-ahead messages from a store of STORED messages",
    )
    parser.add_argument("--read-ahead", type=int, default=1000)
    parser.add_argument(
        "--move",
        type=int,
        metavar="COUNT",
        help="only time one management API move of a paged queue of COUNT messages",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.page_cost:
        report = page_cost(args.page_cost, args.read_ahead, args.size)
    elif args.move:
        report = move_cost(args.move, args.size, args.read_ahead, args.queue_memory or "1M")
    else:
        report = run(args)
    text = json.dumps(report, indent=2)
    print(text)
    if args.json_out:
        Path(args.json_out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
