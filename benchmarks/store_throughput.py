"""
How many persistent messages per second :class:`SQLiteStore` acknowledges, per sync mode.

Usage: ``python -m benchmarks.store_throughput [--seconds S] [--writers N,N,...]
[--body-size BYTES] [--modes off,batch,always] [--dir DIR]``

Each case opens a fresh store in a temporary directory (under ``--dir`` if
given: put it on the disk you mean to measure) with the real reactor and writer
thread, and runs ``N`` simulated producers for ``S`` seconds.  A producer adds a
message with a ``BYTES`` body to its own queue, waits for the add to be
acknowledged (as a client waits for its receipt), then adds the next; each
acknowledged message is also removed again, as a consumer's ACK would (lazily,
as the broker removes it), so the store stays small.  One producer shows the
cost of a lone commit; many show what group commit does with concurrent clients.

It prints a table (acknowledged adds per second, commits per second, operations
per commit, the median and 99th percentile of the time from ``add`` to its
acknowledgement), then one JSON line per case.  The defaults take about 20 s.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from typing import Any

from attrs import Factory, define, frozen
from twisted.internet import defer, task

from benchmarks.report import print_results
from stompbroker.broker.store.sqlite import SYNC_MODES, SQLiteStore
from stompbroker.protocol.frames import Headers


@frozen
class Payload:
    """A message as a queue hands it to the store."""

    destination: str
    message_id: str
    headers: Headers
    body: bytes
    expires: float = 0.0


@define
class Run:
    """What one case's producers achieved."""

    acknowledged: int = 0
    latencies: list[float] = Factory(list)
    running: bool = True


def produce(
    reactor: Any, store: SQLiteStore, run: Run, writer: int, body: bytes, index: int = 0
) -> None:
    """
    Add one message, and when it is acknowledged remove it and add the next.

    Recursion through Deferred callbacks is bounded: each add's acknowledgement
    comes from the writer thread in a later reactor turn (except in ``off``
    mode, where it is immediate, so there the next add is deferred by a turn).
    """
    if not run.running:
        return
    queue = f"/queue/bench{writer}"
    message = Payload(queue, f"{writer}-{index}", (("persistent", "true"),), body)
    started = time.perf_counter()

    def acknowledged(record: Any) -> None:
        if not run.running:
            return
        run.latencies.append(time.perf_counter() - started)
        run.acknowledged += 1
        # An ACK's removal, lazy as the broker asks for it.
        store.remove(queue, record.message_id, lazy=True)
        if store.sync == "off":
            reactor.callLater(0, produce, reactor, store, run, writer, body, index + 1)
        else:
            produce(reactor, store, run, writer, body, index + 1)

    store.add(queue, message).addCallback(acknowledged)


@defer.inlineCallbacks
def measure(
    reactor: Any, sync: str, writers: int, seconds: float, body_size: int, base: str | None
) -> Any:
    """
    Run one case.

    :returns: (via the Deferred) its result as a dict.
    """
    with tempfile.TemporaryDirectory(prefix="store-bench-", dir=base) as data_dir:
        store = SQLiteStore(data_dir, reactor=reactor, sync=sync)
        store.open()
        run = Run()
        body = b"x" * body_size
        began = time.perf_counter()
        for writer in range(writers):
            produce(reactor, store, run, writer, body)
        yield task.deferLater(reactor, seconds, lambda: None)
        run.running = False
        elapsed = time.perf_counter() - began
        commits, operations = store.stats.commits, store.stats.operations
        yield store.close()
    latencies = sorted(run.latencies) or [0.0]
    return {
        "benchmark": "store_throughput",
        "sync": sync,
        "writers": writers,
        "body_bytes": body_size,
        "seconds": round(elapsed, 3),
        "adds_per_s": round(run.acknowledged / elapsed),
        "commits_per_s": round(commits / elapsed),
        "ops_per_commit": round(operations / commits, 1) if commits else 0.0,
        "latency_p50_ms": round(statistics.median(latencies) * 1000, 3),
        "latency_p99_ms": round(latencies[int(len(latencies) * 0.99)] * 1000, 3),
        "python": sys.version.split()[0],
    }


@defer.inlineCallbacks
def run_all(reactor: Any, options: argparse.Namespace) -> Any:
    """Run every case in turn, then print the table and the JSON lines."""
    results = []
    for sync in options.modes:
        for writers in options.writers:
            result = yield measure(
                reactor, sync, writers, options.seconds, options.body_size, options.dir
            )
            results.append(result)
    print_results(
        results,
        (
            ("sync", "sync", "<8"),
            ("writers", "writers", ">8"),
            ("adds/s", "adds_per_s", ">10,"),
            ("commits/s", "commits_per_s", ">11,"),
            ("ops/commit", "ops_per_commit", ">12"),
            ("p50 ms", "latency_p50_ms", ">9"),
            ("p99 ms", "latency_p99_ms", ">9"),
        ),
    )


def main(argv: list[str]) -> int:
    """
    Parse the options and run the benchmark on the real reactor.

    :returns: the exit status.
    """
    parser = argparse.ArgumentParser(prog="python -m benchmarks.store_throughput")
    parser.add_argument("--seconds", type=float, default=2.0, help="per case")
    parser.add_argument(
        "--writers",
        type=lambda text: [int(part) for part in text.split(",")],
        default=[1, 16, 256],
        help="comma-separated producer counts",
    )
    parser.add_argument("--body-size", type=int, default=1024)
    parser.add_argument(
        "--modes",
        type=lambda text: text.split(","),
        default=list(SYNC_MODES),
        help="comma-separated sync modes",
    )
    parser.add_argument("--dir", default=None, help="where to make the stores")
    options = parser.parse_args(argv)
    unknown = set(options.modes) - set(SYNC_MODES)
    if unknown:
        parser.error(f"unknown sync modes: {', '.join(sorted(unknown))}")
    task.react(lambda reactor: run_all(reactor, options))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
