"""
The publishing cluster node's work per queue message, run N times in process:
for counting its instructions.

Usage: ``python -m benchmarks.cluster_publish_parts PART N [--duplicate-id] [--persistent]``

A node with the redis engine, on a ``redis-server`` of its own
(:class:`benchmarks.cluster.RedisServer`) and the ``uvloop`` reactor, takes N
non-persistent SENDs to one queue the way node A takes them in a 4x4
cross-node queue (``benchmarks.cluster_cpu --kind queue``): the frames of
:class:`benchmarks.wire.SendTemplate` (``destination``, ``content-length``,
``seq``; a receipt every 100), a read of 100 from each of four producers in
turn, then a turn of the loop in which the writer sends them all as one
pipeline and reads the replies.

- ``send``: all of it: parsed, routed, encoded, ``XADD`` ed and replied to;
  it checks that the queue's stream holds every message;
- ``route``: the same with the engine's ``publish_queue`` doing nothing: what
  one process pays too (less its own queue), to take off ``send``'s count.

With ``--duplicate-id`` every SEND carries a ``duplicate-id`` of its own, so
each is one script (``lua/dedup_check_add.lua``) rather than one ``XADD``;
with ``--persistent`` every SEND carries ``persistent:true``, and its RECEIPT
waits for Redis as a SEND with a ``duplicate-id`` does.
It prints the messages per second of the run (a short figure: the loop, the
pipelines and Redis on one machine) and the Redis commands per SEND, from
``INFO commandstats`` (a script's commands are counted inside it).

As :mod:`benchmarks.queue_parts`, run it under ``valgrind --tool=callgrind`` at
two values of N, the difference of the counts over the difference of the Ns
(with ``PYTHONHASHSEED`` fixed, the counts repeat within a few hundred
instructions a message):

    for n in 4000 16000; do
        PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
            python -m benchmarks.cluster_publish_parts send $n 2>&1 | grep Collected
    done

A whole node under callgrind in a cluster run does not give a steady count:
how many messages go in one pipeline depends on how fast the other processes
run beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PARTS = ("send", "route")
#: SENDs per read of one producer, the last asking for a receipt.
BATCH = 100
PRODUCERS = 4
DESTINATION = "/queue/bench.publish"


def run_part(
    part: str, messages: int, duplicate_ids: bool = False, persistent: bool = False
) -> int:
    """
    Run one part over ``messages`` messages (rounded down to whole reads), on
    the ``uvloop`` reactor, which it installs (run it in a process of its own).

    :returns: how many messages went through.
    :raises RuntimeError: if ``send`` left a message out of the stream.
    """
    import uvloop
    from twisted.internet import asyncioreactor

    loop = uvloop.new_event_loop()
    asyncio.set_event_loop(loop)
    asyncioreactor.install(loop)
    from twisted.internet import reactor
    from twisted.internet.defer import ensureDeferred

    from benchmarks.cluster import RedisServer

    sent = messages // BATCH * BATCH
    outcome: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="stompbench-") as workdir:
        redis = RedisServer(Path(workdir))
        try:
            running = _run(reactor, redis.url, part, sent, outcome, duplicate_ids, persistent)
            done = ensureDeferred(running)
            done.addErrback(lambda failure: outcome.setdefault("error", failure.value))
            done.addBoth(lambda _: reactor.stop())
            reactor.run()
        finally:
            redis.stop()
    if "error" in outcome:
        raise RuntimeError(f"{part}: {outcome['error']}")
    if part == "send" and outcome["stored"] != sent:
        raise RuntimeError(f"send: {outcome['stored']} of {sent} messages in the stream")
    per_send = ", ".join(
        f"{name} {calls / sent:.2f}"
        for name, calls in sorted(outcome["commands"].items())
        if calls >= sent / 100
    )
    print(
        f"{sent} SENDs, {sent / outcome['seconds']:.0f}/s; Redis commands per SEND: {per_send};"
        f" Redis's time per SEND in them: {outcome['usec'] / sent:.1f} us"
    )
    return sent


async def _run(
    reactor: Any,
    url: str,
    part: str,
    sent: int,
    outcome: dict[str, Any],
    duplicate_ids: bool,
    persistent: bool,
) -> None:
    from twisted.internet.defer import Deferred

    from benchmarks.in_process import connect
    from benchmarks.wire import SendTemplate
    from stompbroker.app.gc_tuning import DEFAULT_THRESHOLD, CollectorTuning
    from stompbroker.broker.engine.factory import build_engine
    from stompbroker.broker.engine.redis.url import parse_engine
    from stompbroker.broker.service import Broker
    from stompbroker.transport.tcp import stomp_server_factory

    def waited(coroutine: Any) -> Deferred[Any]:
        return Deferred.fromFuture(asyncio.ensure_future(coroutine))

    engine = build_engine(reactor, url=parse_engine(url))
    broker = Broker(reactor, engine=engine)
    broker.startService()
    await broker.when_ready()
    if part == "route":
        broker.router._publish_queue = lambda message: None
    factory = stomp_server_factory(broker, reactor)
    producers = [connect(factory) for _ in range(PRODUCERS)]
    varying = ("duplicate-id", "m", 1 << 62) if duplicate_ids else None
    extra = [("persistent", "true")] if persistent else []
    template = SendTemplate(DESTINATION, b"x" * 117, extra, varying=varying)
    reads = [
        b"".join(template.frames(range(start, start + BATCH), True))
        for start in range(0, sent, BATCH)
    ]
    # As the broker runs (stompbroker.app's collector settings).
    tuning = CollectorTuning(DEFAULT_THRESHOLD)
    gc.collect()
    await waited(engine.client.config_resetstat())
    tuning.startService()
    started = time.perf_counter()
    try:
        for first in range(0, len(reads), PRODUCERS):
            turn = reads[first : first + PRODUCERS]
            for (protocol, transport), data in zip(producers, turn, strict=False):
                protocol.dataReceived(data)
                transport.clear()
            # The turn of the loop: the writer sends what the reads queued.
            await waited(engine.writer.drained())
    finally:
        tuning.stopService()
    outcome["seconds"] = time.perf_counter() - started
    stats = await waited(engine.client.info("commandstats"))
    counted = {
        name[len("cmdstat_") :]: figures
        for name, figures in stats.items()
        if name not in ("cmdstat_info", "cmdstat_config|resetstat")
    }
    outcome["commands"] = {name: figures["calls"] for name, figures in counted.items()}
    # A script's time includes its commands': count the top-level ones alone.
    outcome["usec"] = sum(
        figures["usec"] for name, figures in counted.items() if name in ("xadd", "evalsha", "eval")
    )
    outcome["stored"] = await waited(engine.client.xlen(engine.names.queue(DESTINATION)))
    await waited(engine.client.flushall())


def main(argv: list[str]) -> int:
    """:returns: the exit status."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cluster_publish_parts")
    parser.add_argument("part", choices=PARTS)
    parser.add_argument("messages", type=int)
    parser.add_argument("--duplicate-id", action="store_true", help="a duplicate-id per SEND")
    parser.add_argument("--persistent", action="store_true", help="persistent:true SENDs")
    options = parser.parse_args(argv)
    if options.messages < BATCH:
        parser.error(f"at least {BATCH} messages")
    run_part(options.part, options.messages, options.duplicate_id, options.persistent)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
