"""
What one queued message costs the broker's Python, with no sockets and no reactor.

Usage: ``python -m benchmarks.queue_cost [--messages N] [--ack MODE,...] [--repeat R]
[--frames suite|stompbench|duplicate-id]``

Four producers and four consumers are real sessions (the TCP adapter, the
session, the broker and its worker queue) on ``StringTransport`` and a
``task.Clock``.  Producers send in batches of 100 SENDs per read, the last
asking for a receipt, as the suite's deep flow does; consumers subscribe with
a prefetch of 100 and acknowledge, per read, every message they were sent
(``client-individual``), the last of them (``client``) or nothing (``auto``).
Each message thus costs the broker a parsed SEND, a routed and encoded
MESSAGE, and a parsed ACK where the mode has one: everything the load
scenarios measure except system calls and the reactor.

``--frames`` picks the shape of the frames.  ``suite`` (the default) is the
suite's own load generator's: a SEND with ``destination``, ``content-length``
and one user header (``seq``), an ACK with ``id`` alone.  ``stompbench`` is the
Go generator's (``/work/shared/bench``), by which issue 14's targets are
measured: a SEND with three user headers (``seq``, ``ts``, ``run``) and an ACK
that names ``id``, ``message-id`` and ``subscription`` all three, as it does
for every STOMP version.  ``duplicate-id`` is ``stompbench`` with a
``duplicate-id`` header of its own on each SEND: what duplicate detection costs
(:mod:`stompbroker.broker.features.duplicate_ids`).

It prints a table, then one JSON line per ack mode: the median over the
repeats of microseconds per message, and the throughput that would make on
one core.  A change to the per-message path shows here within a few per cent,
which the load scenarios, sharing two cores with their generator, cannot
resolve.  It checks that every message arrived exactly once.
"""

from __future__ import annotations

import argparse
import re
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
from stompbroker.broker.store.memory import MemoryStore
from stompbroker.transport.tcp import stomp_server_factory

ACK_MODES = ("auto", "client", "client-individual")
FRAMES = ("suite", "stompbench", "duplicate-id")
PRODUCERS = 4
CONSUMERS = 4
BATCH = 100
PREFETCH = 100
BODY = b"x" * 117
_ACK_ID = re.compile(rb"\nack:([^\n]+)")
_MESSAGE_ID = re.compile(rb"\nmessage-id:([^\n]+)")


class Run:
    """
    One broker with its producers and consumers, ready to move ``messages``.

    :param ack: the consumers' ack mode.
    :param messages: how many messages to send (rounded down to whole batches).
    :param frames: the shape of the frames, one of :data:`FRAMES`.
    :param store: give the broker a (memory) message store, as twistd's default
        data directory does: its ``/queue/`` destinations then count their
        messages in the paging budget.
    """

    def __init__(self, ack: str, messages: int, frames: str = "suite", store: bool = False) -> None:
        self.ack = ack
        self.frames = frames
        clock = Clock()
        self.broker = Broker(clock, store=MemoryStore() if store else None)
        self.broker.startService()
        self._factory = stomp_server_factory(self.broker, clock)
        self.producers = [self._connect() for _ in range(PRODUCERS)]
        self.consumers = [self._connect() for _ in range(CONSUMERS)]
        for number, (protocol, transport) in enumerate(self.consumers):
            protocol.dataReceived(
                b"SUBSCRIBE\nid:s%d\ndestination:/queue/cost\nack:%s\nprefetch-count:%d\n\n\0"
                % (number, ack.encode(), PREFETCH)
            )
            transport.clear()
        batch = batch_maker(frames)
        self.batches = [batch(start) for start in range(0, messages - BATCH + 1, BATCH)]
        self.sent = len(self.batches) * BATCH
        self.seen: set[int] = set()
        self.duplicated = 0

    def _connect(self) -> tuple[Any, StringTransport]:
        return connect(self._factory)

    @staticmethod
    def _batch(start: int) -> bytes:
        frames = [
            b"SEND\ndestination:/queue/cost\ncontent-length:117\nseq:%d\n\n%b\0" % (seq, BODY)
            for seq in range(start, start + BATCH)
        ]
        frames[-1] = frames[-1].replace(b"SEND\n", b"SEND\nreceipt:r\n", 1)
        return b"".join(frames)

    @staticmethod
    def _stompbench_batch(start: int) -> bytes:
        frames = [
            b"SEND\ndestination:/queue/cost\nseq:%d\nts:%d\nrun:r1\ncontent-length:117\n\n%b\0"
            % (seq, 1_700_000_000_000_000_000 + seq, BODY)
            for seq in range(start, start + BATCH)
        ]
        frames[-1] = frames[-1].replace(b"\ncontent-length:", b"\nreceipt:r\ncontent-length:", 1)
        return b"".join(frames)

    @staticmethod
    def _duplicate_id_batch(start: int) -> bytes:
        return Run._stompbench_batch(start).replace(
            b"\nrun:r1\n", b"\nrun:r1\nduplicate-id:r1-%d\n"
        ) % tuple(range(start, start + BATCH))

    def _acks(self, data: bytes, number: int) -> bytes:
        """The ACK frames for the MESSAGE frames in ``data``, sent to consumer ``number``."""
        ids = _ACK_ID.findall(data)
        if self.frames == "suite":
            if self.ack == "client":
                ids = ids[-1:]
            return b"".join(b"ACK\nid:%b\n\n\0" % i for i in ids)
        pairs = list(zip(ids, _MESSAGE_ID.findall(data), strict=True))
        if self.ack == "client":
            pairs = pairs[-1:]
        return b"".join(
            b"ACK\nid:%b\nmessage-id:%b\nsubscription:s%d\n\n\0" % (ack_id, message_id, number)
            for ack_id, message_id in pairs
        )

    def _consume(self) -> int:
        """Take what each consumer was sent, and acknowledge it as the mode says."""
        moved = 0
        for number, (protocol, transport) in enumerate(self.consumers):
            data = transport.value()
            if not data:
                continue
            transport.clear()
            for seq in SEQ_PATTERN.findall(data):
                number = int(seq)
                if number in self.seen:
                    self.duplicated += 1
                self.seen.add(number)
                moved += 1
            if self.ack != "auto":
                protocol.dataReceived(self._acks(data, number))
        return moved

    def run(self) -> float:
        """
        Send every batch, a batch per producer in turn, consumers served after
        each round, then drain.

        :returns: the seconds it took.
        """
        batches = iter(self.batches)
        started = time.perf_counter()
        done = False
        while not done:
            for protocol, transport in self.producers:
                batch = next(batches, None)
                if batch is None:
                    done = True
                    break
                protocol.dataReceived(batch)
                transport.clear()
            self._consume()
        while self._consume():
            pass
        return time.perf_counter() - started


