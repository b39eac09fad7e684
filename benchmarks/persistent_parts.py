"""
The persistent queue path, run N times in process with a real SQLite store: for
counting its instructions.

Usage: ``python -m benchmarks.persistent_parts N [--body BYTES] [--window W]
[--writer inline|thread|none] [--dir DIR]``

Four producers and four consumers are real sessions on ``StringTransport`` and
a ``task.Clock``, as in :mod:`benchmarks.queue_cost`, on a broker with an
:class:`~stompbroker.broker.store.sqlite.SQLiteStore` (``sync batch``) in a
fresh directory.  The frames are the shared bench's (``stompbench``) for its
persistent scenario: each SEND carries ``persistent:true`` and a receipt, each
producer has ``--window`` of them outstanding (one read each round), the
consumers acknowledge ``client-individual``.  A round is what the real broker
does in one reactor turn and one commit: the producers' reads, then the end of
the turn (the clock's ``advance(0)``), where the store hands the group to its
writer, which inserts and commits it and releases the RECEIPTs; then the
consumers read their MESSAGEs and send their ACKs, whose removals (DELETEs)
ride the next round's commit, as they do when the ACKs arrive while a commit is
in flight.  Each message thus costs the broker a parsed SEND, a store add (its
insert, its share of the commit and its RECEIPT), a MESSAGE, a parsed ACK and
a removal.

``--writer inline`` (the default) runs the writer's work in the caller's thread:
instruction counts are then repeatable.  ``--writer thread`` hands each group to
a second thread and waits for it, which adds the cost of handing the GIL over
and back (not the reactor's wake-up, which needs a real reactor).  ``--writer
none`` runs the same frames through a broker without a store (which ignores
``persistent:true``): the difference to ``inline`` is what persistence costs.

It prints nothing; as :mod:`benchmarks.queue_parts`, run it under
``valgrind --tool=callgrind`` at two values of N and divide the difference of
the counts by the difference of the Ns:

    for n in 2000 6000; do
        valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
            python -m benchmarks.persistent_parts $n 2>&1 | grep Collected
    done

The counts include SQLite's own work (its C code, not the kernel's fsync), and
the harness's (building frames, reading MESSAGEs, building ACKs).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from twisted.internet.defer import Deferred, fail, maybeDeferred, succeed
from twisted.internet.task import Clock

from benchmarks.in_process import connect, timed
from benchmarks.queue_cost import CONSUMERS, PREFETCH, PRODUCERS
from benchmarks.wire import SEQ_PATTERN
from stompbroker.broker.service import Broker
from stompbroker.broker.store.sqlite import SQLiteStore
from stompbroker.transport.tcp import stomp_server_factory

WRITERS = ("inline", "thread", "none")
_ACK = b"\nack:"
_MESSAGE_ID = b"\nmessage-id:"


def _inline(work: Callable[[], Any]) -> Deferred:
    """Run the writer's work in the caller's thread."""
    return maybeDeferred(work)


def _on_thread(pool: ThreadPoolExecutor) -> Callable[[Callable[[], Any]], Deferred]:
    """:returns: an executor that runs the writer's work on ``pool``'s thread and waits for it."""

    def execute(work: Callable[[], Any]) -> Deferred:
        try:
            return succeed(pool.submit(work).result())
        except Exception as error:  # noqa: BLE001 - handed on as the Deferred's failure
            return fail(error)

    return execute


def _header(frame: bytes, name: bytes) -> bytes:
    start = frame.index(name) + len(name)
    return frame[start : frame.index(b"\n", start)]


class PersistentRun:
    """
    One broker with a store, its producers and consumers, ready to move ``messages``.

    :param messages: how many to send (rounded down to whole rounds).
    :param data_dir: the store's directory (fresh).
    :param body: bytes per message body.
    :param window: SENDs each producer has outstanding: one read's worth.
    :param writer: one of :data:`WRITERS`.
    """

    def __init__(
        self,
        messages: int,
        data_dir: Path,
        body: int = 1024,
        window: int = 4,
        writer: str = "inline",
    ) -> None:
        self.clock = Clock()
        self._pool = ThreadPoolExecutor(1) if writer == "thread" else None
        executor = _inline if self._pool is None else _on_thread(self._pool)
        self.store = (
            None
            if writer == "none"
            else SQLiteStore(
                data_dir, reactor=self.clock, executor=executor, close_at_shutdown=False
            )
        )
        self.broker = Broker(self.clock, store=self.store)
        self.broker.startService()
        self.clock.advance(0)
        factory = stomp_server_factory(self.broker, self.clock)
        self.producers = [connect(factory) for _ in range(PRODUCERS)]
        self.consumers = [connect(factory) for _ in range(CONSUMERS)]
        for number, (protocol, transport) in enumerate(self.consumers):
            protocol.dataReceived(
                b"SUBSCRIBE\nid:s%d\ndestination:/queue/p\nack:client-individual\n"
                b"prefetch-count:%d\n\n\0" % (number, PREFETCH)
            )
            transport.clear()
        self._body = b"x" * body
        per_round = PRODUCERS * window
        self.rounds = [
            [self._read(start + each * window, window) for each in range(PRODUCERS)]
            for start in range(0, messages - per_round + 1, per_round)
        ]
        self.sent = len(self.rounds) * per_round
        self.seen: set[int] = set()
        self.duplicated = 0
        self.receipts = 0

    def _read(self, start: int, window: int) -> bytes:
        """:returns: one producer's read: ``window`` persistent SENDs, each asking for a receipt."""
        return b"".join(
            b"SEND\ndestination:/queue/p\npersistent:true\nseq:%d\nts:%d\nrun:r1\nreceipt:%d\n"
            b"content-length:%d\n\n%b\0"
            % (seq, 1_700_000_000_000_000_000 + seq, seq, len(self._body), self._body)
            for seq in range(start, start + window)
        )

    def _consume(self) -> int:
        """Take what each consumer was sent and acknowledge each message."""
        moved = 0
        for number, (protocol, transport) in enumerate(self.consumers):
            data = transport.value()
            if not data:
                continue
            transport.clear()
            acks = []
            for frame in data.split(b"\0")[:-1]:
                seq = int(SEQ_PATTERN.search(frame).group(1))  # type: ignore[union-attr]
                if seq in self.seen:
                    self.duplicated += 1
                self.seen.add(seq)
                acks.append(
                    b"ACK\nid:%b\nmessage-id:%b\nsubscription:s%d\n\n\0"
                    % (_header(frame, _ACK), _header(frame, _MESSAGE_ID), number)
                )
                moved += 1
            protocol.dataReceived(b"".join(acks))
        return moved

    def _take_receipts(self) -> None:
        for _, transport in self.producers:
            self.receipts += transport.value().count(b"RECEIPT")
            transport.clear()

    def run(self) -> float:
        """
        Every round: the producers' reads, the commit, the consumers' reads and ACKs;
        then the last removals.

        :returns: 0.0 (the figure is the instruction count).
        """
        for reads in self.rounds:
            for (protocol, _), read in zip(self.producers, reads, strict=True):
                protocol.dataReceived(read)
            self.clock.advance(0)
            self._take_receipts()
            self._consume()
        while self._consume():
            self.clock.advance(0)
        self.clock.advance(1)
        self._take_receipts()
        return 0.0

    def close(self) -> None:
        """Stop the broker and close its store."""
        self.broker.stopService()
        if self.store is not None:
            self.store.close()
        self.clock.advance(1)
        if self._pool is not None:
            self._pool.shutdown()


