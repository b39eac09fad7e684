"""
The consuming cluster node's own work per queue message, run N times in process:
for counting its instructions.

Usage: ``python -m benchmarks.cluster_read_parts PART N``

The parts, with the redis engine's real
:class:`~stompbroker.broker.engine.redis.queue_settling.QueueSettling` and
:class:`~stompbroker.broker.engine.redis.queue_intake.QueueIntake` on an engine
that counts its Redis commands instead of sending them:

- ``read``: N messages the way node B takes them in a 4x4 cross-node queue
  (``benchmarks.cluster_cpu --kind queue``): reads of 500 entries made into
  messages, screened (:meth:`~.QueueSettling.fresh`) and put in a local queue
  that only collects them; each settled by an ACK of its own
  (``client-individual``), and what a turn of the loop settled ended in one
  script;
- ``entries``: only the entries those reads give, built as Redis gives them:
  the harness's own share of ``read``, to take off its count.

Delivering the messages and taking the ACK frames cost what they cost one
process (:mod:`benchmarks.queue_parts` counts those); what ``read`` counts less
``entries`` is what a node spends on top for the messages coming through Redis.
As :mod:`benchmarks.queue_parts`, run it under ``valgrind --tool=callgrind``
at two values of N, the difference of the counts over the difference of the Ns:

    for n in 4000 12000; do
        valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
            python -m benchmarks.cluster_read_parts read $n 2>&1 | grep Collected
    done

A whole node under callgrind in a cluster run does not give a steady count: how
much its reads and scripts take at once depends on how fast the other processes
run beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
from types import SimpleNamespace
from typing import Any

from twisted.internet.defer import Deferred, succeed

from stompbroker.broker.engine.redis.codec import encode_entry
from stompbroker.broker.engine.redis.keys import Keys
from stompbroker.broker.engine.redis.queue_intake import QueueIntake
from stompbroker.broker.engine.redis.queue_settling import QueueSettling
from stompbroker.broker.flow.traffic import Traffic
from stompbroker.broker.queueing.delivery import DeliveryCounters
from stompbroker.protocol.message import Message

PARTS = ("read", "entries")
#: Entries one read gives (:data:`~stompbroker.broker.engine.redis.queue_intake.MAX_READ`).
READ = 500
STREAM = "bench:{q:/queue/bench}"
#: The user headers of the benchmark's SENDs, as their plain lines travel.
HEADERS = b"persistent:false\ncontent-length:117"


def _engine(soon: list[Any], scripts: list[int]) -> Any:
    """
    :returns: what the settling and the intake use of the redis engine: its
        loop puts what is called soon in ``soon``, its writer counts in
        ``scripts`` the commands it would send.
    """

    def command(*args: Any) -> None:
        scripts[0] += 1

    def command_waited(*args: Any) -> Deferred[Any]:
        scripts[0] += 1
        return succeed([])

    return SimpleNamespace(
        writer=SimpleNamespace(command=command, command_waited=command_waited),
        names=Keys("bench"),
        ids=SimpleNamespace(node="b"),
        liveness=SimpleNamespace(key="bench:alive:b", epoch="1", lapsing=lambda: False),
        limits=SimpleNamespace(of=lambda destination: None),
        counters=DeliveryCounters(),
        traffic=Traffic(),
        loop=SimpleNamespace(call_soon=soon.append),
    )


class _Local:
    """The local queue: collects what the intake puts in it."""

    def __init__(self) -> None:
        self.taken: list[Message] = []

    def enqueue(self, message: Message) -> None:
        self.taken.append(message)


def _read(start: int) -> list[tuple[bytes, dict[bytes, bytes]]]:
    """:returns: one read's entries, as :func:`~.queue_reading.runs_of` gives them."""
    body = b"x" * 117
    return [
        (b"%d-0" % number, {b"m": encode_entry("a", Message(STREAM, f"a-{number}", HEADERS, body))})
        for number in range(start, start + READ)
    ]


def run_part(part: str, messages: int) -> int:
    """
    Run one part over ``messages`` messages (rounded down to whole reads).

    :returns: how many messages went through.
    :raises RuntimeError: if ``read`` left a message unsettled, or settled one in no script.
    """
    # As the broker runs (stompbroker.app's collector settings), so that
    # collections count as they would there.
    gc.set_threshold(50_000, 50, 100)
    gc.freeze()
    soon: list[Any] = []
    scripts = [0]
    engine = _engine(soon, scripts)
    local = _Local()
    queue: Any = SimpleNamespace(
        destination="/queue/bench", aside=None, local=local, lane=lambda message: STREAM
    )
    settling = QueueSettling(engine, STREAM, queue)
    # Taking what was read needs no reading, recovery or dispatch of the cluster.
    unused: Any = None
    intake = QueueIntake(engine, queue, STREAM, settling, unused, unused, None, asyncio.Event())
    # What StreamQueue.acknowledge calls (one call a message before settle_all).
    settle = getattr(settling, "settle_all", None) or (lambda ms: settling.settle(ms[0]))
    reads = messages // READ
    for number in range(reads):
        entries = _read(number * READ)
        if part == "entries":
            continue
        intake.take(entries, stream=STREAM)
        taken, local.taken = local.taken, []
        for message in taken:
            settle((message,))
        # The turn of the loop ends: what it settled ends in one script.
        for call in soon:
            call()
        soon.clear()
    if part == "read" and (settling.held() or scripts[0] != reads):
        raise RuntimeError(
            f"{len(settling.held())} messages unsettled, {scripts[0]} scripts for {reads} reads"
        )
    return reads * READ


def main(argv: list[str]) -> int:
    """:returns: the exit status."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cluster_read_parts")
    parser.add_argument("part", choices=PARTS)
    parser.add_argument("messages", type=int)
    options = parser.parse_args(argv)
    if options.messages < READ:
        parser.error(f"at least {READ} messages")
    run_part(options.part, options.messages)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
