"""
What a wildcard consumer on queues costs per message, next to plain consumers.

Usage: ``python -m benchmarks.wildcard_cost [N]``

In process, on a broker with a local engine and no sockets: N messages sent
round-robin to 100 queues (``/queue/bench.0`` .. ``/queue/bench.99``) through
the router, each delivered to a client-individual consumer with a window of
10 and acknowledged at once, in two cases:

- ``plain``: one consumer on each queue (100 subscriptions);
- ``wildcard``: one subscription to ``/queue/bench.*`` (one window over the
  100 queues).

Each case is timed as the median of several runs, in microseconds per message
(send, delivery, ACK).  The difference is the wildcard consumer's own cost:
grouping each ACK by queue, and offering the room it makes to its queues in
turn.  Under ``valgrind --tool=callgrind`` run it with ``--case`` and two Ns
for instructions per message.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

from twisted.internet.task import Clock

from stompbroker.broker.service import Broker
from stompbroker.protocol.message import Message

QUEUES = 100
WINDOW = 10
REPEATS = 5


class _Connection:
    """What the broker asks of a connection: its peer, for the per-address count."""

    peer = "127.0.0.1:1"


class _Subscriber:
    """A client-individual subscription that acknowledges each message as it comes."""

    def __init__(self, broker: Broker, connection: Any, destination: str, number: int) -> None:
        self.destination = destination
        self.ack_mode = "client-individual"
        self.subscription_id = f"s{number}"
        self.connection = connection
        self.prefetch = WINDOW
        self.max_redeliveries = None
        self.durable = None
        self.headers: dict[str, str] = {}
        self.delivered = 0
        self._ack = broker.ack
        self._pending: list[Message] = []

    def deliver(self, message: Message) -> None:
        self.delivered += 1
        self._pending.append(message)

    def settle(self) -> None:
        """ACK what came, as a client would after reading it."""
        pending, self._pending = self._pending, []
        for message in pending:
            self._ack(self.connection, message.message_id, subscriber=self)


def run(case: str, messages: int) -> float:
    """:returns: seconds for ``messages`` messages in ``case`` (``plain`` or ``wildcard``)."""
    broker = Broker(Clock())
    connection = _Connection()
    broker.open_connection(connection)
    if case == "plain":
        subscribers = [
            _Subscriber(broker, connection, f"/queue/bench.{n}", n) for n in range(QUEUES)
        ]
    else:
        subscribers = [_Subscriber(broker, connection, "/queue/bench.*", 0)]
    for subscriber in subscribers:
        broker.subscribe(subscriber)
    destinations = [f"/queue/bench.{n}" for n in range(QUEUES)]
    send = broker.send
    started = time.perf_counter()
    for number in range(messages):
        send(destinations[number % QUEUES], (), b"x")
        if number % WINDOW == WINDOW - 1:
            for subscriber in subscribers:
                subscriber.settle()
    for subscriber in subscribers:
        subscriber.settle()
    elapsed = time.perf_counter() - started
    delivered = sum(subscriber.delivered for subscriber in subscribers)
    if delivered != messages:
        raise RuntimeError(f"{case}: {delivered} of {messages} messages delivered")
    return elapsed


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    parser.add_argument("messages", nargs="?", type=int, default=50_000)
    parser.add_argument("--case", choices=("plain", "wildcard"), help="run one case once")
    options = parser.parse_args(argv)
    if options.case is not None:
        run(options.case, options.messages)
        return 0
    for case in ("plain", "wildcard"):
        times = [run(case, options.messages) for _ in range(REPEATS)]
        per_message = statistics.median(times) / options.messages * 1e6
        print(f"{case:9} {per_message:7.2f} us/message over {QUEUES} queues")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
