"""
A backlog: one producer fills a queue nobody consumes, then a consumer drains it.

Usage: ``python -m benchmarks.backlog [--size BYTES] [--total SIZE] [--window N]
[--non-persistent] [--kill] [--memory-high SIZE] [--stall S] [--sync MODE]
[--broker-option OPTION ...] [--dir DIR] [--json-out FILE]`` (needs ``stomp.py``,
which ``pip install '.[test]'`` installs).

The scenario of issue 42, run against a ``twistd -n stompbroker`` it starts on a
fresh data directory (:mod:`benchmarks.launcher`):

1. one producer sends messages of ``size`` bytes to one queue, persistent unless
   told otherwise, each with a receipt, keeping at most ``window`` receipts
   outstanding, until ``total`` bytes have been receipted, or until no receipt
   has come for ``stall`` seconds (the broker holds the producer: the report
   says ``held``); nobody consumes meanwhile;
2. the broker's resident set size is sampled throughout (its peak is reported);
3. with ``--kill``, the broker is killed with SIGKILL and started again on the
   same data directory, and the time until it listens, and its RSS then, are
   reported;
4. a consumer (``client-individual``, an ACK every message) drains the queue
   until every receipted message has come and a second has passed without
   another, and the run checks that each receipted message came exactly once
   and in the order sent (a message sent but not receipted may come or not).

One JSON line is printed; the exit status is 0 when nothing receipted was lost,
duplicated or out of order.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import stomp
from attrs import Factory, asdict, define, frozen
from stomp.exception import StompException

from benchmarks.crash import disconnect_quietly, stomp_connection
from benchmarks.launcher import DEFAULT_REACTOR, BrokerProcess, BrokerStarter
from benchmarks.measure import RssSampler, resident_bytes

#: How long to wait for a client to connect.
CONNECT_TIMEOUT = 10.0
#: A drain ends this long after the last message, once every receipted one has come.
DRAIN_QUIET = 1.0
#: Seconds between samples of the broker's RSS.
SAMPLE_INTERVAL = 0.5
DESTINATION = "/queue/backlog"
_SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str) -> int:
    """:returns: bytes, from a number with an optional ``K``, ``M`` or ``G``."""
    cleaned = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = cleaned[-1:] if cleaned[-1:] in _SIZE_UNITS else ""
    try:
        return int(float(cleaned[: len(cleaned) - len(unit)]) * _SIZE_UNITS[unit])
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected bytes with K, M or G, got {text!r}") from None


@frozen
class Shape:
    """
    What one run does.

    :ivar size: body bytes.
    :ivar total: body bytes to have receipted before the drain.
    :ivar window: receipts the producer may have outstanding.
    :ivar persistent: whether the messages are persistent.
    :ivar stall: seconds without a receipt after which the producer counts as held.
    :ivar kill: SIGKILL and restart the broker before the drain.

    The report's ``produce_s`` runs from the first SEND to the last receipt.
    """

    size: int = 1024
    total: int = 1 << 20
    window: int = 200
    persistent: bool = True
    stall: float = 10.0
    kill: bool = False


class Producer(stomp.ConnectionListener):
    """
    Sends numbered messages with a receipt each, ``window`` outstanding.

    :param first: the number of its first message (``seq`` header and receipt).
    """

    def __init__(self, address: tuple[str, int], shape: Shape, first: int = 0) -> None:
        self.shape = shape
        self.first = first
        self.outstanding: set[int] = set()
        self.receipted: set[int] = set()
        self.sent = 0
        self.errors: list[str] = []
        self.last_receipt = time.monotonic()
        self.changed = threading.Condition()
        self.closed = False
        #: Set once the producer counts as held: nothing more is sent.
        self.stopping = False
        self.connection = stomp_connection(address, self)

    def on_receipt(self, frame: Any) -> None:
        receipt = frame.headers["receipt-id"]
        if not receipt.isdigit():
            return  # DISCONNECT's
        with self.changed:
            self.outstanding.discard(int(receipt))
            self.receipted.add(int(receipt))
            self.last_receipt = time.monotonic()
            self.changed.notify_all()

    def on_error(self, frame: Any) -> None:
        with self.changed:
            self.errors.append(frame.headers.get("message", ""))
            self.changed.notify_all()

    def on_disconnected(self) -> None:
        with self.changed:
            self.closed = True
            self.changed.notify_all()

    def run(self) -> bool:
        """
        Send until ``total`` bytes are receipted or the broker holds the producer.

        The sends run on a thread of their own: a held producer of large messages
        blocks in a send, its socket full, until the broker reads again (its
        last SENDs then go through, and nothing more is sent).

        :returns: whether the producer was held (no receipt for ``stall`` seconds).
        """
        sender = threading.Thread(target=self._send_all, name="producer", daemon=True)
        sender.start()
        while sender.is_alive():
            sender.join(0.1)
            with self.changed:
                if self.outstanding and time.monotonic() - self.last_receipt > self.shape.stall:
                    self.stopping = True
                    return True
        return self.stopping

    def _send_all(self) -> None:
        shape = self.shape
        body = b"x" * shape.size
        wanted = -(-shape.total // shape.size)
        headers = {"persistent": "true" if shape.persistent else "false"}
        while True:
            with self.changed:
                while True:
                    if self.stopping or self.closed or self.errors:
                        return
                    if len(self.receipted) >= wanted:
                        return
                    if self.sent < wanted and len(self.outstanding) < shape.window:
                        break
                    if time.monotonic() - self.last_receipt > shape.stall:
                        self.stopping = True
                        return
                    self.changed.wait(0.1)
                seq = self.first + self.sent
                self.outstanding.add(seq)
                self.sent += 1
            try:
                self.connection.send(
                    DESTINATION, body, headers={**headers, "seq": str(seq)}, receipt=str(seq)
                )
            except (StompException, OSError) as error:
                self.errors.append(str(error))
                return


class Consumer(stomp.ConnectionListener):
    """Takes every message with ``client-individual`` acknowledgement, in arrival order."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.seqs: list[int] = []
        self.lock = threading.Lock()
        self.last_message = time.monotonic()
        self.connection = stomp_connection(address, self)
        self.connection.subscribe(
            DESTINATION, id="drain", ack="client-individual", headers={"prefetch-count": "1000"}
        )

    def on_message(self, frame: Any) -> None:
        with self.lock:
            self.seqs.append(int(frame.headers["seq"]))
            self.last_message = time.monotonic()
        try:
            self.connection.ack(frame.headers["ack"])
        except (StompException, OSError):
            return

    def drain(self, receipted: set[int], timeout: float) -> None:
        """Wait until every receipted message came and the queue went quiet, or ``timeout``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                quiet = time.monotonic() - self.last_message > DRAIN_QUIET
                seen = len(receipted.intersection(self.seqs)) if quiet else 0
            if quiet and seen == len(receipted):
                return
            time.sleep(0.1)


@define
class Report:
    """One run's figures and checks; ``ok`` when nothing receipted went wrong."""

    size: int
    persistent: bool
    window: int
    receipted: int = 0
    receipted_mb: float = 0.0
    produce_s: float = 0.0
    receipted_mb_per_s: float = 0.0
    held: bool = False
    producer_errors: list[str] = Factory(list)
    peak_rss_mb: float = 0.0
    rss_after_produce_mb: float = 0.0
    restart_listen_s: float | None = None
    rss_after_restart_mb: float | None = None
    delivered: int = 0
    drain_s: float = 0.0
    drain_mb_per_s: float = 0.0
    peak_rss_drain_mb: float = 0.0
    lost: int = 0
    duplicated: int = 0
    out_of_order: int = 0

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.out_of_order)