def run_path(
    messages: int,
    body: int = 1024,
    window: int = 4,
    writer: str = "inline",
    where: str | None = None,
) -> PersistentRun:
    """
    Move ``messages`` persistent messages through a fresh broker and store.

    :param where: the directory to make the store's directory in (a temporary one by default).
    :returns: the finished run, closed.
    :raises RuntimeError: if a message was lost or duplicated, or a RECEIPT missing.
    """
    with tempfile.TemporaryDirectory(dir=where) as data_dir:
        run = PersistentRun(messages, Path(data_dir), body, window, writer)
        timed(run.run)
        commits = 1 if run.store is None else run.store.stats.commits
        run.close()
    if len(run.seen) != run.sent or run.duplicated or run.receipts != run.sent:
        raise RuntimeError(
            f"{len(run.seen)} of {run.sent} arrived, {run.duplicated} twice,"
            f" {run.receipts} receipts"
        )
    if not commits:
        raise RuntimeError("the store committed nothing")
    return run


def main(argv: list[str]) -> int:
    """:returns: the exit status."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.persistent_parts")
    parser.add_argument("messages", type=int)
    parser.add_argument("--body", type=int, default=1024, help="body bytes (default 1024)")
    parser.add_argument("--window", type=int, default=4, help="SENDs per producer read (4)")
    parser.add_argument("--writer", choices=WRITERS, default="inline")
    parser.add_argument("--dir", default=None, help="where to make the store (a temporary dir)")
    options = parser.parse_args(argv)
    if options.messages < PRODUCERS * options.window or options.window < 1:
        parser.error(f"at least {PRODUCERS} x window messages, a window of at least 1")
    run_path(options.messages, options.body, options.window, options.writer, options.dir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
