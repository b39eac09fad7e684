"""
What one topic delivery costs the broker's Python, with no sockets and no reactor.

Usage: ``python -m benchmarks.fanout_cost [--messages N] [--subscribers N,...] [--repeat R]``

One producer and N subscribers are real sessions (the TCP adapter, the session,
the broker and its topic tree) on ``StringTransport`` and a ``task.Clock``, as in
:mod:`benchmarks.queue_cost`.  The subscribers subscribe to ``/topic/cost`` with
``ack:auto`` (the direct fan-out path); the producer sends in batches of 100
SENDs per read, the last asking for a receipt, and every subscriber's output is
taken after each batch.  Each delivery thus costs the broker its share of a
parsed SEND, the tree's match (cached) and one encoded MESSAGE write.

It prints a table, then one JSON line per subscriber count: the median over the
repeats of microseconds per delivery (per message per subscriber), and the
deliveries per second that would make on one core.  It checks that every
subscriber got every message once.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from benchmarks.in_process import connect, timed
from benchmarks.report import print_results
from benchmarks.wire import SEQ_PATTERN
from stompbroker.broker.service import Broker
from stompbroker.transport.tcp import stomp_server_factory

SUBSCRIBERS = (1, 10, 100)
BATCH = 100
BODY = b"x" * 117


class Run:
    """
    One broker with a producer and ``subscribers`` topic subscribers, ready to
    publish ``messages``.

    :param subscribers: how many subscribers.
    :param messages: how many messages (rounded down to whole batches).
    """

    def __init__(self, subscribers: int, messages: int) -> None:
        clock = Clock()
        self.broker = Broker(clock)
        self.broker.startService()
        self._factory = stomp_server_factory(self.broker, clock)
        self.producer = self._connect()
        self.subscribers = [self._connect() for _ in range(subscribers)]
        for number, (protocol, transport) in enumerate(self.subscribers):
            protocol.dataReceived(b"SUBSCRIBE\nid:s%d\ndestination:/topic/cost\n\n\0" % number)
            transport.clear()
        self.batches = [self._batch(start) for start in range(0, messages - BATCH + 1, BATCH)]
        self.sent = len(self.batches) * BATCH
        self.counts = [0] * subscribers
        self.last = [-1] * subscribers
        self.out_of_order = 0

    def _connect(self) -> tuple[Any, StringTransport]:
        return connect(self._factory)

    @staticmethod
    def _batch(start: int) -> bytes:
        frames = [
            b"SEND\ndestination:/topic/cost\ncontent-length:117\nseq:%d\n\n%b\0" % (seq, BODY)
            for seq in range(start, start + BATCH)
        ]
        frames[-1] = frames[-1].replace(b"SEND\n", b"SEND\nreceipt:r\n", 1)
        return b"".join(frames)

    def _take(self) -> None:
        """Take what each subscriber was sent, checking it came once and in order."""
        for index, (_, transport) in enumerate(self.subscribers):
            data = transport.value()
            transport.clear()
            for seq in SEQ_PATTERN.findall(data):
                number = int(seq)
                if number <= self.last[index]:
                    self.out_of_order += 1
                self.last[index] = number
                self.counts[index] += 1

    def run(self) -> float:
        """
        Send every batch, taking the subscribers' output after each.

        :returns: the seconds it took.
        """
        protocol, transport = self.producer
        started = time.perf_counter()
        for batch in self.batches:
            protocol.dataReceived(batch)
            transport.clear()
            self._take()
        return time.perf_counter() - started


def measure(subscribers: int, messages: int, repeat: int) -> dict[str, Any]:
    """
    Time one subscriber count ``repeat`` times, each on a fresh broker.

    :returns: the JSON record.
    :raises RuntimeError: if a subscriber missed, repeated or reordered a message.
    """
    costs = []
    for _ in range(repeat):
        run = Run(subscribers, messages)
        elapsed = timed(run.run)
        if run.out_of_order or any(count != run.sent for count in run.counts):
            raise RuntimeError(
                f"{subscribers} subscribers: got {sorted(set(run.counts))} of {run.sent},"
                f" {run.out_of_order} repeated or out of order"
            )
        costs.append(elapsed / (run.sent * subscribers) * 1e6)
        run.broker.stopService()
    cost = statistics.median(costs)
    return {
        "benchmark": "fanout_cost",
        "subscribers": subscribers,
        "messages": run.sent,
        "us_per_delivery": round(cost, 3),
        "range_us": [round(min(costs), 3), round(max(costs), 3)],
        "deliveries_per_s_one_core": round(1e6 / cost),
        "repeats": repeat,
        "python": sys.version.split()[0],
    }


def main(argv: list[str]) -> int:
    """
    Measure each subscriber count asked for, and print the table and the JSON lines.

    :returns: the exit status.
    """
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fanout_cost")
    parser.add_argument("--messages", type=int, default=20_000, help="per run (default 20000)")
    parser.add_argument(
        "--subscribers",
        default=",".join(map(str, SUBSCRIBERS)),
        help="subscriber counts, comma-separated (default 1,10,100)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs per count (default 3)")
    options = parser.parse_args(argv)
    try:
        counts = [int(count) for count in options.subscribers.split(",") if count]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1 or options.messages < BATCH or options.repeat < 1:
        parser.error(
            f"--subscribers takes positive integers; --messages at least {BATCH};"
            " --repeat at least 1"
        )
    results = [measure(count, options.messages, options.repeat) for count in counts]
    print_results(
        results,
        (
            ("subscribers", "subscribers", "<12"),
            ("µs/delivery", "us_per_delivery", ">12.3f"),
            ("deliveries/s on one core", "deliveries_per_s_one_core", ">26,"),
        ),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