def _mb(size: float) -> float:
    return round(size / (1 << 20), 1)


def check(report: Report, receipted: set[int], seqs: list[int]) -> None:
    """Count what the drain got wrong: receipted messages lost, duplicated, out of order."""
    counts: dict[int, int] = {}
    for seq in seqs:
        counts[seq] = counts.get(seq, 0) + 1
    report.delivered = len(seqs)
    report.lost = sum(1 for seq in receipted if seq not in counts)
    report.duplicated = sum(1 for seq in receipted if counts.get(seq, 0) > 1)
    ordered = [seq for seq in seqs if seq in receipted]
    report.out_of_order = sum(
        1 for before, after in zip(ordered, ordered[1:], strict=False) if after < before
    )


def run(start: BrokerStarter, data_dir: Path, shape: Shape, drain_timeout: float) -> Report:
    """Fill, optionally kill and restart, then drain; see the module docstring."""
    report = Report(shape.size, shape.persistent, shape.window)
    broker: BrokerProcess = start(data_dir)
    try:
        sampler = RssSampler(broker.pid, SAMPLE_INTERVAL)
        producer = Producer(broker.address, shape)
        began = time.monotonic()
        report.held = producer.run()
        # Up to the last receipt: a held producer's wait for ``stall`` is not sending.
        report.produce_s = round(producer.last_receipt - began, 2)
        receipted = set(producer.receipted)
        report.producer_errors = producer.errors[:3]
        # A held producer's socket may be full: its DISCONNECT must not hold the run.
        threading.Thread(
            target=disconnect_quietly, args=(producer.connection,), daemon=True
        ).start()
        sampler.stop()
        report.receipted = len(receipted)
        report.receipted_mb = _mb(len(receipted) * shape.size)
        report.receipted_mb_per_s = round(report.receipted_mb / max(report.produce_s, 1e-9), 1)
        report.peak_rss_mb = _mb(sampler.peak)
        report.rss_after_produce_mb = _mb(sampler.last)
        if shape.kill:
            broker.kill()
            began = time.monotonic()
            broker = start(data_dir)
            report.restart_listen_s = round(time.monotonic() - began, 2)
            report.rss_after_restart_mb = _mb(resident_bytes(broker.pid))
        sampler = RssSampler(broker.pid, SAMPLE_INTERVAL)
        began = time.monotonic()
        consumer = Consumer(broker.address)
        consumer.drain(receipted, drain_timeout)
        report.drain_s = round(time.monotonic() - began - DRAIN_QUIET, 2)
        disconnect_quietly(consumer.connection)
        sampler.stop()
        report.peak_rss_drain_mb = _mb(sampler.peak)
        with consumer.lock:
            seqs = list(consumer.seqs)
        check(report, receipted, seqs)
        report.drain_mb_per_s = round(_mb(len(seqs) * shape.size) / max(report.drain_s, 1e-9), 1)
    finally:
        broker.stop()
    return report


