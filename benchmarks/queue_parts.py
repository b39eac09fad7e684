"""
One part of the queue path, run N times in process: for counting its instructions.

Usage: ``python -m benchmarks.queue_parts PART N [--frames suite|stompbench|duplicate-id]
[--store]``

The parts, each with :mod:`benchmarks.queue_cost`'s brokers, sessions and frames
(client-individual acknowledgement):

- ``path``: N messages the whole way: SEND parsed, routed, queued, delivered as a
  MESSAGE, its ACK parsed and settled;
- ``send``: the same SENDs to a queue without consumers: parsed, routed and
  queued only;
- ``parse-send``, ``parse-ack``: the frame parser alone, fed the SEND frames, or
  ACK frames of the shape the consumers send.

``--store`` gives the broker a message store (in memory), as twistd's default
data directory does: the non-persistent messages of its ``/queue/`` then count
in the paging budget on their way.

It prints nothing: it is meant to run under ``valgrind --tool=callgrind`` (or
``perf stat -e instructions``) twice, at two values of N, so that the
difference of the two counts, divided by the difference of the Ns, is the
instructions per message of that part, start-up and imports cancelled out:

    for n in 4000 12000; do
        valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
            python -m benchmarks.queue_parts path $n --frames stompbench 2>&1 | grep Collected
    done

Instruction counts do not depend on what else the machine runs, which wall-clock
figures on a shared machine do.  The counts include the harness's own work
(building the frames, reading the MESSAGE frames, building the ACKs), the same
for any version of the broker.
"""

from __future__ import annotations

import argparse
import sys

from benchmarks.in_process import timed
from benchmarks.queue_cost import BATCH, FRAMES, Run, batch_maker
from stompbroker.protocol.parser import FrameParser

PARTS = ("path", "send", "parse-send", "parse-ack")


def ack_batch(frames: str) -> bytes:
    """:returns: a read's worth of ACK frames, as :class:`Run`'s consumers send them."""
    if frames == "suite":
        return b"".join(b"ACK\nid:%d.abcdef01-%d\n\n\0" % (i % 4, i) for i in range(BATCH))
    return b"".join(
        b"ACK\nid:%d.abcdef01-%d\nmessage-id:abcdef01-%d\nsubscription:s%d\n\n\0"
        % (i % 4, i, i, i % 4)
        for i in range(BATCH)
    )


def run_part(part: str, messages: int, frames: str, store: bool = False) -> int:
    """
    Run one part over ``messages`` messages (rounded down to whole batches).

    :returns: how many messages went through.
    :raises RuntimeError: if the path lost or duplicated a message.
    """
    if part in ("parse-send", "parse-ack"):
        if part == "parse-ack":
            batch = ack_batch(frames)
        else:
            batch = batch_maker(frames)(0)
        parser = FrameParser()
        for _ in range(messages // BATCH):
            parser.receive_data(batch)
        return messages // BATCH * BATCH
    run = Run("client-individual", messages, frames, store)
    if part == "send":
        for number, (protocol, _) in enumerate(run.consumers):
            protocol.dataReceived(b"UNSUBSCRIBE\nid:s%d\n\n\0" % number)
    timed(run.run)
    expected = run.sent if part == "path" else 0
    if len(run.seen) != expected or run.duplicated:
        raise RuntimeError(f"{part}: {len(run.seen)} of {expected} arrived, {run.duplicated} twice")
    run.broker.stopService()
    return run.sent


def main(argv: list[str]) -> int:
    """:returns: the exit status."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.queue_parts")
    parser.add_argument("part", choices=PARTS)
    parser.add_argument("messages", type=int)
    parser.add_argument("--frames", choices=FRAMES, default="suite")
    parser.add_argument("--store", action="store_true", help="a broker with a message store")
    options = parser.parse_args(argv)
    if options.messages < BATCH:
        parser.error(f"at least {BATCH} messages")
    run_part(options.part, options.messages, options.frames, options.store)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
