"""
Kill the broker with SIGKILL while persistent messages flow, restart it, and
check that nothing acknowledged was lost.

Usage: ``python -m benchmarks.crash [--producers N] [--consumers N] [--rounds R]
[--seconds S] [--size BYTES] [--window W] [--sync MODE] [--seed N] [--json-out FILE]``
(needs ``stomp.py``, which ``pip install '.[test]'`` installs).

One round goes the way issue 5 describes:

1. ``twistd -n stompbroker`` starts on a fresh data directory;
2. consumers subscribe to one queue with ``client-individual`` acknowledgement
   and ACK every message with a receipt; producers send persistent messages
   (``persistent:true``, a ``seq`` header naming each), every one with a
   receipt, keeping at most ``window`` receipts outstanding;
3. at a random moment within ``seconds`` the broker is killed with SIGKILL;
4. it is started again on the same data directory, and fresh consumers drain
   the queue until every message that must come back has, and a second has
   passed without another.

Then the rules are checked.  Every message whose SEND receipt arrived is
delivered at least once (before the kill or after).  Only messages that had been
delivered but whose ACK had not been answered by a receipt at the kill are
delivered again, and each such second delivery says ``redelivered:true``; no
message whose ACK receipt had arrived comes back.  The round's report counts
each rule's offenders (all must be 0), and what the run did: messages sent and
acknowledged with receipts before the kill, the rate of those receipts, and how
many came back.

The same round, small, is ``tests/integration/test_crash.py``.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

import stomp
from attrs import Factory, asdict, define, frozen
from stomp.exception import StompException

from benchmarks.launcher import DEFAULT_REACTOR, BrokerStarter

#: How long to wait for a client to connect, or for the queue to drain.
CONNECT_TIMEOUT = 10.0
DRAIN_TIMEOUT = 60.0
#: A drain ends this long after the last message that had to come back.
DRAIN_QUIET = 1.0


class Broker(Protocol):
    """A broker process the round can reach, kill and stop."""

    @property
    def address(self) -> tuple[str, int]: ...

    def kill(self) -> None:
        """End it at once with SIGKILL."""

    def stop(self) -> None:
        """Stop it cleanly."""


#: Starts a broker on a data directory (the same one again after the kill).
StartBroker = Callable[[Path], Broker]


@frozen
class Shape:
    """
    What one round does.

    :ivar producers: connections sending.
    :ivar consumers: connections receiving and acknowledging.
    :ivar seconds: the kill comes at a random moment between a fifth of this
        and all of it after the producers start.
    :ivar size: body bytes.
    :ivar window: receipts each producer may have outstanding.
    """

    producers: int = 2
    consumers: int = 2
    seconds: float = 2.0
    size: int = 1024
    window: int = 20


@define
class Ledger:
    """
    What the clients saw, shared by their threads (under ``lock``).

    :ivar deliveries: ``(seq, redelivered, after the restart)`` for every MESSAGE.
    :ivar acked: messages whose ACK receipt arrived.
    :ivar seen_after: messages delivered after the restart.
    """

    sent: set[str] = Factory(set)
    receipted: set[str] = Factory(set)
    deliveries: list[tuple[str, bool, bool]] = Factory(list)
    acked: set[str] = Factory(set)
    seen_after: set[str] = Factory(set)
    lock: threading.Lock = Factory(threading.Lock)


class _Producer(stomp.ConnectionListener):
    """Sends persistent messages with receipts, ``window`` outstanding, until stopped."""

    def __init__(
        self, address: tuple[str, int], destination: str, name: str, shape: Shape, ledger: Ledger
    ) -> None:
        self.ledger = ledger
        self.destination = destination
        self.name = name
        self.shape = shape
        self.stopping = threading.Event()
        self.outstanding: set[str] = set()
        self.changed = threading.Condition()
        self.connection = stomp_connection(address, self)
        self.thread = threading.Thread(target=self._run, name=f"producer {name}", daemon=True)

    def on_receipt(self, frame: Any) -> None:
        seq = frame.headers["receipt-id"]
        with self.changed:
            if seq not in self.outstanding:
                return  # DISCONNECT's
            self.outstanding.discard(seq)
            self.changed.notify_all()
        with self.ledger.lock:
            self.ledger.receipted.add(seq)

    def on_disconnected(self) -> None:
        self.stopping.set()
        with self.changed:
            self.changed.notify_all()

    def _run(self) -> None:
        body = b"x" * self.shape.size
        index = 0
        while not self.stopping.is_set():
            with self.changed:
                self.changed.wait_for(
                    lambda: len(self.outstanding) < self.shape.window or self.stopping.is_set()
                )
                if self.stopping.is_set():
                    return
                seq = f"{self.name}-{index}"
                self.outstanding.add(seq)
            with self.ledger.lock:
                self.ledger.sent.add(seq)
            try:
                self.connection.send(
                    self.destination,
                    body,
                    headers={"persistent": "true", "seq": seq},
                    receipt=seq,
                )
            except (StompException, OSError):
                return
            index += 1


class _Consumer(stomp.ConnectionListener):
    """Takes messages with client-individual acknowledgement and ACKs each with a receipt."""

    def __init__(
        self,
        address: tuple[str, int],
        destination: str,
        name: str,
        ledger: Ledger,
        after_restart: bool,
    ) -> None:
        self.ledger = ledger
        self.after_restart = after_restart
        self.connection = stomp_connection(address, self)
        self.connection.subscribe(destination, id=name, ack="client-individual")

    def on_message(self, frame: Any) -> None:
        seq = frame.headers["seq"]
        redelivered = frame.headers.get("redelivered") == "true"
        with self.ledger.lock:
            number = len(self.ledger.deliveries)
            self.ledger.deliveries.append((seq, redelivered, self.after_restart))
            if self.after_restart:
                self.ledger.seen_after.add(seq)
        try:
            self.connection.ack(frame.headers["ack"], receipt=f"ack:{number}:{seq}")
        except (StompException, OSError):
            return

    def on_receipt(self, frame: Any) -> None:
        kind, _, rest = frame.headers["receipt-id"].partition(":")
        if kind != "ack":
            return  # DISCONNECT's
        seq = rest.split(":", 1)[1]
        with self.ledger.lock:
            self.ledger.acked.add(seq)


def stomp_connection(address: tuple[str, int], listener: Any) -> Any:
    """:returns: a stomp.py 1.2 connection to ``address``, connected, with ``listener``."""
    connection = stomp.Connection12(
        [address], auto_decode=False, reconnect_attempts_max=1, timeout=CONNECT_TIMEOUT
    )
    connection.set_listener("benchmark", listener)
    connection.connect(wait=True)
    return connection


def disconnect_quietly(connection: Any) -> None:
    """DISCONNECT, whatever state the connection is in (the broker may be gone)."""
    try:
        connection.disconnect()
    except (StompException, OSError):
        return


@frozen
class Report:
    """
    One round's outcome; ``ok`` when every rule held.

    :ivar lost: receipted messages never delivered.
    :ivar came_back_acknowledged: messages whose ACK receipt had arrived before
        the kill, delivered again after it.
    :ivar duplicated_unmarked: second deliveries without ``redelivered:true``.
    :ivar duplicated_before_kill: messages delivered twice before the kill.
    """

    seed: int
    kill_after: float
    sent: int
    receipted: int
    receipts_per_s: float
    delivered_before: int
    acked_before: int
    delivered_after: int
    redelivered_after: int
    lost: tuple[str, ...]
    came_back_acknowledged: tuple[str, ...]
    duplicated_unmarked: tuple[str, ...]
    duplicated_before_kill: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """:returns: whether no rule was broken."""
        return not (
            self.lost
            or self.came_back_acknowledged
            or self.duplicated_unmarked
            or self.duplicated_before_kill
        )

    def as_dict(self) -> dict[str, Any]:
        """:returns: the figures, with offenders counted (and the first few named)."""
        figures: dict[str, Any] = {"benchmark": "crash", "ok": self.ok}
        for name, value in asdict(self).items():
            if isinstance(value, tuple):
                figures[name] = len(value)
                if value:
                    figures[f"{name}_examples"] = list(value[:5])
            else:
                figures[name] = value
        return figures


def judge(
    ledger: Ledger, acked_before: set[str], seed: int, kill_after: float, sending: float
) -> Report:
    """
    Check a finished round's ledger against the rules.

    :param acked_before: messages whose ACK receipt had arrived at the kill.
    :param sending: seconds the producers sent before the kill.
    """
    before: dict[str, int] = {}
    after: dict[str, list[bool]] = {}
    for seq, redelivered, after_restart in ledger.deliveries:
        if after_restart:
            after.setdefault(seq, []).append(redelivered)
        else:
            before[seq] = before.get(seq, 0) + 1
    delivered = set(before) | set(after)
    # A second delivery must say so: the first one after the restart of a
    # message seen before the kill, and any later one.
    unmarked = sorted(
        seq
        for seq, flags in after.items()
        if (seq in before and not flags[0]) or not all(flags[1:])
    )
    return Report(
        seed=seed,
        kill_after=round(kill_after, 3),
        sent=len(ledger.sent),
        receipted=len(ledger.receipted),
        receipts_per_s=round(len(ledger.receipted) / sending, 1),
        delivered_before=len(before),
        acked_before=len(acked_before),
        delivered_after=len(after),
        redelivered_after=sum(1 for seq in after if seq in before),
        lost=tuple(sorted(ledger.receipted - delivered)),
        came_back_acknowledged=tuple(sorted(acked_before & set(after))),
        duplicated_unmarked=tuple(unmarked),
        duplicated_before_kill=tuple(sorted(seq for seq, count in before.items() if count > 1)),
    )


def run_round(start: StartBroker, data_dir: Path, shape: Shape, seed: int) -> Report:
    """
    Run one round (see the module docstring) and judge it.

    :param start: starts a broker on ``data_dir``; called twice.
    :param seed: decides the moment of the kill.
    """
    chooser = random.Random(seed)
    kill_after = chooser.uniform(shape.seconds / 5, shape.seconds)
    destination = f"/queue/crash.{seed}"
    ledger = Ledger()
    broker = start(data_dir)
    consumers = [
        _Consumer(broker.address, destination, f"c{index}", ledger, after_restart=False)
        for index in range(shape.consumers)
    ]
    producers = [
        _Producer(broker.address, destination, f"p{index}", shape, ledger)
        for index in range(shape.producers)
    ]
    started = time.monotonic()
    for producer in producers:
        producer.thread.start()
    time.sleep(kill_after)
    broker.kill()
    sending = time.monotonic() - started
    for producer in producers:
        producer.stopping.set()
        with producer.changed:
            producer.changed.notify_all()
        producer.thread.join(CONNECT_TIMEOUT)
    with ledger.lock:
        acked_before = set(ledger.acked)
    for client in [*consumers, *producers]:
        disconnect_quietly(client.connection)
    broker = start(data_dir)
    try:
        _drain(broker, destination, shape, ledger)
    finally:
        broker.stop()
    return judge(ledger, acked_before, seed, kill_after, sending)


def _drain(broker: Broker, destination: str, shape: Shape, ledger: Ledger) -> None:
    """
    Consume after the restart until every message that must come now has (each
    receipted one not delivered before the kill), and nothing more has come for
    :data:`DRAIN_QUIET` seconds; or until :data:`DRAIN_TIMEOUT`.  (A message
    delivered before the kill may or may not come back: its ACK may have been
    stored without its receipt getting out.)
    """
    with ledger.lock:
        must = ledger.receipted - {seq for seq, _, _ in ledger.deliveries}
    consumers = [
        _Consumer(broker.address, destination, f"d{index}", ledger, after_restart=True)
        for index in range(shape.consumers)
    ]
    deadline = time.monotonic() + DRAIN_TIMEOUT
    last_count, quiet_since = -1, time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.05)
        with ledger.lock:
            count = len(ledger.deliveries)
            complete = must <= ledger.seen_after
        now = time.monotonic()
        if count != last_count:
            last_count, quiet_since = count, now
        elif complete and now - quiet_since >= DRAIN_QUIET:
            break
    for consumer in consumers:
        disconnect_quietly(consumer.connection)


@contextmanager
def _workdir(keep: Path | None) -> Iterator[Path]:
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        yield keep
        return
    with tempfile.TemporaryDirectory(prefix="stompcrash-") as name:
        yield Path(name)


def main(argv: list[str]) -> int:
    """
    Run the rounds; print one JSON line per round, then a summary.

    :returns: 0 when every round kept every rule.
    """
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.crash",
        description="SIGKILL the broker while persistent messages flow, restart it,"
        " and check that no acknowledged message was lost.",
    )
    parser.add_argument("--producers", type=int, default=4, help="(default: 4)")
    parser.add_argument("--consumers", type=int, default=4, help="(default: 4)")
    parser.add_argument("--rounds", type=int, default=3, help="(default: 3)")
    parser.add_argument(
        "--seconds",
        type=float,
        default=10.0,
        help="the kill comes within this many seconds of the start (default: 10)",
    )
    parser.add_argument("--size", type=int, default=1024, help="body bytes (default: 1024)")
    parser.add_argument(
        "--window",
        type=int,
        default=50,
        help="receipts each producer may have outstanding (default: 50)",
    )
    parser.add_argument("--sync", default="batch", choices=("always", "batch", "off"))
    parser.add_argument("--seed", type=int, help="first round's seed (default: random)")
    parser.add_argument("--dir", type=Path, help="keep data directories and logs here")
    parser.add_argument("--json-out", type=Path, help="also append the JSON lines to FILE")
    args = parser.parse_args(argv)
    # stomp.py logs every frame it cannot send to the killed broker: expected here.
    logging.getLogger("stomp.py").setLevel(logging.CRITICAL)
    shape = Shape(args.producers, args.consumers, args.seconds, args.size, args.window)
    first_seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    reports = []
    with _workdir(args.dir) as workdir:
        for round_number in range(args.rounds):
            seed = first_seed + round_number
            place = workdir / f"round-{seed}"
            print(f"# round {round_number + 1} of {args.rounds}, seed {seed}", file=sys.stderr)
            start = BrokerStarter(place, ("--sync", args.sync), DEFAULT_REACTOR)
            report = run_round(start, place / "data", shape, seed)
            line = json.dumps({**report.as_dict(), "sync": args.sync, **_shape(shape)})
            print(line, flush=True)
            if args.json_out:
                with open(args.json_out, "a") as out:
                    print(line, file=out)
            reports.append(report)
    ok = all(report.ok for report in reports)
    print(
        f"{sum(r.receipted for r in reports)} receipted messages in {len(reports)} rounds,"
        f" {sum(r.redelivered_after for r in reports)} redelivered after a kill,"
        f" {sum(len(r.lost) for r in reports)} lost: {'ok' if ok else 'FAILED'}"
    )
    return 0 if ok else 1


def _shape(shape: Shape) -> dict[str, Any]:
    return {
        "producers": shape.producers,
        "consumers": shape.consumers,
        "size": shape.size,
        "window": shape.window,
    }


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