@contextmanager
def _workdir(keep: Path | None) -> Iterator[Path]:
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        yield keep
        return
    with tempfile.TemporaryDirectory(prefix="stompbacklog-") as name:
        yield Path(name)


def main(argv: list[str]) -> int:
    """
    Run once and print one JSON line.

    :returns: 0 when nothing receipted was lost, duplicated or out of order.
    """
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.backlog",
        description="Fill a queue nobody consumes, optionally SIGKILL and restart the"
        " broker, then drain it and check exactly-once, in order.",
    )
    parser.add_argument("--size", type=parse_size, default=1024, help="body bytes (default: 1K)")
    parser.add_argument(
        "--total", type=parse_size, default=1 << 20, help="body bytes to send (default: 1M)"
    )
    parser.add_argument(
        "--window", type=int, default=200, help="receipts outstanding at most (default: 200)"
    )
    parser.add_argument("--non-persistent", action="store_true", help="send persistent:false")
    parser.add_argument("--kill", action="store_true", help="SIGKILL and restart before draining")
    parser.add_argument(
        "--stall",
        type=float,
        default=10.0,
        help="seconds without a receipt after which the producer is held (default: 10)",
    )
    parser.add_argument("--memory-high", help="the broker's --memory-high")
    parser.add_argument("--sync", default="batch", choices=("always", "batch", "off"))
    parser.add_argument(
        "--broker-option",
        action="append",
        default=[],
        help="one more broker option, e.g. --broker-option=--disk-free-limit=100M (repeatable)",
    )
    parser.add_argument(
        "--drain-timeout", type=float, default=600.0, help="longest drain (default: 600 s)"
    )
    parser.add_argument("--dir", type=Path, help="keep the data directory and logs here")
    parser.add_argument("--json-out", type=Path, help="also append the JSON line to FILE")
    args = parser.parse_args(argv)
    logging.getLogger("stomp.py").setLevel(logging.CRITICAL)
    shape = Shape(
        args.size, args.total, args.window, not args.non_persistent, args.stall, args.kill
    )
    options = ["--sync", args.sync, *args.broker_option]
    if args.memory_high is not None:
        options += ["--memory-high", args.memory_high]
    with _workdir(args.dir) as workdir:
        start = BrokerStarter(workdir, tuple(options), DEFAULT_REACTOR)
        report = run(start, workdir / "data", shape, args.drain_timeout)
    line = json.dumps({**asdict(report), "ok": report.ok, "sync": args.sync})
    print(line, flush=True)
    if args.json_out:
        with open(args.json_out, "a") as out:
            print(line, file=out)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