def batch_maker(frames: str) -> Any:
    """:returns: the function that makes a read's worth of SENDs of the shape ``frames``."""
    if frames == "suite":
        return Run._batch
    if frames == "stompbench":
        return Run._stompbench_batch
    return Run._duplicate_id_batch


def measure(ack: str, messages: int, repeat: int, frames: str = "suite") -> dict[str, Any]:
    """
    Time one ack mode ``repeat`` times, each on a fresh broker.

    :param frames: the shape of the frames, one of :data:`FRAMES`.

    :returns: the JSON record.
    :raises RuntimeError: if a message was lost or duplicated.
    """
    costs = []
    for _ in range(repeat):
        run = Run(ack, messages, frames)
        elapsed = timed(run.run)
        lost = run.sent - len(run.seen)
        if lost or run.duplicated:
            raise RuntimeError(f"{ack}: {lost} lost, {run.duplicated} duplicated")
        costs.append(elapsed / run.sent * 1e6)
        run.broker.stopService()
    cost = statistics.median(costs)
    return {
        "benchmark": "queue_cost",
        "ack": ack,
        "frames": frames,
        "messages": run.sent,
        "us_per_message": round(cost, 3),
        "range_us": [round(min(costs), 3), round(max(costs), 3)],
        "msgs_per_s_one_core": round(1e6 / cost),
        "repeats": repeat,
        "python": sys.version.split()[0],
    }


def main(argv: list[str]) -> int:
    """
    Measure each ack mode asked for, and print the table and the JSON lines.

    :returns: the exit status.
    """
    parser = argparse.ArgumentParser(prog="python -m benchmarks.queue_cost")
    parser.add_argument("--messages", type=int, default=200_000, help="per run (default 200000)")
    parser.add_argument(
        "--ack",
        default=",".join(ACK_MODES),
        help="ack modes, comma-separated (default: all three)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs per mode (default 3)")
    parser.add_argument(
        "--frames",
        choices=FRAMES,
        default="suite",
        help="the frames' shape: the suite's generator's, or the Go generator's (default suite)",
    )
    options = parser.parse_args(argv)
    modes = [mode for mode in options.ack.split(",") if mode]
    unknown = set(modes) - set(ACK_MODES)
    if unknown or options.messages < BATCH or options.repeat < 1:
        parser.error(
            f"--ack takes {', '.join(ACK_MODES)}; --messages at least {BATCH}; --repeat at least 1"
        )
    results = [measure(mode, options.messages, options.repeat, options.frames) for mode in modes]
    print_results(
        results,
        (
            ("ack", "ack", "<19"),
            ("µs/message", "us_per_message", ">11.2f"),
            ("msgs/s on one core", "msgs_per_s_one_core", ">20,"),
        ),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
