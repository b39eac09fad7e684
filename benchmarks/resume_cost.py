"""
What resumable sessions cost the broker's Python, with no sockets and no reactor.

Usage: ``python -m benchmarks.resume_cost [--missed N] [--subscribers N] [--repeat R]``

As :mod:`benchmarks.fanout_cost`: real sessions (the TCP adapter, the session,
the broker and its topic tree) on ``StringTransport`` and a ``task.Clock``.
Three figures:

- **resume**: a resumable subscriber of ``/topic/cost`` loses its connection,
  ``--missed`` messages are published, and it comes back with its token: the
  milliseconds from its CONNECT to the last missed MESSAGE written (the whole
  resume is synchronous, so that is when it has caught up).  Checked: every
  message once, in order.
- **detached**: microseconds per message delivered into a detached session's
  buffer while it is away.
- **resumable fan-out**: microseconds per delivery to ``--subscribers``
  connected resumable subscribers, against as many plain ones (the extra is
  keeping the latest frames for a dropped network's sake).

It prints a table, then one JSON line per figure.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from benchmarks.in_process import timed
from benchmarks.report import print_results
from benchmarks.wire import SEQ_PATTERN
from stompbroker.broker.service import Broker
from stompbroker.protocol.resume.resume_book import DEFAULT_BUFFER, ResumeBook
from stompbroker.protocol.session import SessionConfig
from stompbroker.transport.tcp import stomp_server_factory

BATCH = 100
BODY = b"x" * 117
#: Room for every missed message in the benchmark (about 200 bytes each).
BUFFER = 1 << 30
CONNECT = b"CONNECT\naccept-version:1.2\nhost:/\nresume-token:%b\n\n\0"
SUBSCRIBE = b"SUBSCRIBE\nid:s%d\ndestination:/topic/cost\n\n\0"


def batches(messages: int) -> list[bytes]:
    """:returns: SENDs to ``/topic/cost`` with ``seq`` 0.., a batch per read."""
    made = []
    for start in range(0, messages - BATCH + 1, BATCH):
        made.append(
            b"".join(
                b"SEND\ndestination:/topic/cost\ncontent-length:117\nseq:%d\n\n%b\0" % (seq, BODY)
                for seq in range(start, start + BATCH)
            )
        )
    return made


class World:
    """A broker whose sessions are resumable, and a producer."""

    def __init__(self, buffer: int = BUFFER) -> None:
        self.clock = Clock()
        self.broker = Broker(self.clock)
        self.broker.startService()
        config = SessionConfig(heartbeat=(0, 0), resumption=ResumeBook(self.clock, 120, buffer))
        self.factory = stomp_server_factory(self.broker, self.clock, config)
        self.producer = self.connect(resumable=False)[0]

    def open(self) -> tuple[Any, StringTransport]:
        """:returns: a connection before its CONNECT, and its transport."""
        protocol = self.factory.buildProtocol(None)
        transport = StringTransport()
        protocol.makeConnection(transport)
        return protocol, transport

    def connect(self, resumable: bool = True) -> tuple[Any, StringTransport]:
        """:returns: a connection past its CONNECT, asking for a resumable session or not."""
        protocol, transport = self.open()
        if resumable:
            protocol.dataReceived(CONNECT % b"")
        else:
            protocol.dataReceived(b"CONNECT\naccept-version:1.2\nhost:/\n\n\0")
        return protocol, transport

    def publish(self, sends: list[bytes]) -> None:
        for batch in sends:
            self.producer.dataReceived(batch)

    def stop(self) -> None:
        self.broker.stopService()


def token_of(transport: StringTransport) -> bytes:
    head = transport.value().split(b"\n\n", 1)[0]
    for line in head.split(b"\n"):
        if line.startswith(b"resume-token:"):
            return line.partition(b":")[2]
    raise RuntimeError("no resume-token in CONNECTED")


def check(data: bytes, messages: int) -> None:
    seqs = [int(seq) for seq in SEQ_PATTERN.findall(data)]
    if seqs != list(range(messages)):
        raise RuntimeError(f"resumed with {len(seqs)} of {messages} messages, or out of order")


def resume_once(missed: int) -> tuple[float, float]:
    """:returns: seconds to resume ``missed`` messages, and seconds to buffer them."""
    world = World()
    protocol, transport = world.connect()
    token = token_of(transport)
    protocol.dataReceived(SUBSCRIBE % 0)
    protocol.connectionLost(None)
    sends = batches(missed)
    started = time.perf_counter()
    world.publish(sends)
    buffering = time.perf_counter() - started
    again, transport = world.open()

    def resume() -> float:
        started = time.perf_counter()
        again.dataReceived(CONNECT % token)
        return time.perf_counter() - started

    elapsed = timed(resume)
    if b"resumed:true" not in transport.value()[:300]:
        raise RuntimeError("the session was not resumed")
    check(transport.value(), len(sends) * BATCH)
    world.stop()
    return elapsed, buffering


def fanout_once(subscribers: int, messages: int, resumable: bool) -> float:
    """
    :returns: microseconds per delivery to ``subscribers`` connected subscribers
        (resumable ones keep the default --resume-buffer of the latest frames).
    """
    world = World(DEFAULT_BUFFER)
    clients = [world.connect(resumable) for _ in range(subscribers)]
    for number, (protocol, transport) in enumerate(clients):
        protocol.dataReceived(SUBSCRIBE % number)
        transport.clear()
    sends = batches(messages)

    def run() -> float:
        started = time.perf_counter()
        for batch in sends:
            world.producer.dataReceived(batch)
            for _, transport in clients:
                transport.clear()
        return time.perf_counter() - started

    elapsed = timed(run)
    world.stop()
    return elapsed / (len(sends) * BATCH * subscribers) * 1e6


def measure(missed: int, subscribers: int, messages: int, repeat: int) -> list[dict[str, Any]]:
    """:returns: the JSON records, medians over ``repeat`` runs."""
    resumes = [resume_once(missed) for _ in range(repeat)]
    plain = [fanout_once(subscribers, messages, False) for _ in range(repeat)]
    kept = [fanout_once(subscribers, messages, True) for _ in range(repeat)]
    sent = missed - missed % BATCH
    common = {"repeats": repeat, "python": sys.version.split()[0]}
    return [
        {
            "benchmark": "resume_cost",
            "figure": f"resume of {sent} missed messages",
            "value": round(statistics.median(r for r, _ in resumes) * 1000, 2),
            "unit": "  ms to caught-up",
            **common,
        },
        {
            "benchmark": "resume_cost",
            "figure": "delivery into a detached session's buffer",
            "value": round(statistics.median(b for _, b in resumes) / sent * 1e6, 3),
            "unit": "  µs/message (with its SEND)",
            **common,
        },
        {
            "benchmark": "resume_cost",
            "figure": f"fan-out 1->{subscribers}, plain subscribers",
            "value": round(statistics.median(plain), 3),
            "unit": "  µs/delivery",
            **common,
        },
        {
            "benchmark": "resume_cost",
            "figure": f"fan-out 1->{subscribers}, resumable subscribers",
            "value": round(statistics.median(kept), 3),
            "unit": "  µs/delivery",
            **common,
        },
    ]


def main(argv: list[str]) -> int:
    """
    Measure, and print the table and the JSON lines.

    :returns: the exit status.
    """
    parser = argparse.ArgumentParser(prog="python -m benchmarks.resume_cost")
    parser.add_argument("--missed", type=int, default=10_000, help="default 10000")
    parser.add_argument("--subscribers", type=int, default=10, help="for fan-out (default 10)")
    parser.add_argument("--messages", type=int, default=20_000, help="for fan-out (default 20000)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (default 3)")
    options = parser.parse_args(argv)
    if (
        min(options.missed, options.messages) < BATCH
        or min(options.subscribers, options.repeat) < 1
    ):
        parser.error(
            f"--missed and --messages at least {BATCH}; --subscribers, --repeat at least 1"
        )
    results = measure(options.missed, options.subscribers, options.messages, options.repeat)
    print_results(
        results,
        (("figure", "figure", "<48"), ("value", "value", ">10"), ("  unit", "unit", "<28")),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
